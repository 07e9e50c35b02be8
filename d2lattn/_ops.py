"""Numerical building blocks shared by the attention modules."""
from mxnet import autograd, gluon, nd, np


class Dropout(gluon.nn.Dropout):
    """Gluon's Dropout, returning its input itself where Gluon would copy it unchanged: with a
    rate of 0, or outside training."""

    def forward(self, x):
        return super().forward(x) if self._rate > 0 and autograd.is_training() else x


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
        return on_rows(super().forward, x)


class LayerNorm(gluon.nn.LayerNorm):
    """Gluon's LayerNorm over the last axis that also takes an empty input: as for
    :class:`Dense`, MXNet 1.9.1 writes no gradient of gamma and beta there."""

    def forward(self, x):
        return on_rows(super().forward, x)


def on_rows(layer, X):
    """``layer(X)`` for a ``layer`` that maps each row X[..., :] on its own, (..., d) ->
    (..., out), with every parameter gradient written (0) when X is empty: the layer then
    sees X's rows and one row of zeros, and the output of that row is dropped."""
    if X.size:
        return layer(X)
    rows = X.reshape(-1, X.shape[-1])
    out = layer(np.concatenate([rows, np.zeros((1, X.shape[-1]), dtype=X.dtype, ctx=X.ctx)]))
    return out[:0].reshape(X.shape[:-1] + out.shape[1:])


def transpose(X, axes):
    """``X.transpose(*axes)`` for an mxnet.np array, gradient included.

    MXNet 1.9.1's legacy operator is ~4x faster on CPU than the numpy-interface one
    (bench/mha.py); the conversions share memory and are recorded by autograd.
    """
    return nd.transpose(X.as_nd_ndarray(), axes=axes).as_np_ndarray()


def sequence_mask(rows, lens, value):
    """``rows`` (n, keys, ...) with the entries at positions >= ``lens`` (n,) set to ``value``.

    The legacy SequenceMask operator, faster on CPU than ``npx.sequence_mask`` in 1.9.1.
    """
    return nd.SequenceMask(rows.as_nd_ndarray(), lens.as_nd_ndarray(),
                           use_sequence_length=True, value=value, axis=1).as_np_ndarray()


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
