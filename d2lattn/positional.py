"""Positional encodings: telling attention where each token is.

Self-attention treats its inputs as a set: permuting the tokens permutes the outputs in the
same way. Adding a vector that depends on the position to each token's representation breaks
that symmetry. :class:`PositionalEncoding` adds fixed sinusoids (Vaswani et al., 2017);
:class:`LearnedPositionalEmbedding` adds one learned vector per position (BERT).
:func:`apply_rope` instead rotates queries and keys by angles proportional to their positions
(Su et al., 2021), so that their dot product depends on the positions only through their
difference; :class:`~d2lattn.gpt.CausalSelfAttention` applies it in every head.
"""
import numpy as onp
from mxnet import gluon, nd, np

from ._checks import (check_array, check_float_array, check_int, check_ndarray,
                      check_positive, check_rate)
from ._ops import Dropout
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
        check_float_array("X", X)
        if X.ndim != 3:
            raise ValueError(f"X must be 3-D, got shape {X.shape}")
        offset = _check_positions(X, offset, self.num_hiddens, self.max_len)
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
    attention instead (rotary positions, :func:`apply_rope`). Call ``(X (batch, n,
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
    of a query rotated at m and a key rotated at n depends on the positions only through
    m - n. :func:`rotate` is the computation. Returns X's shape, dtype and context.
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
    return rotate(nd, X, positions.as_in_ctx(X.ctx), check_positive("base", base), X.dtype)


def rotate(F, X, positions, base, dtype):
    """:func:`apply_rope` without its checks, in either mode of F (a block's
    ``hybrid_forward``): X (..., steps, d) of ``dtype``, positions (steps,) of any numeric
    dtype holding integers. The angles are taken in float64 (exact integer positions times
    float64 frequencies), then their cosines and sines rounded to ``dtype``: float32 angles
    would be off by up to position * 2^-24 radians (0.008 at position 131072)."""
    x1, x2 = F.np.split(X, 2, axis=-1)
    i = F.npx.arange_like(x1, axis=-1).astype("float64")  # 0 .. d/2 - 1
    w = F.np.power(float(base), -i / F.np.max(i + 1))  # base^(-2i/d)
    angles = F.np.expand_dims(positions.astype("float64"), -1) * F.np.expand_dims(w, 0)
    cos, sin = F.np.cos(angles).astype(dtype), F.np.sin(angles).astype(dtype)
    return F.np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_positions(X, offset, num_hiddens, max_len):
    """``offset`` as an int >= 0, after checking that ``X`` (batch, steps, d) has d =
    ``num_hiddens`` and that its positions offset .. offset + steps - 1 are below
    ``max_len``."""
    offset = check_int("offset", offset)
    if X.shape[-1] != num_hiddens:
        raise ValueError(f"X must have num_hiddens = {num_hiddens} features on its "
                         f"last axis, got X of shape {X.shape}")
    if offset + X.shape[1] > max_len:
        raise ValueError(f"positions {offset} to {offset + X.shape[1] - 1} (offset {offset}, "
                         f"{X.shape[1]} steps) do not fit max_len = {max_len}")
    return offset
