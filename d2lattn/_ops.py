"""Numerical building blocks shared by the attention modules."""
from mxnet import autograd, gluon, nd, np, symbol


def is_symbol(x):
    """Whether ``x`` is a Symbol: the block holding it is being traced into a cached graph
    (``hybridize()``), its inputs already checked by the hybridized block called."""
    return isinstance(x, symbol.Symbol)


class Dropout(gluon.nn.Dropout):
    """Gluon's Dropout, returning its input itself where Gluon would copy it unchanged: with a
    rate of 0, or outside training. In a cached graph (a Symbol) it is Gluon's, which drops
    in training mode only."""

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


def full_lengths(valid_lens, X):
    """``valid_lens``, or for None every position of X (batch, steps, ...): (batch,) int32
    lengths for a cached graph, which takes the same arguments at every call."""
    if valid_lens is not None:
        return valid_lens
    return np.full(X.shape[:1], X.shape[1], dtype="int32", ctx=X.ctx)


def graph_rows(layer, X):
    """``layer(X)`` in a cached graph (X a Symbol (..., in)) for a ``layer`` that maps each
    row on its own, e.g. a Dense: it sees the rows as one (n, in) matrix. MXNet 1.9.1's
    FullyConnected is ~2x faster on a matrix than on a 3-D input at BERT's sizes (batch 1,
    17 tokens, 384 features: 0.24 against 0.45 ms on 2 cores)."""
    rows = symbol.reshape(X.as_nd_ndarray(), shape=(-1, 0), reverse=True).as_np_ndarray()
    out = layer(rows).as_nd_ndarray()
    return symbol.reshape_like(out, X.as_nd_ndarray(), lhs_begin=0, lhs_end=1, rhs_begin=0,
                               rhs_end=-1).as_np_ndarray()


def on_rows(layer, X):
    """``layer(X)`` for a ``layer`` that maps each row X[..., :] on its own, (..., d) ->
    (..., out), with every parameter gradient written (0) when X is empty: the layer then
    sees X's rows and one row of zeros, and the output of that row is dropped."""
    if X.size:
        return layer(X)
    rows = X.reshape(-1, X.shape[-1])
    out = layer(np.concatenate([rows, np.zeros((1, X.shape[-1]), dtype=X.dtype, ctx=X.ctx)]))
    return out[:0].reshape(X.shape[:-1] + out.shape[1:])


def _legacy(X):
    """The module of MXNet's legacy operators for X (an mxnet.np array or Symbol)."""
    return symbol if is_symbol(X) else nd


def transpose(X, axes):
    """``X.transpose(*axes)`` for an mxnet.np array or Symbol, gradient included.

    MXNet 1.9.1's legacy operator is ~4x faster on CPU than the numpy-interface one
    (bench/mha.py); the conversions share memory and are recorded by autograd.
    """
    return _legacy(X).transpose(X.as_nd_ndarray(), axes=axes).as_np_ndarray()


def sequence_mask(rows, lens, value):
    """``rows`` (n, keys, ...) with the entries at positions >= ``lens`` (n,) set to ``value``;
    arrays or Symbols.

    The legacy SequenceMask operator, faster on CPU than ``npx.sequence_mask`` in 1.9.1.
    """
    return _legacy(rows).SequenceMask(rows.as_nd_ndarray(), lens.as_nd_ndarray(),
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
