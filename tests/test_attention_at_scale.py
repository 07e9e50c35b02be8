"""Attention at scale: grouped-query MultiHeadAttention (against NumPy and against multi-head
attention with repeated key/value heads), sliding windows (against an explicit mask, with a
bounded cache) and tiled_attention (against DotProductAttention for every mask)."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np, npx

from d2lattn.attention import (DotProductAttention, MultiHeadAttention, SlidingWindowAttention,
                               tiled_attention, transpose_output, transpose_qkv)
from reference import MHA_LAYERS, np_grouped_heads, np_mask, np_softmax_where

B, Q, K, H, HEADS = 2, 4, 6, 16, 4
LENS = [None, [3, 0], [[1, 0, 6, 2], [6, 5, 4, 3]]]
LENS_IDS = ["none", "per-sequence", "per-query"]


def as_np(x, dtype="float32", ctx=None):
    return np.array(x, dtype=dtype, ctx=ctx or mx.cpu())


def normal(shape, seed=0, scale=1.0):
    return onp.random.default_rng(seed).normal(size=shape) * scale


def make(num_kv_heads=None, window=None, use_bias=True, ctx=None, seed=0):
    mx.random.seed(seed)
    net = MultiHeadAttention(H, HEADS, 0.0, use_bias, num_kv_heads, window)
    net.initialize(mx.init.Normal(0.5), ctx=ctx or mx.cpu())
    return net


def inputs(seed=0, nq=Q, nk=K):
    return normal((B, nq, 5), seed), normal((B, nk, 6), seed + 1), normal((B, nk, 7), seed + 2)


def call(net, q, k, v, lens=None, cache=None, ctx=None):
    lens = None if lens is None else as_np(lens, "int32")
    return net(as_np(q, ctx=ctx), as_np(k, ctx=ctx), as_np(v, ctx=ctx), lens, cache)


def causal(steps, offset=0):
    return [list(range(offset + 1, offset + steps + 1))] * B


# --- grouped-query attention --------------------------------------------------------------------

def test_num_kv_heads_equal_to_num_heads_is_todays_multihead_attention():
    q, k, v = inputs()
    old, new = make(), make(num_kv_heads=HEADS)
    shapes = {name: [p.shape for p in getattr(old, name).collect_params().values()]
              for name in MHA_LAYERS}
    call(old, q, k, v), call(new, q, k, v)
    for name in MHA_LAYERS:
        for a, b in zip(getattr(old, name).collect_params().values(),
                        getattr(new, name).collect_params().values()):
            assert a.shape == b.shape
            b.set_data(a.data())
    assert shapes["W_k"] == [(H, -1), (H,)]  # as today: num_hiddens outputs
    for lens in LENS:
        onp.testing.assert_array_equal(call(new, q, k, v, lens).asnumpy(),
                                       call(old, q, k, v, lens).asnumpy())
        onp.testing.assert_array_equal(new.attention_weights.asnumpy(),
                                       old.attention_weights.asnumpy())


@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
def test_multi_head_attention_reshapes_no_more_than_before_grouped_query(monkeypatch, lens):
    # Each reshape is an operator call, and decoding one token of a small model makes about
    # a hundred (bench/decoding.py): the grouping of query heads is skipped for groups of 1.
    calls = []
    reshape = np.ndarray.reshape
    monkeypatch.setattr(np.ndarray, "reshape",
                        lambda self, *args, **kw: calls.append(1) or reshape(self, *args, **kw))
    net = make()
    call(net, *inputs())
    calls.clear()
    call(net, *inputs(), lens)
    made = len(calls)
    calls.clear()  # what multi-head attention needs: heads split and joined, one attention
    q, k, v = (transpose_qkv(np.ones((B, n, H)), HEADS) for n in (Q, K, K))
    per_head = None if lens is None else as_np(lens, "int32").repeat(HEADS, axis=0)
    transpose_output(net.attention(q, k, v, per_head), HEADS)
    assert made == len(calls)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
def test_grouped_query_attention_matches_numpy(num_kv_heads, lens):
    q, k, v = inputs(seed=3)
    net = make(num_kv_heads)
    out = call(net, q, k, v, lens)
    p = H // HEADS
    assert (net.W_k.weight.shape, net.W_v.weight.shape) == ((num_kv_heads * p, 6),
                                                            (num_kv_heads * p, 7))
    expected, weights = np_grouped_heads(net, q, k, v, lens)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    assert net.attention_weights.shape == (B, HEADS, Q, K)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-5)


def repeated_heads(net, num_kv_heads):
    """A multi-head attention whose key/value heads are ``net``'s repeated for every query
    head of their group: the same function, each key/value head computed group times."""
    group, p = HEADS // num_kv_heads, H // HEADS
    mha = make(seed=1)
    call(mha, *inputs())
    rows = onp.repeat(onp.arange(num_kv_heads), group)[:, None] * p + onp.arange(p)
    for name in MHA_LAYERS:
        for mine, theirs in zip(getattr(mha, name).collect_params().values(),
                                getattr(net, name).collect_params().values()):
            value = theirs.data()
            if name in ("W_k", "W_v"):
                value = value[as_np(rows.reshape(-1), "int32")]
            mine.set_data(value)
    return mha


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_query_equals_multihead_with_repeated_key_value_heads_gradients_included(
        num_kv_heads):
    q, k, v = inputs(seed=4)
    net = make(num_kv_heads)
    call(net, q, k, v)
    mha = repeated_heads(net, num_kv_heads)
    lens = [[1, 3, 6, 2], [6, 5, 0, 3]]
    outputs, grads = [], []
    for model in (net, mha):
        with autograd.record():
            out = call(model, q, k, v, lens)
            (out * as_np(normal(out.shape, seed=5))).sum().backward()
        outputs.append(out.asnumpy())
        grads.append({name: getattr(model, name).weight.grad().asnumpy() for name in MHA_LAYERS})
    onp.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-5)
    group, p = HEADS // num_kv_heads, H // HEADS
    for name in ("W_q", "W_o"):
        onp.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-5)
    for name in ("W_k", "W_v"):  # a shared head's gradient: the sum over its group
        summed = grads[1][name].reshape(num_kv_heads, group, p, -1).sum(axis=1)
        onp.testing.assert_allclose(grads[0][name], summed.reshape(num_kv_heads * p, -1),
                                    rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_the_cache_holds_num_kv_heads_heads_and_decoding_equals_one_causal_call(num_kv_heads):
    X = normal((B, K, H), seed=6)
    net = make(num_kv_heads)
    expected = call(net, X, X, X, causal(K)).asnumpy()
    cache = {}
    for t in range(K):
        x = X[:, t:t + 1]
        step = call(net, x, x, x, None, cache)
        assert cache["k"].shape == cache["v"].shape == (B * num_kv_heads, t + 1, H // HEADS)
        onp.testing.assert_allclose(step.asnumpy(), expected[:, t:t + 1], rtol=1e-5, atol=1e-5)
    # Keys with no position attend to the cache as it is (e.g. cross-attention).
    q = normal((B, 2, H), seed=7)
    again = call(net, q, X[:, :0], X[:, :0], None, cache)
    onp.testing.assert_allclose(again.asnumpy(), np_grouped_heads(net, q, X, X)[0], rtol=1e-4,
                                atol=1e-4)
    with pytest.raises(ValueError, match="the cache must hold keys and values for the queries"):
        call(net, q[:1], X[:1, :0], X[:1, :0], None, cache)
    # New keys for another batch: the message names the cache's rows as they are.
    with pytest.raises(ValueError, match=r"the cache must hold \(batch \* num_kv_heads, steps, "
                                         rf"num_hiddens / num_heads\) arrays matching the new "
                                         rf"keys \({num_kv_heads}, 1, {H // HEADS}\)"):
        call(net, q[:1, :1], X[:1, :1], X[:1, :1], None, cache)


def test_grouped_query_attention_on_cpu1(cpu1):
    q, k, v = inputs(seed=8)
    net = make(2, window=3, ctx=cpu1)
    for lens_ctx in (cpu1, mx.cpu()):
        out = net(as_np(q, ctx=cpu1), as_np(k, ctx=cpu1), as_np(v, ctx=cpu1),
                  as_np(LENS[2], "int32", lens_ctx))
        assert out.ctx == cpu1 and net.attention_weights.ctx == cpu1
        onp.testing.assert_allclose(out.asnumpy(), np_grouped_heads(net, q, k, v, LENS[2], 3)[0],
                                    rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kwargs, match", [
    ({"num_kv_heads": 3}, "num_heads must be divisible by num_kv_heads, got num_heads = 4 and "
                          "num_kv_heads = 3"),
    ({"num_kv_heads": 8}, "num_heads must be divisible by num_kv_heads"),
    ({"num_kv_heads": 0}, "num_kv_heads must be an int >= 1, got 0"),
    ({"num_kv_heads": True}, "num_kv_heads must be an int"),
    ({"num_kv_heads": 2.0}, "num_kv_heads must be an int"),
    ({"window": 0}, "window must be an int >= 1, got 0"),
    ({"window": False}, "window must be an int"),
    ({"window": 2.5}, "window must be an int"),
])
def test_bad_num_kv_heads_and_windows_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(H, HEADS, 0.0, **kwargs)
    if "window" in kwargs:
        with pytest.raises(ValueError, match=match):
            SlidingWindowAttention(kwargs["window"], 0.0)


# --- sliding windows ----------------------------------------------------------------------------

@pytest.mark.parametrize("window", [1, 2, 5, 10])
@pytest.mark.parametrize("lens", LENS + [causal(Q, K - Q)], ids=LENS_IDS + ["causal"])
def test_sliding_window_attention_equals_an_explicit_mask(window, lens):
    q, k, v = normal((B, Q, 3), seed=9), normal((B, K, 3), seed=10), normal((B, K, 2), seed=11)
    net = SlidingWindowAttention(window, 0.0)
    out = net(as_np(q), as_np(k), as_np(v), None if lens is None else as_np(lens, "int32"))
    mask = np_mask(B, Q, K, lens, window)
    assert (mask.sum(-1) <= window).all()
    weights = np_softmax_where(q @ k.transpose(0, 2, 1) / onp.sqrt(3), mask)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(out.asnumpy(), weights @ v, rtol=1e-5, atol=1e-5)


def test_sliding_window_gradients_match_finite_differences():
    q, k, v = normal((1, 3, 2), seed=12), normal((1, 5, 2), seed=13), normal((1, 5, 2), seed=14)
    lens, window, G = [[3, 4, 5]], 2, normal((1, 3, 2), seed=15)

    def loss(q, k):
        w = np_softmax_where(q @ k.transpose(0, 2, 1) / onp.sqrt(2), np_mask(1, 3, 5, lens, window))
        return ((w @ v) * G).sum()

    Qm, Km = as_np(q, "float64"), as_np(k, "float64")
    Qm.attach_grad(), Km.attach_grad()
    with autograd.record():
        out = SlidingWindowAttention(window, 0.0)(Qm, Km, as_np(v, "float64"),
                                                  as_np(lens, "int32"))
        (out * as_np(G, "float64")).sum().backward()
    for x, grad, which in ((q, Qm.grad, 0), (k, Km.grad, 1)):
        numeric = onp.zeros_like(x)
        for index in onp.ndindex(x.shape):
            plus, minus = x.copy(), x.copy()
            plus[index] += 1e-6
            minus[index] -= 1e-6
            args = [(plus, k), (minus, k)] if which == 0 else [(q, plus), (q, minus)]
            numeric[index] = (loss(*args[0]) - loss(*args[1])) / 2e-6
        onp.testing.assert_allclose(grad.asnumpy(), numeric, rtol=1e-5, atol=1e-7)
    assert onp.abs(Km.grad.asnumpy()[0, :1]).max() == 0  # key 0 is in no query's window


@pytest.mark.parametrize("num_kv_heads", [None, 2])
@pytest.mark.parametrize("window", [1, 3])
def test_windowed_multihead_attention_matches_numpy(num_kv_heads, window):
    X = normal((B, K, H), seed=16)
    net = make(num_kv_heads, window)
    out = call(net, X, X, X, causal(K))
    expected, weights = np_grouped_heads(net, X, X, X, causal(K), window)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-5)
    assert ((net.attention_weights.asnumpy() > 0).sum(-1) <= window).all()


@pytest.mark.parametrize("pieces", [[1] * K, [3, 1, 2], [K]])
@pytest.mark.parametrize("window", [1, 2, 4])
def test_a_windowed_cache_keeps_at_most_window_keys_and_decodes_as_one_call(pieces, window):
    X = normal((B, K, H), seed=17)
    net = make(2, window)
    expected = call(net, X, X, X, causal(K)).asnumpy()
    cache, outputs, start = {}, [], 0
    for n in pieces:
        cached = cache["k"].shape[1] if cache else 0
        outputs.append(call(net, X[:, start:start + n], X[:, start:start + n],
                            X[:, start:start + n], causal(n, cached), cache).asnumpy())
        start += n
        assert cache["k"].shape[1] == cache["v"].shape[1] == min(start, window)
        assert cache.get("start", 0) == start - min(start, window)
    onp.testing.assert_allclose(onp.concatenate(outputs, axis=1), expected, rtol=1e-5,
                                atol=1e-5)


# --- tiled attention ----------------------------------------------------------------------------

def full_lens(lens, causal_, batch, nq, nk):
    """The (batch, nq) valid lengths DotProductAttention needs for ``lens`` and a causal mask."""
    hi = onp.full((batch, nq), nk) if lens is None else \
        onp.broadcast_to(onp.reshape(lens, (batch, -1)), (batch, nq))
    if causal_:
        hi = onp.minimum(hi, onp.clip(onp.arange(nk - nq + 1, nk + 1), 0, None))
    return hi


def reference(q, k, v, lens, causal_):
    hi = full_lens(lens, causal_, *q.shape[:2], k.shape[1])
    return DotProductAttention(0.0)(q, k, v, as_np(hi, "int32"))


@pytest.mark.parametrize("block_size", [1, 3, 4, 64])
@pytest.mark.parametrize("causal_", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
@pytest.mark.parametrize("nq", [Q, K, 1])
def test_tiled_attention_equals_dot_product_attention(block_size, causal_, lens, nq):
    if lens is not None and onp.ndim(lens) == 2 and nq != Q:
        lens = onp.resize(lens, (B, nq))
    q, k, v = (as_np(x) for x in (normal((B, nq, 3), 18), normal((B, K, 3), 19),
                                  normal((B, K, 2), 20)))
    got = tiled_attention(q, k, v, None if lens is None else as_np(lens, "int32"), causal_,
                          block_size)
    expected = reference(q, k, v, lens, causal_).asnumpy()
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    hi = full_lens(lens, causal_, B, nq, K)
    assert (got.asnumpy()[hi == 0] == 0).all()  # no key: zeros, as masked_softmax gives


def test_tiled_attention_with_more_queries_than_keys_and_causal_gives_zero_rows():
    q, k, v = (as_np(x) for x in (normal((B, 5, 3), 21), normal((B, 2, 3), 22),
                                  normal((B, 2, 2), 23)))
    got = tiled_attention(q, k, v, None, True, 1).asnumpy()
    assert (got[:, :3] == 0).all()
    onp.testing.assert_allclose(got, reference(q, k, v, None, True).asnumpy(), rtol=1e-5,
                                atol=1e-6)


def test_tiled_attention_never_forms_the_queries_by_keys_scores(monkeypatch):
    shapes, batch_dot = [], npx.batch_dot

    def recording(a, b, **kwargs):
        out = batch_dot(a, b, **kwargs)
        shapes.append(out.shape)
        return out

    monkeypatch.setattr(npx, "batch_dot", recording)
    q, k, v = (as_np(x) for x in (normal((1, 40, 8), 24), normal((1, 100, 8), 25),
                                  normal((1, 100, 5), 26)))
    got = tiled_attention(q, k, v, None, True, 16)
    monkeypatch.undo()
    assert shapes and max(shape[-1] for shape in shapes) <= 16
    assert len(shapes) == 2 * 7  # scores and values of each of the ceil(100 / 16) blocks
    onp.testing.assert_allclose(got.asnumpy(), reference(q, k, v, None, True).asnumpy(),
                                rtol=1e-5, atol=1e-6)


def test_tiled_attention_is_finite_for_scores_far_beyond_exps_range():
    # Scores ~ +-1e4: exp overflows without the running maximum.
    q, k, v = (as_np(x) for x in (normal((B, Q, 4), 27, 100), normal((B, K, 4), 28, 100),
                                  normal((B, K, 3), 29)))
    got = tiled_attention(q, k, v, as_np([[2, 6, 1, 0], [6, 6, 3, 4]], "int32"), False, 2)
    assert onp.isfinite(got.asnumpy()).all()
    expected = reference(q, k, v, [[2, 6, 1, 0], [6, 6, 3, 4]], False).asnumpy()
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-4, atol=1e-4)


def test_nan_and_inf_in_padding_reach_no_output_and_no_gradient():
    k, v = normal((B, K, 3), 30), normal((B, K, 2), 31)
    k[0, 3:], v[0, 3:], k[1, 5:], v[1, 5:] = onp.nan, onp.inf, onp.inf, onp.nan
    q, k, v = as_np(normal((B, Q, 3), 32)), as_np(k), as_np(v)
    lens = as_np([3, 5], "int32")
    for x in (q, k, v):
        x.attach_grad()
    with autograd.record():
        out = tiled_attention(q, k, v, lens, True, 2)
        out.sum().backward()
    assert onp.isfinite(out.asnumpy()).all()
    for x in (q, k, v):
        assert onp.isfinite(x.grad.asnumpy()).all()
    with autograd.record():
        expected = reference(q, k, v, [3, 5], True)
    onp.testing.assert_allclose(out.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)


def test_tiled_attention_gradients_equal_dot_product_attentions():
    G = as_np(normal((B, Q, 2), 33))
    grads = []
    for fn in (lambda q, k, v: tiled_attention(q, k, v, as_np(LENS[2], "int32"), True, 2),
               lambda q, k, v: reference(q, k, v, LENS[2], True)):
        q, k, v = (as_np(x, "float64") for x in (normal((B, Q, 3), 34), normal((B, K, 3), 35),
                                                  normal((B, K, 2), 36)))
        for x in (q, k, v):
            x.attach_grad()
        with autograd.record():
            (fn(q, k, v) * G.astype("float64")).sum().backward()
        grads.append([x.grad.asnumpy() for x in (q, k, v)])
    for mine, theirs in zip(*grads):
        onp.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)


def test_tiled_attention_on_cpu1(cpu1):
    q, k, v = (as_np(x, ctx=cpu1) for x in (normal((B, Q, 3), 37), normal((B, K, 3), 38),
                                            normal((B, K, 2), 39)))
    for lens_ctx in (cpu1, mx.cpu()):
        got = tiled_attention(q, k, v, as_np([2, 6], "int32", lens_ctx), True, 4)
        assert got.ctx == cpu1
        onp.testing.assert_allclose(got.asnumpy(), reference(q, k, v, [2, 6], True).asnumpy(),
                                    rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((), {"block_size": 0}, ValueError, "block_size must be an int >= 1, got 0"),
    ((), {"block_size": 2.0}, ValueError, "block_size must be an int"),
    ((), {"causal": 1}, TypeError, "causal must be a bool, got 1"),
    ((), {"valid_lens": as_np([1, 2, 3], "int32")}, ValueError, "valid_lens must have shape"),
    ((), {"valid_lens": as_np([1, 7], "int32")}, ValueError, r"valid_lens must hold integers in \[0, 6\]"),
    ((), {"valid_lens": [1, 2]}, TypeError, "valid_lens must be None or an mxnet.np.ndarray"),
    (("q-width",), {}, ValueError, "queries and keys must have the same width"),
    (("numpy",), {}, TypeError, "queries must be an mxnet.np.ndarray"),
    (("float16",), {}, TypeError, "float16"),
    (("2-D",), {}, ValueError, "queries must be 3-D"),
])
def test_tiled_attention_rejects_bad_input(args, kwargs, error, match):
    q, k, v = as_np(normal((B, Q, 3))), as_np(normal((B, K, 3))), as_np(normal((B, K, 2)))
    if args == ("q-width",):
        q = as_np(normal((B, Q, 4)))
    elif args == ("numpy",):
        q = normal((B, Q, 3))
    elif args == ("float16",):
        q, k, v = (x.astype("float16") for x in (q, k, v))
    elif args == ("2-D",):
        q = q[0]
    with pytest.raises(error, match=match):
        tiled_attention(q, k, v, **kwargs)
