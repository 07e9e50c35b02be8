"""Rotary positions: apply_rope against values recorded from Hugging Face Llama's rotary code
(tests/data/rope_reference.json), against its rotate-half definition written in float64 NumPy,
by hand, the relative-position property, gradients, float16, float64 angles at large positions,
devices, bad input; CausalSelfAttention(rope_base=...) against NumPy, with its cache, grouped-query
heads and sliding windows."""
import json
import math
from pathlib import Path

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from d2lattn.attention import KVCache
from d2lattn.gpt import CausalSelfAttention, _per_head
from d2lattn.positional import apply_rope
from reference import layer_params, np_grouped_heads, np_mask, np_rope


def as_np(x, dtype="float32", ctx=None):
    return np.array(x, dtype=dtype, ctx=ctx or mx.cpu())


def normal(shape, seed=0):
    return onp.random.default_rng(seed).normal(size=shape)


# --- apply_rope ---------------------------------------------------------------------------------

def test_width_2_is_a_rotation_of_the_plane_by_the_position():
    # d = 2: one frequency, w_0 = 1, so position p rotates (1, 0) to (cos p, sin p).
    got = apply_rope(as_np([[1, 0]] * 3), as_np([0, 1, 2], "int32")).asnumpy()
    expected = [[1, 0], [math.cos(1), math.sin(1)], [math.cos(2), math.sin(2)]]
    onp.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_width_4_pairs_feature_i_with_feature_i_plus_2_by_hand():
    # base 100, d = 4: w = (1, 100^(-1/2) = 0.1); features (0, 2) turn by p, (1, 3) by p / 10.
    got = apply_rope(as_np([[1, 2, 3, 4]]), as_np([5], "int64"), base=100.0).asnumpy()[0]
    c0, s0, c1, s1 = math.cos(5), math.sin(5), math.cos(0.5), math.sin(0.5)
    expected = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1]
    onp.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("shape", [(6, 2), (2, 3, 5, 8), (4, 7, 64)])
@pytest.mark.parametrize("base", [10000.0, 100.0, 500000.0])
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_matches_llamas_rotate_half_in_float64(shape, base, dtype):
    X = normal(shape, seed=len(shape))
    positions = onp.arange(shape[-2]) * 7 + 3  # not 0..n-1: a prefix came before
    got = apply_rope(as_np(X), as_np(positions, dtype), base)
    assert got.shape == X.shape and got.dtype == onp.float32
    onp.testing.assert_allclose(got.asnumpy(), np_rope(X, positions, base), rtol=1e-5,
                                atol=1e-5)


# Recorded by tools/record_rope_fixture.py (never run by the tests).
ROPE_REFERENCE = Path(__file__).with_name("data") / "rope_reference.json"


def rope_cases():
    with open(ROPE_REFERENCE) as f:
        cases = json.load(f)["cases"]
    return [pytest.param(case, id=f"d{case['d']}-base{case['base']:g}") for case in cases]


def np_rope_interleaved(x, positions, base=10000.0):
    """The other layout (Su et al.; GPT-J, Meta's Llama): features 2i and 2i + 1 form a plane."""
    d = x.shape[-1]
    angles = onp.outer(positions, 1.0 / base ** (onp.arange(0, d, 2) / d))
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = onp.empty_like(x)
    out[..., 0::2] = x1 * onp.cos(angles) - x2 * onp.sin(angles)
    out[..., 1::2] = x2 * onp.cos(angles) + x1 * onp.sin(angles)
    return out


@pytest.mark.parametrize("case", rope_cases())
def test_matches_values_recorded_from_hugging_face_llama(case):
    # Hugging Face transformers' Flax Llama rotary code in float32 (the file says which
    # versions; for base 500000 its table with the base substituted, the file says so too).
    X = onp.array(case["X"], dtype="float32")  # (heads, steps, d)
    expected = onp.array(case["expected"], dtype="float32")
    positions = case["positions"]
    got = apply_rope(as_np(X), as_np(positions, "int32"), case["base"])
    assert got.dtype == onp.float32 and got.shape == expected.shape
    # Both round the angles (positions up to 96) to float32: they may differ by that.
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-5)
    # The float64 NumPy transcription the other tests use agrees with the recording ...
    onp.testing.assert_allclose(np_rope(X, positions, case["base"]), expected, rtol=1e-5,
                                atol=1e-5)
    # ... and the recording tells the layouts apart.
    interleaved = np_rope_interleaved(X.astype(float), positions, case["base"])
    assert not onp.allclose(interleaved, expected, rtol=1e-2, atol=1e-2)


def test_float64_inputs_stay_float64():
    X = normal((3, 8))
    got = apply_rope(as_np(X, "float64"), as_np([0, 1, 2], "int32"))
    assert got.dtype == onp.float64
    onp.testing.assert_allclose(got.asnumpy(), np_rope(X, [0, 1, 2]), rtol=1e-6, atol=1e-6)


def test_the_dot_product_of_a_rotated_query_and_key_depends_on_m_minus_n_only():
    q, k = normal((1, 16), seed=1), normal((1, 16), seed=2)

    def score(m, n):
        qm = apply_rope(as_np(q, "float64"), as_np([m], "int32")).asnumpy()
        kn = apply_rope(as_np(k, "float64"), as_np([n], "int32")).asnumpy()
        return float((qm @ kn.T)[0, 0])

    for distance in (0, 1, 5, 37):
        scores = [score(n + distance, n) for n in (0, 3, 100, 1000)]
        onp.testing.assert_allclose(scores, scores[0], rtol=1e-9, atol=1e-9)
    # ... and it does depend on the distance: a rotation, not a constant.
    assert abs(score(5, 0) - score(6, 0)) > 1e-3
    # q_m . k_n = q . R(n - m) k: the key rotated back by m.
    onp.testing.assert_allclose(score(9, 4), (q @ np_rope(k, [4 - 9]).T)[0, 0], rtol=1e-9)


def test_rotations_keep_the_norm_of_every_vector():
    X = normal((2, 9, 10), seed=3)
    got = apply_rope(as_np(X, "float64"), as_np(onp.arange(9) * 11, "int32")).asnumpy()
    onp.testing.assert_allclose(onp.linalg.norm(got, axis=-1), onp.linalg.norm(X, axis=-1),
                                rtol=1e-10)


def test_the_gradient_is_the_inverse_rotation():
    # d sum(G * R X) / dX = R^T G, and R(p)^T = R(-p).
    X, G = as_np(normal((2, 5, 6), seed=4)), normal((2, 5, 6), seed=5)
    positions = onp.array([0, 2, 4, 9, 30])
    X.attach_grad()
    with autograd.record():
        loss = (apply_rope(X, as_np(positions, "int32")) * as_np(G)).sum()
    loss.backward()
    onp.testing.assert_allclose(X.grad.asnumpy(), np_rope(G, -positions), rtol=1e-5, atol=1e-5)


def test_float16_angles_are_not_computed_in_float16():
    # float16 holds no odd integer above 2048: angles in float16 would rotate positions 2048
    # and 2049 alike.
    X = normal((4, 8), seed=6)
    positions = onp.array([2048, 2049, 4097, 30001])
    got = apply_rope(as_np(X, "float16"), as_np(positions, "int32"))
    assert got.dtype == onp.float16
    got = got.asnumpy().astype(float)
    onp.testing.assert_allclose(got, np_rope(X, positions), rtol=0, atol=1e-2)
    same = apply_rope(as_np(X[:2] * 0 + X[:1], "float16"), as_np([2048, 2049], "int32"))
    assert not onp.allclose(same.asnumpy()[0], same.asnumpy()[1], atol=1e-2)


def test_on_cpu1_whatever_the_context_of_the_positions(cpu1):
    X = normal((2, 3, 4), seed=7)
    for positions_ctx in (cpu1, mx.cpu()):
        got = apply_rope(as_np(X, ctx=cpu1), as_np([1, 2, 3], "int32", positions_ctx))
        assert got.ctx == cpu1
        onp.testing.assert_allclose(got.asnumpy(), np_rope(X, [1, 2, 3]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("X, positions, kwargs, error, match", [
    (as_np(onp.ones((3, 5))), as_np([0, 1, 2], "int32"), {}, ValueError, "even width"),
    (as_np(onp.ones((3,))), as_np([0, 1, 2], "int32"), {}, ValueError, r"X must be \(\.\.\., steps, d\)"),
    (as_np(onp.ones((3, 4))), as_np([0, 1], "int32"), {}, ValueError,
     r"positions must have shape \(steps,\) = \(3,\).*got \(2,\)"),
    (as_np(onp.ones((3, 4))), as_np([[0, 1, 2]], "int32"), {}, ValueError, "positions must have shape"),
    (as_np(onp.ones((3, 4))), as_np([0, 1, 2]), {}, TypeError, "positions must hold integers, got dtype float32"),
    (as_np(onp.ones((3, 4))), as_np([0, 1, 1], "bool"), {}, TypeError, "positions must hold integers"),
    (as_np(onp.ones((3, 4))), onp.arange(3), {}, TypeError, "positions must be an mxnet.np.ndarray"),
    (onp.ones((3, 4)), as_np([0, 1, 2], "int32"), {}, TypeError, "X must be an mxnet.np.ndarray"),
    (as_np(onp.ones((3, 4)), "int32"), as_np([0, 1, 2], "int32"), {}, TypeError, "X must hold floating"),
    (as_np(onp.ones((0, 4))), as_np([], "int32"), {}, ValueError, "X must have no empty axis"),
    (as_np(onp.ones((3, 4))), as_np([0, 1, 2], "int32"), {"base": math.inf}, ValueError, "base must be"),
    (as_np(onp.ones((3, 4))), as_np([0, 1, 2], "int32"), {"base": math.nan}, ValueError, "base must be"),
    (as_np(onp.ones((3, 4))), as_np([0, 1, 2], "int32"), {"base": 0}, ValueError, "base must be"),
    (as_np(onp.ones((3, 4))), as_np([0, 1, 2], "int32"), {"base": True}, ValueError, "base must be"),
], ids=["odd-d", "1-D", "short-positions", "2-D-positions", "float-positions", "bool-positions",
        "numpy-positions", "numpy-X", "int-X", "empty", "inf-base", "nan-base", "zero-base",
        "bool-base"])
def test_apply_rope_rejects_bad_input(X, positions, kwargs, error, match):
    with pytest.raises(error, match=match):
        apply_rope(X, positions, **kwargs)


# --- float64 angles -----------------------------------------------------------------------------

LONG = onp.array([0, 1, 2047, 4097, 65535, 100003, 131071, 131072])  # up to 2^17


def old_float32_rope(X, positions, base=10000.0):
    """The computation apply_rope made before its angles were float64 (float32 angles, as
    for float32 X): the integer positions times float32 frequencies, rounded to float32."""
    half = X.shape[-1] // 2
    w = np.array(base ** (-onp.arange(half) / half), dtype="float32")
    angles = positions.astype("float32").reshape(-1, 1) * w
    cos, sin = np.cos(angles), np.sin(angles)
    x1, x2 = X[..., :half], X[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def long_inputs(d=8):
    # |x| <= 2.6: the bound is an error of 1e-6 relative and absolute at this scale.
    X = onp.clip(normal((3, LONG.size, d), seed=40), -2.6, 2.6).astype("float32")
    X[0, :, 1] = X[0, :, 5] = 2.6  # the largest entries at every position, in plane 1
    return X


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_float32_inputs_at_positions_up_to_131072_match_float64_numpy_within_1e_6(base):
    X = long_inputs()
    got = apply_rope(as_np(X), as_np(LONG, "int32"), base)
    assert got.dtype == onp.float32
    # The exact float32 inputs rotated in float64: what is left is float32 rounding.
    onp.testing.assert_allclose(got.asnumpy(), np_rope(X, LONG, base), rtol=1e-6, atol=1e-6)


def test_float32_angles_would_miss_that_bound_by_far():
    # The test above is meaningful: float32 angles p * w_i are rounded by up to p * w_i *
    # 2^-24 (w_1 = 0.1 for d = 8: ~4e-4 rad at p = 131072), which moves x = 2.6 by ~1e-3.
    X = long_inputs()
    old = old_float32_rope(as_np(X), as_np(LONG, "int32")).asnumpy()
    error = onp.abs(old - np_rope(X, LONG))
    assert error.max() > 1e-4  # 100 times the bound
    assert not onp.allclose(old, np_rope(X, LONG), rtol=1e-6, atol=1e-6)
    # at positions 0 and 1 the old computation was within the bound: the angles make the
    # difference, and it grows with the position
    assert error[:, :2].max() < 1e-6
    assert error[:, -1].max() > 10 * error[:, 2].max()


def test_causal_self_attention_rotates_at_large_cache_offsets_in_float64():
    # A cache that has seen 131066 positions (its keys dropped): the new steps are rotated
    # at positions 131066 .. 131071, with the float64 angles of apply_rope.
    net = make(2)
    X = normal((B, T, H), seed=41)
    net(as_np(X))
    start = 131072 - T
    cache = KVCache(2, H // HEADS, None, offset=start)
    out = net(as_np(X), cache)
    expected, weights = np_grouped_heads(net, X, X, X, CAUSAL, positions=onp.arange(start, 131072))
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    onp.testing.assert_allclose(_per_head(net).asnumpy(), weights, rtol=1e-4, atol=1e-5)
    assert cache.offset == 131072
    # the cached keys are the keys rotated at their positions
    onp.testing.assert_allclose(cache.keys.asnumpy(), np_keys(net, X, onp.arange(start, 131072)),
                                rtol=1e-4, atol=1e-4)


# --- CausalSelfAttention(rope_base=...) ---------------------------------------------------------

B, T, H, HEADS = 2, 6, 16, 4
CAUSAL = [list(range(1, T + 1))] * B


def make(num_kv_heads=None, window=None, ctx=None, rope_base=10000.0):
    net = CausalSelfAttention(H, HEADS, 0.0, True, num_kv_heads, window, rope_base)
    net.initialize(mx.init.Normal(0.5), ctx=ctx or mx.cpu())
    return net


def np_keys(net, X, positions):
    """The keys a CausalSelfAttention caches, as (batch * num_kv_heads, steps, p), float64:
    X's projections by W_k, key/value head by head, rotated at ``positions``."""
    Wk, bk = layer_params(net)["W_k"]
    p = H // HEADS
    heads = [np_rope(X @ Wk[j * p:(j + 1) * p].T + bk[j * p:(j + 1) * p], positions)
             for j in range(net.num_kv_heads)]
    return onp.stack(heads, axis=1).reshape(-1, X.shape[1], p)


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
@pytest.mark.parametrize("window", [None, 1, 3])
def test_rotary_causal_self_attention_matches_numpy(num_kv_heads, window):
    X = normal((B, T, H), seed=8)
    net = make(num_kv_heads, window)
    out = net(as_np(X))
    expected, weights = np_grouped_heads(net, X, X, X, CAUSAL, window, positions=onp.arange(T))
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    kv = num_kv_heads or HEADS
    assert net.attention_weights.shape == (B * kv, HEADS // kv * T, T)
    onp.testing.assert_allclose(_per_head(net).asnumpy(), weights, rtol=1e-4, atol=1e-5)
    # the rotation matters (each query sees more than itself): without it the values differ
    plain = np_grouped_heads(net, X, X, X, CAUSAL, window)[0]
    assert window == 1 or onp.abs(plain - expected).max() > 1e-2


@pytest.mark.parametrize("pieces", [[1] * T, [3, 1, 2], [2, 4], [T]],
                         ids=["ones", "3-1-2", "2-4", "whole"])
@pytest.mark.parametrize("num_kv_heads, window", [(None, None), (2, None), (1, 2), (2, 3),
                                                  (None, 1)])
def test_cached_pieces_at_their_positions_equal_one_causal_call(pieces, num_kv_heads, window):
    X = normal((B, T, H), seed=9)
    net = make(num_kv_heads, window)
    expected = net(as_np(X)).asnumpy()
    cache, outputs, start = net.init_cache(), [], 0
    for n in pieces:
        outputs.append(net(as_np(X[:, start:start + n]), cache).asnumpy())
        start += n
        assert cache.offset == start
    onp.testing.assert_allclose(onp.concatenate(outputs, axis=1), expected, rtol=1e-5,
                                atol=1e-5)
    onp.testing.assert_allclose(expected, np_grouped_heads(
        net, X, X, X, CAUSAL, window, positions=onp.arange(T))[0], rtol=1e-4, atol=1e-4)
    # The cache holds the rotated keys of the last `kept` positions.
    kept = T if window is None else window
    kv = HEADS if num_kv_heads is None else num_kv_heads
    p = H // HEADS
    assert cache.keys.shape == cache.values.shape == (B * kv, kept, p)
    onp.testing.assert_allclose(cache.keys.asnumpy(),
                                np_keys(net, X, onp.arange(T))[:, T - kept:], rtol=1e-4,
                                atol=1e-4)


def test_rotary_causal_self_attention_on_cpu1(cpu1):
    X = normal((B, T, H), seed=10)
    net = make(2, 3, ctx=cpu1)
    out = net(as_np(X, ctx=cpu1))
    assert out.ctx == cpu1 and net.attention_weights.ctx == cpu1
    expected = np_grouped_heads(net, X, X, X, CAUSAL, 3, positions=onp.arange(T))[0]
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    cache, steps = net.init_cache(), []
    for t in range(T):
        steps.append(net(as_np(X[:, t:t + 1], ctx=cpu1), cache).asnumpy())
    assert cache.keys.ctx == cpu1
    onp.testing.assert_allclose(onp.concatenate(steps, axis=1), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("args, kwargs, match", [
    ((12, 4), {"rope_base": 10000.0}, r"num_hiddens / num_heads \(the head width\) must be even "
                                      r"for rotary positions, got 12 / 4"),
    ((6, 2), {"rope_base": 10000.0}, "head width.* must be even"),
    ((16, 4), {"rope_base": -1.0}, "rope_base must be a positive finite number, got -1.0"),
    ((16, 4), {"rope_base": 0}, "rope_base must be a positive finite number"),
    ((16, 4), {"rope_base": math.inf}, "rope_base must be a positive finite number"),
    ((16, 4), {"rope_base": math.nan}, "rope_base must be a positive finite number"),
    ((16, 4), {"rope_base": True}, "rope_base must be a positive finite number"),
    ((16, 4), {"rope_base": "10000"}, "rope_base must be a positive finite number"),
], ids=["odd-head-width", "odd-head-width-3", "negative-base", "zero-base", "inf-base",
        "nan-base", "bool-base", "str-base"])
def test_odd_head_widths_and_bad_rope_bases_are_named(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        CausalSelfAttention(*args, 0.0, **kwargs)
    CausalSelfAttention(*args, 0.0)  # the same sizes without rotary positions are fine
    assert np_mask(1, 1, 2).all()  # the helper itself: no mask without lengths
