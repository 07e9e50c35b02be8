"""tools/attention_variants.py, the script behind Chapter 10's comparisons, and the results it
stored: the first steps of a stored run reproduce, the position scales match the token
vectors' norm, the paired bootstrap and the windows' positions."""
import json
import math
import sys
from pathlib import Path

import mxnet as mx
import numpy as onp
import pytest
from mxnet import np

from d2lattn.data.lm import load_corpus_lm, ngram_probs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import attention_variants as av  # after the path to tools/ is added

STORED = json.loads(av.OUT.read_text())


def corpus():
    train_ids, test_ids, vocab = load_corpus_lm(av.MIN_FREQ)
    return train_ids, test_ids, vocab


@pytest.mark.parametrize("name", ["sinusoidal", "1 kv head"])
def test_first_training_steps_reproduce_the_stored_losses(name):
    train_ids, _, vocab = corpus()
    fit, _ = av.split_validation(train_ids, vocab["<eos>"])
    run = next(r for r in STORED["runs"] if r["setting"] == name)
    options, scale = next((o, s) for n, o, s in av.SETTINGS if n == name)
    _, losses = av.train_setting(options, scale, run["seed"], fit, len(vocab), steps=3)
    assert losses == pytest.approx(run["first_losses"][:3], rel=1e-4)


def test_the_stored_bigram_is_the_chapters_and_every_run_is_stored():
    train_ids, test_ids, vocab = corpus()
    test = onp.array(test_ids)
    nll = -onp.log(ngram_probs(train_ids, len(vocab), 2)[test[:-1], test[1:]])
    assert STORED["bigram"]["perplexity"] == pytest.approx(math.exp(nll.mean()), abs=1e-4)
    first, *others = STORED["seeds"]
    assert sorted((r["setting"], r["seed"]) for r in STORED["runs"]) == sorted(
        [(name, first) for name, _, _ in av.SETTINGS]
        + [(name, seed) for seed in others for name in av.REPLICATED])
    for r in STORED["runs"]:  # every held-out target counted once at every length
        assert len(r["sums"]["64"]) == STORED["held_out_paragraphs"]
        assert len(r["validation_curve"]) == av.TRAIN["steps"] // av.EVERY


def test_each_stored_perplexity_is_its_runs_mean_loss():
    for entry in STORED["settings"]:
        runs = [r for r in STORED["runs"] if r["setting"] == entry["setting"]]
        losses = [sum(r["sums"][str(entry["length"])]) / STORED["held_out_targets"]
                  for r in runs]
        assert entry["perplexity"] == pytest.approx(math.exp(onp.mean(losses)), rel=1e-4)


def test_validation_is_the_end_of_the_training_split_not_the_test_split():
    train_ids, test_ids, vocab = corpus()
    fit, validation = av.split_validation(train_ids, vocab["<eos>"])
    assert fit + validation[1:] == train_ids
    assert fit[-1] == validation[0] == vocab["<eos>"]
    assert 0.9 * av.VALIDATION_TOKENS < len(validation) <= av.VALIDATION_TOKENS + 1
    assert (len(fit), len(validation)) == (STORED["fit_tokens"], STORED["validation_tokens"])


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_matched_positions_start_with_the_token_vectors_norm(positions):
    vocab_size, d = 557, av.MODEL["num_hiddens"]
    norms = {}
    for scale in ("matched", None):
        mx.random.seed(0)
        net = av.make_model({"positions": positions}, scale, vocab_size)
        net.initialize(mx.init.Xavier())  # as train_lm does
        X = np.zeros((1, av.MODEL["max_len"], d))
        norms[scale] = float(np.sqrt((net.pos_encoding.positions(X, 0) ** 2).sum(-1)).mean())
    tokens = net.embedding.weight.data() * math.sqrt(d)
    measured = float(np.sqrt((tokens ** 2).sum(-1)).mean())
    assert measured == pytest.approx(av.token_norm(vocab_size, d), rel=0.02)
    assert norms["matched"] == pytest.approx(av.token_norm(vocab_size, d), rel=0.05)
    # the package's own scales, the confound the matching removes: Xavier's (max_len, d)
    # table and the sinusoids
    expected = {"learned": math.sqrt(2 * d / (av.MODEL["max_len"] + d)),
                "sinusoidal": math.sqrt(d / 2)}[positions]
    assert norms[None] == pytest.approx(expected, rel=0.1)


def test_paired_ratios_draw_the_same_paragraphs_and_seeds_for_both_settings():
    # b loses 0.5 nat more than a on every token, whatever the draw: the ratio is e^-0.5
    rng = onp.random.default_rng(0)
    counts = onp.array([2.0, 5.0, 3.0])
    a = rng.random((2, 3)) * counts
    replicates = av.paired_ratios({"a": a, "b": a + 0.5 * counts}, counts, [("a", "b")],
                                  replicates=50)
    onp.testing.assert_allclose(replicates[:, 0], math.exp(-0.5), rtol=1e-12)


def test_window_positions_follow_consecutive_windows():
    assert av.window_positions(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert av.by_position(onp.array([1.0, 2.0, 3.0, 6.0]), 2) == [2.0, 4.0]


def test_compare_pairs_the_seeds_both_settings_have():
    counts = onp.array([1.0, 3.0])
    a = {0: onp.array([1.0, 3.0]), 1: onp.array([9.0, 27.0])}  # 1 and 9 nats per token
    b = {0: onp.array([2.0, 6.0])}  # 2 nats per token, seed 0 only
    result = av.compare(a, b, counts)
    assert result["seeds"] == [0]
    assert result["ratio"] == pytest.approx(math.exp(-1.0), abs=1e-4)
    assert result["interval"] == pytest.approx([math.exp(-1.0)] * 2, abs=1e-4)
