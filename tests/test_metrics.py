import math
import random

import numpy as onp

import pytest

from d2lattn.data.grammar import generate_pairs
from d2lattn.metrics import bleu, bootstrap_interval, corpus_bleu

LABEL, PRED = "A B C D E F", "A B B C D"
# By hand: len_pred = 5, len_label = 6, brevity exp(min(0, 1 - 6/5)) = exp(-0.2).
# p1: A, B (twice, clipped to once), C, D match: 4/5.
# p2: AB, BB, BC, CD -> AB, BC, CD match: 3/4.
# p3: ABB, BBC, BCD -> BCD matches: 1/3.
# p4: ABBC, BBCD -> none: 0/2.
P = {1: 4 / 5, 2: 3 / 4, 3: 1 / 3, 4: 0.0}


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_bleu_by_hand(k):
    expected = math.exp(-0.2) * math.prod(P[n] ** 0.5 ** n for n in range(1, k + 1))
    assert bleu(PRED, LABEL, k) == pytest.approx(expected, rel=1e-12)
    assert bleu(PRED.split(), LABEL.split(), k) == pytest.approx(expected, rel=1e-12)


def test_bleu_matches_d2l_stored_output():
    """d2l's Bahdanau section printed 'he's calm . => il est riche ., bleu 0.658'."""
    got = bleu("il est riche .", "il est calme .", k=2)
    assert got == pytest.approx((3 / 4) ** 0.5 * (1 / 3) ** 0.25, rel=1e-12)
    assert round(got, 3) == 0.658


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_bleu_of_identical_sequences_is_one(k):
    assert bleu("je suis chez moi .", "je suis chez moi .", k) == 1.0
    assert bleu(["a"], ("a",), k) == 1.0


def test_bleu_is_zero_without_a_k_gram_match():
    assert bleu("a b", "c d", 1) == 0.0
    assert bleu("a b c", "b a c", 1) == pytest.approx(1.0)
    assert bleu("a b c", "b a c", 2) == 0.0  # no bigram in common


def test_bleu_longer_prediction_has_no_brevity_penalty():
    assert bleu("a b c d", "a b", 1) == pytest.approx(0.5 ** 0.5)


def test_bleu_prediction_shorter_than_k():
    """Only the orders up to len_pred count (d2l classic divided by zero here)."""
    assert bleu("a", "a b c", 4) == pytest.approx(math.exp(1 - 3))
    assert bleu("a b", "a b", 4) == 1.0
    assert bleu("a b", "a b c", 3) == pytest.approx(math.exp(1 - 3 / 2))
    assert bleu("a c", "a b c", 3) == 0.0  # p2 = 0


@pytest.mark.parametrize("pred", ["", "   ", []])
def test_bleu_of_an_empty_prediction_is_zero(pred):
    assert bleu(pred, "a b c", 2) == 0.0


def test_bleu_of_an_empty_label_is_zero():
    assert bleu("a b", "", 2) == 0.0


@pytest.mark.parametrize("args, error, match", [
    (("a", "a", 0), ValueError, "k must be an int >= 1, got 0"),
    (("a", "a", 1.5), ValueError, "k must be an int >= 1, got 1.5"),
    (("a", "a", True), ValueError, "k must be an int >= 1, got True"),
    ((5, "a", 1), TypeError, "pred_seq must be a str or a list of str tokens, got 5"),
    (("a", [1, 2], 1), TypeError, r"label_seq must be a str or a list of str tokens, got \[1, 2\]"),
])
def test_bleu_rejects_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        bleu(*args)


# --- corpus BLEU --------------------------------------------------------------------------------

def test_corpus_bleu_by_hand():
    # One sentence, max_n=2: brevity exp(1 - 6/5), precisions 4/5 and 3/4, geometric mean.
    assert corpus_bleu([PRED], [LABEL], max_n=2) == pytest.approx(
        math.exp(1 - 6 / 5) * (4 / 5 * 3 / 4) ** 0.5, rel=1e-12)
    assert corpus_bleu([PRED], [LABEL], max_n=4) == 0.0  # no 4-gram match, no smoothing
    # Counts are pooled over the corpus: p1 = (2 + 2) / 5, p2 = (1 + 1) / 3, c = r = 5.
    got = corpus_bleu([["a", "b"], ["c", "d", "e"]], [["a", "b"], ["c", "d", "f"]], max_n=2)
    assert got == pytest.approx((4 / 5 * 2 / 3) ** 0.5, rel=1e-12)


def test_corpus_bleu_of_identical_corpora_is_one():
    sentences = ["a b c d e", "le chat dort .", "x y z w"]
    assert corpus_bleu(sentences, sentences) == pytest.approx(1.0, rel=1e-12)


def test_corpus_bleu_accepts_strings_and_token_lists_alike():
    preds, labels = ["a b c d", "b c d e f"], ["a b c d e", "b c d e"]
    assert corpus_bleu(preds, labels) == corpus_bleu([p.split() for p in preds],
                                                     [tuple(l.split()) for l in labels])


@pytest.mark.parametrize("args, error, match", [
    (([], []), ValueError, r"preds must be a non-empty list of sequences, got \[\]"),
    (("a b", ["a b"]), ValueError, "preds must be a non-empty list"),
    ((["a b"], ["a b", "c"]), ValueError, "preds and labels must be equally long, got 1 and 2"),
    ((["a b"], ["a b"], 0), ValueError, "max_n must be an int >= 1, got 0"),
    ((["a", 3], ["a", "b"]), TypeError, r"preds\[1\] must be a str or a list of str tokens"),
])
def test_corpus_bleu_rejects_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        corpus_bleu(*args)


# --- against sacrebleu (test-only dependency) ----------------------------------------------------

def corrupt(tokens, rng, vocab, rate):
    """Drop, replace or duplicate each token with probability ``rate``."""
    out = []
    for token in tokens:
        r = rng.random()
        if r < rate / 3:
            continue
        out += [rng.choice(vocab)] if r < 2 * rate / 3 else [token] * (1 + (r < rate))
    return out


def sacre(preds, labels, max_n=4):
    sacrebleu = pytest.importorskip("sacrebleu")
    metric = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", max_ngram_order=max_n,
                                    force=True)
    return metric.corpus_score([" ".join(p) for p in preds],
                               [[" ".join(l) for l in labels]]).score / 100


@pytest.mark.parametrize("seed", range(6))
def test_corpus_bleu_matches_sacrebleu_on_random_corpora(seed):
    rng = random.Random(seed)
    vocab = list("abcdefg")
    labels = [[rng.choice(vocab) for _ in range(rng.randint(1, 15))] for _ in range(40)]
    preds = [corrupt(label, rng, vocab, rate=0.1 + 0.1 * seed) for label in labels]
    for max_n in (1, 2, 4):
        expected = sacre(preds, labels, max_n)
        assert corpus_bleu(preds, labels, max_n) == pytest.approx(expected, abs=1e-6)
    assert 0 < corpus_bleu(preds, labels) < 1


def test_corpus_bleu_matches_sacrebleu_on_the_grammar_corpus():
    rng = random.Random(0)
    pairs = generate_pairs(300, seed=5)
    labels = [tgt for _, tgt in pairs]
    vocab = sorted({token for label in labels for token in label})
    for rate in (0.0, 0.05, 0.2, 0.5):
        preds = [corrupt(label, rng, vocab, rate) for label in labels]
        got = corpus_bleu(preds, labels)
        assert got == pytest.approx(sacre(preds, labels), abs=1e-6)
        assert (got == pytest.approx(1.0)) == (rate == 0)


def test_bootstrap_interval_against_a_loop_over_draws():
    values = onp.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    groups = onp.array([0, 0, 1, 2, 2, 2, 3])
    mean, low, high = bootstrap_interval(values, groups, num_draws=300, seed=3, level=0.9)
    assert mean == 4 / 7
    draws = onp.random.RandomState(3).randint(0, 4, (300, 4))
    means = []
    for draw in draws:  # the groups drawn, each with all its values
        chosen = [v for g in draw for v, h in zip(values, groups) if h == g]
        means.append(sum(chosen) / len(chosen))
    onp.testing.assert_allclose([low, high], onp.percentile(means, [5, 95]))
    assert low < mean < high


def test_bootstrap_interval_of_single_values_and_of_a_constant():
    rng = onp.random.RandomState(0)
    values = rng.rand(400)
    mean, low, high = bootstrap_interval(values)  # each value its own group
    half = 1.96 * values.std() / math.sqrt(len(values))  # the normal approximation
    assert abs((high - low) / 2 - half) < 0.15 * half and abs((low + high) / 2 - mean) < 0.01
    assert bootstrap_interval([2.0, 2.0, 2.0], [0, 1, 1]) == (2.0, 2.0, 2.0)
    # a group id that never occurs is no group: ids 0 and 5 give two groups, as 0 and 1 do
    assert bootstrap_interval([1.0, 0.0], [0, 5]) == bootstrap_interval([1.0, 0.0], [0, 1])


@pytest.mark.parametrize("args, message", [
    (([],), "values must be a non-empty 1-D array, got shape \\(0,\\)"),
    (([1.0, 2.0], [0]), "groups must be ints >= 0 shaped like values \\(2,\\)"),
    (([1.0, 2.0], [0.0, 1.0]), "groups must be ints >= 0"),
    (([1.0, 2.0], [0, -1]), "groups must be ints >= 0"),
    (([1.0], None, 0), "num_draws must be an int >= 1, got 0"),
    (([1.0], None, 10, 0, 1.0), "level must be in \\(0, 1\\), got 1.0")])
def test_bootstrap_interval_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_interval(*args)
