import math
import re

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from reference import MHA_LAYERS as LAYERS, layer_params, np_multihead
from d2lattn.attention import MultiHeadAttention, transpose_output, transpose_qkv

B, Q, K, H, HEADS = 2, 3, 5, 12, 3  # batch, queries, keys, num_hiddens, heads
DQ, DK, DV = 4, 6, 7  # input widths of queries, keys and values
LENS = [None, [2, 5], [[1, 0, 5], [3, 4, 2]]]
LENS_IDS = ["none", "per-sequence", "per-query"]


def as_np(x, ctx=None, dtype="float32"):
    return np.array(x, dtype=dtype, ctx=ctx or mx.cpu())


def make(dropout=0.0, use_bias=False, ctx=None, num_hiddens=H, num_heads=HEADS):
    net = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
    net.initialize(mx.init.Normal(0.5), ctx=ctx or mx.cpu())  # weights far from uniform
    return net


def inputs(seed=0, nq=Q, nk=K):
    rng = onp.random.default_rng(seed)
    return rng.normal(size=(B, nq, DQ)), rng.normal(size=(B, nk, DK)), rng.normal(size=(B, nk, DV))


def run(net, q, k, v, lens=None, ctx=None):
    lens = None if lens is None else as_np(lens, ctx)
    return net(as_np(q, ctx), as_np(k, ctx), as_np(v, ctx), lens)


# --- transpose_qkv / transpose_output -----------------------------------------------------------

@pytest.mark.parametrize("heads", [1, 2, 3, 4, 6, 12])
def test_transpose_qkv_puts_head_i_of_sequence_b_in_row_b_times_heads_plus_i(heads):
    X = onp.random.default_rng(0).normal(size=(B, Q, H))
    got = transpose_qkv(as_np(X), heads).asnumpy()
    p = H // heads
    assert got.shape == (B * heads, Q, p)
    for b, i in onp.ndindex(B, heads):
        onp.testing.assert_array_equal(got[b * heads + i], X[:, :, i * p:(i + 1) * p][b]
                                       .astype("float32"))


@pytest.mark.parametrize("heads", [1, 3, 4])
@pytest.mark.parametrize("n", [Q, K, 1])
def test_transpose_output_undoes_transpose_qkv(heads, n):
    X = as_np(onp.random.default_rng(n).normal(size=(B, n, H)))
    heads_first = transpose_qkv(X, heads)
    onp.testing.assert_array_equal(transpose_output(heads_first, heads).asnumpy(), X.asnumpy())
    onp.testing.assert_array_equal(transpose_qkv(transpose_output(heads_first, heads), heads)
                                   .asnumpy(), heads_first.asnumpy())


def test_transposes_keep_the_context(cpu1):
    X = np.ones((B, Q, H), ctx=cpu1)
    assert transpose_qkv(X, 4).ctx == transpose_output(transpose_qkv(X, 4), 4).ctx == cpu1


def test_transposes_reject_bad_input():
    with pytest.raises(ValueError, match=r"the last axis of X \(12\) must be divisible by "
                                         r"num_heads = 5, got X of shape \(2, 3, 12\)"):
        transpose_qkv(np.zeros((2, 3, 12)), 5)
    with pytest.raises(ValueError, match=r"the first axis of X \(10\) must be divisible by "
                                         r"num_heads = 4, got X of shape \(10, 3, 2\)"):
        transpose_output(np.zeros((10, 3, 2)), 4)
    for f in (transpose_qkv, transpose_output):
        with pytest.raises(ValueError, match=r"X must be 3-D, got shape \(2, 12\)"):
            f(np.zeros((2, 12)), 2)
        with pytest.raises(ValueError, match="num_heads must be an int >= 1, got 0"):
            f(np.zeros((2, 3, 12)), 0)
        with pytest.raises(TypeError, match="X must be an mxnet.np.ndarray"):
            f(onp.zeros((2, 3, 12)), 2)


# --- MultiHeadAttention: values -----------------------------------------------------------------

@pytest.mark.parametrize("use_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
def test_multihead_attention_matches_each_head_computed_separately(lens, use_bias):
    q, k, v = inputs()
    net = make(use_bias=use_bias)
    out = run(net, q, k, v, lens)
    expected, weights = np_multihead(net, q, k, v, lens)
    assert out.shape == (B, Q, H) and net.attention_weights.shape == (B, HEADS, Q, K)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-6)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lens", LENS[1:], ids=LENS_IDS[1:])
def test_valid_lens_are_repeated_for_every_head(lens):
    net = make()
    run(net, *inputs(seed=1), lens)
    weights = net.attention_weights.asnumpy()  # (B, heads, Q, K)
    valid = onp.arange(K) < onp.broadcast_to(onp.reshape(lens, (B, -1)), (B, Q))[..., None]
    for i in range(HEADS):
        assert (weights[:, i][~valid] == 0).all() and (weights[:, i][valid] > 0).all()
        onp.testing.assert_allclose(weights[:, i].sum(axis=-1), valid.any(axis=-1), rtol=1e-5)


def test_valid_length_0_gives_zero_output_rows_and_finite_gradients():
    q, k, v = (as_np(a) for a in inputs(seed=2))
    for a in (q, k, v):
        a.attach_grad()
    net = make()
    with autograd.record():
        out = net(q, k, v, as_np([[0, 2, 0], [5, 0, 1]]))
    out.backward()
    got = out.asnumpy()
    assert (got[0, [0, 2]] == 0).all() and (got[1, 1] == 0).all()
    assert (got[0, 1] != 0).all() and (got[1, [0, 2]] != 0).all()
    assert (net.attention_weights.asnumpy()[0, :, 0] == 0).all()
    for a in (q, k, v):
        assert onp.isfinite(a.grad.asnumpy()).all()
    for layer in (net.W_q, net.W_k, net.W_v, net.W_o):
        assert onp.isfinite(layer.weight.grad().asnumpy()).all()


def test_geron_example_50_queries_80_keys_512_wide_8_heads():
    rng = onp.random.default_rng(3)
    Q_, V_ = as_np(rng.random((2, 50, 512))), as_np(rng.random((2, 80, 512)))
    net = MultiHeadAttention(512, 8, 0.1)
    net.initialize()
    out = net(Q_, V_, V_, as_np([80, 33]))
    assert out.shape == (2, 50, 512)
    weights = net.attention_weights
    assert weights.shape == (2, 8, 50, 80)
    assert (weights[1, :, :, 33:] == 0).all()
    onp.testing.assert_allclose(weights.sum(axis=-1).asnumpy(), 1, rtol=1e-5)


def test_d2l_demo_shapes_and_one_weight_distribution_per_head_and_query():
    net = MultiHeadAttention(100, 5, 0.5)
    net.initialize()
    out = net(np.ones((2, 4, 100)), np.ones((2, 6, 100)), np.ones((2, 6, 100)), as_np([3, 2]))
    assert out.shape == (2, 4, 100) and net.attention_weights.shape == (2, 5, 4, 6)
    # Equal keys: every head spreads its weight evenly over the valid keys.
    onp.testing.assert_allclose(net.attention_weights[0].asnumpy(),
                                onp.broadcast_to([1 / 3] * 3 + [0] * 3, (5, 4, 6)), rtol=1e-5)


def test_attention_weights_are_none_before_the_first_call():
    assert MultiHeadAttention(8, 2, 0).attention_weights is None


def test_dropout_acts_in_training_only():
    q, k, v = inputs(seed=4)
    net = make(dropout=0.5)
    out = run(net, q, k, v)  # prediction: no dropout
    expected, weights = np_multihead(net, q, k, v)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    with autograd.record(train_mode=False):
        out = run(net, q, k, v)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    mx.random.seed(0)
    with autograd.record():
        out = run(net, q, k, v)
    assert not onp.allclose(out.asnumpy(), expected, rtol=1e-3)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-6)


def test_gradients_of_every_projection_match_finite_differences():
    q, k, v = inputs(seed=5)
    lens = LENS[2]
    G = onp.random.default_rng(6).normal(size=(B, Q, H))
    net = make(use_bias=True)
    with autograd.record():
        loss = (run(net, q, k, v, lens) * as_np(G)).sum()
    loss.backward()
    weights, rng, eps = layer_params(net), onp.random.default_rng(7), 1e-6

    def loss_at(name, j, index, x):
        changed = {**weights, name: [w.copy() for w in weights[name]]}
        changed[name][j][index] = x
        return (np_multihead(net, q, k, v, lens, changed)[0] * G).sum()

    for name in LAYERS:
        for j, param in enumerate(getattr(net, name).collect_params().values()):
            grad = param.grad().asnumpy()
            assert onp.abs(grad).max() > 0, param.name
            for index in [tuple(rng.integers(0, s) for s in grad.shape) for _ in range(4)]:
                x0 = weights[name][j][index]
                numeric = (loss_at(name, j, index, x0 + eps)
                           - loss_at(name, j, index, x0 - eps)) / (2 * eps)
                assert grad[index] == pytest.approx(numeric, rel=1e-3, abs=1e-4), (name, index)


# --- the key/value cache ------------------------------------------------------------------------

def test_decoding_with_a_cache_equals_one_causal_call():
    X = as_np(onp.random.default_rng(8).normal(size=(B, 5, H)))
    net = make()
    expected = net(X, X, X, as_np([[1, 2, 3, 4, 5]] * B)).asnumpy()
    expected_weights = net.attention_weights.asnumpy()
    cache = net.init_cache()
    for t in range(5):
        x = X[:, t:t + 1]
        step = net(x, x, x, None, cache)
        assert cache.keys.shape == cache.values.shape == (B * HEADS, t + 1, H // HEADS)
        assert cache.offset == cache.steps == t + 1
        onp.testing.assert_allclose(step.asnumpy(), expected[:, t:t + 1], rtol=1e-5, atol=1e-5)
        onp.testing.assert_allclose(net.attention_weights.asnumpy()[..., 0, :],
                                    expected_weights[..., t, :t + 1], rtol=1e-5, atol=1e-6)


def test_the_cache_holds_the_projected_keys_and_values_laid_out_by_transpose_qkv():
    q, k, v = (as_np(a) for a in inputs(seed=9))
    net = make()
    cache = net.init_cache()
    net(q, k[:, :2], v[:, :2], None, cache)
    net(q, k[:, 2:], v[:, 2:], as_np([4, 5]), cache)
    onp.testing.assert_allclose(cache.keys.asnumpy(), transpose_qkv(net.W_k(k), HEADS).asnumpy(),
                                rtol=1e-6)
    onp.testing.assert_allclose(cache.values.asnumpy(),
                                transpose_qkv(net.W_v(v), HEADS).asnumpy(), rtol=1e-6)
    # The second call attended to all 5 cached keys, with valid lengths counting them.
    expected, weights = np_multihead(net, *inputs(seed=9), [4, 5])
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-6)


def test_keys_with_no_position_attend_to_the_cache_as_it_is():
    q, k, v = (as_np(a) for a in inputs(seed=11))
    net = make()
    cache = net.init_cache()
    first = net(q, k, v, as_np([5, 3]), cache).asnumpy()
    again = net(q, k[:, :0], v[:, :0], as_np([5, 3]), cache).asnumpy()
    assert cache.keys.shape == (B * HEADS, K, H // HEADS)
    onp.testing.assert_allclose(again, first, rtol=1e-6)
    onp.testing.assert_allclose(again, np_multihead(net, *inputs(seed=11), [5, 3])[0],
                                rtol=1e-4, atol=1e-4)


def test_the_cache_rejects_bad_input():
    q, k, v = (as_np(a) for a in inputs())
    net = make()
    with pytest.raises(TypeError, match="cache must be None or a KVCache .*, got dict"):
        net(q, k, v, None, {})
    cache = net.init_cache()
    net(q, k, v, None, cache)
    with pytest.raises(ValueError, match=r"cache holds keys for 2 sequences \(cache keys "
                                         r"\(6, 5, 4\)\), got a batch of 1"):
        net(q[:1], k[:1], v[:1], None, cache)
    with pytest.raises(ValueError, match=r"cache was made for \(num_kv_heads, head width, "
                                         r"window\) = \(2, 6, None\), this layer has "
                                         r"\(3, 4, None\)"):
        net(q, k, v, None, MultiHeadAttention(12, 2, 0).init_cache())
    with pytest.raises(ValueError, match="keys must have at least one position, or the cache"):
        net(q, k[:, :0], v[:, :0], None, net.init_cache())


# --- device, bad input --------------------------------------------------------------------------

def test_multihead_attention_on_cpu1(cpu1):
    q, k, v = inputs(seed=10)
    net = make(dropout=0.2, ctx=cpu1)
    for lens_ctx in (cpu1, mx.cpu()):
        out = net(as_np(q, cpu1), as_np(k, cpu1), as_np(v, cpu1), as_np(LENS[2], lens_ctx))
        assert out.ctx == net.attention_weights.ctx == cpu1
        onp.testing.assert_allclose(out.asnumpy(), np_multihead(net, q, k, v, LENS[2])[0],
                                    rtol=1e-4, atol=1e-4)
    cache = net.init_cache()
    with autograd.record():
        out = net(as_np(q, cpu1), as_np(k, cpu1), as_np(v, cpu1), as_np(LENS[1], cpu1), cache)
    out.backward()
    assert out.ctx == cache.keys.ctx == cache.values.ctx == cpu1
    assert net.W_q.weight.grad(cpu1).ctx == cpu1


@pytest.mark.parametrize("num_hiddens, num_heads", [(12, 5), (10, 4), (3, 6)])
def test_num_hiddens_must_be_divisible_by_num_heads(num_hiddens, num_heads):
    with pytest.raises(ValueError, match=f"num_hiddens must be divisible by num_heads, got num_"
                                         f"hiddens = {num_hiddens} and num_heads = {num_heads}"):
        MultiHeadAttention(num_hiddens, num_heads, 0.1)


@pytest.mark.parametrize("args, message", [
    ((0, 2, 0.1), "num_hiddens must be an int >= 1, got 0"),
    ((8.0, 2, 0.1), "num_hiddens must be an int >= 1, got 8.0"),
    ((8, 0, 0.1), "num_heads must be an int >= 1, got 0"),
    ((8, "2", 0.1), "num_heads must be an int >= 1, got '2'"),
    ((8, 2, 1.0), r"dropout must be a number in \[0, 1\), got 1.0"),
])
def test_multihead_attention_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(*args)


def test_multihead_attention_rejects_inputs_of_another_width_than_before():
    q, k, v = (as_np(a) for a in inputs())
    net = make()
    net(q, k, v)
    for i, (name, layer, width) in enumerate([("queries", "W_q", DQ), ("keys", "W_k", DK),
                                               ("values", "W_v", DV)]):
        args = [q, k, v]
        args[i] = np.zeros((B, K, width + 1))
        with pytest.raises(ValueError, match=rf"{name} must have width {width}, the input "
                                             rf"width of {layer}, got {name} of shape "
                                             rf"\(2, 5, {width + 1}\)"):
            net(*args)


def test_multihead_attention_rejects_mismatched_shapes():
    q, k, v = (as_np(a) for a in inputs())
    net = make()
    with pytest.raises(ValueError, match=r"keys and values must have the same number of "
                                         r"positions, got .* keys \(2, 5, 6\), values \(2, 4, 7\)"):
        net(q, k, v[:, :4])
    with pytest.raises(ValueError, match=r"same batch size, got queries \(1, 3, 4\)"):
        net(q[:1], k, v)
    with pytest.raises(ValueError, match=r"queries must be 3-D, got shape \(3, 4\)"):
        net(q[0], k, v)


def test_multihead_attention_rejects_bad_valid_lens_with_the_callers_shapes():
    net = make()
    with pytest.raises(ValueError, match=re.escape(
            "valid_lens must have shape (batch,) = (2,) or (batch, queries) = (2, 3) for scores "
            "of shape (2, 3, 5), got shape (6,)")):
        run(net, *inputs(), [1] * 6)
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 5\] .* "
                                         r"got \[6.0\]"):
        run(net, *inputs(), [[1, 2, 6], [0, 0, 0]])


def test_valid_lens_checked_again_when_the_number_of_keys_changes():
    q, k, v = (as_np(a) for a in inputs())
    net = make()
    lens = as_np([5, 4])
    net(q, k, v, lens)
    net(q, k, v, lens)
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 3\]"):
        net(q, k[:, :3], v[:, :3], lens)


def test_nan_and_inf_in_padding_reach_no_output_and_no_gradient_on_another_context():
    ctx, lens = mx.cpu(1), [[1, 0, 3], [4, 2, 2]]  # positions 3.. and 4.. are padding
    q, k, v = inputs(seed=5)
    dirty_k, dirty_v = k.copy(), v.copy()
    dirty_k[0, 3:], dirty_v[0, 3:] = onp.nan, onp.inf
    dirty_k[1, 4:], dirty_v[1, 4:] = -onp.inf, onp.nan
    net = make(use_bias=True, ctx=ctx)

    def outputs_and_gradients(keys, values):
        with autograd.record():
            out = run(net, q, keys, values, lens, ctx)
            out.sum().backward()
        assert out.ctx == ctx
        return [out.asnumpy()] + [getattr(net, name).weight.grad(ctx).asnumpy()
                                  for name in LAYERS]

    for got, want in zip(outputs_and_gradients(dirty_k, dirty_v), outputs_and_gradients(k, v)):
        assert onp.isfinite(got).all()
        onp.testing.assert_array_equal(got, want)
