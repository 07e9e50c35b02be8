"""Positional encodings: telling attention where each token is.

Self-attention treats its inputs as a set: permuting the tokens permutes the outputs in the
same way. Adding a vector that depends on the position to each token's representation breaks
that symmetry. :class:`PositionalEncoding` adds fixed sinusoids (Vaswani et al., 2017);
:class:`LearnedPositionalEmbedding` adds one learned vector per position (BERT).
:func:`apply_rope` instead rotates queries and keys by angles proportional to their positions
(Su et al., 2021), so that their dot product depends on the distance between them only;
:class:`RotaryMultiHeadAttention` applies it in every head.
"""
import numpy as onp
from mxnet import gluon, np

from ._checks import (check_array, check_float_array, check_int, check_ndarray, check_positions,
                      check_positive, check_rate)
from ._ops import Dropout
from .attention import MultiHeadAttention, _check_3d, _next_position
from .device import cpu


def sinusoidal_encoding(max_len, num_hiddens):
    """The table P (max_len, num_hiddens) as float64 NumPy: P[pos, 2i] = sin(pos w_i) and
    P[pos, 2i + 1] = cos(pos w_i) with w_i = 1 / 10000^(2i / num_hiddens).

    For an odd ``num_hiddens`` the last column is a sine.
    """
    max_len = check_int("max_len", max_len, minimum=1)
    num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
    angles = onp.arange(max_len)[:, None] * _frequencies(num_hiddens)
    P = onp.empty((max_len, num_hiddens))
    P[:, 0::2] = onp.sin(angles)
    P[:, 1::2] = onp.cos(angles[:, :num_hiddens // 2])
    return P


def _frequencies(num_hiddens):
    """w_i = 10000^(-2i / num_hiddens) for the (num_hiddens + 1) // 2 sin/cos pairs i."""
    return 10000.0 ** (-onp.arange(0, num_hiddens, 2) / num_hiddens)


class _AddPositions(gluon.nn.Block):
    """Shared part: checks ``(X, offset)``, adds ``self.positions(...)`` and applies dropout."""

    def __init__(self, num_hiddens, dropout, max_len, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.dropout = Dropout(check_rate("dropout", dropout))

    def positions(self, X, offset):
        """(1 or batch, n, num_hiddens) vectors of positions offset .. offset + n - 1."""
        raise NotImplementedError

    def forward(self, X, offset=0):
        _check_3d("X", X)
        offset = check_positions(X, offset, self.num_hiddens, self.max_len)
        return self.dropout(X + self.positions(X, offset))


class PositionalEncoding(_AddPositions):
    """Sinusoidal positional encoding: X + P[:, offset:offset + n], then dropout.

    Call ``(X (batch, n, num_hiddens), offset=0)`` -> (batch, n, num_hiddens). ``offset`` is
    the position of X's first step, e.g. t when decoding step t alone. ``P`` (1, max_len,
    num_hiddens) is a constant (no parameter, no gradient), see :func:`sinusoidal_encoding`;
    it is made on each input's context and dtype the first time it is needed there.
    """

    def __init__(self, num_hiddens, dropout, max_len=1000, **kwargs):
        super().__init__(num_hiddens, dropout, max_len, **kwargs)
        self._table = sinusoidal_encoding(self.max_len, self.num_hiddens)[None]
        self._P = {}  # (context, dtype) -> P

    @property
    def P(self):
        """The table (1, max_len, num_hiddens) as an mxnet array on the CPU."""
        return self._on(cpu(), "float32")

    def _on(self, ctx, dtype):
        key = (ctx, onp.dtype(dtype).name)
        if key not in self._P:
            self._P[key] = np.array(self._table, dtype=dtype, ctx=ctx)
        return self._P[key]

    def positions(self, X, offset):
        return self._on(X.ctx, X.dtype)[:, offset:offset + X.shape[1]]


class LearnedPositionalEmbedding(_AddPositions):
    """Learned absolute positions (BERT, GPT): X + E[offset:offset + n], then dropout.

    ``embedding``: an ``nn.Embedding(max_len, num_hiddens)`` whose row p is the vector added
    at position p. Call ``(X (batch, n, num_hiddens), offset=0)`` -> (batch, n, num_hiddens).
    """

    def __init__(self, num_hiddens, dropout, max_len=512, **kwargs):
        super().__init__(num_hiddens, dropout, max_len, **kwargs)
        self.embedding = gluon.nn.Embedding(self.max_len, self.num_hiddens)

    def positions(self, X, offset):
        steps = np.arange(offset, offset + X.shape[1], ctx=X.ctx)
        return np.expand_dims(self.embedding(steps), 0)


class NoPositionalEncoding(_AddPositions):
    """No position vector: X itself, then dropout, for models whose positions enter the
    attention instead (:class:`RotaryMultiHeadAttention`). Call ``(X (batch, n,
    num_hiddens), offset=0)`` -> (batch, n, num_hiddens); ``offset`` and ``max_len`` are
    checked as by the other encodings."""

    def positions(self, X, offset):
        return np.zeros((1, 1, 1), dtype=X.dtype, ctx=X.ctx)


def apply_rope(X, positions, base=10000.0):
    """Rotary position embedding (Su et al., 2021) in the "rotate half" layout of Llama.

    X: (..., steps, d) floats, d even; positions: (steps,) integers (any integer dtype, any
    context), the position of each step. Feature i < d/2 and feature i + d/2 form a plane
    rotated by the angle positions * w_i, w_i = base^(-2i/d): with x1, x2 the two halves,
    the result is [x1 cos - x2 sin, x2 cos + x1 sin]. Rotations compose, so the dot product
    of a query rotated at m and a key rotated at n depends on m - n only. The angles are
    computed in float32 (float64 for float64 X): float16 would round positions above 2048.
    Returns X's shape, dtype and context.
    """
    check_array("X", check_float_array("X", X))
    if X.ndim < 2 or X.shape[-1] % 2:
        raise ValueError(f"X must be (..., steps, d) with an even width d, got shape {X.shape}")
    check_ndarray("positions", positions)
    if onp.dtype(positions.dtype).kind not in "iu":
        raise TypeError(f"positions must hold integers, got dtype "
                        f"{onp.dtype(positions.dtype).name}")
    if positions.shape != X.shape[-2:-1]:
        raise ValueError(f"positions must have shape (steps,) = ({X.shape[-2]},) for X of "
                         f"shape {X.shape}, got {positions.shape}")
    half = X.shape[-1] // 2
    dtype = "float64" if X.dtype == onp.float64 else "float32"
    w = np.array(check_positive("base", base) ** (-onp.arange(half) / half), dtype=dtype,
                 ctx=X.ctx)
    angles = positions.as_in_ctx(X.ctx).astype(dtype).reshape(-1, 1) * w  # (steps, d/2)
    cos, sin = np.cos(angles).astype(X.dtype), np.sin(angles).astype(X.dtype)
    x1, x2 = X[..., :half], X[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


class RotaryMultiHeadAttention(MultiHeadAttention):
    """:class:`~d2lattn.attention.MultiHeadAttention` whose queries and keys are rotated in
    every head by :func:`apply_rope` (the head width must be even), as in Llama.

    Self-attention: queries and keys are the same steps, at positions offset .. offset +
    steps - 1, offset the number of positions the cache has seen (0 without a cache). The
    cache holds rotated keys. Arguments and call as for MultiHeadAttention, plus ``base``.
    """

    def __init__(self, num_hiddens, num_heads, dropout, use_bias=False, num_kv_heads=None,
                 window=None, base=10000.0, **kwargs):
        super().__init__(num_hiddens, num_heads, dropout, use_bias, num_kv_heads, window,
                         **kwargs)
        self.base = check_positive("base", base)
        if (self.num_hiddens // self.num_heads) % 2:
            raise ValueError(f"num_hiddens / num_heads (the head width) must be even for "
                             f"rotary positions, got {self.num_hiddens} / {self.num_heads}")

    def forward(self, queries, keys, values, valid_lens=None, cache=None):
        check_ndarray("queries", queries)
        if check_ndarray("keys", keys).shape[1:2] != queries.shape[1:2]:
            raise ValueError(f"queries and keys must be the same steps (self-attention), got "
                             f"queries {queries.shape}, keys {keys.shape}")
        return super().forward(queries, keys, values, valid_lens, cache)

    def _rotate(self, X, cache):
        start = _next_position(cache)
        return apply_rope(X, np.arange(start, start + X.shape[1], dtype="int32", ctx=X.ctx),
                          self.base)
