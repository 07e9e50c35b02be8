"""Attention scoring functions, multi-head attention and its extensions.

Every attention layer here computes scores a(q, k) for all (query, key) pairs, turns them
into weights with a softmax that ignores the keys a query may not see, and returns the
weighted sum of the values: f(q) = sum_i softmax(a(q, k_i)) v_i.

Each block is a Gluon ``HybridBlock`` whose computation is written once, in
``hybrid_forward(F, ...)``: MXNet runs it with ``F = mxnet.ndarray`` when the block is called
as it is, and traces it with ``F = mxnet.symbol`` into a cached graph after ``hybridize()``.
``forward`` only checks the arguments of a call with arrays and hands the computation one
form of lengths: float32 valid lengths, (batch,) or (batch, queries), every key for None.
"""
import math

import numpy as onp
from mxnet import gluon, nd, np, npx

from ._checks import (check_bool, check_divisible, check_float_array, check_int,
                      check_integers, check_layer_input, check_rate)
from ._ops import (Dense, Dropout, checked, checked_call, is_symbol, masked_fill, operators,
                   sequence_mask, transpose)


def masked_softmax(X, valid_lens):
    """Softmax over the last axis of ``X`` that gives keys beyond the valid length weight 0.

    X: (batch, queries, keys) float scores, keys >= 1. valid_lens: None (no masking),
    (batch,) one length per sequence shared by all its queries, or (batch, queries) one
    length per query; integers in [0, keys], stored as ints or floats, on any context. A
    valid length of 0 gives an all-zero row. Masked scores are replaced, not added to
    (d2l's -1e6 leaks weight when the valid scores are lower still), so their weight and
    gradient are exactly 0 whatever they hold, inf and NaN included. float16 scores are
    summed in float32. Returns (batch, queries, keys), X's dtype.
    """
    _check_scores("X", X)
    lens = lengths(valid_lens, X.shape, X.ctx)
    if X.size == 0:  # nothing to weigh (MXNet's masks fail on empty arrays)
        return np.zeros_like(X)
    return _masked_softmax(nd, X, lens)


def _masked_softmax(F, X, valid_lens, window=None):
    """:func:`masked_softmax` of X (rows, queries, keys) for the float32 ``valid_lens`` (rows,)
    or (rows, queries) of :func:`lengths`, in either mode of F; with a ``window``, each query
    also sees only the last ``window`` keys its length allows. MXNet's softmax with lengths
    reads no score at or beyond a row's length and writes weight 0 there, and a row of
    length 0 gets weights 0: whatever a masked score holds, its weight and gradient are
    exactly 0. float16 rows are summed in float32 (``MXNET_SAFE_ACCUMULATION``, set by
    d2lattn)."""
    rows = F.npx.reshape(X, (-5, -2))  # (rows * queries, keys)
    hi = _per_query(F, valid_lens, X)  # (rows * queries,): keys >= hi are masked
    if window is not None:
        rows = _before_window(F, rows, hi, window)
    weights = F.npx.softmax(rows, hi.astype("int32"), axis=-1, use_length=True)
    return operators(F).reshape_like(weights.as_nd_ndarray(),
                                     X.as_nd_ndarray()).as_np_ndarray()


def _per_query(F, valid_lens, scores):
    """The float32 lengths (rows,) or (rows, queries) as one length per row of the scores
    (rows, queries, keys) laid out as (rows * queries,)."""
    lens = F.npx.reshape(valid_lens, (-2, -1, 1)).as_nd_ndarray()  # (rows, 1 or queries, 1)
    first = operators(F).slice_axis(scores.as_nd_ndarray(), axis=2, begin=0, end=1)
    return operators(F).broadcast_like(lens, first).as_np_ndarray().reshape(-1)


def _before_window(F, rows, hi, window):
    """``rows`` (n, keys) with -inf at the keys before the last ``window`` below ``hi`` (n,)."""
    early = F.np.expand_dims(F.npx.arange_like(rows, axis=-1), 0) \
        < F.np.expand_dims(hi - window, -1)
    return F.np.where(early, F.np.full_like(rows, -onp.inf), rows)


def lengths(valid_lens, shape, ctx=None):
    """``valid_lens`` checked against scores of ``shape`` (batch, queries, keys), as the
    float32 lengths (batch,) or (batch, queries) that the computations take (exact below
    2^24), on ``ctx`` (None: where ``valid_lens`` are, or the current context); None gives
    ``keys`` for every sequence.

    Checked at every call (one small copy to the host): lengths changed in place between
    two calls give the new mask or an error, never the old mask."""
    batch, queries, keys = shape
    if valid_lens is None:
        return np.full((batch,), keys, dtype="float32", ctx=ctx)
    if not isinstance(valid_lens, np.ndarray):
        raise TypeError("valid_lens must be None or an mxnet.np.ndarray, got "
                        f"{type(valid_lens).__name__}")
    if valid_lens.shape not in ((batch,), (batch, queries)):
        raise ValueError(f"valid_lens must have shape (batch,) = ({batch},) or (batch, queries) "
                         f"= ({batch}, {queries}) for scores of shape {shape}, got shape "
                         f"{valid_lens.shape}")
    check_integers("valid_lens", valid_lens, 0, keys, " (the number of keys)")
    lens = valid_lens.astype("float32", copy=False)
    return lens if ctx is None else lens.as_in_ctx(ctx)


def without_padding(F, keys, values, valid_lens):
    """``keys`` and ``values`` (batch, positions, width) with each position beyond every
    valid length of its sequence (float32 ``valid_lens`` (batch,) or (batch, queries)) set
    to 0, so that whatever padding holds (inf, NaN) reaches neither the outputs nor a
    gradient. The same keys and values (self-attention) are masked once."""
    longest = F.np.max(F.npx.reshape(valid_lens, (-2, -1)), axis=1)
    keys_out = sequence_mask(keys, longest, 0)
    return keys_out, keys_out if values is keys else sequence_mask(values, longest, 0)


def attention_pooling(F, scores, values, valid_lens, dropout, window=None):
    """The pooling every attention layer ends with: weights = the masked softmax of
    ``scores`` (rows, queries, keys) (:func:`_masked_softmax`), then dropout(weights) @
    ``values`` (rows, keys, v). Returns (output (rows, queries, v), weights).

    A masked score contributes exactly 0 whatever it holds. A value is multiplied by its
    weight, so a non-finite value at a position that some query may not see (a later token
    under a causal mask) still reaches that query as 0 * NaN = NaN, as in every attention
    built on a matrix product; the callers zero the padding, the positions no query sees."""
    weights = _masked_softmax(F, scores, valid_lens, window)
    return F.npx.batch_dot(dropout(weights), values), weights


class ScoredAttention(gluon.nn.HybridBlock):
    """Attention pooling with a scoring function: the step all attention layers share.

    Subclasses define ``score(queries, keys) -> (batch, queries, keys)``. The call
    ``(queries (batch, queries, q), keys (batch, keys, k), values (batch, keys, v),
    valid_lens=None)`` returns (batch, queries, v) and keeps the weights, before dropout, in
    ``attention_weights`` (batch, queries, keys). Dropout on the weights acts in training
    mode only (under ``autograd.record()``). Keys and values beyond every valid length of
    their sequence are zeroed first: inf or NaN there reaches no output and no gradient.

    ``hybridize()`` makes the call a cached graph where the score is written for both kinds
    of input (``has_graph``: :class:`DotProductAttention`, :class:`GeneralAttention`, whose
    ``score`` takes its operators from ``operators(queries)``): the same computation,
    checked as before; ``attention_weights`` is then None (the graph does not return them:
    call the block without ``hybridize()`` to see them). A score written with ``np``
    functions, as in a subclass of one's own, stays imperative when hybridized.
    """

    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = Dropout(check_rate("dropout", dropout))
        self.attention_weights = None

    has_graph = False  # True: the score takes Symbols too (a cached graph)

    def score(self, queries, keys):
        """Scores (batch, queries, keys) of every query against every key."""
        raise NotImplementedError

    def check_widths(self, queries, keys):
        """Raise unless the score can compare ``queries`` and ``keys`` (any widths here)."""

    def forward(self, queries, keys, values, valid_lens=None):
        if not checked(queries):  # a call with arrays from outside a block: check them
            valid_lens = check_attention_call(self, queries, keys, values, valid_lens)
            self.check_widths(queries, keys)
            self.attention_weights = None
        elif is_symbol(queries) and not self.has_graph:
            raise NotImplementedError(f"{type(self).__name__} has no cached-graph form: call "
                                      "it from a block that is not hybridized")
        with checked_call():
            if not self.has_graph:
                return self.hybrid_forward(nd, queries, keys, values, valid_lens)
            return super().forward(queries, keys, values, valid_lens)

    def hybrid_forward(self, F, queries, keys, values, valid_lens):
        keys, values = without_padding(F, keys, values, valid_lens)
        return self.pool(F, queries, keys, values, valid_lens)

    def pool(self, F, queries, keys, values, valid_lens):
        """The pooling of :meth:`hybrid_forward` on keys and values whose padding is already
        zeroed (float32 ``valid_lens``); keeps the weights unless in a graph."""
        out, weights = attention_pooling(F, self.score(queries, keys), values, valid_lens,
                                         self.dropout)
        self.attention_weights = None if is_symbol(weights) else weights
        return out


def check_attention_call(block, queries, keys, values, valid_lens):
    """Raise unless the arrays of an attention call fit each other and ``block``'s
    parameters; return the lengths the computation takes (:func:`lengths`)."""
    _check_inputs(queries, keys, values)
    _check_param_dtype(block, queries)
    shape = (queries.shape[0], queries.shape[1], keys.shape[1])
    return lengths(valid_lens, shape, queries.ctx)


def _check_3d(name, x):
    """Raise unless ``x`` is a 3-D mxnet.np array of floats."""
    if check_float_array(name, x).ndim != 3:
        raise ValueError(f"{name} must be 3-D, got shape {x.shape}")


def _check_scores(name, X):
    """Raise unless ``X`` is 3-D float scores with at least one key position."""
    _check_3d(name, X)
    if X.shape[-1] == 0:
        raise ValueError(f"{name} must have at least one key position, got shape {X.shape}")


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
    ``queries``. Reads Gluon 1.x's private ``Block._children`` (its sub-layers): cheaper
    than ``collect_params()``, ~100x at every call, and safe because MXNet 1.9.1, the last
    release of Gluon 1.x, will not change."""
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
    variance d), so the softmax does not saturate for wide vectors. ``key_width``: d, when
    every call has it (multi-head attention's head width); a cached graph then divides by a
    number instead of reading d from the queries' shape (30% of a hybridized multi-head
    attention's time on the CPU, bench/mha.py).
    """

    def __init__(self, dropout, key_width=None, **kwargs):
        super().__init__(dropout, **kwargs)
        self.key_width = None if key_width is None else \
            check_int("key_width", key_width, minimum=1)

    has_graph = True

    def score(self, queries, keys):
        F = operators(queries)
        return F.npx.batch_dot(queries, keys, transpose_b=True) \
            / _sqrt_width(F, queries, self.key_width)

    def check_widths(self, queries, keys):
        width = _check_same_width(queries, keys)
        if self.key_width not in (None, width):
            raise ValueError(f"queries and keys must have width key_width = {self.key_width}, "
                             f"got queries {queries.shape}")


def _sqrt_width(F, X, width=None):
    """sqrt(d) for X (..., d) of ``width`` d (None: read from X): a float when d is known or X
    an array; in a graph otherwise (shapes are unknown until it runs) a (1,) array without
    gradient."""
    if width is not None or not is_symbol(X):
        return math.sqrt(width or X.shape[-1])
    d = F.npx.shape_array(X)[-1:].astype("float32")
    return F.BlockGrad(F.np.sqrt(d).as_nd_ndarray()).as_np_ndarray()


class AdditiveAttention(ScoredAttention):
    """Additive (Bahdanau) attention: a(q, k) = w_v^T tanh(W_q q + W_k k).

    W_q, W_k: (num_hiddens, q) and (num_hiddens, k), so queries and keys may differ in width.
    Its score is written for arrays (:func:`_pairwise_sum`): the layer stays imperative when
    hybridized.
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

    def check_widths(self, queries, keys):
        if queries.shape[-1] != self.query_size:
            raise ValueError(f"queries must have width query_size = {self.query_size}, got "
                             f"queries {queries.shape}")
        check_layer_input("keys", keys, self.W_a, "W_a")

    has_graph = True

    def score(self, queries, keys):
        return operators(queries).npx.batch_dot(queries, self.W_a(keys), transpose_b=True)


class ConcatAttention(ScoredAttention):
    """Luong's concat score: a(q, k) = v_a^T tanh(W_a [q; k]), W_a: (num_hiddens, q + k).

    Splitting W_a = [W_q, W_k] gives W_a [q; k] = W_q q + W_k k: additive attention. Its
    score is written for arrays: the layer stays imperative when hybridized.
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
    with p = num_hiddens / num_heads. :func:`split_heads` is the computation.
    """
    _check_3d("X", X)
    return split_heads(nd, X, _check_heads(X, "last", num_heads))


def transpose_output(X, num_heads):
    """Undo :func:`transpose_qkv`: X (batch * num_heads, n, p) -> (batch, n, num_heads * p).
    :func:`merge_heads` is the computation."""
    _check_3d("X", X)
    return merge_heads(nd, X, _check_heads(X, "first", num_heads))


def split_heads(F, X, num_heads):
    """:func:`transpose_qkv` without its checks, in either mode of F: (batch, n, h * p) ->
    (batch * h, n, p). The first reshape only relabels feature i * p + j as feature j of
    head i; the transpose moves the heads next to the batch; the last reshape merges them."""
    X = transpose(F.npx.reshape(X, (-2, -2, -6, num_heads, -1)), (0, 2, 1, 3))
    return F.npx.reshape(X, (-5, -2, -2))


def merge_heads(F, X, num_heads):
    """:func:`transpose_output` without its checks: (batch * h, n, p) -> (batch, n, h * p)."""
    X = transpose(F.npx.reshape(X, (-6, -1, num_heads, -2, -2)), (0, 2, 1, 3))
    return F.npx.reshape(X, (-2, -2, -5))


class KVCache:
    """The projected keys and values an attention layer has seen, for decoding a sequence
    piece by piece: each call projects its new tokens only and attends to every cached key.

    ``keys``, ``values``: (batch * num_kv_heads, steps, p) arrays laid out as by
    :func:`transpose_qkv` (``num_kv_heads``: the layer's key/value heads, p its head width),
    or None before the first call. ``window``: keep only the last ``window`` keys (a sliding
    window, whose queries never see older ones), None: all. ``offset``: the number of
    positions seen, those a window dropped included: the position of the next token.
    :meth:`append` extends it after a call.
    """

    def __init__(self, num_kv_heads, head_width, window=None, keys=None, values=None,
                 offset=0):
        self.num_kv_heads = check_int("num_kv_heads", num_kv_heads, minimum=1)
        self.head_width = check_int("head_width", head_width, minimum=1)
        self.window = None if window is None else check_int("window", window, minimum=1)
        self.keys, self.values, self.offset = keys, values, offset

    @property
    def steps(self):
        """The number of cached key positions."""
        return 0 if self.keys is None else self.keys.shape[1]

    def arrays(self, batch, like):
        """(keys, values) for ``batch`` sequences, empty (batch * num_kv_heads, 0, p) arrays
        of ``like``'s dtype and context before the first call."""
        rows = batch * self.num_kv_heads
        if self.keys is None:
            empty = np.zeros((rows, 0, self.head_width), dtype=like.dtype, ctx=like.ctx)
            return empty, empty
        if self.keys.shape[0] != rows:
            raise ValueError(f"cache holds keys for {self.keys.shape[0] // self.num_kv_heads} "
                             f"sequences (cache keys {self.keys.shape}), got a batch of {batch}")
        return self.keys, self.values

    def append(self, keys, values, new_steps):
        """Hold ``keys`` and ``values`` (the cached ones and ``new_steps`` new ones), the last
        ``window`` of them with a window; in place (``copy.copy`` keeps the old cache)."""
        drop = 0 if self.window is None else max(keys.shape[1] - self.window, 0)
        self.keys, self.values = (keys[:, drop:], values[:, drop:]) if drop else (keys, values)
        self.offset += new_steps

    def reordered(self, indices):
        """The cache of the sequences ``indices`` (an int array into the batch), each
        sequence's heads kept together (beam search)."""
        if self.keys is None:
            return self
        rows, steps, p = self.keys.shape
        pick = lambda x: x.reshape(rows // self.num_kv_heads, self.num_kv_heads, steps, p)[
            indices].reshape(-1, steps, p)
        return KVCache(self.num_kv_heads, self.head_width, self.window, pick(self.keys),
                       pick(self.values), self.offset)


def check_cache(cache, attention):
    """Raise unless ``cache`` is a :class:`KVCache` made for ``attention`` (its key/value
    heads, head width and window)."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be None or a KVCache (from init_cache()), got "
                        f"{type(cache).__name__}")
    made = (cache.num_kv_heads, cache.head_width, cache.window)
    wanted = (attention.num_kv_heads, attention.num_hiddens // attention.num_heads,
              getattr(attention, "window", None))
    if made != wanted:
        raise ValueError(f"cache was made for (num_kv_heads, head width, window) = {made}, "
                         f"this layer has {wanted}: use its init_cache()")
    return cache


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
    as in :func:`masked_softmax`, shared by all heads; keys and values beyond every valid
    length of their sequence are zeroed before their projections.

    ``cache``: a :class:`KVCache` from :meth:`init_cache`, to decode one step at a time
    (:meth:`cached`): the call projects its keys and values, appends them to the cache and
    attends to every cached key (``valid_lens`` counts them); keys with 0 positions attend to the cache as it is (encoder outputs projected
    once). ``attention_weights``: the last call's weights per head, (batch, num_heads,
    queries, keys), before dropout.

    ``hybridize()``: calls without a cache become one cached graph (or part of a
    hybridized parent's), the same computation after the same checks;
    ``attention_weights`` is then None. A hybridized parent runs :meth:`cached` in its
    graph (:class:`~d2lattn.transformer.TransformerDecoderBlock`).
    """

    def __init__(self, num_hiddens, num_heads, dropout, use_bias=False, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.num_heads = self.num_kv_heads = check_int("num_heads", num_heads, minimum=1)
        check_divisible("num_hiddens", num_hiddens, "num_heads", num_heads)
        self.attention = DotProductAttention(dropout, num_hiddens // num_heads)
        self.W_q = Dense(num_hiddens, use_bias=use_bias)
        self.W_k = Dense(num_hiddens, use_bias=use_bias)
        self.W_v = Dense(num_hiddens, use_bias=use_bias)
        self.W_o = Dense(num_hiddens, use_bias=use_bias)

    def hybrid_forward(self, F, queries, keys, values, valid_lens):
        keys, values = without_padding(F, keys, values, valid_lens)
        q = split_heads(F, self.W_q(queries), self.num_heads)
        k = split_heads(F, self.W_k(keys), self.num_heads)
        v = split_heads(F, self.W_v(values), self.num_heads)
        return self.attend(F, q, k, v, valid_lens)

    def attend(self, F, q, k, v, valid_lens):
        """Per-head queries ``q`` (batch * num_heads, queries, p) attend to per-head keys
        and values ``k``, ``v`` (batch * num_heads, keys, p), as split by :func:`split_heads`,
        whose padding is zeroed; the heads' outputs are merged and mixed by ``W_o``."""
        out = self.attention.pool(F, q, k, v, F.np.repeat(valid_lens, self.num_heads, axis=0))
        return self.W_o(merge_heads(F, out, self.num_heads))

    def cached(self, F, queries, keys, values, valid_lens, cache_k, cache_v):
        """The call with a key/value cache: this call's keys and values are projected and
        appended to the cached ``cache_k``, ``cache_v`` (batch * num_heads, steps, p), and
        the queries attend to them all. Keys and values with 0 positions leave the cache as
        it is; the queries see zeros at the keys and values beyond every valid length (as
        :func:`without_padding` makes them). Returns (output, keys, values), the keys and
        values to cache, as projected."""
        q = split_heads(F, self.W_q(queries), self.num_heads)
        k = F.np.concatenate([cache_k, split_heads(F, self.W_k(keys), self.num_heads)], axis=1)
        v = F.np.concatenate([cache_v, split_heads(F, self.W_v(values), self.num_heads)],
                             axis=1)
        seen = without_padding(F, k, v, F.np.repeat(valid_lens, self.num_heads, axis=0))
        return self.attend(F, q, *seen, valid_lens), k, v

    def init_cache(self):
        """An empty :class:`KVCache` for this layer."""
        return KVCache(self.num_heads, self.num_hiddens // self.num_heads)

    def forward(self, queries, keys, values, valid_lens=None, cache=None):
        if checked(queries) and cache is None:  # called by a block that checked its inputs
            return super().forward(queries, keys, values, valid_lens)
        if cache is None:
            valid_lens = self.check_call(queries, keys, values, valid_lens)
            with checked_call():
                return super().forward(queries, keys, values, valid_lens)
        cache_k, cache_v = check_cache(cache, self).arrays(queries.shape[0], queries)
        lens = self.check_call(queries, keys, values, valid_lens, cache.steps)
        with checked_call():
            out, k, v = self.cached(nd, queries, keys, values, lens, cache_k, cache_v)
        cache.append(k, v, keys.shape[1])
        return out

    def check_call(self, queries, keys, values, valid_lens=None, cached=None):
        """Raise unless the call's arrays fit each other and the layer, ``cached`` the
        number of cached keys (None: no cache); return the float32 lengths (:func:`lengths`)."""
        _check_inputs(queries, keys, values, no_keys=cached is not None)
        _check_param_dtype(self, queries)
        for name, x, layer in (("queries", queries, "W_q"), ("keys", keys, "W_k"),
                               ("values", values, "W_v")):
            check_layer_input(name, x, getattr(self, layer), layer)
        if cached == 0 and keys.shape[1] == 0:
            raise ValueError("keys must have at least one position, or the cache some keys, "
                             f"got keys {keys.shape} and an empty cache")
        shape = (queries.shape[0], queries.shape[1], (cached or 0) + keys.shape[1])
        self.attention.attention_weights = None  # a cached graph does not set them
        return lengths(valid_lens, shape, queries.ctx)

    @property
    def attention_weights(self):
        weights = self.attention.attention_weights
        if weights is None:
            return None
        rows, n_q, n_k = weights.shape  # (batch * num_heads, queries, keys)
        return weights.reshape(rows // self.num_heads, self.num_heads, n_q, n_k)


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
    d = _check_same_width(queries, keys)
    causal = check_bool("causal", causal)
    block_size = check_int("block_size", block_size, minimum=1)
    shape = (queries.shape[0], queries.shape[1], keys.shape[1])
    lens = lengths(valid_lens, shape, queries.ctx)
    if queries.dtype == onp.float16:  # running sums in float32
        return tiled_attention(*(x.astype("float32") for x in (queries, keys, values)),
                               valid_lens, causal, block_size).astype("float16")
    keys, values = without_padding(nd, keys, values, lens)
    hi = _key_bounds(lens, causal, shape)
    m = np.full(shape[:2] + (1,), -onp.inf, dtype=queries.dtype, ctx=queries.ctx)
    l = np.zeros_like(m)
    o = np.zeros(shape[:2] + values.shape[2:], dtype=queries.dtype, ctx=queries.ctx)
    for start in range(0, shape[2], block_size):
        k, v = keys[:, start:start + block_size], values[:, start:start + block_size]
        s = npx.batch_dot(queries, k, transpose_b=True) / math.sqrt(d)
        cols = np.arange(start, start + k.shape[1], dtype="float32", ctx=queries.ctx)
        s = masked_fill(s, cols >= hi, -onp.inf)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True)).detach()
        shift = np.where(np.isinf(m_new), np.zeros_like(m_new), m_new)  # no key seen yet
        p, decay = np.exp(s - shift), np.exp(m - shift)
        l = l * decay + p.sum(axis=-1, keepdims=True)
        o = o * decay + npx.batch_dot(p, v)
        m = m_new
    return o / np.where(l > 0, l, np.ones_like(l))


def _key_bounds(lens, causal, shape):
    """(batch, n_q, 1) float32: each query sees the keys below its bound."""
    batch, n_q, n_k = shape
    hi = lens.reshape(batch, -1, 1)
    if causal:
        last = np.arange(n_k - n_q + 1, n_k + 1, dtype="float32", ctx=lens.ctx)
        hi = np.minimum(hi, last.reshape(1, n_q, 1))
    return hi


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_heads(X, axis, num_heads):
    """``num_heads`` as an int >= 1, after checking that it divides the ``axis`` ("first" or
    "last") of ``X``, the axis that holds the heads."""
    num_heads = check_int("num_heads", num_heads, minimum=1)
    size = X.shape[0 if axis == "first" else -1]
    if size % num_heads:
        raise ValueError(f"the {axis} axis of X ({size}) must be divisible by num_heads = "
                         f"{num_heads}, got X of shape {X.shape}")
    return num_heads


def _check_same_width(queries, keys):
    """The width d of ``queries`` and ``keys`` (..., d), after checking that they share it."""
    d = queries.shape[-1]
    if keys.shape[-1] != d:
        raise ValueError("queries and keys must have the same width d, got "
                         f"queries {queries.shape}, keys {keys.shape}")
    return d
