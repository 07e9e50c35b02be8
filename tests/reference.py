"""Independent NumPy references shared by several test files, and the inputs that some of them
share (B, Q, K and the masks LENS; as_np, normal)."""
import math

import mxnet as mx
import numpy as onp
from mxnet import np

# batch, queries, keys of the attention-at-scale and tiled-attention tests, and their masks:
# none, valid lengths per sequence (one of them 0) and per query
B, Q, K = 2, 4, 6
LENS = [None, [3, 0], [[1, 0, 6, 2], [6, 5, 4, 3]]]
LENS_IDS = ["none", "per-sequence", "per-query"]


def as_np(x, dtype="float32", ctx=None):
    """``x`` as an mxnet.np array of ``dtype`` on ``ctx`` (the CPU by default)."""
    return np.array(x, dtype=dtype, ctx=ctx or mx.cpu())


def normal(shape, seed=0, scale=1.0):
    """Standard normal draws of ``shape`` from ``seed``, times ``scale`` (float64 NumPy)."""
    return onp.random.default_rng(seed).normal(size=shape) * scale


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


def np_softmax_grad(w, G):
    """d sum(w * G) / dX for w = softmax(X) over the last axis: w (G - sum(w G))."""
    return w * (G - (w * G).sum(axis=-1, keepdims=True))


def np_dot_scores(net, q, k):
    """Scaled dot-product scores (b, q, k) of queries (b, q, d) and keys (b, k, d)."""
    return q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])


def np_additive_scores(net, q, k):
    """w_v^T tanh(W_q q + W_k k) for every pair, from an AdditiveAttention's weights."""
    feats = (q @ value(net.W_q.weight).T)[:, :, None] + (k @ value(net.W_k.weight).T)[:, None]
    return (onp.tanh(feats) @ value(net.w_v.weight).T)[..., 0]


MHA_LAYERS = ("W_q", "W_k", "W_v", "W_o")


def layer_params(net):
    """{layer: [weight (out, in), bias (out,) if any]} of a MultiHeadAttention's four
    projections, float64 NumPy."""
    return {name: [value(p) for p in getattr(net, name).collect_params().values()]
            for name in MHA_LAYERS}


def np_multihead(net, q, k, v, lens=None, weights=None):
    """Each head on its own with slices of the layers' weights, in float64.

    Head i uses rows i*p to (i+1)*p - 1 of W_q, W_k, W_v (p = num_hiddens / heads); the
    output is sum_i W_o[:, head i's columns] h_i + b_o, the concatenation written as a sum.
    ``weights`` replaces the layers' own (see ``layer_params``).
    Returns (output (B, queries, num_hiddens), weights (B, heads, queries, keys)).
    """
    weights = weights or layer_params(net)
    (Wq, bq), (Wk, bk), (Wv, bv), (Wo, bo) = ((w + [0.0])[:2] for w in
                                              (weights[name] for name in MHA_LAYERS))
    p = Wq.shape[0] // net.num_heads
    out, attention = bo + onp.zeros(q.shape[:2] + (Wo.shape[0],)), []
    for i in range(net.num_heads):
        rows = slice(i * p, (i + 1) * p)
        qi, ki, vi = (x @ W[rows].T + (b[rows] if onp.ndim(b) else b)
                      for x, W, b in ((q, Wq, bq), (k, Wk, bk), (v, Wv, bv)))
        w = np_masked_softmax(qi @ ki.transpose(0, 2, 1) / math.sqrt(p), lens)
        out += (w @ vi) @ Wo[:, rows].T
        attention.append(w)
    return out, onp.stack(attention, axis=1)


def np_rope(x, positions, base=10000.0):
    """Rotary positions as Hugging Face's Llama computes them, in float64: x (..., steps, d),
    positions (steps,). inv_freq = 1 / base^(arange(0, d, 2) / d), cos and sin of the angles
    tiled twice, x cos + rotate_half(x) sin with rotate_half(x) = [-x2, x1]."""
    x = onp.asarray(x, float)
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (onp.arange(0, d, 2) / d)
    emb = onp.concatenate([onp.outer(positions, inv_freq)] * 2, axis=-1)
    rotate_half = onp.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * onp.cos(emb) + rotate_half * onp.sin(emb)


def np_mask(batch, queries, keys, lens=None, window=None):
    """(batch, queries, keys) booleans, True where a query sees a key: keys below its valid
    length (None, (batch,) or (batch, queries)) and, with a window, no more than the last
    ``window`` of those."""
    hi = onp.full((batch, queries), keys) if lens is None else \
        onp.broadcast_to(onp.reshape(lens, (batch, -1)), (batch, queries))
    j = onp.arange(keys)
    mask = j < hi[..., None]
    return mask if window is None else mask & (j >= hi[..., None] - window)


def np_softmax_where(scores, mask):
    """Softmax of ``scores`` over the keys where ``mask`` is True, 0 elsewhere and on rows
    with no True, float64."""
    scores = onp.where(mask, scores, -onp.inf)
    top = onp.where(mask.any(-1, keepdims=True), scores.max(-1, keepdims=True), 0)
    e = onp.where(mask, onp.exp(scores - top), 0)
    total = e.sum(-1, keepdims=True)
    return e / onp.where(total > 0, total, 1)


def np_grouped_heads(net, q, k, v, lens=None, window=None, positions=None):
    """Multi-head attention head by head in float64: a MultiHeadAttention, or a
    CausalSelfAttention (grouped-query, windowed, rotary with base 10000) given causal ``lens``.

    Query head i uses rows i*p.. of W_q and key/value head j = i // (num_heads /
    num_kv_heads), rows j*p.. of W_k and W_v; ``positions`` (steps,): rotate queries and
    keys with :func:`np_rope`. Returns (output, weights (batch, num_heads, queries, keys)).
    """
    (Wq, bq), (Wk, bk), (Wv, bv), (Wo, bo) = ((w + [0.0])[:2] for w in
                                              (layer_params(net)[name] for name in MHA_LAYERS))
    heads, group = net.num_heads, net.num_heads // net.num_kv_heads
    p = Wq.shape[0] // heads
    mask = np_mask(q.shape[0], q.shape[1], k.shape[1], lens, window)
    out, attention = bo + onp.zeros(q.shape[:2] + (Wo.shape[0],)), []
    for i in range(heads):
        rows, kv = slice(i * p, (i + 1) * p), slice(i // group * p, (i // group + 1) * p)
        qi, ki, vi = (x @ W[r].T + (b[r] if onp.ndim(b) else b)
                      for x, W, b, r in ((q, Wq, bq, rows), (k, Wk, bk, kv), (v, Wv, bv, kv)))
        if positions is not None:
            qi, ki = np_rope(qi, positions), np_rope(ki, positions)
        w = np_softmax_where(qi @ ki.transpose(0, 2, 1) / math.sqrt(p), mask)
        out += (w @ vi) @ Wo[:, rows].T
        attention.append(w)
    return out, onp.stack(attention, axis=1)
