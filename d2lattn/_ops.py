"""Numerical building blocks shared by the attention modules."""
import contextlib
import threading
import warnings

from mxnet import autograd, gluon, nd, np, symbol


def is_symbol(x):
    """Whether ``x`` is a Symbol: the block holding it is being traced into a cached graph
    (``hybridize()``), its inputs already checked by the hybridized block called."""
    return isinstance(x, symbol.Symbol)


_CALLS = threading.local()


def checked(x):
    """Whether the inputs of a block called with ``x`` are already checked: ``x`` is a Symbol
    (see :func:`is_symbol`), or a block that checked its own inputs is running (inside
    :func:`checked_call`), so its children skip their checks (host round trips)."""
    return is_symbol(x) or getattr(_CALLS, "checked", False)


@contextlib.contextmanager
def checked_call():
    """The calls of blocks inside this context are those of a block that checked its inputs."""
    outer = getattr(_CALLS, "checked", False)
    _CALLS.checked = True
    try:
        yield
    finally:
        _CALLS.checked = outer


class Dropout(gluon.nn.Dropout):
    """Gluon's Dropout, returning its input itself where Gluon would copy it unchanged: with a
    rate of 0, or outside training. In a cached graph (a Symbol) it is Gluon's, which drops
    in training mode only. Reads Gluon's private ``_rate`` (the rate it was built with):
    MXNet 1.9.1, the last release of Gluon 1.x, will not change."""

    def forward(self, x):
        if self._rate > 0 and (is_symbol(x) or autograd.is_training()):
            return super().forward(x)
        return x


class Dense(gluon.nn.Dense):
    """Gluon's Dense on the last axis (``flatten=False``) that also takes an empty input.

    X (..., in) -> (..., units). On an empty X, MXNet 1.9.1's FullyConnected writes no
    parameter gradient: the last step's stays (and an optimizer applies it again), or none
    was ever allocated and reading it fails. There the layer runs on one row of zeros
    instead, whose output is dropped: every gradient is written, and is 0.
    """

    def __init__(self, units, **kwargs):
        super().__init__(units, flatten=False, **kwargs)

    def forward(self, x):
        return graph_rows(super().forward, x) if is_symbol(x) else on_rows(super().forward, x)


class LayerNorm(gluon.nn.LayerNorm):
    """Gluon's LayerNorm over the last axis that also takes an empty input: as for
    :class:`Dense`, MXNet 1.9.1 writes no gradient of gamma and beta there."""

    def forward(self, x):
        return super().forward(x) if is_symbol(x) else on_rows(super().forward, x)


def graph_rows(layer, X):
    """``layer(X)`` in a cached graph (X a Symbol (..., in)) for a ``layer`` that maps each
    row on its own, e.g. a Dense: it sees the rows as one (n, in) matrix. MXNet 1.9.1's
    FullyConnected is ~2x faster on a matrix than on a 3-D input at BERT's sizes (batch 1,
    17 tokens, 384 features: 0.24 against 0.45 ms on 2 cores)."""
    rows = symbol.reshape(X.as_nd_ndarray(), shape=(-1, 0), reverse=True).as_np_ndarray()
    out = layer(rows).as_nd_ndarray()
    return symbol.reshape_like(out, X.as_nd_ndarray(), lhs_begin=0, lhs_end=1, rhs_begin=0,
                               rhs_end=-1).as_np_ndarray()


def on_rows(layer, X, *more):
    """``layer(X, *more)`` for a ``layer`` that maps each row X[..., :] (and the same rows
    of ``more``, arrays of X's shape) on its own, (..., d) -> (..., out), with every
    parameter gradient written (0) when X is empty: the layer then sees one row of zeros,
    whose output is dropped. (On an empty input MXNet 1.9.1 writes no parameter gradient,
    imperative or in a cached graph: the last step's stays, or reading it fails.)"""
    if X.size:
        return layer(X, *more)
    one = lambda A: np.zeros((1, A.shape[-1]), dtype=A.dtype, ctx=A.ctx)
    out = layer(one(X), *(one(A) for A in more))
    return out[:0].reshape(X.shape[:-1] + out.shape[1:])


def operators(X):
    """The module of operators for X, what a block's ``hybrid_forward`` receives as F:
    ``mxnet.ndarray`` for an mxnet.np array, ``mxnet.symbol`` for a Symbol (and F itself for
    F). Its ``np`` and ``npx`` serve mxnet.np inputs; its own functions are MXNet's legacy
    operators (``SequenceMask``, ``transpose``, ...), called on ``x.as_nd_ndarray()``."""
    if X is nd or X is symbol:
        return X
    return symbol if is_symbol(X) else nd


def transpose(X, axes):
    """``X.transpose(*axes)`` for an mxnet.np array or Symbol, gradient included.

    MXNet 1.9.1's legacy operator is ~4x faster on CPU than the numpy-interface one
    (bench/mha.py); the conversions share memory and are recorded by autograd.
    """
    return operators(X).transpose(X.as_nd_ndarray(), axes=axes).as_np_ndarray()


def sequence_mask(rows, lens, value):
    """``rows`` (n, keys, ...) with the entries at positions >= ``lens`` (n,) set to ``value``;
    arrays or Symbols.

    The legacy SequenceMask operator, faster on CPU than ``npx.sequence_mask`` in 1.9.1.
    """
    return operators(rows).SequenceMask(rows.as_nd_ndarray(), lens.as_nd_ndarray(),
                                      use_sequence_length=True, value=value,
                                      axis=1).as_np_ndarray()


def softmax_rows(scores):
    """Softmax over the last axis that maps a row of -inf scores to a row of zeros, not NaN.

    scores: any shape, finite or -inf (never +inf or NaN). The row maximum is subtracted
    (the softmax does not change) and left out of the gradient.
    """
    top = scores.max(axis=-1, keepdims=True).detach()
    expd = np.exp(scores - np.where(np.isinf(top), np.zeros_like(top), top))
    total = expd.sum(axis=-1, keepdims=True)
    return expd / np.where(total > 0, total, np.ones_like(total))


def masked_fill(X, mask, value):
    """``X`` with ``value`` where ``mask`` (booleans broadcast to X's shape) is True; the
    gradient there is 0. (MXNet 1.9.1's ``np.where`` with a Python number as a branch sends
    the gradient to the wrong entries; a one-element array broadcasts correctly.)"""
    fill = np.full((1,) * X.ndim, value, dtype=X.dtype, ctx=X.ctx)
    return np.where(mask, fill, X)


@contextlib.contextmanager
def unused_parameters_allowed():
    """Silence Gluon's warning that a cached graph leaves parameters or inputs of the block
    unused (a pre-norm block's own LayerNorm, a step's unused offset)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Parameter .* is not used by any computation")
        warnings.filterwarnings("ignore", ".*input to HybridBlock is not used by any")
        yield
