"""Attention scoring functions: masked softmax and the additive, dot-product and Luong scores.

Every attention layer here computes scores a(q, k) for all (query, key) pairs, turns them
into weights with a softmax that ignores padded keys, and returns the weighted sum of the
values: f(q) = sum_i softmax(a(q, k_i)) v_i. Only the scoring function differs.
"""
import math

import numpy as onp
from mxnet import gluon, np, npx

from ._checks import (check_bool, check_divisible, check_float_array, check_heads, check_int,
                      check_integers, check_rate, check_same_width)
from ._ops import (Dropout, full_lengths, graph_rows, is_symbol, masked_fill, sequence_mask,
                   transpose)


def masked_softmax(X, valid_lens):
    """Softmax over the last axis of ``X`` that gives keys beyond the valid length weight 0.

    X: (batch, queries, keys) float scores, keys >= 1. valid_lens: None (no masking),
    (batch,) one length per sequence shared by all its queries, or (batch, queries) one
    length per query; integers in [0, keys], stored as ints or floats, on any context. A
    valid length of 0 gives an all-zero row. Masked scores are replaced, not added to
    (d2l's -1e6 leaks weight when the valid scores are lower still), so their weight and
    gradient are exactly 0 whatever they hold, inf and NaN included. float16 scores are
    computed in float32. Returns (batch, queries, keys), X's dtype.
    """
    _check_scores("X", X)
    kind = None if valid_lens is None else _check_valid_lens(valid_lens, X.shape)
    return _masked_softmax(X, valid_lens, kind)


def _masked_softmax(X, valid_lens, kind):
    """masked_softmax without the checks of ``valid_lens``' values (a host round trip);
    ``kind`` is what the check returned: "full" (nothing to mask), "some" (no length is 0)
    or "empty"."""
    if X.dtype == onp.float16:  # float16 sums of long rows are wrong: sum in float32
        return _masked_softmax(X.astype("float32"), valid_lens, kind).astype(X.dtype)
    if valid_lens is None or kind == "full" or X.size == 0:  # masks crash on size 0
        return npx.softmax(X, axis=-1)
    shape = X.shape
    # int32 lengths: exact, unlike lengths cast to the scores' dtype
    lens = valid_lens.as_in_ctx(X.ctx).astype("int32").reshape(shape[0], -1)
    lens = np.broadcast_to(lens, shape[:2]).reshape(-1)
    rows = X.reshape(-1, shape[-1])
    # Masked scores become -inf, so they get weight exactly 0. (Masking is ~3x faster than
    # npx.softmax(use_length=True) on large score tensors.)
    if kind == "some":
        return npx.softmax(sequence_mask(rows, lens, -onp.inf), axis=-1).reshape(shape)
    # A row of length 0 keeps one key, replaced by 0 so that its softmax and gradient stay
    # finite whatever the score was; a last mask then zeroes the row.
    rows = sequence_mask(sequence_mask(rows, lens, 0), np.maximum(lens, 1), -onp.inf)
    return sequence_mask(npx.softmax(rows, axis=-1), lens, 0).reshape(shape)


def _check_3d(name, x):
    """Raise unless ``x`` is a 3-D mxnet.np array of floats."""
    if check_float_array(name, x).ndim != 3:
        raise ValueError(f"{name} must be 3-D, got shape {x.shape}")


def _check_scores(name, X):
    """Raise unless ``X`` is 3-D float scores with at least one key position."""
    _check_3d(name, X)
    if X.shape[-1] == 0:
        raise ValueError(f"{name} must have at least one key position, got shape {X.shape}")


def _check_valid_lens(valid_lens, shape):
    """Raise unless ``valid_lens`` fits scores of ``shape`` (batch, queries, keys). Returns what
    needs masking: "full" (every length is ``keys``), "empty" (some length is 0) or "some".

    Checked at every call (one small copy to the host): lengths changed in place between
    two calls give the new mask or an error, never the old mask.
    """
    batch, queries, keys = shape
    if not isinstance(valid_lens, np.ndarray):
        raise TypeError("valid_lens must be None or an mxnet.np.ndarray, got "
                        f"{type(valid_lens).__name__}")
    if valid_lens.shape not in ((batch,), (batch, queries)):
        raise ValueError(f"valid_lens must have shape (batch,) = ({batch},) or (batch, queries) "
                         f"= ({batch}, {queries}) for scores of shape {shape}, got shape "
                         f"{valid_lens.shape}")
    lens = check_integers("valid_lens", valid_lens, 0, keys, " (the number of keys)")
    return "full" if (lens == keys).all() else "empty" if (lens == 0).any() else "some"


class ScoredAttention(gluon.nn.HybridBlock):
    """Attention pooling with a scoring function: the step all attention layers share.

    Subclasses define ``score(queries, keys) -> (batch, queries, keys)``. The call
    ``(queries (batch, queries, q), keys (batch, keys, k), values (batch, keys, v),
    valid_lens=None)`` returns (batch, queries, v) and keeps the weights, before dropout, in
    ``attention_weights`` (batch, queries, keys). Dropout on the weights acts in training
    mode only (under ``autograd.record()``). Keys and values beyond every valid length of
    their sequence are zeroed first: inf or NaN there reaches no output and no gradient.

    A subclass with a ``graph_score(F, queries, keys, width)`` (:class:`DotProductAttention`)
    is also a cached graph after ``hybridize()``: the same results (to float32 rounding)
    from one masking that holds for any lengths, 0 included (:func:`_graph_attention`); the
    inputs are checked as before, but ``attention_weights`` is then None (the graph does not
    return them: call the block without ``hybridize()`` to see them). Other subclasses stay
    imperative when hybridized and cannot be part of a hybridized parent.
    """

    graph_score = None

    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = Dropout(check_rate("dropout", dropout))
        self.attention_weights = None

    def score(self, queries, keys):
        """Scores (batch, queries, keys) of every query against every key."""
        raise NotImplementedError

    def forward(self, queries, keys, values, valid_lens=None):
        if is_symbol(queries):  # traced into a hybridized parent, which checked its inputs
            if self.graph_score is None:
                raise NotImplementedError(f"{type(self).__name__} has no cached-graph form: "
                                          "call it from a block that is not hybridized")
            self.attention_weights = None  # the graph does not return them
            return super().forward(queries, keys, values, valid_lens)
        _check_inputs(queries, keys, values)
        _check_param_dtype(self, queries)
        shape = (queries.shape[0], queries.shape[1], keys.shape[1])
        kind = None if valid_lens is None else _check_valid_lens(valid_lens, shape)
        if self._active and self.graph_score is not None:
            self.attention_weights = None
            return super().forward(queries, keys, values, full_lengths(valid_lens, keys))
        keys, values = _without_padding(keys, values, valid_lens, kind)
        return self._attend(queries, keys, values, valid_lens, kind)

    def hybrid_forward(self, F, queries, keys, values, valid_lens=None):
        """The call in a cached graph; ``valid_lens``: None (inside a parent's graph),
        (batch,) or (batch, queries)."""
        lens = None
        if valid_lens is not None:
            lens = F.npx.reshape(valid_lens, (-2, -1)).astype("float32")  # (batch, 1 or queries)
            keys, values = _graph_without_padding(F, keys, values, lens)
        return _graph_attention(F, self, queries, keys, values, lens)

    def _attend(self, queries, keys, values, valid_lens, kind):
        """The call without its checks; ``kind``: see :func:`_masked_softmax`."""
        scores = self.score(queries, keys)
        _check_3d("scores", scores)
        self.attention_weights = _masked_softmax(scores, valid_lens, kind)
        return npx.batch_dot(self.dropout(self.attention_weights), values)


def _graph_attention(F, attention, queries, keys, values, lens, width=None):
    """The pooling of ``attention`` (a :class:`ScoredAttention` with a ``graph_score``) in a
    cached graph: lens None or (batch, 1 or queries) float32, keys and values already zeroed
    beyond them (so the scores are finite: adding -inf masks them); ``width``: the queries'
    width if known. A length 0 keeps key 0 for the softmax; its output row is zeroed after
    the pooling (and so its gradient)."""
    scores = attention.graph_score(F, queries, keys, width)
    if lens is None:
        return F.npx.batch_dot(attention.dropout(F.npx.softmax(scores, axis=-1)), values)
    lens = F.np.expand_dims(lens, -1)  # (rows, 1 or queries, 1)
    valid = F.npx.arange_like(scores, axis=-1) < F.np.maximum(lens, 1)
    bias = F.np.log(valid.astype("float32"))  # 0, or -inf beyond the length
    weights = F.npx.softmax(scores + _like(F, bias, scores), axis=-1)
    out = F.npx.batch_dot(attention.dropout(weights), values)
    return out * _like(F, F.np.minimum(lens, 1), out)  # lengths are integers: 0 or 1


def _like(F, small, big):
    """``small`` broadcast to ``big``'s shape, a new array: elementwise operators on equal
    shapes are much faster in MXNet 1.9.1 than broadcasting ones, gradient included."""
    return F.broadcast_like(small.as_nd_ndarray(), big.as_nd_ndarray()).as_np_ndarray()


def _graph_without_padding(F, keys, values, lens):
    """:func:`_without_padding` in a cached graph: lens (batch, 1 or queries) float32; the
    same Symbol for keys and values (self-attention) is masked once."""
    longest = F.np.max(lens, axis=1)
    keys_out = sequence_mask(keys, longest, 0)
    return keys_out, keys_out if values is keys else sequence_mask(values, longest, 0)


def _without_padding(keys, values, valid_lens, kind):
    """``keys`` and ``values`` (batch, positions, width) with each position beyond every
    valid length of its sequence set to 0, so that whatever padding holds (inf, NaN) reaches
    neither the outputs nor a gradient. valid_lens: checked, (batch,) or (batch, queries);
    ``kind``: what the check returned (nothing to do unless "some" or "empty")."""
    if kind not in ("some", "empty"):
        return keys, values
    longest = valid_lens.as_in_ctx(keys.ctx).reshape(keys.shape[0], -1).max(axis=1)
    longest = longest.astype("int32")
    return sequence_mask(keys, longest, 0), sequence_mask(values, longest, 0)


def _check_inputs(queries, keys, values, no_keys=False):
    """Raise unless queries, keys and values are 3-D floats of one dtype, batch and context,
    keys ~ values, with no empty axis (keys may have 0 positions if ``no_keys``)."""
    for name, x in (("queries", queries), ("keys", keys), ("values", values)):
        _check_3d(name, x)
    got = f"got queries {queries.shape}, keys {keys.shape}, values {values.shape}"
    if not queries.dtype == keys.dtype == values.dtype:
        raise TypeError("queries, keys and values must have one dtype, got "
                        f"{_dtype(queries)}, {_dtype(keys)}, {_dtype(values)}")
    if queries.dtype == onp.float16 and queries.ctx.device_type == "cpu":
        raise TypeError("queries, keys and values are float16, which MXNet's matrix "
                        "products do not support on the CPU: cast them to float32")
    if not queries.shape[0] == keys.shape[0] == values.shape[0]:
        raise ValueError(f"queries, keys and values must have the same batch size, {got}")
    if keys.shape[1] != values.shape[1]:
        raise ValueError(f"keys and values must have the same number of positions, {got}")
    for name, x in (("queries", queries), ("keys", keys), ("values", values)):
        if 0 in (x.shape[::2] if no_keys and name != "queries" else x.shape):
            raise ValueError(f"{name} must have no empty axis (batch, positions and width "
                             f">= 1), {got}")
    if not queries.ctx == keys.ctx == values.ctx:
        raise ValueError("queries, keys and values must be on one context, got "
                         f"{queries.ctx}, {keys.ctx}, {values.ctx}")


def _check_param_dtype(block, queries):
    """Raise if ``block`` or its direct sub-layers have parameters of another dtype than
    ``queries`` (not ``collect_params()``, which costs ~100x more at every call)."""
    for layer in (block, *block._children.values()):
        for param in layer.params.values():
            if onp.dtype(param.dtype) != queries.dtype:
                raise TypeError(f"queries have dtype {_dtype(queries)} but {param.name} has "
                                f"dtype {onp.dtype(param.dtype).name}: cast the inputs or "
                                "the block (block.cast(dtype))")


def _dtype(x):
    return onp.dtype(x.dtype).name


class DotProductAttention(ScoredAttention):
    """Scaled dot-product attention: a(q, k) = q^T k / sqrt(d), queries and keys of width d.

    Dividing by sqrt(d) keeps the scores' variance at 1 for unit-variance q and k (q^T k has
    variance d), so the softmax does not saturate for wide vectors.
    """

    def score(self, queries, keys):
        d = check_same_width(queries, keys)
        return npx.batch_dot(queries, keys, transpose_b=True) / math.sqrt(d)

    def graph_score(self, F, queries, keys, width=None):
        """:meth:`score` in a cached graph; ``width`` None: read from the queries' shape (a
        division by an array, slower)."""
        if width is not None:  # the queries are scaled: fewer entries than the scores
            return F.npx.batch_dot(queries / math.sqrt(width), keys, transpose_b=True)
        d = F.npx.shape_array(queries)[-1:].astype("float32")  # (1,), without gradient
        scores = F.npx.batch_dot(queries, keys, transpose_b=True)
        return scores / F.BlockGrad(F.np.sqrt(d).as_nd_ndarray()).as_np_ndarray()


class SlidingWindowAttention(DotProductAttention):
    """Scaled dot-product attention in which each query sees at most ``window`` keys: the
    last ``window`` of those its valid length allows, keys hi - window .. hi - 1 for a valid
    length hi (every key without ``valid_lens``). With causal valid lengths (t + 1 at position
    t) this is the sliding window of Longformer and Mistral: positions t - window + 1 .. t.
    Call as :class:`ScoredAttention`; ``attention_weights`` are 0 outside the window.
    """

    graph_score = None

    def __init__(self, window, dropout, **kwargs):
        super().__init__(dropout, **kwargs)
        self.window = check_int("window", window, minimum=1)

    def _attend(self, queries, keys, values, valid_lens, kind):
        scores = _outside_window(self.score(queries, keys), valid_lens, self.window)
        self.attention_weights = _masked_softmax(scores, valid_lens, kind)
        return npx.batch_dot(self.dropout(self.attention_weights), values)


def _outside_window(scores, valid_lens, window):
    """``scores`` (batch, queries, keys) with -inf before the last ``window`` keys that each
    query's valid length (None, (batch,) or (batch, queries)) allows."""
    batch, _, n_k = scores.shape
    if valid_lens is None:
        if n_k <= window:
            return scores
        hi = np.full((1, 1, 1), n_k, dtype="int32", ctx=scores.ctx)
    else:
        hi = valid_lens.as_in_ctx(scores.ctx).astype("int32").reshape(batch, -1, 1)
    keys = np.arange(n_k, dtype="int32", ctx=scores.ctx)
    return masked_fill(scores, keys < hi - window, -onp.inf)


class AdditiveAttention(ScoredAttention):
    """Additive (Bahdanau) attention: a(q, k) = w_v^T tanh(W_q q + W_k k).

    W_q, W_k: (num_hiddens, q) and (num_hiddens, k), so queries and keys may differ in width.
    """

    def __init__(self, num_hiddens, dropout, **kwargs):
        super().__init__(dropout, **kwargs)
        num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.W_k = gluon.nn.Dense(num_hiddens, use_bias=False, flatten=False)
        self.W_q = gluon.nn.Dense(num_hiddens, use_bias=False, flatten=False)
        self.w_v = gluon.nn.Dense(1, use_bias=False, flatten=False)

    def score(self, queries, keys):
        features = _pairwise_sum(self.W_q(queries), self.W_k(keys))
        return np.squeeze(self.w_v(_tanh(features)), axis=-1)


class GeneralAttention(ScoredAttention):
    """Luong's general score: a(q, k) = q^T W_a k, with W_a: (query_size, k).

    The queries must have width ``query_size``; the keys may have any width.
    """

    def __init__(self, query_size, dropout, **kwargs):
        super().__init__(dropout, **kwargs)
        self.query_size = check_int("query_size", query_size, minimum=1)
        self.W_a = gluon.nn.Dense(self.query_size, use_bias=False, flatten=False)

    def score(self, queries, keys):
        if queries.shape[-1] != self.query_size:
            raise ValueError(f"queries must have width query_size = {self.query_size}, got "
                             f"queries {queries.shape}")
        return npx.batch_dot(queries, self.W_a(keys), transpose_b=True)


class ConcatAttention(ScoredAttention):
    """Luong's concat score: a(q, k) = v_a^T tanh(W_a [q; k]), W_a: (num_hiddens, q + k).

    Splitting W_a = [W_q, W_k] gives W_a [q; k] = W_q q + W_k k: additive attention.
    """

    def __init__(self, num_hiddens, dropout, **kwargs):
        super().__init__(dropout, **kwargs)
        num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.W_a = gluon.nn.Dense(num_hiddens, use_bias=False, flatten=False)
        self.v_a = gluon.nn.Dense(1, use_bias=False, flatten=False)

    def score(self, queries, keys):
        pairs = (queries.shape[0], queries.shape[1], keys.shape[1])  # (batch, queries, keys)
        q = np.broadcast_to(np.expand_dims(queries, 2), pairs + queries.shape[-1:])
        k = np.broadcast_to(np.expand_dims(keys, 1), pairs + keys.shape[-1:])
        return np.squeeze(self.v_a(_tanh(self.W_a(np.concatenate([q, k], axis=-1)))), axis=-1)


def _pairwise_sum(A, B):
    """A (batch, queries, h) and B (batch, keys, h) -> (batch, queries, keys, h), A_i + B_j.

    B is broadcast over the queries. A is copied over the keys by a batched product with a
    column of ones, O(queries * keys * h) like the sum itself: its gradient, the sum over
    the keys, is then a GEMM, as fast as MXNet's reductions and for one query per call (a
    decoder step) the very float32 sums of the 0/1-matrix products used before, whose cost
    grew as queries^2 * keys and which spread a NaN in one key to every pair.
    """
    batch, n_a, h = A.shape
    ones = np.ones((batch * n_a, B.shape[1], 1), dtype=A.dtype, ctx=A.ctx)
    rows = npx.batch_dot(ones, A.reshape(batch * n_a, 1, h))  # (batch * n_a, n_b, h)
    return rows.reshape(batch, n_a, B.shape[1], h) + np.expand_dims(B, 1)


def _tanh(x):
    # mxnet's np.tanh is ~30x slower than its fused activation on large arrays (CPU)
    return npx.activation(x, act_type="tanh")


def transpose_qkv(X, num_heads):
    """Split the last axis into heads and stack the heads along the batch axis.

    X: (batch, n, num_hiddens) -> (batch * num_heads, n, num_hiddens / num_heads); row
    b * num_heads + i holds head i of sequence b, i.e. features i*p to (i+1)*p - 1 of X
    with p = num_hiddens / num_heads.
    """
    _check_3d("X", X)
    num_heads = check_heads(X, "last", num_heads)
    batch, n, num_hiddens = X.shape
    X = transpose(X.reshape(batch, n, num_heads, num_hiddens // num_heads), (0, 2, 1, 3))
    return X.reshape(batch * num_heads, n, num_hiddens // num_heads)


def transpose_output(X, num_heads):
    """Undo :func:`transpose_qkv`.

    X: (batch * num_heads, n, p) -> (batch, n, num_heads * p).
    """
    _check_3d("X", X)
    num_heads = check_heads(X, "first", num_heads)
    rows, n, p = X.shape
    X = transpose(X.reshape(rows // num_heads, num_heads, n, p), (0, 2, 1, 3))
    return X.reshape(rows // num_heads, n, num_heads * p)


class MultiHeadAttention(gluon.nn.HybridBlock):
    """Multi-head scaled dot-product attention (Vaswani et al., 2017).

    Queries, keys and values are projected by ``W_q``, ``W_k``, ``W_v`` (each
    ``Dense(num_hiddens)``), split into ``num_heads`` heads of width
    p = num_hiddens / num_heads, attended to per head with :class:`DotProductAttention`,
    concatenated and projected by ``W_o``. One wide projection split into heads is the same
    as ``num_heads`` narrow projections of width p.

    Call ``(queries (batch, queries, q), keys (batch, keys, k), values (batch, keys, v),
    valid_lens=None, cache=None)`` -> (batch, queries, num_hiddens); like every Gluon block
    it takes positional arguments only. ``valid_lens``: None, (batch,) or (batch, queries),
    as in :func:`masked_softmax`, shared by all heads; without a cache, keys and values
    beyond every valid length of their sequence are zeroed before their projections.

    ``cache``: for decoding one step at a time. When it is a dict, the projected keys and
    values of this call, (batch * num_kv_heads, keys, p) each, are appended along the key axis
    to ``cache["k"]`` and ``cache["v"]`` (created on the first call; rows laid out as by
    :func:`transpose_qkv`) and the queries attend to every cached key, so ``valid_lens``
    counts cached keys. A step then projects only its new tokens: O(steps so far) work
    instead of re-projecting the whole prefix. Keys and values with 0 positions attend to
    the cache as it is, without projecting anything (e.g. encoder outputs projected once,
    for cross-attention).

    ``num_kv_heads``: grouped-query attention (Ainslie et al., 2023): ``W_k`` and ``W_v``
    project to ``num_kv_heads`` heads of width p (None: ``num_heads``, multi-head attention;
    1: multi-query attention, Shazeer 2019), each shared by a group of num_heads /
    num_kv_heads query heads (head i uses key/value head i // group); the cache holds
    (batch * num_kv_heads, keys, p) arrays. ``window``: each query sees at most the last
    ``window`` keys its valid length allows (:class:`SlidingWindowAttention`); a cache then
    keeps the last ``window`` keys only (later calls must see every cached key, as causal
    decoding does) and counts the dropped ones in ``cache["start"]``.

    ``attention_weights``: the last call's weights per head, (batch, num_heads, queries,
    keys), before dropout.

    ``hybridize()``: calls without a cache become one cached graph (or part of a hybridized
    parent's), with the same results to float32 rounding, after the same checks of the
    inputs; ``attention_weights`` is then None. Calls with a cache stay imperative (a
    hybridized parent may run cached steps in its graph with :meth:`graph_step`), and so do
    layers with a ``window``, ``num_kv_heads < num_heads`` or rotary positions, which cannot
    be part of a hybridized parent.
    """

    def __init__(self, num_hiddens, num_heads, dropout, use_bias=False, num_kv_heads=None,
                 window=None, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        check_divisible("num_hiddens", num_hiddens, "num_heads", num_heads)
        self.num_kv_heads = num_heads if num_kv_heads is None else \
            check_int("num_kv_heads", num_kv_heads, minimum=1)
        check_divisible("num_heads", num_heads, "num_kv_heads", self.num_kv_heads)
        self.window = None if window is None else check_int("window", window, minimum=1)
        self.attention = DotProductAttention(dropout) if window is None else \
            SlidingWindowAttention(window, dropout)
        kv_width = self.num_kv_heads * (num_hiddens // num_heads)
        self.W_q = gluon.nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_k = gluon.nn.Dense(kv_width, use_bias=use_bias, flatten=False)
        self.W_v = gluon.nn.Dense(kv_width, use_bias=use_bias, flatten=False)
        self.W_o = gluon.nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)

    @property
    def attention_weights(self):
        weights = self.attention.attention_weights
        if weights is None:
            return None
        rows, n_q, n_k = weights.shape  # (batch * num_kv_heads, group * queries, keys)
        group = self.num_heads // self.num_kv_heads
        return weights.reshape(rows // self.num_kv_heads, self.num_heads, n_q // group, n_k)

    def forward(self, queries, keys, values, valid_lens=None, cache=None):
        if is_symbol(queries):  # traced into a hybridized parent, which checked its inputs
            if not self._graph_supported(cache):
                raise NotImplementedError(
                    f"{type(self).__name__} with a cache, a window, num_kv_heads < num_heads "
                    "or rotary positions has no cached-graph form: call it from a block that "
                    "is not hybridized")
            self.attention.attention_weights = None  # the graph does not return them
            return super().forward(queries, keys, values, valid_lens)
        kind = self.check_call(queries, keys, values, valid_lens, cache)
        if self._active and self._graph_supported(cache):
            self.attention.attention_weights = None
            return super().forward(queries, keys, values, full_lengths(valid_lens, keys))
        q = self._rotate(transpose_qkv(self.W_q(queries), self.num_heads), cache)
        k, v = self._keys_and_values(keys, values, valid_lens, kind, cache, q.shape)
        out = self._grouped_attention(q, k, v, valid_lens, kind)
        return self.W_o(transpose_output(out, self.num_heads))

    def check_call(self, queries, keys, values, valid_lens=None, cache=None):
        """Raise unless the call's arguments are valid (mxnet.np arrays); return what the
        check of ``valid_lens`` returned (see :func:`_masked_softmax`), None without."""
        _check_inputs(queries, keys, values, no_keys=cache is not None)
        _check_param_dtype(self, queries)
        for name, x, layer in (("queries", queries, "W_q"), ("keys", keys, "W_k"),
                               ("values", values, "W_v")):
            _check_width(name, x, layer, getattr(self, layer))
        cached = _cached_steps(cache)
        if cache is not None and keys.shape[1] == 0 and not cached:
            raise ValueError("keys must have at least one position, or the cache some keys, "
                             f"got keys {keys.shape} and an empty cache")
        return None if valid_lens is None else _check_valid_lens(
            valid_lens, (queries.shape[0], queries.shape[1], cached + keys.shape[1]))

    def _graph_supported(self, cache):
        """Whether a call with ``cache`` has a cached-graph form (:meth:`hybrid_forward`)."""
        return cache is None and self.window is None and self.num_kv_heads == self.num_heads \
            and type(self)._rotate is MultiHeadAttention._rotate

    def hybrid_forward(self, F, queries, keys, values, valid_lens=None):
        """The call without a cache in a cached graph; ``valid_lens``: None (inside a
        parent's graph), (batch,) or (batch, queries)."""
        lens = None
        if valid_lens is not None:
            lens = F.npx.reshape(valid_lens, (-2, -1)).astype("float32")  # (batch, 1 or queries)
            keys, values = _graph_without_padding(F, keys, values, lens)
            lens = F.np.repeat(lens, self.num_heads, axis=0)  # (batch * heads, 1 or queries)
        q, k, v = (_split_heads(F, graph_rows(layer, x), self.num_heads) for layer, x in
                   ((self.W_q, queries), (self.W_k, keys), (self.W_v, values)))
        out = _graph_attention(F, self.attention, q, k, v, lens,
                               self.num_hiddens // self.num_heads)
        return graph_rows(self.W_o, _merge_heads(F, out, self.num_heads))

    def graph_step(self, F, queries, cache_k, cache_v, lens=None, self_attention=True):
        """A call with a cache, in a parent's cached graph: ``queries`` (batch, steps, q);
        ``cache_k``, ``cache_v`` (batch * num_heads, keys, p) the cached projected keys and
        values; ``self_attention``: the queries' own keys and values are projected and
        appended first (else the queries attend to the cache as it is, e.g. encoder
        outputs); ``lens`` None (every key) or (batch,) valid lengths of the keys.
        Returns (output (batch, steps, num_hiddens), keys, values), the cache to keep."""
        split = lambda layer: _split_heads(F, graph_rows(layer, queries), self.num_heads)
        if self_attention:
            cache_k = F.np.concatenate([cache_k, split(self.W_k)], axis=1)
            cache_v = F.np.concatenate([cache_v, split(self.W_v)], axis=1)
        if lens is not None:  # (batch,) -> (batch * heads, 1)
            lens = F.np.repeat(F.npx.reshape(lens, (-2, -1)).astype("float32"), self.num_heads,
                               axis=0)
        out = _graph_attention(F, self.attention, split(self.W_q), cache_k, cache_v, lens,
                               self.num_hiddens // self.num_heads)
        return graph_rows(self.W_o, _merge_heads(F, out, self.num_heads)), cache_k, cache_v

    def _rotate(self, X, cache):
        """Per-head queries or keys (rows, steps, p) at their positions: unchanged here, where
        positions are added to the inputs (see RotaryMultiHeadAttention)."""
        return X

    def _keys_and_values(self, keys, values, valid_lens, kind, cache, q_shape):
        """The per-head keys and values the queries attend to, (batch * num_kv_heads, keys,
        p): this call's projected, after the cached ones if ``cache`` is a dict (of which a
        window keeps the last ``window``)."""
        kv_rows = q_shape[0] // self.num_heads * self.num_kv_heads
        if cache is not None and keys.shape[1] == 0:  # e.g. encoder outputs projected once
            return _cached(cache, q_shape, kv_rows)
        if cache is None:  # what padding holds stays out
            keys, values = _without_padding(keys, values, valid_lens, kind)
        k = self._rotate(transpose_qkv(self.W_k(keys), self.num_kv_heads), cache)
        v = transpose_qkv(self.W_v(values), self.num_kv_heads)
        if cache is None:
            return k, v
        k, v = _extend_cache(cache, k, v)
        if self.window is not None:
            _keep_last(cache, self.window)
        return k, v

    def _grouped_attention(self, q, k, v, valid_lens, kind):
        """Per-head outputs (batch * num_heads, queries, p) of q (batch * num_heads, queries,
        p) against k, v (batch * num_kv_heads, keys, p): the group of query heads sharing a
        key/value head is stacked along the queries, (batch * num_kv_heads, group * queries,
        p), a reshape that copies nothing, and attends to that head's keys."""
        group = self.num_heads // self.num_kv_heads
        rows, n, p = q.shape
        lens = None if kind in (None, "full") else valid_lens.repeat(self.num_kv_heads, axis=0)
        if group == 1:  # multi-head attention: no reshape, an operator each (bench/decoding.py)
            return self.attention._attend(q, k, v, lens, kind)
        if lens is not None and lens.ndim == 2:  # (rows, n) -> (rows, group * n)
            lens = np.tile(lens, (1, group))
        out = self.attention._attend(q.reshape(rows // group, group * n, p), k, v, lens, kind)
        return out.reshape(rows, n, p)


def _split_heads(F, X, num_heads):
    """:func:`transpose_qkv` in a cached graph: (batch, n, h * p) -> (batch * h, n, p)."""
    X = transpose(F.npx.reshape(X, (-2, -2, num_heads, -1)), (0, 2, 1, 3))
    return F.npx.reshape(X, (-5, -2, -2))


def _merge_heads(F, X, num_heads):
    """:func:`transpose_output` in a cached graph: (batch * h, n, p) -> (batch, n, h * p)."""
    X = transpose(F.npx.reshape(X, (-6, -1, num_heads, -2, -2)), (0, 2, 1, 3))
    return F.npx.reshape(X, (-2, -2, -5))


def _check_width(name, x, layer, dense):
    """Raise if ``dense`` (called ``layer``) knows its input width and ``x`` has another."""
    width = dense.weight.shape[1]  # -1 or 0 until the first call
    if width > 0 and x.shape[-1] != width:
        raise ValueError(f"{name} must have width {width}, the input width of {layer}, got "
                         f"{name} of shape {x.shape}")


def _checked_cache(cache):
    if not isinstance(cache, dict):
        raise TypeError(f"cache must be None or a dict, got {type(cache).__name__}")
    return cache


def _cached_steps(cache):
    """The number of key positions in ``cache`` (None or a dict)."""
    if cache is None or "k" not in _checked_cache(cache):
        return 0
    return cache["k"].shape[1]


def _next_position(cache):
    """The position of the next key of ``cache`` (None or a dict): the number of keys it
    has seen, those a window dropped included."""
    return 0 if cache is None else cache.get("start", 0) + _cached_steps(cache)


def _cached(cache, q_shape, kv_rows):
    """The cached keys and values, checked against the per-head queries' shape and the
    number of key/value rows (batch * num_kv_heads)."""
    k, v = cache["k"], cache["v"]
    if (k.shape[0], k.shape[2], v.shape[0]) != (kv_rows, q_shape[2], kv_rows):
        raise ValueError(f"the cache must hold keys and values for the queries {q_shape} "
                         f"(per head), got cache k {k.shape}, v {v.shape}")
    return k, v


def _keep_last(cache, window):
    """Keep the last ``window`` keys and values of ``cache``, counting those dropped in
    ``cache["start"]``."""
    drop = cache["k"].shape[1] - window
    if drop > 0:
        cache["k"], cache["v"] = cache["k"][:, drop:], cache["v"][:, drop:]
        cache["start"] = cache.get("start", 0) + drop


def _extend_cache(cache, k, v):
    """Append projected keys and values to ``cache`` (a dict) and return the whole cache."""
    if "k" in _checked_cache(cache):
        if cache["k"].shape[::2] != k.shape[::2] or cache["v"].shape[::2] != v.shape[::2]:
            raise ValueError("the cache must hold (batch * num_kv_heads, steps, num_hiddens / "
                             f"num_heads) arrays matching the new keys {k.shape}, got "
                             f"cache k {cache['k'].shape}, v {cache['v'].shape}")
        k = np.concatenate([cache["k"], k], axis=1)
        v = np.concatenate([cache["v"], v], axis=1)
    cache["k"], cache["v"] = k, v
    return k, v


def tiled_attention(queries, keys, values, valid_lens=None, causal=False, block_size=64):
    """Exact scaled dot-product attention by blocks of keys with the online softmax
    (Milakov & Gimelshein, 2018; Rabe & Staats, 2021; the inner loop of FlashAttention, Dao
    et al., 2022): (batch, queries, keys) scores are never formed, only (batch, queries,
    block_size) ones.

    queries (batch, n_q, d), keys (batch, n_k, d), values (batch, n_k, v); ``valid_lens``:
    None, (batch,) or (batch, n_q), as in :func:`masked_softmax`; ``causal``: query i also
    sees no key after position i + n_k - n_q (the queries are the last n_q positions). For
    each block, with s its scores, each query updates its running maximum m, sum l and
    output o: m' = max(m, max s), l' = l e^(m - m') + sum e^(s - m'),
    o' = o e^(m - m') + e^(s - m') V_block; the result is o / l, and 0 for a query that sees
    no key. Equals :class:`DotProductAttention` without dropout, to float32 rounding.
    Returns (batch, n_q, v).
    """
    _check_inputs(queries, keys, values)
    d = check_same_width(queries, keys)
    causal = check_bool("causal", causal)
    block_size = check_int("block_size", block_size, minimum=1)
    shape = (queries.shape[0], queries.shape[1], keys.shape[1])
    kind = None if valid_lens is None else _check_valid_lens(valid_lens, shape)
    if queries.dtype == onp.float16:  # running sums in float32
        return tiled_attention(*(x.astype("float32") for x in (queries, keys, values)),
                               valid_lens, causal, block_size).astype("float16")
    keys, values = _without_padding(keys, values, valid_lens, kind)
    hi = _key_bounds(valid_lens if kind != "full" else None, causal, shape, queries.ctx)
    m = np.full(shape[:2] + (1,), -onp.inf, dtype=queries.dtype, ctx=queries.ctx)
    l = np.zeros_like(m)
    o = np.zeros(shape[:2] + values.shape[2:], dtype=queries.dtype, ctx=queries.ctx)
    for start in range(0, shape[2], block_size):
        k, v = keys[:, start:start + block_size], values[:, start:start + block_size]
        s = npx.batch_dot(queries, k, transpose_b=True) / math.sqrt(d)
        if hi is not None:
            cols = np.arange(start, start + k.shape[1], dtype="int32", ctx=queries.ctx)
            s = masked_fill(s, cols >= hi, -onp.inf)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True)).detach()
        shift = np.where(np.isinf(m_new), np.zeros_like(m_new), m_new)  # no key seen yet
        p, decay = np.exp(s - shift), np.exp(m - shift)
        l = l * decay + p.sum(axis=-1, keepdims=True)
        o = o * decay + npx.batch_dot(p, v)
        m = m_new
    return o / np.where(l > 0, l, np.ones_like(l))


def _key_bounds(valid_lens, causal, shape, ctx):
    """(batch or 1, n_q, 1) int32: each query sees the keys below its bound; None: all."""
    batch, n_q, n_k = shape
    hi = None if valid_lens is None else \
        valid_lens.as_in_ctx(ctx).astype("int32").reshape(batch, -1, 1)
    if causal:
        last = np.arange(n_k - n_q + 1, n_k + 1, dtype="int32", ctx=ctx).reshape(1, n_q, 1)
        hi = last if hi is None else np.minimum(hi, last)
    return hi
