"""Positional encodings: telling attention where each token is.

Self-attention treats its inputs as a set: permuting the tokens permutes the outputs in the
same way. Adding a vector that depends on the position to each token's representation breaks
that symmetry. :class:`PositionalEncoding` adds fixed sinusoids (Vaswani et al., 2017);
:class:`LearnedPositionalEmbedding` adds one learned vector per position (BERT).
"""
import numpy as onp
from mxnet import gluon, np

from ._checks import check_int, check_positions, check_rate
from ._ops import Dropout
from .attention import _check_3d
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
