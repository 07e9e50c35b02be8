"""Machine-translation data: token pairs -> padded index arrays -> minibatches.

The course trains on an offline generated corpus (:mod:`d2lattn.data.grammar`); the fra-eng
helpers at the end read d2l's Tatoeba English-French file for readers who are online.
"""
import math
import os
import re

import numpy as onp
from mxnet import np

from .._checks import check_int, check_special_tokens
from ..text import Vocab, truncate_pad
from .download import download_extract

RESERVED_TOKENS = ['<pad>', '<bos>', '<eos>']


def _check_lines(lines, name="lines"):
    if not isinstance(lines, (list, tuple)):
        raise TypeError(f"{name} must be a list of token lists, got {type(lines).__name__}")
    for i, line in enumerate(lines):
        if not isinstance(line, (list, tuple)):
            raise TypeError(f"{name}[{i}] must be a list of str tokens, got {line!r}")


def build_array_nmt(lines, vocab, num_steps):
    """Token lists -> ``(array, valid_len)``: ``line + ['<eos>']`` as indices, ``'<pad>'``-padded.

    Returns an int32 ``(len(lines), num_steps)`` array and the int32 ``(len(lines),)`` counts of
    its non-pad entries. As in d2l, a line of ``num_steps`` tokens or more is cut to
    ``num_steps``, which drops its ``'<eos>'``: choose ``num_steps`` above the longest line
    (:func:`load_data_nmt` does so by default).
    """
    _check_lines(lines)
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a Vocab, got {type(vocab).__name__}")
    check_special_tokens("vocab", vocab, ['<pad>', '<eos>'])
    num_steps = check_int("num_steps", num_steps, minimum=1)
    pad, eos = vocab['<pad>'], vocab['<eos>']
    array = onp.array([truncate_pad(vocab[line] + [eos], num_steps, pad) for line in lines],
                      dtype=onp.int32).reshape(len(lines), num_steps)
    # the length of each line with its <eos>, not its count of non-pad ids: a line may hold
    # the token '<pad>' itself
    valid_len = onp.array([min(len(line) + 1, num_steps) for line in lines], dtype=onp.int32)
    return np.array(array, dtype='int32'), np.array(valid_len, dtype='int32')


class ArrayLoader:
    """Re-iterable minibatches of equally long arrays: each batch is a tuple of row slices.

    With ``is_train`` the rows are shuffled anew each epoch with NumPy's global generator (so
    ``d2lattn.set_seed`` makes the order reproducible); otherwise they come in order. Given
    ``lengths`` (n,), training batches hold examples of similar length: each pool of 16
    shuffled batches is sorted by length before it is cut into batches, and the batches are
    shuffled, so that padding (and the time spent on it) stays small. The last batch may be
    smaller than ``batch_size``. Batches stay on their array's context.
    """

    def __init__(self, arrays, batch_size, is_train=True, lengths=None):
        if not isinstance(arrays, (list, tuple)) or not arrays \
                or not all(isinstance(a, np.ndarray) and a.ndim >= 1 for a in arrays):
            raise TypeError("arrays must be a non-empty tuple of mxnet.np arrays with ndim >= 1, "
                            f"got {arrays!r}")
        sizes = [a.shape[0] for a in arrays]
        if len(set(sizes)) != 1:
            raise ValueError(f"arrays must have the same first dimension, got shapes "
                             f"{[a.shape for a in arrays]}")
        if not isinstance(is_train, bool):
            raise TypeError(f"is_train must be a bool, got {is_train!r}")
        if lengths is not None and onp.shape(lengths) != (sizes[0],):
            raise ValueError(f"lengths must have shape ({sizes[0]},), got {onp.shape(lengths)}")
        self.arrays, self.num_examples = tuple(arrays), sizes[0]
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.is_train = is_train
        self.lengths = None if lengths is None else onp.asarray(lengths)

    def __len__(self):
        return math.ceil(self.num_examples / self.batch_size)

    def __iter__(self):
        if not self.is_train:
            for i in range(0, self.num_examples, self.batch_size):
                yield tuple(a[i:i + self.batch_size] for a in self.arrays)
            return
        for rows in self._batches(onp.random.permutation(self.num_examples)):
            yield tuple(np.take(a, np.array(rows, dtype='int32', ctx=a.ctx), axis=0)
                        for a in self.arrays)

    def _batches(self, order):
        """Cut ``order`` into batches, grouping similar lengths when ``lengths`` is set."""
        size = self.batch_size
        if self.lengths is None:
            return [order[i:i + size] for i in range(0, len(order), size)]
        batches = []
        for start in range(0, len(order), 16 * size):
            pool = order[start:start + 16 * size]
            pool = pool[onp.argsort(self.lengths[pool], kind='stable')]
            batches += [pool[i:i + size] for i in range(0, len(pool), size)]
        return [batches[i] for i in onp.random.permutation(len(batches))]


def load_array(arrays, batch_size, is_train=True, lengths=None):
    """An :class:`ArrayLoader` (d2l's name): ``for X, y in load_array((X, y), 32): ...``."""
    return ArrayLoader(arrays, batch_size, is_train, lengths)


def load_data_nmt(pairs, batch_size, num_steps=None, src_vocab=None, tgt_vocab=None,
                  min_freq=0, is_train=True):
    """Minibatches ``(X, X_valid_len, Y, Y_valid_len)`` of ``(src_tokens, tgt_tokens)`` pairs.

    Builds both vocabularies from ``pairs`` (``min_freq``, reserved ``'<pad>'``, ``'<bos>'``,
    ``'<eos>'``) unless they are given: pass the training vocabularies for validation and test
    data, whose unseen tokens then map to ``'<unk>'``. ``num_steps=None`` takes the longest
    sentence + 1, so that no ``'<eos>'`` is cut. X, Y: int32 ``(batch, num_steps)``; valid
    lengths: int32 ``(batch,)``. Training batches group sources of similar length (see
    :class:`ArrayLoader`). Returns ``(data_iter, src_vocab, tgt_vocab)``.
    """
    if not isinstance(pairs, (list, tuple)) or not pairs \
            or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise TypeError("pairs must be a non-empty list of (src_tokens, tgt_tokens) pairs, "
                        f"got {pairs!r:.200}")
    source, target = [list(side) for side in zip(*pairs)]
    _check_lines(source, "source")
    _check_lines(target, "target")
    if num_steps is None:
        num_steps = 1 + max(len(line) for line in source + target)
    if src_vocab is None:
        src_vocab = Vocab(source, min_freq, RESERVED_TOKENS)
    if tgt_vocab is None:
        tgt_vocab = Vocab(target, min_freq, RESERVED_TOKENS)
    src_array, src_valid_len = build_array_nmt(source, src_vocab, num_steps)
    tgt_array, tgt_valid_len = build_array_nmt(target, tgt_vocab, num_steps)
    data_iter = load_array((src_array, src_valid_len, tgt_array, tgt_valid_len), batch_size,
                           is_train, lengths=src_valid_len.asnumpy() if is_train else None)
    return data_iter, src_vocab, tgt_vocab


# --- d2l's English-French corpus (online readers only) --------------------------------------

def preprocess_nmt(text):
    """d2l's cleaning: no-break spaces -> spaces, lower case, a space before ``, . ! ?``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = text.replace('\u202f', ' ').replace('\xa0', ' ').lower()
    return re.sub(r'(?<=[^ ])([,.!?])', r' \1', text)


def tokenize_nmt(text, num_examples=None):
    """Tab-separated ``source<TAB>target`` lines -> ``(source, target)`` lists of token lists.

    Tokens are split on whitespace; lines without a tab are skipped and columns after the
    second (Tatoeba's attribution) ignored. ``num_examples`` keeps the first pairs only (d2l's
    loop kept one pair more than asked).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if num_examples is not None:
        num_examples = check_int("num_examples", num_examples, minimum=1)
    source, target = [], []
    for line in text.split('\n'):
        if len(source) == num_examples:
            break
        parts = line.split('\t')
        if len(parts) >= 2:
            source.append(parts[0].split())
            target.append(parts[1].split())
    return source, target


def load_fra_eng(num_examples=None, cache_dir=None):
    """d2l's ``fra-eng.zip`` (downloaded once, checksum verified), preprocessed and tokenized.

    Returns ``(source, target)``: English and French token lists, e.g. ``['go', '.']``.
    """
    data_dir = download_extract('fra-eng', cache_dir=cache_dir)
    with open(os.path.join(data_dir, 'fra.txt'), encoding='utf-8') as f:
        return tokenize_nmt(preprocess_nmt(f.read()), num_examples)
