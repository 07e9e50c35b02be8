"""Language-modelling data: the corpus streams, the windows and the n-gram baselines."""
import math
import random

import numpy as onp
import pytest
from hypothesis import given, settings, strategies as st

from d2lattn.data.lm import consecutive_windows, load_corpus_lm, ngram_probs, random_windows
from d2lattn.data.pretrain import load_paragraphs, split_paragraphs, tokenize


def test_streams_hold_the_split_paragraphs_between_eos():
    train, test, vocab = load_corpus_lm(min_freq=3)
    eos = vocab['<eos>']
    for ids, paragraphs in zip((train, test), split_paragraphs(load_paragraphs())):
        assert ids[0] == eos and ids[-1] == eos and ids.count(eos) == len(paragraphs) + 1
        first = [t for s in paragraphs[0] for t in tokenize(s)]
        assert vocab.to_tokens(ids[1:len(first) + 1]) == [
            t if t in vocab.token_to_idx else '<unk>' for t in first]
    assert vocab.idx_to_token[:3] == ['<unk>', '<pad>', '<eos>']
    assert vocab['<pad>'] not in train + test
    assert len(load_corpus_lm(min_freq=1)[2]) > len(vocab)


def test_random_windows_are_windows_of_the_stream_and_follow_the_seed():
    ids = list(range(100, 150))
    first = next(random_windows(ids, 4, 6, seed=1))
    assert first.shape == (4, 7) and first.dtype == onp.int32
    for row in first.asnumpy():
        onp.testing.assert_array_equal(row, onp.arange(row[0], row[0] + 7))
    onp.testing.assert_array_equal(next(random_windows(ids, 4, 6, seed=1)).asnumpy(),
                                   first.asnumpy())
    rng = random.Random(1)
    assert first[:, 0].asnumpy().tolist() == [100 + rng.randrange(44) for _ in range(4)]
    with pytest.raises(ValueError, match="more than num_steps"):
        next(random_windows(ids[:6], 2, 6))


def test_consecutive_windows_predict_every_token_but_the_first_once():
    ids = list(range(10, 21))  # 11 tokens: 10 to predict
    tokens, lens = consecutive_windows(ids, 4, pad=0)
    onp.testing.assert_array_equal(tokens.asnumpy(), [[10, 11, 12, 13, 14],
                                                      [14, 15, 16, 17, 18],
                                                      [18, 19, 20, 0, 0]])
    onp.testing.assert_array_equal(lens.asnumpy(), [5, 5, 3])
    assert int((lens - 1).sum()) == len(ids) - 1
    with pytest.raises(ValueError, match="at least 2"):
        consecutive_windows([1], 4, 0)


def test_ngram_probs_by_hand():
    ids = [0, 1, 0, 2, 0, 1]  # counts: 0 x3, 1 x2, 2 x1; pairs 01 x2, 10, 02, 20
    unigram = ngram_probs(ids, 4, 1)
    onp.testing.assert_allclose(unigram, [3 / 6, 2 / 6, 1 / 6, 0])
    bigram = ngram_probs(ids, 4, 2, discount=0.5)
    # after 0: c = 3, two distinct followers: (2 - .5) / 3 + .5 * 2 / 3 * P(w)
    onp.testing.assert_allclose(bigram[0], [1 / 3 * unigram[0], 1.5 / 3 + unigram[1] / 3,
                                            0.5 / 3 + unigram[2] / 3, 0])
    onp.testing.assert_allclose(bigram[1], [0.5 + 0.5 * unigram[0], 0.5 * unigram[1],
                                            0.5 * unigram[2], 0])
    onp.testing.assert_allclose(bigram[3], unigram)  # never followed by anything
    onp.testing.assert_allclose(bigram.sum(axis=1), 1)


def test_bigram_beats_unigram_on_the_held_out_text():
    train, test, vocab = load_corpus_lm()
    t = onp.array(test)
    uni = math.exp(-onp.log(ngram_probs(train, len(vocab), 1)[t[1:]]).mean())
    bi = math.exp(-onp.log(ngram_probs(train, len(vocab), 2)[t[:-1], t[1:]]).mean())
    assert 1 < bi < uni < len(vocab)


@pytest.mark.parametrize("kwargs, match", [
    ({"order": 3}, "order"), ({"discount": 1.5}, "discount"), ({"discount": 0}, "discount"),
    ({"ids": [0, 7]}, "ids"), ({"ids": [1]}, "ids")])
def test_ngram_probs_rejects_bad_input(kwargs, match):
    args = {"ids": [0, 1, 2], "vocab_size": 4, "order": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        ngram_probs(**args)


CALLS = {"random_windows": lambda ids: next(random_windows(ids, 2, 2)),
         "consecutive_windows": lambda ids: consecutive_windows(ids, 2, 0),
         "ngram_probs": lambda ids: ngram_probs(ids, 4, 1)}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("big", [2 ** 32 + 1, 2 ** 40])
def test_ids_beyond_int32_are_refused_not_wrapped(call, big):
    """In int32, 2**32 + 1 and 2**40 wrapped to the valid ids 1 and 0."""
    with pytest.raises(ValueError, match=rf"ids must hold token ids in \[0, \d+\], got "
                                         rf"\[{big}\]"):
        CALLS[call]([0, 1, big, 3])


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("ids, dtype", [
    ([0, 1.5, 1, 2], "float64"), ([0, 1.0, 1, 2], "float64"),
    ([True, False, True, True], "bool"), ([0, 1j, 1, 2], "complex128")])
def test_ids_that_are_not_ints_are_refused(call, ids, dtype):
    """Floats were truncated and bools taken as 0 and 1, silently."""
    with pytest.raises(TypeError, match=f"ids must hold ints, got dtype {dtype}"):
        CALLS[call](ids)


def test_the_windows_pad_must_fit_int32():
    with pytest.raises(ValueError, match=r"pad must be an int in \[0, 2147483647\], got "
                                         "4294967296"):
        consecutive_windows([0, 1, 2], 2, 2 ** 32)


@settings(derandomize=True, max_examples=60, deadline=None, database=None)
@given(st.lists(st.integers(0, 2 ** 31 - 1), min_size=2, max_size=9),
       st.sampled_from([None, -1, 2 ** 31, 2 ** 32 + 1, 2 ** 40]),
       st.sampled_from(["int", "float", "numpy int64", "numpy float32"]))
def test_windows_keep_int32_ids_exactly_and_refuse_the_rest(ids, bad, kind):
    """Fuzz: the windows hold the very ids given, or the call names ids; never a wrapped or
    truncated id."""
    ids = ids if bad is None else ids + [bad]
    given_ids = {"int": ids, "float": [float(i) for i in ids],
                 "numpy int64": onp.array(ids, dtype="int64"),
                 "numpy float32": onp.array(ids, dtype="float32")}[kind]
    if kind in ("float", "numpy float32"):
        with pytest.raises(TypeError, match="ids must hold ints, got dtype float"):
            consecutive_windows(given_ids, 3, 0)
    elif all(0 <= i < 2 ** 31 for i in ids):
        tokens, lens = consecutive_windows(given_ids, 3, 0)
        rows = [row[:n].tolist() for row, n in zip(tokens.asnumpy(), lens.asnumpy())]
        assert [i for row in rows for i in row[1:]] == ids[1:] and rows[0][0] == ids[0]
    else:
        with pytest.raises(ValueError, match=r"ids must hold token ids in \[0, 2147483647\]"):
            consecutive_windows(given_ids, 3, 0)
