"""Numerical building blocks shared by the attention modules."""
from mxnet import np


def softmax_rows(scores):
    """Softmax over the last axis that maps a row of -inf scores to a row of zeros, not NaN.

    scores: any shape, finite or -inf (never +inf or NaN). The row maximum is subtracted
    (the softmax does not change) and left out of the gradient.
    """
    top = scores.max(axis=-1, keepdims=True).detach()
    expd = np.exp(scores - np.where(np.isinf(top), np.zeros_like(top), top))
    total = expd.sum(axis=-1, keepdims=True)
    return expd / np.where(total > 0, total, np.ones_like(total))
