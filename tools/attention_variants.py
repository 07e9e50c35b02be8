"""Chapter 10's comparisons: positions, key/value heads and windows of a small GPT, paired.

Every setting is a GPT of two pre-norm blocks (width 64, 8 query heads, d_ff 256, dropout
0.1) trained on Chapter 9's corpus (words seen at least 10 times) for 600 Adam steps of 16
windows of 64 tokens, learning rate 2e-3; the settings differ in one thing only: how
positions enter (learned, sinusoidal, rotary), the number of key/value heads (8, 4, 2, 1:
rotary positions), or a sliding window (16 or 4 tokens: rotary positions).

Position scale: at initialisation the token vectors (Xavier, times sqrt(d)) have the norm
sqrt(2 d^2 / (V + d)) (3.6 here), the sinusoids sqrt(d / 2) (5.7) and Xavier's learned
positions about 1. The settings "learned" and "sinusoidal" therefore start with position
vectors of the token vectors' norm (learned: drawn from a normal of that norm; sinusoidal:
the table scaled by the ratio); the settings marked "unmatched" keep the package's scale,
a control for what the scale alone does.

Seeds: every setting is trained from the first seed, the five of REPLICATED (the three kinds
of positions, 1 key/value head, window 4) from the others too: a run takes about 4 to 8
minutes on a shared 2-core machine, and the stored run had about an hour.

Validation is never the test split: the last paragraphs of the training split (about 5,000
tokens) are held out for validation, the models train on the rest, and the number of steps
was fixed before any test score was computed, from a pilot of rotary and learned positions
(seed 0, the same model and data, hybridized): validation perplexity 58.9, 56.1, 57.4 (rotary) and 51.3,
47.4, 46.7 (learned) after 250, 500 and 750 steps, against 63.0 for the bigram counts of the
fit split (each word counted once more); 600 steps, between the rotary minimum and the learned plateau. Each run records
its validation curve.

Scores: the held-out (test) split in consecutive windows of 64 tokens (as trained), 128 and
256 (beyond the trained length; learned positions 64 to 255 were never trained). Paired
differences: for two settings, the ratio of their perplexities with a 95% interval from a
bootstrap that draws the held-out paragraphs and the seeds, the same draws for both,
over the seeds both settings have (settings with the same seed share their training
batches); with one seed the interval holds the held-out sample's noise only. Writes
``d2lattn/data/attention_variants.json``; tests/test_attention_variants.py checks that the
first steps of a stored run reproduce. The stored file was made by::

    PYTHONPATH=. python tools/attention_variants.py --processes 2 --cache /tmp/variants
"""
import json
import math
import os
import sys
import time
from pathlib import Path

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import mxnet as mx
import numpy as onp
from mxnet import cpu

from d2lattn import set_seed
from d2lattn.data.lm import consecutive_windows, load_corpus_lm, ngram_probs, random_windows
from d2lattn.gpt import GPT, perplexity, train_lm
from d2lattn.positional import PositionalEncoding

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stored_runs import cached, command_line, interval, spawn_pool, window_nll  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "d2lattn" / "data" / "attention_variants.json"
MIN_FREQ = 10
MODEL = {"num_hiddens": 64, "ffn_num_hiddens": 256, "num_heads": 8, "num_blks": 2,
         "dropout": 0.1, "max_len": 256}
TRAIN = {"batch_size": 16, "window": 64, "steps": 600, "lr": 2e-3}
VALIDATION_TOKENS = 5000  # validation: the whole paragraphs among the last 5,000 tokens
EVAL_LENGTHS = (64, 128, 256)
EVERY = 200  # steps between two validation scores
FIRST_LOSSES = 5
ROPE = {"positions": "rope"}
# (name, GPT options, position scale: "matched" or None)
SETTINGS = [("learned", {"positions": "learned"}, "matched"),
            ("sinusoidal", {"positions": "sinusoidal"}, "matched"),
            ("rotary (8 kv heads)", ROPE, None),
            ("learned, unmatched", {"positions": "learned"}, None),
            ("sinusoidal, unmatched", {"positions": "sinusoidal"}, None),
            ("4 kv heads", {**ROPE, "num_kv_heads": 4}, None),
            ("2 kv heads", {**ROPE, "num_kv_heads": 2}, None),
            ("1 kv head", {**ROPE, "num_kv_heads": 1}, None),
            ("window 16", {**ROPE, "window": 16}, None),
            ("window 4", {**ROPE, "window": 4}, None)]
# trained from every seed; the others from the first seed only (the budget of the stored run)
REPLICATED = ["learned", "sinusoidal", "rotary (8 kv heads)", "1 kv head", "window 4"]
# (setting, the setting it is compared with): ratios of perplexities, paired
PAIRS = [("learned", "rotary (8 kv heads)"), ("sinusoidal", "rotary (8 kv heads)"),
         ("sinusoidal", "learned"), ("learned, unmatched", "learned"),
         ("sinusoidal, unmatched", "sinusoidal"),
         ("4 kv heads", "rotary (8 kv heads)"), ("2 kv heads", "rotary (8 kv heads)"),
         ("1 kv head", "rotary (8 kv heads)"), ("window 16", "rotary (8 kv heads)"),
         ("window 4", "rotary (8 kv heads)")]


def token_norm(vocab_size, num_hiddens):
    """The expected norm of a token vector at initialisation: Xavier's uniform weights
    (variance 2 / (V + d)) times sqrt(d), over d features."""
    return math.sqrt(2 * num_hiddens ** 2 / (vocab_size + num_hiddens))


class ScaledSinusoids(PositionalEncoding):
    """The sinusoids of :class:`PositionalEncoding` times ``scale``."""

    def __init__(self, num_hiddens, dropout, max_len, scale):
        super().__init__(num_hiddens, dropout, max_len)
        self.scale = scale

    def positions(self, X, offset):
        return super().positions(X, offset) * self.scale


def make_model(options, scale, vocab_size):
    """A GPT with ``options``; with ``scale`` "matched", position vectors of the token
    vectors' norm at initialisation."""
    net = GPT(vocab_size, **MODEL, **options)
    if scale == "matched":
        d, norm = MODEL["num_hiddens"], token_norm(vocab_size, MODEL["num_hiddens"])
        if options["positions"] == "learned":  # train_lm's Xavier leaves this init alone
            net.pos_encoding.embedding.weight.init = mx.init.Normal(norm / math.sqrt(d))
        else:  # every sinusoid has norm sqrt(d / 2)
            net.pos_encoding = ScaledSinusoids(d, MODEL["dropout"], MODEL["max_len"],
                                               norm / math.sqrt(d / 2))
    return net


def split_validation(train_ids, eos):
    """(fit, validation): the training stream cut at the first paragraph end among its last
    VALIDATION_TOKENS tokens; both keep that '<eos>'."""
    cut = len(train_ids) - VALIDATION_TOKENS
    while train_ids[cut] != eos:
        cut += 1
    return train_ids[:cut + 1], train_ids[cut:]


def monitored(batches, net, validation, curve, every=EVERY):
    """``batches`` passed on, the validation perplexity of ``net`` appended to ``curve``
    after every ``every`` batches (read between two training steps, outside autograd)."""
    for step, rows in enumerate(batches):
        if step and step % every == 0:
            curve.append(round(perplexity(net, *validation), 4))
        yield rows


def train_setting(options, scale, seed, fit_ids, vocab_size, steps=TRAIN["steps"],
                  validation=None, curve=None):
    """A model of ``options`` trained for ``steps`` steps from ``seed`` on ``fit_ids``:
    (net, losses). With ``validation`` windows (tokens, lens) and a list ``curve``, the
    validation perplexity every EVERY steps is appended to it."""
    set_seed(seed)
    net = make_model(options, scale, vocab_size)
    batches = random_windows(fit_ids, TRAIN["batch_size"], TRAIN["window"], seed=seed)
    if validation is not None:
        batches = monitored(batches, net, validation, curve)
    return net, train_lm(net, batches, steps, TRAIN["lr"], cpu())


def window_positions(num_targets, length):
    """The position in its window of each of ``num_targets`` targets read in consecutive
    windows of ``length`` (as :func:`consecutive_windows` cuts them)."""
    return onp.concatenate([onp.arange(min(length, num_targets - start))
                            for start in range(0, num_targets, length)])


def by_position(nll, length):
    """The mean of the losses ``nll`` (in order) by position in windows of ``length``."""
    positions = window_positions(len(nll), length)
    return (onp.bincount(positions, nll) / onp.bincount(positions)).round(5).tolist()


def run(name, seed, cache=None):
    """Train setting ``name`` from ``seed`` and score it: its record, with the summed test
    loss of each held-out paragraph at every evaluation length. A run in ``cache`` is read."""
    return cached(cache, f"{name.replace(' ', '_')}-{seed}", lambda: scored_run(name, seed))


def scored_run(name, seed):
    """Setting ``name`` trained from ``seed`` and scored: its record (see :func:`run`)."""
    options, scale = next((o, s) for n, o, s in SETTINGS if n == name)
    train_ids, test_ids, vocab = load_corpus_lm(MIN_FREQ)
    fit, validation = split_validation(train_ids, vocab["<eos>"])
    validation = consecutive_windows(validation, TRAIN["window"], vocab["<pad>"])
    start, curve = time.perf_counter(), []
    net, losses = train_setting(options, scale, seed, fit, len(vocab), validation=validation,
                                curve=curve)
    curve.append(round(perplexity(net, *validation), 4))
    paragraph = paragraphs(test_ids, vocab["<eos>"])
    record = {"setting": name, "seed": seed,
              "first_losses": [round(x, 6) for x in losses[:FIRST_LOSSES]],
              "last_train_loss": round(float(onp.mean(losses[-50:])), 4),
              "validation_curve": curve, "sums": {}}
    for length in EVAL_LENGTHS:
        nll = window_nll(net, test_ids, length, vocab["<pad>"])
        record["sums"][str(length)] = onp.bincount(paragraph, nll).round(6).tolist()
        if length == TRAIN["window"]:
            record["by_position"] = by_position(nll, length)
    record["seconds"] = round(time.perf_counter() - start, 1)
    return record


def paragraphs(ids, eos):
    """The paragraph of each target ids[1:] (a paragraph ends with its '<eos>')."""
    return onp.cumsum(onp.array(ids[:-1]) == eos) - 1


def paired_ratios(sums, counts, pairs, seed=0, replicates=2000):
    """Bootstrap replicates of perplexity ratios, paired.

    sums {setting: (seeds, paragraphs)} summed losses, the same seeds for every setting;
    counts (paragraphs,); pairs [(a, b)]. Each replicate draws the paragraphs and the seeds
    with replacement, the same draws for every setting, and gives ppl(a) / ppl(b) for each
    pair: (replicates, pairs)."""
    rng = onp.random.default_rng(seed)
    seeds, n = next(iter(sums.values())).shape
    out = onp.empty((replicates, len(pairs)))
    for r in range(replicates):
        pick, chosen = rng.integers(n, size=n), rng.integers(seeds, size=seeds)
        total = counts[pick].sum()
        loss = {name: s[chosen][:, pick].sum() / (seeds * total) for name, s in sums.items()}
        out[r] = [math.exp(loss[a] - loss[b]) for a, b in pairs]
    return out


def compare(a, b, counts):
    """The paired comparison of runs ``a`` and ``b`` ({seed: per-paragraph summed losses})
    over the seeds both have: {"ratio": ppl(a) / ppl(b), "interval", "seeds"}."""
    seeds = sorted(set(a) & set(b))
    sums = {"a": onp.array([a[s] for s in seeds]), "b": onp.array([b[s] for s in seeds])}
    ratio = math.exp((sums["a"].sum() - sums["b"].sum()) / (len(seeds) * counts.sum()))
    replicates = paired_ratios(sums, counts, [("a", "b")])[:, 0]
    return {"ratio": round(ratio, 4), "interval": interval(replicates), "seeds": seeds}


def summarise(records, test_ids, train_ids, vocab):
    """The stored result: per setting and length the perplexity of each seed and their
    mean, the paired ratios with intervals (against another setting, the bigram, and the
    setting itself at the trained length), the bigram and the mean loss by position."""
    paragraph = paragraphs(test_ids, vocab["<eos>"])
    counts = onp.bincount(paragraph).astype("float64")
    test = onp.array(test_ids)
    bigram_nll = -onp.log(ngram_probs(train_ids, len(vocab), 2)[test[:-1], test[1:]])
    bigram_sums = onp.bincount(paragraph, bigram_nll)
    names = [name for name, _, _ in SETTINGS]
    sums = {(name, length): {r["seed"]: onp.array(r["sums"][str(length)]) for r in records
                             if r["setting"] == name}
            for name in names for length in EVAL_LENGTHS}
    settings, comparisons = [], []
    for length in EVAL_LENGTHS:
        for name in names:
            runs = sums[name, length]
            per_seed = {s: math.exp(x.sum() / counts.sum()) for s, x in runs.items()}
            settings.append({"setting": name, "length": length, "seeds": sorted(runs),
                             "perplexity": round(math.exp(onp.mean(
                                 [x.sum() / counts.sum() for x in runs.values()])), 4),
                             "per_seed": [round(per_seed[s], 4) for s in sorted(runs)]})
            bigram = {s: bigram_sums for s in runs}
            comparisons.append({"length": length, "setting": name, "against": "bigram",
                                **compare(runs, bigram, counts)})
            if length != TRAIN["window"]:
                comparisons.append({"length": length, "setting": name,
                                    "against": f"itself at {TRAIN['window']}",
                                    **compare(runs, sums[name, TRAIN["window"]], counts)})
        for a, b in PAIRS:
            comparisons.append({"length": length, "setting": a, "against": b,
                                **compare(sums[a, length], sums[b, length], counts)})
    return {"bigram": {"perplexity": round(math.exp(bigram_nll.mean()), 4),
                       "by_position": by_position(bigram_nll, TRAIN["window"])},
            "settings": settings, "comparisons": comparisons,
            "by_position": {name: onp.mean([r["by_position"] for r in records
                                            if r["setting"] == name], axis=0).round(5).tolist()
                            for name in names}}


def main(seeds, out, processes, cache=None):
    os.environ["OMP_NUM_THREADS"] = "1"  # each spawned run on one core
    records = []
    with spawn_pool(processes) as pool:
        jobs = [pool.submit(run, name, seeds[0], cache) for name, _, _ in SETTINGS]
        jobs += [pool.submit(run, name, seed, cache) for seed in seeds[1:]
                 for name in REPLICATED]
        for job in jobs:
            records.append(job.result())
            r = records[-1]
            print(f"{r['setting']:22s} seed {r['seed']}: validation {r['validation_curve']} "
                  f"({r['seconds']:.0f} s)", flush=True)
    write(records, seeds, out)


def write(records, seeds, out):
    """Summarise the runs ``records`` and write them with the settings to ``out``."""
    train_ids, test_ids, vocab = load_corpus_lm(MIN_FREQ)
    fit, validation = split_validation(train_ids, vocab["<eos>"])
    result = {"about": "Chapter 10's comparisons, made by tools/attention_variants.py; "
                       "perplexities on the held-out (test) split, ratios paired over "
                       "held-out paragraphs and seeds with 95% bootstrap intervals",
              "model": MODEL, "train": TRAIN, "min_freq": MIN_FREQ, "seeds": list(seeds),
              "replicated": REPLICATED, "fit_tokens": len(fit),
              "validation_tokens": len(validation), "validation_every": EVERY,
              "token_norm": round(token_norm(len(vocab), MODEL["num_hiddens"]), 4),
              "held_out_paragraphs": int(paragraphs(test_ids, vocab["<eos>"]).max() + 1),
              "held_out_targets": len(test_ids) - 1,
              **summarise(records, test_ids, train_ids, vocab), "runs": records}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    args = command_line(__doc__, OUT,
                        seeds_help="the first for every setting, the others for REPLICATED")
    main(args.seeds, args.out, args.processes, args.cache)
