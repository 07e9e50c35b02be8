"""Pretrain Chapter 7's small BERT for longer than the chapter does, and record when its held-out
accuracy passes the count-based judges.

The run is the chapter's own (same data, sizes, seed, Adam with lr 1e-3, ``train_bert``), so its
first steps are the chapter's live steps; it goes on to ``--steps`` steps. Every ``--every``
steps (and at steps 100 and 250) it measures, on the held-out test pairs, the MLM loss and the
accuracy of the model by kind of masked token, with 95% bootstrap intervals over the sentence
pairs, and its paired difference from the two bigram judges. Nothing is chosen from these
measurements: the settings are fixed in advance, so no validation split is needed.

Writes ``d2lattn/data/small_bert.safetensors`` (the final weights in float16) and
``small_bert.json`` (settings, the losses of the first steps, the judges, the measurements over
training, and those of the stored float16 weights). ``tests/test_pretrain_bert.py`` checks that
the first steps reproduce. Usage::

    python tools/pretrain_bert.py     # about 30 minutes on two CPU cores shared with others

(The stored run was made with ``OMP_NUM_THREADS=1`` set, which
changes nothing but the speed on busy cores.)
"""
import argparse
import json

import d2lattn  # noqa: F401  first: it makes MXNet work with today's numpy

import numpy as onp
from mxnet import npx

from d2lattn import set_seed, try_all_gpus
from d2lattn.bert import SMALL_BERT, BERTModel
from d2lattn.checkpoint import save_parameters
from d2lattn.data.lm import ngram_probs
from d2lattn.data.pretrain import (load_data_bert, neighbour_probs, sentence_stream,
                                   token_kinds, unigram_distribution)
from d2lattn.metrics import bootstrap_interval
from d2lattn.train import train_bert

SETTINGS = {"num_hiddens": 128, "ffn_num_hiddens": 256, "num_heads": 2, "num_blks": 2,
            "dropout": 0.1, "max_len": 64, "batch_size": 64, "dupe_factor": 10, "lr": 1e-3,
            "seed": 0}
NUM_FIRST = 5  # the losses of this many first steps are stored for the reproduction test


def make_data(settings=SETTINGS):
    """``(train_iter, test_iter, vocab)`` as Chapter 7 loads them."""
    train_iter, vocab = load_data_bert(settings["batch_size"], settings["max_len"],
                                       dupe_factor=settings["dupe_factor"])
    test_iter, _ = load_data_bert(settings["batch_size"], settings["max_len"], split="test")
    return train_iter, test_iter, vocab


def pretrain(train_iter, vocab, num_steps, on_step=None, settings=SETTINGS):
    """The seeded net and its training history after ``num_steps`` steps of the run."""
    set_seed(settings["seed"])
    net = BERTModel(len(vocab), settings["num_hiddens"], settings["ffn_num_hiddens"],
                    settings["num_heads"], settings["num_blks"], settings["dropout"],
                    settings["max_len"])
    history = train_bert(train_iter, net, num_steps, try_all_gpus(), settings["lr"], on_step)
    return net, history


class HeldOut:
    """The masked words of the test pairs, their kinds, and the judges' right answers."""

    def __init__(self, test_iter, vocab):
        tokens, _, _, positions, weights, labels, _ = (a.asnumpy() for a in test_iter.arrays)
        self.arrays = test_iter.arrays
        real = weights == 1
        self.pair = onp.nonzero(real)[0]  # the sentence pair of every masked word
        self.answers = labels[real]
        self.kinds = {"all": onp.ones(len(self.answers), dtype=bool),
                      **token_kinds(vocab, self.answers)}
        where = positions[real]
        before, after = tokens[self.pair, where - 1], tokens[self.pair, where + 1]
        stream = sentence_stream(vocab)
        bigram = ngram_probs(stream, len(vocab), order=2)
        bigram[vocab["[CLS]"]] = bigram[vocab["[SEP]"]]  # [CLS], too, precedes a first word
        reserved = vocab[["[PAD]", "[MASK]", "[CLS]", "[SEP]"]]
        u = unigram_distribution(vocab)
        self.judges = {  # right (1) or wrong (0) at every masked word
            "unigram": (onp.full(len(self.answers), u.argmax()) == self.answers) * 1.0,
            "bigram, left word": self._right(neighbour_probs(bigram, before,
                                                             exclude=reserved)),
            "bigram, both sides": self._right(neighbour_probs(
                bigram, before, after, unknown=[vocab["[MASK]"]], exclude=reserved))}

    def _right(self, probs):
        return (probs.argmax(axis=1) == self.answers) * 1.0

    def by_kind(self, values):
        """{kind: [mean, low, high]} of per-word ``values``, bootstrapped over the pairs."""
        return {kind: [round(float(v), 5) for v in
                       bootstrap_interval(values[chosen], self.pair[chosen])]
                for kind, chosen in self.kinds.items()}

    def measure(self, net):
        """The model's held-out MLM loss and accuracy by kind, and its paired differences
        from the bigram judges."""
        device = try_all_gpus()[0]
        tokens, segments, valid_lens, positions, weights, _, _ = (
            a.as_in_ctx(device) for a in self.arrays)
        _, mlm_Y_hat, _ = net(tokens, segments, valid_lens, positions)
        log_probs = npx.log_softmax(mlm_Y_hat).asnumpy()[weights.asnumpy() == 1]
        words = onp.arange(len(self.answers))
        right = (log_probs.argmax(axis=1) == self.answers) * 1.0
        return {"loss": [round(float(v), 5) for v in
                         bootstrap_interval(-log_probs[words, self.answers], self.pair)],
                "accuracy": self.by_kind(right),
                **{f"minus {name}": self.by_kind(right - self.judges[name])
                   for name in ("bigram, both sides", "bigram, left word")}}


def round_to_float16(net):
    """Round every parameter to float16 (and back), as the stored checkpoint holds them."""
    for p in net.collect_params().values():
        p.set_data(p.data().astype("float16").astype("float32"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--out", default=str(SMALL_BERT))
    args = parser.parse_args()
    train_iter, test_iter, vocab = make_data()
    held_out = HeldOut(test_iter, vocab)
    record = {"settings": {**SETTINGS, "num_steps": args.steps, "vocab_size": len(vocab)},
              "held_out": {"pairs": int(held_out.pair.max() + 1),
                           "masked": {k: int(c.sum()) for k, c in held_out.kinds.items()}},
              "judges": {name: held_out.by_kind(right)
                         for name, right in held_out.judges.items()},
              "bert": []}
    checkpoints = {100, *range(args.every, args.steps + 1, args.every)}

    def on_step(step, net):
        if step in checkpoints:
            record["bert"].append({"step": step, **held_out.measure(net)})
            print(json.dumps({"step": step, "accuracy": record["bert"][-1]["accuracy"]}),
                  flush=True)

    net, history = pretrain(train_iter, vocab, args.steps, on_step)
    record["first_losses"] = {key: [round(v, 6) for v in losses[:NUM_FIRST]]
                              for key, losses in history.items()}
    ends = sorted(checkpoints)
    record["train_loss"] = {  # the mean training MLM loss over the steps up to each checkpoint
        "step": ends, "mlm": [round(float(onp.mean(history["mlm"][a:b])), 4)
                              for a, b in zip([0] + ends, ends)]}
    round_to_float16(net)
    record["stored"] = held_out.measure(net)
    save_parameters(net, args.out + ".safetensors")
    with open(args.out + ".json", "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
