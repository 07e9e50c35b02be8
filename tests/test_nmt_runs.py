"""``tools/nmt_runs.py`` and the models it stored for Chapter 3: the first steps of each run
reproduce, the stored file is what the script's settings say, and
:func:`d2lattn.seq2seq.load_nmt_run` gives back the trained models."""
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as onp
import pytest

import d2lattn
from d2lattn.seq2seq import Seq2SeqAttentionDecoder, Seq2SeqDecoder, load_nmt_run

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("nmt_runs", ROOT / "tools" / "nmt_runs.py")
nmt_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nmt_runs)
STORED = json.loads(nmt_runs.OUTPUT.read_text())


@pytest.fixture(scope="module")
def data():
    return nmt_runs.data()


@pytest.mark.parametrize("name", list(nmt_runs.MODELS))
def test_first_batches_reproduce_the_stored_loss(data, name):
    """The first batches of each model's run (same data order, initialisation and Adam
    steps) give the stored training loss."""
    train_iter, _, src_vocab, tgt_vocab = data
    batches = nmt_runs.first_batches(train_iter)
    assert len(batches) == nmt_runs.FIRST_BATCHES == STORED["settings"]["first_batches"]
    _, history = nmt_runs.train(name, batches, src_vocab, tgt_vocab, 1)
    onp.testing.assert_allclose(history["train"][0],
                                STORED["models"][name]["first_batches_loss"], rtol=1e-4)


def test_first_batches_are_the_start_of_the_first_epoch(data):
    train_iter = data[0]
    batches = nmt_runs.first_batches(train_iter)
    d2lattn.set_seed(nmt_runs.SETTINGS["seed"])
    for batch, expected in zip(train_iter, batches):
        for a, b in zip(batch, expected):
            onp.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_stored_record_follows_the_settings(data):
    _, _, src_vocab, tgt_vocab = data
    settings = STORED["settings"]
    assert {k: settings[k] for k in nmt_runs.SETTINGS} == nmt_runs.SETTINGS
    assert (settings["src_vocab_size"], settings["tgt_vocab_size"]) == (len(src_vocab),
                                                                        len(tgt_vocab))
    for name, model in nmt_runs.MODELS.items():
        stored = STORED["models"][name]
        assert {k: stored[k] for k in model} == model
        assert len(stored["train"]) == len(stored["val"]) == model["num_epochs"]


@pytest.mark.parametrize("name, decoder_cls", [("plain", Seq2SeqDecoder), ("wide", Seq2SeqDecoder),
                                               ("attention", Seq2SeqAttentionDecoder)])
def test_loaded_models_have_the_stored_validation_loss(data, name, decoder_cls, cpu1):
    """The stored (float32) weights give the trained model's final validation loss, on any
    device."""
    _, val_iter, _, tgt_vocab = data
    net, record = load_nmt_run(name, device=cpu1)
    assert isinstance(net.decoder, decoder_cls) and record == STORED
    assert net.encoder.num_hiddens == STORED["models"][name]["num_hiddens"]
    loss = d2lattn.seq2seq_loss(net, val_iter, tgt_vocab, cpu1)
    assert loss == pytest.approx(STORED["models"][name]["val"][-1], rel=1e-5)


def test_load_nmt_run_rejects_bad_names_contexts_and_files(tmp_path):
    with pytest.raises(ValueError, match=r"name must be one of \['attention', 'plain', "
                                         r"'wide'\], got 'big'"):
        load_nmt_run("big")
    with pytest.raises(TypeError, match="device must be an mxnet Context"):
        load_nmt_run("plain", device="cpu")
    path = tmp_path / "runs"
    shutil.copy(nmt_runs.OUTPUT, tmp_path / "runs.json")
    shutil.copy(f"{nmt_runs.NMT_RUNS}_wide.safetensors", tmp_path / "runs_plain.safetensors")
    with pytest.raises(ValueError, match=r"runs_plain.safetensors does not fit the net: "
                                         r"decoder.dense.weight is \(\d+, 128\)"):
        load_nmt_run("plain", path)
    shutil.copy(f"{nmt_runs.NMT_RUNS}_plain.safetensors", tmp_path / "runs_attention.safetensors")
    with pytest.raises(ValueError, match=r"runs_attention.safetensors does not fit the net: "
                                         r"unknown tensors \[\], missing parameters "
                                         r"\['decoder.attention"):
        load_nmt_run("attention", path)
    with pytest.raises(FileNotFoundError):
        load_nmt_run("wide", path)
    record = json.loads((tmp_path / "runs.json").read_text())
    del record["settings"]["embed_size"], record["models"]["plain"]["num_hiddens"]
    (tmp_path / "runs.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"runs.json lacks the settings of 'plain' "
                                         r"\['num_hiddens'\]"):
        load_nmt_run("plain", path)
    record["models"]["plain"]["num_hiddens"] = 32
    (tmp_path / "runs.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"runs.json lacks the settings \['embed_size'\]"):
        load_nmt_run("plain", path)
    (tmp_path / "runs.json").write_text(json.dumps({"settings": record["settings"]}))
    with pytest.raises(ValueError, match=r"runs.json lacks the entries \['models'\]"):
        load_nmt_run("plain", path)


def test_full_first_epoch_of_the_plain_model_reproduces_the_stored_losses(data):
    """A whole epoch of the plain model, as in the chapter: training and validation loss."""
    train_iter, val_iter, src_vocab, tgt_vocab = data
    _, history = nmt_runs.train("plain", train_iter, src_vocab, tgt_vocab, 1, val_iter)
    stored = STORED["models"]["plain"]
    onp.testing.assert_allclose([history["train"][0], history["val"][0]],
                                [stored["train"][0], stored["val"][0]], rtol=1e-4)
