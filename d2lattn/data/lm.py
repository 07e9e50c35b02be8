"""Language-modelling data from the Python-documentation corpus of :mod:`.pretrain`.

The paragraphs, their train/test split and the word-level tokens are those of
:func:`~d2lattn.data.pretrain.load_data_bert`; here each split becomes one stream of token
ids, every paragraph followed by ``'<eos>'``. :func:`ngram_probs` gives the unigram and
bigram baselines a neural language model must beat.
"""
import random

import numpy as onp
from mxnet import np

from .._checks import INT32_IDS, check_id_list, check_int, check_positive
from .pretrain import load_paragraphs, split_paragraphs, tokenize
from ..text import Vocab

RESERVED_TOKENS = ['<pad>', '<eos>']


def load_corpus_lm(min_freq=3):
    """``(train_ids, test_ids, vocab)``: each split as one list of ids, ``'<eos>'`` first
    and after every paragraph. ``vocab``: '<unk>', ``RESERVED_TOKENS``, then the words of the
    training paragraphs seen at least ``min_freq`` times (rarer words become '<unk>')."""
    min_freq = check_int("min_freq", min_freq)
    splits = [[[token for sentence in paragraph for token in tokenize(sentence)]
               for paragraph in split] for split in split_paragraphs(load_paragraphs())]
    vocab = Vocab(splits[0], min_freq, RESERVED_TOKENS)
    eos = vocab['<eos>']
    streams = [[eos] + [i for paragraph in split for i in vocab[paragraph] + [eos]]
               for split in splits]
    return streams[0], streams[1], vocab


def random_windows(ids, batch_size, num_steps, seed=0):
    """Endless minibatches (batch_size, num_steps + 1) int32 of windows of ``ids`` starting
    at offsets drawn with ``random.Random(seed)``: a model reads window[:-1] and predicts
    window[1:]. ``ids``: ints in int32's range."""
    batch_size = check_int("batch_size", batch_size, minimum=1)
    num_steps = check_int("num_steps", num_steps, minimum=1)
    ids = check_id_list("ids", ids).astype("int32")
    if len(ids) <= num_steps:
        raise ValueError(f"ids must have more than num_steps = {num_steps} tokens, got "
                         f"{len(ids)}")
    rng = random.Random(check_int("seed", seed))
    while True:
        starts = [rng.randrange(len(ids) - num_steps) for _ in range(batch_size)]
        yield np.array(onp.stack([ids[s:s + num_steps + 1] for s in starts]), dtype="int32")


def consecutive_windows(ids, num_steps, pad):
    """``ids`` cut into windows of num_steps + 1 tokens that overlap by one, so that every
    token but the first is predicted once: ``(tokens (n, num_steps + 1) int32, valid_lens
    (n,) int32)``, the last window padded with ``pad``. ``ids`` and ``pad``: ints in int32's
    range."""
    num_steps = check_int("num_steps", num_steps, minimum=1)
    ids = check_id_list("ids", ids)
    if len(ids) < 2:
        raise ValueError(f"ids must have at least 2 tokens, got {len(ids)}")
    starts = range(0, len(ids) - 1, num_steps)
    tokens = onp.full((len(starts), num_steps + 1), check_int("pad", pad, 0, INT32_IDS - 1),
                     dtype="int32")
    lens = onp.zeros(len(starts), dtype="int32")
    for row, start in enumerate(starts):
        window = ids[start:start + num_steps + 1]
        tokens[row, :len(window)], lens[row] = window, len(window)
    return np.array(tokens, dtype="int32"), np.array(lens, dtype="int32")


def ngram_probs(ids, vocab_size, order, discount=0.75):
    """Count-based next-token probabilities from the stream ``ids``, float64 NumPy.

    order 1: the unigram distribution (vocab_size,), count / number of tokens. order 2: the
    bigram table (vocab_size, vocab_size), row v the distribution of the token after v, with
    interpolated absolute discounting (Ney et al., 1994): P(w | v) = max(c(v, w) - D, 0) /
    c(v) + D * n(v) / c(v) * P(w), where n(v) is the number of distinct tokens seen after v
    and P the unigram; a token v never followed by anything gets P itself.
    """
    vocab_size = check_int("vocab_size", vocab_size, minimum=1)
    ids = check_id_list("ids", ids, vocab_size)
    if ids.size < 2:
        raise ValueError(f"ids must have at least 2 tokens, got {ids.tolist()}")
    unigram = onp.bincount(ids, minlength=vocab_size) / ids.size
    if check_int("order", order, 1, 2) == 1:
        return unigram
    if not 0 < check_positive("discount", discount) <= 1:
        raise ValueError(f"discount must be in (0, 1], got {discount!r}")
    counts = onp.zeros((vocab_size, vocab_size))
    onp.add.at(counts, (ids[:-1], ids[1:]), 1)
    totals = counts.sum(axis=1, keepdims=True)
    seen = (counts > 0).sum(axis=1, keepdims=True)
    safe = onp.maximum(totals, 1)
    bigram = onp.maximum(counts - discount, 0) / safe + discount * seen / safe * unigram
    return onp.where(totals > 0, bigram, unigram)
