"""Exact attention in tiles: the online softmax forward and FlashAttention's recomputing
backward pass.

:func:`tiled_attention` computes scaled dot-product attention block by block of keys
(Milakov & Gimelshein, 2018; Rabe & Staats, 2021), so that no (queries, keys) matrix of
scores is ever formed. Under ``autograd.record()`` it runs as :class:`TiledAttention`, an
``mxnet.autograd.Function`` built as FlashAttention's (Dao et al., 2022): the forward pass
keeps only its inputs, its output O and each query's log-sum-exp L; the backward pass
recomputes each block's weights P = exp(S - L) from them and forms, per block,
dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ += dS K / sqrt(d),
dK = dS^T Q / sqrt(d). Memory, forward and backward, grows linearly with the length.
"""
import math

import numpy as onp
from mxnet import autograd, nd, np, npx

from ._checks import check_bool, check_int
from ._ops import masked_fill
from .attention import check_attention_inputs, check_same_width, lengths, without_padding


def tiled_attention(queries, keys, values, valid_lens=None, causal=False, block_size=64):
    """Exact scaled dot-product attention by blocks of keys with the online softmax:
    (batch, queries, keys) scores are never formed, only (batch, queries, block_size) ones,
    in the forward pass and (under ``autograd.record()``) in the backward pass.

    queries (batch, n_q, d), keys (batch, n_k, d), values (batch, n_k, v); ``valid_lens``:
    None, (batch,) or (batch, n_q), as in :func:`~d2lattn.attention.masked_softmax`;
    ``causal``: query i also sees no key after position i + n_k - n_q (the queries are the
    last n_q positions). A query that sees no key gets 0. Equals
    :class:`~d2lattn.attention.DotProductAttention` without dropout, values and gradients,
    to float32 rounding. Returns (batch, n_q, v).
    """
    check_attention_inputs(queries, keys, values)
    check_same_width(queries, keys)
    causal = check_bool("causal", causal)
    block_size = check_int("block_size", block_size, minimum=1)
    shape = (queries.shape[0], queries.shape[1], keys.shape[1])
    lens = lengths(valid_lens, shape).as_in_ctx(queries.ctx)
    if queries.dtype == onp.float16:  # running sums in float32
        return tiled_attention(*(x.astype("float32") for x in (queries, keys, values)),
                               valid_lens, causal, block_size).astype("float16")
    if autograd.is_recording():
        # MXNet 1.9.1's Function writes no gradient after an input that needs none: make
        # all three need one (the anchor's own gradient is never read)
        anchor = np.zeros((), dtype=queries.dtype, ctx=queries.ctx)
        anchor.attach_grad()
        queries, keys, values = (x + anchor for x in (queries, keys, values))
    keys, values = without_padding(nd, keys, values, lens)  # recorded: padding gets no grad
    return TiledAttention(key_bounds(lens, causal, shape), block_size)(queries, keys, values)


def key_bounds(lens, causal, shape):
    """(batch, n_q, 1) float32 bounds: each query sees the keys below its bound. ``lens``:
    float32 (batch,) or (batch, n_q); ``shape``: (batch, n_q, n_k) of the scores."""
    batch, n_q, n_k = shape
    hi = lens.reshape(batch, -1, 1)
    if causal:
        last = np.arange(n_k - n_q + 1, n_k + 1, dtype="float32", ctx=lens.ctx)
        hi = np.minimum(hi, last.reshape(1, n_q, 1))
    return hi


def wait_for(*arrays):
    """Wait until ``arrays`` are computed. MXNet runs operators asynchronously: a loop that
    did not wait would queue the tiles of every block at once, and hold them all."""
    for x in arrays:
        x.wait_to_read()


class TiledAttention(autograd.Function):
    """Attention by blocks of keys whose backward pass recomputes the blocks.

    ``TiledAttention(bounds, block_size)(queries, keys, values)`` -> (batch, n_q, v), for
    the ``bounds`` (batch, n_q, 1) of :func:`key_bounds` (key j is seen by query i iff
    j < bounds[i]); one instance per call, as every ``autograd.Function``. The forward pass
    saves (``saved_tensors``) the inputs, the output (batch, n_q, v) and the log-sum-exp
    (batch, n_q, 1) of each query's scores (-inf for a query that sees no key): nothing
    that grows with n_q * n_k.
    """

    def __init__(self, bounds, block_size):
        super().__init__()
        self.bounds, self.block_size = bounds, block_size

    def scores(self, queries, keys, start):
        """The masked scores (batch, n_q, block) of the block of keys from ``start``."""
        k = keys[:, start:start + self.block_size]
        s = npx.batch_dot(queries, k, transpose_b=True) / math.sqrt(queries.shape[-1])
        cols = np.arange(start, start + k.shape[1], dtype="float32", ctx=queries.ctx)
        return masked_fill(s, cols >= self.bounds, -onp.inf)

    def forward(self, queries, keys, values):
        """The online softmax: per block of scores s, each query's running maximum m, sum
        l and output o become m' = max(m, max s), l' = l e^(m - m') + sum e^(s - m'),
        o' = o e^(m - m') + e^(s - m') V_block; the output is o / l, L = m + log l."""
        shape = queries.shape[:2] + (1,)
        m = np.full(shape, -onp.inf, dtype=queries.dtype, ctx=queries.ctx)
        l = np.zeros_like(m)
        o = np.zeros(queries.shape[:2] + values.shape[2:], dtype=queries.dtype,
                     ctx=queries.ctx)
        for start in range(0, keys.shape[1], self.block_size):
            s = self.scores(queries, keys, start)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            shift = np.where(np.isinf(m_new), np.zeros_like(m_new), m_new)  # no key yet
            p, decay = np.exp(s - shift), np.exp(m - shift)  # e^-inf = 0
            l = l * decay + p.sum(axis=-1, keepdims=True)
            o = o * decay + npx.batch_dot(p, values[:, start:start + self.block_size])
            m = m_new
            wait_for(o, l)
        out = o / np.where(l > 0, l, np.ones_like(l))
        # L = m + log l; no key seen: -inf + log 0 = -inf
        self.save_for_backward(queries, keys, values, out, m + np.log(l))
        return out

    def backward(self, d_out):
        """Recompute each block's weights P = exp(S - L) and return (dQ, dK, dV) (as
        ``mxnet.nd`` arrays; ``d_out`` is one too)."""
        queries, keys, values, out, lse = self.saved_tensors
        d_out = d_out.as_np_ndarray()
        scale = 1 / math.sqrt(queries.shape[-1])
        row_dot = (d_out * out).sum(axis=-1, keepdims=True)  # rowsum(dO * O) = sum_j P dP
        base = np.where(np.isinf(lse), np.zeros_like(lse), lse)  # no key: every P is 0
        d_q, d_k, d_v = np.zeros_like(queries), [], []
        for start in range(0, keys.shape[1], self.block_size):
            p = np.exp(self.scores(queries, keys, start) - base)
            v = values[:, start:start + self.block_size]
            d_v.append(npx.batch_dot(p, d_out, transpose_a=True))
            d_s = p * (npx.batch_dot(d_out, v, transpose_b=True) - row_dot) * scale
            d_q = d_q + npx.batch_dot(d_s, keys[:, start:start + self.block_size])
            d_k.append(npx.batch_dot(d_s, queries, transpose_a=True))
            wait_for(d_q, d_k[-1], d_v[-1])
        grads = d_q, np.concatenate(d_k, axis=1), np.concatenate(d_v, axis=1)
        return tuple(g.as_nd_ndarray() for g in grads)  # autograd.Function's array type
