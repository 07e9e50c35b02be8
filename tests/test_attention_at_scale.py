"""Attention at scale: grouped-query heads and sliding windows of CausalSelfAttention (against
NumPy, finite differences, multi-head attention with repeated key/value heads and causal
MultiHeadAttention; a windowed cache bounded and decoding as one call), the windowed masked
softmax against an explicit mask, and tiled_attention (against DotProductAttention for every
mask)."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, nd, np, npx

from d2lattn.attention import (DotProductAttention, MultiHeadAttention, _masked_softmax,
                               lengths, tiled_attention)
from d2lattn.gpt import CausalSelfAttention, GPTBlock, _per_head
from reference import MHA_LAYERS, np_grouped_heads, np_mask, np_softmax_where

B, Q, K, H, HEADS = 2, 4, 6, 16, 4
LENS = [None, [3, 0], [[1, 0, 6, 2], [6, 5, 4, 3]]]
LENS_IDS = ["none", "per-sequence", "per-query"]


def as_np(x, dtype="float32", ctx=None):
    return np.array(x, dtype=dtype, ctx=ctx or mx.cpu())


def normal(shape, seed=0, scale=1.0):
    return onp.random.default_rng(seed).normal(size=shape) * scale


def make(num_kv_heads=None, window=None, use_bias=True, ctx=None, seed=0, dtype="float32"):
    mx.random.seed(seed)
    net = CausalSelfAttention(H, HEADS, 0.0, use_bias, num_kv_heads, window)
    net.initialize(mx.init.Normal(0.5), ctx=ctx or mx.cpu())
    net.cast(dtype)
    return net


def causal(steps, offset=0, batch=B):
    return [list(range(offset + 1, offset + steps + 1))] * batch


# --- grouped-query attention --------------------------------------------------------------------

def copy_weights(source, target, rows=None):
    """Set ``target``'s four projections to ``source``'s; W_k and W_v rows ``rows`` only."""
    for name in MHA_LAYERS:
        for a, b in zip(getattr(source, name).collect_params().values(),
                        getattr(target, name).collect_params().values()):
            value = a.data()
            if rows is not None and name in ("W_k", "W_v"):
                value = value[as_np(rows, "int32")]
            b.set_data(value)


def test_num_kv_heads_equal_to_num_heads_is_causal_multihead_attention():
    X = normal((B, K, H), seed=1)
    new, old = make(num_kv_heads=HEADS), MultiHeadAttention(H, HEADS, 0.0, True)
    old.initialize(ctx=mx.cpu())
    new(as_np(X)), old(as_np(X), as_np(X), as_np(X))
    assert [p.shape for p in new.W_k.collect_params().values()] == [(H, H), (H,)]
    copy_weights(new, old)
    expected = old(as_np(X), as_np(X), as_np(X), as_np(causal(K), "int32"))
    got = new(as_np(X))
    onp.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), rtol=1e-6, atol=1e-6)
    onp.testing.assert_allclose(_per_head(new).asnumpy(), old.attention_weights.asnumpy(),
                                rtol=1e-6, atol=1e-7)
    # and both are NumPy's causal multi-head attention
    onp.testing.assert_allclose(got.asnumpy(), np_grouped_heads(new, X, X, X, causal(K))[0],
                                rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("window", [None, 2, 5], ids=["no-window", "window-2", "window-5"])
def test_grouped_query_attention_matches_numpy(num_kv_heads, window):
    X = normal((B, K, H), seed=3)
    net = make(num_kv_heads, window)
    out = net(as_np(X))
    p = H // HEADS
    assert (net.W_k.weight.shape, net.W_v.weight.shape) == ((num_kv_heads * p, H),
                                                            (num_kv_heads * p, H))
    expected, weights = np_grouped_heads(net, X, X, X, causal(K), window)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    assert _per_head(net).shape == (B, HEADS, K, K)
    onp.testing.assert_allclose(_per_head(net).asnumpy(), weights, rtol=1e-4, atol=1e-5)
    seen = (_per_head(net).asnumpy() > 0).sum(-1)  # keys each query sees
    onp.testing.assert_array_equal(seen, onp.minimum(onp.arange(1, K + 1), window or K)
                                   + onp.zeros((B, HEADS, 1), int))


def repeated_heads(net, num_kv_heads, window=None, rope_base=None):
    """A multi-head CausalSelfAttention whose key/value heads are ``net``'s repeated for every
    query head of their group: the same function, each key/value head computed group times."""
    group, p = HEADS // num_kv_heads, H // HEADS
    mha = CausalSelfAttention(H, HEADS, 0.0, True, None, window, rope_base)
    mha.initialize(ctx=mx.cpu())
    mha(as_np(onp.zeros((1, 1, H))))
    rows = onp.repeat(onp.arange(num_kv_heads), group)[:, None] * p + onp.arange(p)
    copy_weights(net, mha, rows.reshape(-1))
    return mha


@pytest.mark.parametrize("num_kv_heads", [1, 2])
@pytest.mark.parametrize("window, rope_base", [(None, None), (3, None), (2, 10000.0)])
def test_grouped_query_equals_multihead_with_repeated_key_value_heads_gradients_included(
        num_kv_heads, window, rope_base):
    X = normal((B, K, H), seed=4)
    net = CausalSelfAttention(H, HEADS, 0.0, True, num_kv_heads, window, rope_base)
    net.initialize(mx.init.Normal(0.5))
    net(as_np(X))
    mha = repeated_heads(net, num_kv_heads, window, rope_base)
    outputs, grads = [], []
    for model in (net, mha):
        x = as_np(X)
        x.attach_grad()
        with autograd.record():
            out = model(x)
            (out * as_np(normal(out.shape, seed=5))).sum().backward()
        outputs.append(out.asnumpy())
        grads.append({name: getattr(model, name).weight.grad().asnumpy() for name in MHA_LAYERS})
        grads[-1]["X"] = x.grad.asnumpy()
    onp.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-5)
    group, p = HEADS // num_kv_heads, H // HEADS
    for name in ("W_q", "W_o", "X"):
        onp.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-5)
    for name in ("W_k", "W_v"):  # a shared head's gradient: the sum over its group
        summed = grads[1][name].reshape(num_kv_heads, group, p, -1).sum(axis=1)
        onp.testing.assert_allclose(grads[0][name], summed.reshape(num_kv_heads * p, -1),
                                    rtol=1e-4, atol=1e-5)


def numeric_gradient(f, x, eps=1e-6):
    """Central differences of the scalar f at x (float64 NumPy), entry by entry."""
    grad = onp.zeros_like(x)
    for index in onp.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += eps
        minus[index] -= eps
        grad[index] = (f(plus) - f(minus)) / (2 * eps)
    return grad


@pytest.mark.parametrize("num_kv_heads, window", [(1, 2), (2, None), (1, None)])
def test_grouped_and_windowed_gradients_match_finite_differences(num_kv_heads, window):
    # float64 throughout; queries 0 .. 2 get no output gradient (G = 0 there).
    steps, width, heads = 5, 4, 2
    X, G = normal((1, steps, width), seed=12), normal((1, steps, width), seed=15)
    G[:, :3] = 0
    net = CausalSelfAttention(width, heads, 0.0, True, num_kv_heads, window)
    net.initialize(mx.init.Normal(0.5))
    net.cast("float64")
    x = as_np(X, "float64")
    x.attach_grad()
    with autograd.record():
        (net(x) * as_np(G, "float64")).sum().backward()
    lens = causal(steps, batch=1)

    def loss(X_):
        return (np_grouped_heads(net, X_, X_, X_, lens, window)[0] * G).sum()

    onp.testing.assert_allclose(x.grad.asnumpy(), numeric_gradient(loss, X), rtol=1e-5,
                                atol=1e-7)
    Wk = net.W_k.weight
    base = Wk.data().asnumpy()

    def loss_wk(W):
        Wk.set_data(as_np(W, "float64"))
        try:
            return loss(X)
        finally:
            Wk.set_data(as_np(base, "float64"))

    onp.testing.assert_allclose(Wk.grad().asnumpy(), numeric_gradient(loss_wk, base),
                                rtol=1e-5, atol=1e-7)
    if window == 2:  # queries 3 and 4 see positions 2 .. 4 only: X[0] and X[1] reach nothing
        assert onp.abs(x.grad.asnumpy()[0, :2]).max() == 0
        assert onp.abs(x.grad.asnumpy()[0, 2:]).min() > 0


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_the_cache_holds_num_kv_heads_heads_and_decoding_equals_one_causal_call(num_kv_heads):
    X = normal((B, K, H), seed=6)
    net = make(num_kv_heads)
    expected = net(as_np(X)).asnumpy()
    cache = net.init_cache()
    assert (cache.keys, cache.steps, cache.offset) == (None, 0, 0)
    for t in range(K):
        step = net(as_np(X[:, t:t + 1]), cache)
        assert cache.keys.shape == cache.values.shape == (B * num_kv_heads, t + 1, H // HEADS)
        assert cache.offset == t + 1
        onp.testing.assert_allclose(step.asnumpy(), expected[:, t:t + 1], rtol=1e-5, atol=1e-5)
        # the step's weights: one query per head over the t + 1 cached keys
        assert _per_head(net).shape == (B, HEADS, 1, t + 1)
    # A cache of another batch size, another layer's cache, or no KVCache are named.
    with pytest.raises(ValueError, match=r"cache holds keys for 2 sequences .*got a batch of 1"):
        net(as_np(X[:1, :1]), cache)
    with pytest.raises(ValueError, match=r"cache was made for \(num_kv_heads, head width, "
                                         r"window\)"):
        net(as_np(X[:, :1]), make(num_kv_heads, 2).init_cache())
    with pytest.raises(TypeError, match="cache must be None or a KVCache"):
        net(as_np(X[:, :1]), {})
    assert cache.offset == K  # the failed calls left it as it was


def test_grouped_query_attention_on_cpu1(cpu1):
    X = normal((B, K, H), seed=8)
    net = make(2, window=3, ctx=cpu1)
    out = net(as_np(X, ctx=cpu1))
    assert out.ctx == cpu1 and net.attention_weights.ctx == cpu1
    onp.testing.assert_allclose(out.asnumpy(), np_grouped_heads(net, X, X, X, causal(K), 3)[0],
                                rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kwargs, match", [
    ({"num_kv_heads": 3}, "num_heads must be divisible by num_kv_heads, got num_heads = 4 and "
                          "num_kv_heads = 3"),
    ({"num_kv_heads": 8}, "num_heads must be divisible by num_kv_heads"),
    ({"num_kv_heads": 0}, "num_kv_heads must be an int >= 1, got 0"),
    ({"num_kv_heads": True}, "num_kv_heads must be an int"),
    ({"num_kv_heads": 2.0}, "num_kv_heads must be an int"),
    ({"window": 0}, "window must be an int >= 1, got 0"),
    ({"window": -3}, "window must be an int >= 1, got -3"),
    ({"window": False}, "window must be an int"),
    ({"window": 2.5}, "window must be an int"),
])
def test_bad_num_kv_heads_and_windows_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CausalSelfAttention(H, HEADS, 0.0, **kwargs)
    with pytest.raises(ValueError, match=match):
        GPTBlock(H, 8, HEADS, 0.0, **kwargs)


# --- sliding windows ----------------------------------------------------------------------------

@pytest.mark.parametrize("window", [1, 2, 5, 10])
@pytest.mark.parametrize("lens", LENS + [causal(Q, K - Q)], ids=LENS_IDS + ["causal"])
def test_the_windowed_masked_softmax_equals_an_explicit_mask(window, lens):
    # The softmax every windowed attention ends with, for each kind of lengths.
    S = normal((B, Q, K), seed=9, scale=3)
    valid = lengths(None if lens is None else as_np(lens, "int32"), (B, Q, K))
    got = _masked_softmax(nd, as_np(S), valid, window).asnumpy()
    mask = np_mask(B, Q, K, lens, window)
    assert (mask.sum(-1) <= window).all()
    onp.testing.assert_allclose(got, np_softmax_where(S, mask), rtol=1e-5, atol=1e-6)
    assert (got[~mask] == 0).all()


@pytest.mark.parametrize("num_kv_heads", [None, 2])
@pytest.mark.parametrize("window", [1, 3, 10])
def test_windowed_attention_matches_numpy(num_kv_heads, window):
    X = normal((B, K, H), seed=16)
    net = make(num_kv_heads, window)
    out = net(as_np(X))
    expected, weights = np_grouped_heads(net, X, X, X, causal(K), window)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    onp.testing.assert_allclose(_per_head(net).asnumpy(), weights, rtol=1e-4, atol=1e-5)
    assert ((_per_head(net).asnumpy() > 0).sum(-1) <= window).all()


@pytest.mark.parametrize("pieces", [[1] * K, [3, 1, 2], [K]], ids=["ones", "3-1-2", "whole"])
@pytest.mark.parametrize("window", [1, 2, 4])
def test_a_windowed_cache_keeps_at_most_window_keys_and_decodes_as_one_call(pieces, window):
    X = normal((B, K, H), seed=17)
    net = make(2, window)
    expected = net(as_np(X)).asnumpy()
    cache, outputs, start = net.init_cache(), [], 0
    for n in pieces:
        outputs.append(net(as_np(X[:, start:start + n]), cache).asnumpy())
        start += n
        assert cache.keys.shape[1] == cache.values.shape[1] == min(start, window)
        assert cache.offset == start
    onp.testing.assert_allclose(onp.concatenate(outputs, axis=1), expected, rtol=1e-5,
                                atol=1e-5)
    onp.testing.assert_allclose(expected, np_grouped_heads(net, X, X, X, causal(K), window)[0],
                                rtol=1e-4, atol=1e-4)


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
