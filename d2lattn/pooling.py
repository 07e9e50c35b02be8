"""Attention pooling by similarity: Nadaraya-Watson kernel regression.

A query x is answered by a weighted average of the training targets y_i, with weights
alpha(x, x_i) = K((x - x_i) / h) / sum_j K((x - x_j) / h). Writing the score as
a = log K turns the weights into a softmax over scores: attention pooling.
"""
import mxnet as mx
from mxnet import autograd, gluon, np, npx


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


def kernel_scores(kernel, u):
    """The attention scores a = log K(u) of ``kernel``; -inf where K(u) = 0.

    The Gaussian's score is written out, -u^2 / 2, so that a tiny bandwidth gives
    nearest-neighbour weights instead of 0 / 0.
    """
    return -u**2 / 2 if kernel is gaussian else np.log(kernel(u))


def softmax_rows(scores):
    """Softmax over the last axis that maps a row of -inf scores to a row of zeros."""
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isinf(top), np.zeros_like(top), top)
    expd = np.exp(scores - top)
    total = expd.sum(axis=-1, keepdims=True)
    return expd / np.where(total > 0, total, np.ones_like(total))


def nadaraya_watson(x_train, y_train, x_query, kernel=gaussian, bandwidth=1.0):
    """Nadaraya-Watson regression: predict at ``x_query`` from (``x_train``, ``y_train``).

    x_train, y_train: (n,); x_query: (m,). Returns (predictions (m,), weights (m, n)),
    each weight row summing to 1. A query with no training point inside a compact
    kernel's support gets all-zero weights and the prediction 0 (the estimator is
    undefined there), never NaN.
    """
    x_train, y_train, x_query = (_as_vector(v, name) for v, name in
                                 ((x_train, "x_train"), (y_train, "y_train"), (x_query, "x_query")))
    if x_train.shape != y_train.shape or x_train.shape[0] == 0:
        raise ValueError("x_train and y_train must be non-empty and of equal length, got "
                         f"shapes {x_train.shape} and {y_train.shape}")
    if not callable(kernel):
        raise TypeError(f"kernel must be a function of u, got {kernel!r}")
    if not isinstance(bandwidth, (int, float)) or not 0 < bandwidth < float("inf"):
        raise ValueError(f"bandwidth must be a positive finite number, got {bandwidth!r}")
    u = (x_query.reshape(-1, 1) - x_train.reshape(1, -1)) / bandwidth
    weights = softmax_rows(kernel_scores(kernel, u))
    return np.dot(weights, y_train), weights


def _as_vector(x, name):
    x = x if isinstance(x, np.ndarray) else np.array(x, dtype="float32")
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {x.shape}")
    return x


def leave_one_out(x_train, y_train):
    """Keys and values for training: row i holds every training example except the i-th.

    x_train, y_train: (n,) -> keys, values: (n, n - 1). Without this, each query would
    find itself among the keys and the learned width would shrink towards 0.
    """
    n = x_train.shape[0]
    if y_train.shape != (n,) or n < 2:
        raise ValueError("x_train and y_train must be 1-D of equal length >= 2, got shapes "
                         f"{x_train.shape} and {y_train.shape}")
    # Row i skips column i: take columns (i + 1 + j) mod n for j = 0 .. n - 2.
    idx = (np.arange(n, ctx=x_train.ctx).reshape(-1, 1)
           + np.arange(1, n, ctx=x_train.ctx).reshape(1, -1)) % n
    idx = idx.astype("int32")
    return x_train[idx], y_train[idx]


class NWKernelRegression(gluon.nn.Block):
    """Parametric attention pooling: a Gaussian kernel whose width is learned.

    The score of query q and key k is -((q - k) w)^2 / 2 with a learned scalar w, so the
    bandwidth is 1 / |w|. ``forward(queries (m,), keys (m, n), values (m, n))`` returns
    (m,) predictions and keeps the (m, n) weights in ``attention_weights``.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = self.params.get("w", shape=(1,), init=mx.init.One())
        self.attention_weights = None

    def forward(self, queries, keys, values):
        if queries.ndim != 1 or keys.ndim != 2 or keys.shape != values.shape \
                or keys.shape[0] != queries.shape[0]:
            raise ValueError("expected queries (m,), keys and values (m, n); got shapes "
                             f"{queries.shape}, {keys.shape}, {values.shape}")
        scores = -((queries.reshape(-1, 1) - keys) * self.w.data(queries.ctx)) ** 2 / 2
        self.attention_weights = npx.softmax(scores, axis=-1)
        return (self.attention_weights * values).sum(axis=1)

    @property
    def bandwidth(self):
        """The learned kernel width 1 / |w|."""
        return 1 / abs(float(self.w.data(self.w.list_ctx()[0])[0]))


def train_nw(net, x_train, y_train, num_epochs=5, lr=0.5, callback=None):
    """Fit ``net``'s width by full-batch SGD on the squared error, with leave-one-out keys.

    ``net`` must be initialised on the context of ``x_train``. ``callback(epoch, loss)``
    is called after each epoch (e.g. to draw a curve). Returns the loss per epoch.
    """
    if not isinstance(num_epochs, int) or num_epochs < 1:
        raise ValueError(f"num_epochs must be a positive int, got {num_epochs!r}")
    keys, values = leave_one_out(x_train, y_train)
    loss_fn = gluon.loss.L2Loss()
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
