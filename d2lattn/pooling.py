"""Attention pooling by similarity: Nadaraya-Watson kernel regression.

A query x is answered by a weighted average of the training targets y_i, with weights
alpha(x, x_i) = K((x - x_i) / h) / sum_j K((x - x_j) / h). Writing the score as
a = log K turns the weights into a softmax over scores: attention pooling.
"""
import mxnet as mx
import numpy as onp
from mxnet import autograd, gluon, np, npx

from ._checks import check_array, check_int, check_positive
from ._ops import softmax_rows


def gaussian(u):
    """Gaussian kernel exp(-u^2 / 2), without its constant 1/sqrt(2 pi), which cancels."""
    return np.exp(-u**2 / 2)


def boxcar(u):
    """Boxcar kernel: 1 where |u| < 1, else 0."""
    return (np.abs(u) < 1).astype(u.dtype)


def constant(u):
    """Constant kernel: 1 everywhere, so every key gets the same weight (average pooling)."""
    return np.ones_like(u)


def epanechnikov(u):
    """Epanechnikov kernel max(0, 1 - u^2), without its constant 3/4, which cancels."""
    return np.maximum(0, 1 - u**2)


def kernel_scores(kernel, d, bandwidth):
    """The attention scores a = log K(u) of ``kernel`` for u = d / ``bandwidth``, where d
    (m, n) are the differences between queries and keys, up to a constant per row (which the
    softmax ignores); -inf where K(u) = 0.

    The Gaussian's score -u^2 / 2 is written out, less the row's largest (that of its
    nearest key), so that a tiny bandwidth gives nearest-neighbour weights instead of 0 / 0,
    and never forms u, which overflows for a subnormal bandwidth. A kernel is a weight: its
    values must be finite and >= 0 (a singular or negative one would give inf or NaN weights).
    """
    h = np.array(bandwidth, dtype=d.dtype, ctx=d.ctx)  # MXNet reads no subnormal scalar
    if kernel is gaussian:
        return gaussian_scores(d, lambda x: x / h)
    u = d / h
    values = _check_kernel_values(kernel(u), u)
    return np.log(values)


def gaussian_scores(d, scaled):
    """The Gaussian's scores -u^2 / 2 of u = scaled(d) (d (m, n), ``scaled`` linear), less
    each row's largest: -|scaled(|d| - r)| |scaled(|d| + r)| / 2 with r the distance of the
    row's nearest key. The nearest key scores 0 and the others below 0 or -inf however small
    the bandwidth (u^2 itself overflows to inf for every key, and inf - inf is NaN)."""
    dist = np.abs(d)
    nearest = dist.min(axis=-1, keepdims=True)
    # Factors bounded (by an array: MXNet reads no scalar that large): no 0 * inf in the
    # scores or their gradient.
    big = np.array(onp.finfo(d.dtype).max, dtype=d.dtype, ctx=d.ctx)
    below, above = (np.minimum(np.abs(scaled(x)), big)
                    for x in (dist - nearest, dist + nearest))
    return -below * above / 2


def nadaraya_watson(x_train, y_train, x_query, kernel=gaussian, bandwidth=1.0):
    """Nadaraya-Watson regression: predict at ``x_query`` from (``x_train``, ``y_train``).

    x_train, y_train: (n,); x_query: (m,). Returns (predictions (m,), weights (m, n)),
    each weight row summing to 1, on the context of ``x_train``. A query with no training
    point inside a compact kernel's support gets all-zero weights and the prediction 0
    (the estimator is undefined there), never NaN. Scores are computed in float64, and
    stay exact for any positive bandwidth, subnormal ones included.
    """
    x_train = _as_vector(x_train, "x_train")
    y_train = _as_vector(y_train, "y_train", x_train.ctx)
    x_query = _as_vector(x_query, "x_query", x_train.ctx)
    _check_training_data(x_train, y_train)
    _check_kernel(kernel)
    bandwidth = check_positive("bandwidth", bandwidth)
    # No query: empty answers, without an operator on empty arrays.
    if x_query.shape[0] == 0:
        return (np.zeros((0,), dtype=y_train.dtype, ctx=x_train.ctx),
                np.zeros((0, x_train.shape[0]), dtype=y_train.dtype, ctx=x_train.ctx))
    d = x_query.astype("float64").reshape(-1, 1) - x_train.astype("float64").reshape(1, -1)
    weights = softmax_rows(kernel_scores(kernel, d, bandwidth)).astype(y_train.dtype)
    return np.dot(weights, y_train), weights


def _as_vector(x, name, ctx=None):
    """``x`` as a 1-D float mx.np array of finite numbers, on ``ctx`` if given."""
    if not isinstance(x, np.ndarray):
        x = np.array(x, dtype="float32", ctx=ctx)
    elif ctx is not None and x.ctx != ctx:
        raise ValueError(f"{name} is on {x.ctx} but x_train is on {ctx}")
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {x.shape}")
    if x.dtype not in (onp.float16, onp.float32, onp.float64):
        x = x.astype("float32")
    if not bool(np.isfinite(x).all()):
        raise ValueError(f"{name} must hold finite numbers only")
    return x


def leave_one_out(x_train, y_train):
    """Keys and values for training: row i holds every training example except the i-th.

    x_train, y_train: (n,) -> keys, values: (n, n - 1), in index order. Without this,
    each query would find itself among the keys and the learned width would shrink to 0.
    """
    x_train = _as_vector(x_train, "x_train")
    y_train = _as_vector(y_train, "y_train", x_train.ctx)
    n = x_train.shape[0]
    _check_training_data(x_train, y_train, minimum=2)
    # Row i takes columns 0 .. i-1 and i+1 .. n-1: column j, shifted by one from j = i on.
    rows = np.arange(n, ctx=x_train.ctx).reshape(-1, 1)
    cols = np.arange(n - 1, ctx=x_train.ctx).reshape(1, -1)
    idx = (cols + (cols >= rows)).astype("int32")
    return x_train[idx], y_train[idx]


class NWKernelRegression(gluon.nn.Block):
    """Parametric attention pooling: a Gaussian kernel whose width is learned.

    The score of query q and key k is -((q - k) w)^2 / 2 with a learned scalar w, so the
    bandwidth is 1 / |w|; :func:`gaussian_scores` keeps the weights finite for any w.
    ``forward(queries (m,), keys (m, n), values (m, n))`` returns (m,) predictions and
    keeps the (m, n) weights in ``attention_weights``.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = self.params.get("w", shape=(1,), init=mx.init.One())
        self.attention_weights = None

    def forward(self, queries, keys, values):
        _check_row_keys(queries, keys, values)
        w = self.w.data(queries.ctx)
        scores = gaussian_scores(queries.reshape(-1, 1) - keys, lambda x: x * w)
        self.attention_weights = npx.softmax(scores, axis=-1)
        return (self.attention_weights * values).sum(axis=1)

    @property
    def bandwidth(self):
        """The learned kernel width 1 / |w|."""
        return 1 / abs(float(self.w.data(self.w.list_ctx()[0])[0]))


def train_nw(net, x_train, y_train, num_epochs=5, lr=0.5, callback=None):
    """Fit ``net``'s width by gradient descent on the squared leave-one-out error.

    Every step uses the whole training set (Gluon's "sgd" with one batch: nothing random).

    ``net`` must be initialised on the context of ``x_train``. ``callback(epoch, loss)``
    is called after each epoch (e.g. to draw a curve). Returns the loss per epoch.
    """
    num_epochs = check_int("num_epochs", num_epochs, minimum=1)
    keys, values = leave_one_out(x_train, y_train)
    loss_fn = gluon.loss.L2Loss()
    lr = check_positive("lr", lr)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    losses = []
    for epoch in range(num_epochs):
        with autograd.record():
            loss = loss_fn(net(x_train, keys, values), y_train)
        loss.backward()
        trainer.step(1)
        losses.append(float(loss.sum()))
        if callback is not None:
            callback(epoch + 1, losses[-1])
    return losses


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_training_data(x_train, y_train, minimum=1):
    """Raise unless ``x_train`` and ``y_train`` (1-D arrays) have one length >= ``minimum``."""
    if x_train.shape != y_train.shape or x_train.shape[0] < minimum:
        length = "non-empty and of equal length" if minimum == 1 else \
            f"of equal length >= {minimum}"
        raise ValueError(f"x_train and y_train must be {length}, got shapes {x_train.shape} "
                         f"and {y_train.shape}")


def _check_kernel(kernel):
    """Raise unless ``kernel`` is callable, a function of u."""
    if not callable(kernel):
        raise TypeError(f"kernel must be a function of u, got {kernel!r}")


def _check_row_keys(queries, keys, values):
    """Raise unless ``queries`` is (m,) and ``keys`` and ``values`` (m, n), n >= 1: one row of
    keys and values per query."""
    if queries.ndim != 1 or keys.ndim != 2 or keys.shape != values.shape \
            or keys.shape[0] != queries.shape[0]:
        raise ValueError("expected queries (m,), keys and values (m, n); got shapes "
                         f"{queries.shape}, {keys.shape}, {values.shape}")
    check_array("keys", keys)


def _check_kernel_values(values, u):
    """``values``, the kernel's K(u), after checking that they are an mxnet.np array of the
    shape of ``u`` holding finite numbers >= 0 (weights)."""
    if not isinstance(values, np.ndarray) or values.shape != u.shape:
        raise TypeError(f"kernel must map u {u.shape} to an array of its shape, got {values!r}")
    bad = values.asnumpy()[~(np.isfinite(values) & (values >= 0)).asnumpy()]
    if bad.size:
        raise ValueError(f"kernel must return finite values >= 0, got {bad[:5].tolist()}")
    return values
