"""tools/gpt_ladder.py, the script behind Chapter 9's ladder, and the results it stored."""
import json
import math
import sys
from pathlib import Path

import numpy as onp
import pytest

from d2lattn.data.lm import load_corpus_lm, ngram_probs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gpt_ladder  # after the path to tools/ is added

LADDER = json.loads(gpt_ladder.OUT.read_text())


def test_first_training_steps_reproduce_the_stored_losses():
    train_ids, _, vocab = load_corpus_lm(min_freq=3)
    rung = LADDER["rungs"][1]  # one attention-only block: the cheapest GPT rung
    run = rung["runs"][0]
    _, losses = gpt_ladder.train_rung(rung["options"], run["seed"], train_ids, len(vocab),
                                      steps=3)
    assert losses == pytest.approx(run["first_losses"][:3], rel=1e-4)
    assert rung["options"] == dict(gpt_ladder.RUNGS[1][1])


def test_the_stored_bigram_rung_is_the_chapters_bigram():
    train_ids, test_ids, vocab = load_corpus_lm(min_freq=3)
    test = onp.array(test_ids)
    nll = -onp.log(ngram_probs(train_ids, len(vocab), 2)[test[:-1], test[1:]])
    assert LADDER["rungs"][0]["perplexity"] == pytest.approx(math.exp(nll.mean()), abs=1e-4)
    assert LADDER["held_out_targets"] == len(test) - 1


def test_each_rung_is_the_mean_loss_of_its_seeds_inside_its_interval():
    for rung in LADDER["rungs"][1:]:
        per_seed = [math.log(run["perplexity"]) for run in rung["runs"]]
        assert len(per_seed) == len(LADDER["seeds"])
        assert rung["perplexity"] == pytest.approx(math.exp(onp.mean(per_seed)), rel=1e-4)
        low, high = rung["interval"]
        assert low < rung["perplexity"] < high


def test_bootstrap_draws_paragraphs_and_seeds():
    # two paragraphs of 1 and 3 tokens; seed 0 loses 1 nat per token, seed 1 loses 3
    sums = onp.array([[[1.0, 3.0], [3.0, 9.0]]])
    counts = onp.array([1.0, 3.0])
    replicates = gpt_ladder.bootstrap(sums, counts, replicates=400)[:, 0]
    # every token of a seed has the same loss: only the draw of seeds matters
    assert set(onp.round(replicates, 6)) == {round(math.exp(v), 6) for v in (1.0, 2.0, 3.0)}
    low, high = gpt_ladder.interval(replicates)
    assert low == pytest.approx(math.e, rel=1e-3) and high == pytest.approx(math.e ** 3, rel=1e-3)
