"""Attention at scale: grouped-query heads and sliding windows of CausalSelfAttention (against
NumPy, finite differences, multi-head attention with repeated key/value heads and causal
MultiHeadAttention; a windowed cache bounded and decoding as one call), the windowed masked
softmax against an explicit mask (tiled attention: test_tiled.py)."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, nd

from d2lattn.attention import MultiHeadAttention, _masked_softmax, lengths
from d2lattn.gpt import CausalSelfAttention, GPTBlock, _per_head
from reference import (B, K, LENS, LENS_IDS, MHA_LAYERS, Q, as_np, normal, np_grouped_heads,
                       np_mask, np_softmax_where)

H, HEADS = 16, 4


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
