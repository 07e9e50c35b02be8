"""Independent NumPy references shared by several test files."""
import math

import numpy as onp


def value(param):
    """A Gluon parameter's data as float64 NumPy."""
    return param.data(param.list_ctx()[0]).asnumpy().astype(float)


def np_gelu(x):
    """GELU(x) = x Phi(x), with the normal CDF Phi written through erf."""
    return x * 0.5 * (1 + onp.vectorize(math.erf)(x / math.sqrt(2)))


def np_masked_softmax(X, lens=None):
    """Reference in float64: softmax over the first n scores of each row, zeros after.

    X: (b, q, k); lens: None, (b,) or (b, q).
    """
    X = onp.asarray(X, float)
    b, q, k = X.shape
    lens = onp.full((b, q), k) if lens is None else \
        onp.broadcast_to(onp.reshape(lens, (b, -1)), (b, q))
    out = onp.zeros_like(X)
    for i, j in onp.ndindex(b, q):
        n = int(lens[i, j])
        if n:
            e = onp.exp(X[i, j, :n] - X[i, j, :n].max())
            out[i, j, :n] = e / e.sum()
    return out
