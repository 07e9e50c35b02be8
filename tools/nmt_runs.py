"""Record Chapter 3's three translation models: ``d2lattn/data/nmt_runs.json`` and
``d2lattn/data/nmt_runs_<name>.safetensors``.

Chapter 3 (``book/03_bahdanau_attention.ipynb``) compares a plain GRU encoder-decoder
(d = 64, 20 epochs), a wide one (d = 128, 12 epochs) and Bahdanau's attention model
(d = 64, 8 epochs) on the generated English-French corpus. Training them takes about
15 minutes on 2 CPU cores, longer than a chapter may run, so this script trains them once
and stores each model's weights (float32: the chapter evaluates exactly the trained models),
its per-epoch training and validation losses, and the training loss of its first
``FIRST_BATCHES`` batches, which ``tests/test_nmt_runs.py`` re-runs. The chapter loads the
models with :func:`d2lattn.seq2seq.load_nmt_run` and re-trains the plain model's first
epoch live.

Settings are the chapter's: 4000 training pairs, batches of 32, embeddings of 32, one GRU
layer, Adam at 0.01, gradients clipped to norm 1, ``d2lattn.set_seed(1)`` before each
model; encoder and plain decoder hybridized (the same numbers, faster). Deterministic on a
given machine (CPU). From the repository root::

    PYTHONPATH=. .venv/bin/python tools/nmt_runs.py
"""
import json
import pathlib
import sys

import d2lattn  # first: it makes MXNet work with today's numpy
from d2lattn.checkpoint import save_parameters
from d2lattn.data import load_corpus, load_data_nmt
from d2lattn.seq2seq import NMT_RUNS, seq2seq_model

SETTINGS = {"n_train": 4000, "batch_size": 32, "embed_size": 32, "num_layers": 1, "lr": 0.01,
            "seed": 1}
MODELS = {"plain": {"decoder": "plain", "num_hiddens": 64, "num_epochs": 20},
          "wide": {"decoder": "plain", "num_hiddens": 128, "num_epochs": 12},
          "attention": {"decoder": "attention", "num_hiddens": 64, "num_epochs": 8}}
FIRST_BATCHES = 3  # the training loss of these is stored per model, re-run by the test
OUTPUT = pathlib.Path(str(NMT_RUNS) + ".json")


def data():
    """The chapter's data: ``(train_iter, val_iter, src_vocab, tgt_vocab)``."""
    d2lattn.set_seed(0)
    corpus = load_corpus(n_train=SETTINGS["n_train"])
    train_iter, src_vocab, tgt_vocab = load_data_nmt(corpus.train, SETTINGS["batch_size"])
    val_iter, _, _ = load_data_nmt(corpus.val, 128, None, src_vocab, tgt_vocab,
                                   is_train=False)
    return train_iter, val_iter, src_vocab, tgt_vocab


def train(name, train_iter, src_vocab, tgt_vocab, num_epochs, val_iter=None):
    """Train model ``name`` of ``MODELS`` from seed 1 as the chapter does: ``(net, history)``.
    ``train_iter`` may be a list of batches: it is then used as it is."""
    d2lattn.set_seed(SETTINGS["seed"])
    model = MODELS[name]
    net = seq2seq_model(model["decoder"], len(src_vocab), len(tgt_vocab),
                        SETTINGS["embed_size"], model["num_hiddens"], SETTINGS["num_layers"])
    net.hybridize()
    history = d2lattn.train_seq2seq(net, train_iter, SETTINGS["lr"], num_epochs, tgt_vocab,
                                    d2lattn.cpu(), val_iter=val_iter, animate=False)
    return net, history


def first_batches(train_iter):
    """The first ``FIRST_BATCHES`` batches of an epoch after ``set_seed(1)``: those each
    model's training starts with (its initialisation draws from MXNet's generator, the
    shuffle from NumPy's)."""
    d2lattn.set_seed(SETTINGS["seed"])
    batches = []
    for batch in train_iter:
        batches.append(batch)
        if len(batches) == FIRST_BATCHES:
            return batches


def main():
    train_iter, val_iter, src_vocab, tgt_vocab = data()
    models = {}
    for name, model in MODELS.items():
        timer = d2lattn.Timer()
        net, history = train(name, train_iter, src_vocab, tgt_vocab, model["num_epochs"],
                             val_iter)
        seconds = timer.stop()
        save_parameters(net, f"{NMT_RUNS}_{name}.safetensors", dtype="float32")
        _, first = train(name, first_batches(train_iter), src_vocab, tgt_vocab, 1)
        models[name] = {**model, "seconds": round(seconds, 1),
                        "train": [round(x, 6) for x in history["train"]],
                        "val": [round(x, 6) for x in history["val"]],
                        "first_batches_loss": round(first["train"][0], 6)}
        print(f"{name}: validation {history['val'][-1]:.3f} in {seconds:.0f} s", file=sys.stderr)
    settings = {**SETTINGS, "src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab),
                "first_batches": FIRST_BATCHES}
    OUTPUT.write_text(json.dumps({"settings": settings, "models": models}, indent=1) + "\n")
    print(f"wrote {OUTPUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
