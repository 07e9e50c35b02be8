"""tools/pretrain_bert.py: its first steps reproduce, and the stored checkpoint is the one its
record describes."""
import importlib.util
import pathlib

import numpy as onp
import pytest

from d2lattn.bert import load_small_bert

SCRIPT = pathlib.Path(__file__).parents[1] / "tools" / "pretrain_bert.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("pretrain_bert", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data(script):
    return script.make_data()


@pytest.fixture(scope="module")
def stored():
    return load_small_bert()


def test_the_first_steps_reproduce_the_stored_losses(script, data, stored):
    train_iter, _, vocab = data
    record = stored[1]
    assert {k: v for k, v in record["settings"].items()
            if k not in ("num_steps", "vocab_size")} == script.SETTINGS
    assert record["settings"]["vocab_size"] == len(vocab)
    _, history = script.pretrain(train_iter, vocab, script.NUM_FIRST)
    for key in ("mlm", "nsp"):
        onp.testing.assert_allclose(history[key], record["first_losses"][key], rtol=1e-4)


def test_the_stored_weights_give_the_recorded_held_out_numbers(script, data, stored):
    _, test_iter, vocab = data
    net, record = stored
    held_out = script.HeldOut(test_iter, vocab)
    assert record["held_out"]["masked"] == {k: int(c.sum()) for k, c in held_out.kinds.items()}
    for name, right in held_out.judges.items():
        assert held_out.by_kind(right) == record["judges"][name]
    measured = held_out.measure(net)
    onp.testing.assert_allclose(measured["loss"], record["stored"]["loss"], atol=1e-3)
    for key in ("accuracy", "minus bigram, both sides"):  # one word in 548 may flip
        for kind, interval in record["stored"][key].items():
            onp.testing.assert_allclose(measured[key][kind], interval, atol=0.005)
    steps = [entry["step"] for entry in record["bert"]]
    assert steps == sorted(steps) and steps[-1] == record["settings"]["num_steps"]
