"""Chapter 9's ladder: what each part of the GPT block buys, on the chapter's corpus.

Rungs, each adding one thing to the one before: the bigram counts; one attention-only block
(post-norm); + the FFN; + a second block; + pre-norm (the chapter's GPT). Every GPT rung is
trained with the chapter's settings (width 128, 4 heads, d_ff 512, dropout 0.1, 300 Adam
steps of 32 windows of 64 tokens, learning rate 1e-3) for each seed, and scored on the
held-out split as the chapter scores it. Nothing is chosen on the held-out split: the
settings are the chapter's, fixed before the ladder was run.

The 95% intervals resample the 75 held-out paragraphs and, for each rung, the seeds (a
two-level bootstrap), so they hold both the noise of the held-out sample and the noise
between training runs; the steps between rungs are paired over the same paragraphs.
Writes ``d2lattn/data/gpt_ladder.json`` (the chapter reads it; tests/test_gpt_ladder.py checks
that the first training steps of a rung reproduce). The stored file holds two seeds per rung,
made by the default command; each GPT run costs about what the chapter's training cell does::

    PYTHONPATH=. python tools/gpt_ladder.py --processes 2
"""
import json
import math
import sys
import time
from pathlib import Path

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import numpy as onp
from mxnet import cpu

from d2lattn import set_seed
from d2lattn.data.lm import load_corpus_lm, ngram_probs, random_windows
from d2lattn.gpt import GPT, train_lm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stored_runs import cached, command_line, interval, spawn_pool, window_nll  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "d2lattn" / "data" / "gpt_ladder.json"
MODEL = {"num_hiddens": 128, "num_heads": 4, "dropout": 0.1, "max_len": 128}
TRAIN = {"batch_size": 32, "window": 64, "steps": 300, "lr": 1e-3}
# (name, GPT options); None: the bigram counts of the chapter
RUNGS = [("bigram counts", None),
         ("1 attention-only block", {"num_blks": 1, "ffn_num_hiddens": 0, "pre_norm": False}),
         ("+ FFN", {"num_blks": 1, "ffn_num_hiddens": 512, "pre_norm": False}),
         ("+ second block", {"num_blks": 2, "ffn_num_hiddens": 512, "pre_norm": False}),
         ("+ pre-norm", {"num_blks": 2, "ffn_num_hiddens": 512, "pre_norm": True})]
FIRST_LOSSES = 5  # training losses stored per run, for the reproduction test


def train_rung(options, seed, train_ids, vocab_size, steps=TRAIN["steps"]):
    """A GPT with ``options`` trained for ``steps`` steps from ``seed``: (net, losses)."""
    set_seed(seed)
    net = GPT(vocab_size, **MODEL, **options)
    batches = random_windows(train_ids, TRAIN["batch_size"], TRAIN["window"], seed=seed)
    return net, train_lm(net, batches, steps, TRAIN["lr"], cpu())


def bootstrap(sums, counts, seed=0, replicates=2000):
    """Two-level bootstrap of perplexities.

    sums (rungs, seeds, paragraphs): summed loss of each paragraph's tokens; counts
    (paragraphs,). Each replicate draws the paragraphs with replacement (the same for
    every rung) and, for each rung, its seeds with replacement. Returns the replicates'
    perplexities (replicates, rungs).
    """
    rng = onp.random.default_rng(seed)
    rungs, seeds, paragraphs = sums.shape
    out = onp.empty((replicates, rungs))
    for b in range(replicates):
        pick = rng.integers(paragraphs, size=paragraphs)
        chosen = rng.integers(seeds, size=(rungs, seeds))
        per_seed = sums[:, :, pick].sum(axis=2)  # (rungs, seeds)
        mean = onp.take_along_axis(per_seed, chosen, axis=1).mean(axis=1)
        out[b] = onp.exp(mean / counts[pick].sum())
    return out


def run(options, seed, cache=None):
    """Train one rung from one seed and score it: its record and its held-out token losses.
    With a ``cache`` folder, a run already there is read instead of trained again."""
    record = cached(cache, f"{json.dumps(options, sort_keys=True)}-{seed}",
                    lambda: scored_run(options, seed))
    return record, onp.array(record.pop("nll"))


def scored_run(options, seed):
    """One rung trained from one seed and scored: its record, with the loss of every
    held-out token but the first in "nll"."""
    train_ids, test_ids, vocab = load_corpus_lm(min_freq=3)
    start = time.perf_counter()
    net, losses = train_rung(options, seed, train_ids, len(vocab))
    nll = window_nll(net, test_ids, TRAIN["window"], vocab["<pad>"])
    return {"seed": seed, "perplexity": round(math.exp(nll.mean()), 4),
            "parameters": sum(p.data().size for p in net.collect_params().values()),
            "first_losses": [round(x, 6) for x in losses[:FIRST_LOSSES]],
            "last_train_loss": round(float(onp.mean(losses[-20:])), 4),
            "seconds": round(time.perf_counter() - start, 1), "nll": nll.tolist()}


def main(seeds, out, processes, cache=None):
    train_ids, test_ids, vocab = load_corpus_lm(min_freq=3)
    test = onp.array(test_ids)
    paragraph = onp.cumsum(test[:-1] == vocab["<eos>"]) - 1  # paragraph of each target
    counts = onp.bincount(paragraph).astype("float64")
    bigram = ngram_probs(train_ids, len(vocab), 2)
    bigram_sums = onp.bincount(paragraph, -onp.log(bigram[test[:-1], test[1:]]))
    # Each run in a fresh process; a seed of every rung before the next seed, the longest
    # runs first
    with spawn_pool(processes) as pool:
        jobs = {(name, seed): pool.submit(run, options, seed, cache)
                for seed in seeds for name, options in reversed(RUNGS) if options}
        rungs, sums = [], []
        for name, options in RUNGS:
            rung = {"name": name, "options": options, "runs": []}
            if options is None:
                rung["runs"].append({"seed": None, "perplexity": round(
                    math.exp(bigram_sums.sum() / counts.sum()), 4)})
                sums.append([bigram_sums] * len(seeds))
            else:
                sums.append([])
                for seed in seeds:
                    record, nll = jobs[name, seed].result()
                    rung["parameters"] = record.pop("parameters")
                    rung["runs"].append(record)
                    sums[-1].append(onp.bincount(paragraph, nll))
                    print(f"{name:24s} seed {seed}: held-out perplexity "
                          f"{record['perplexity']:.2f} ({record['seconds']:.0f} s)", flush=True)
            rungs.append(rung)
    sums = onp.array(sums)
    replicates = bootstrap(sums, counts)
    for k, rung in enumerate(rungs):
        rung["perplexity"] = round(float(onp.exp(sums[k].sum(axis=1).mean() / counts.sum())), 4)
        rung["interval"] = interval(replicates[:, k])
        if k:  # the step from the rung before: the ratio of their perplexities
            rung["step_ratio"] = round(rung["perplexity"] / rungs[k - 1]["perplexity"], 4)
            rung["step_interval"] = interval(replicates[:, k] / replicates[:, k - 1])
    result = {"about": "Chapter 9's ladder, made by tools/gpt_ladder.py; perplexities on the "
                       "held-out split, 95% intervals over held-out paragraphs and seeds",
              "model": MODEL, "train": TRAIN, "seeds": list(seeds),
              "held_out_paragraphs": len(counts), "held_out_targets": int(counts.sum()),
              "rungs": rungs}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    args = command_line(__doc__, OUT)
    main(args.seeds, args.out, args.processes, args.cache)
