import math

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from d2lattn.attention import MultiHeadAttention
from d2lattn.positional import (LearnedPositionalEmbedding, PositionalEncoding,
                                sinusoidal_encoding)
from reference import value

CLASSES = [PositionalEncoding, LearnedPositionalEmbedding]


def as_np(x, ctx=None, dtype="float32"):
    return np.array(x, dtype=dtype, ctx=ctx or mx.cpu())


def np_sinusoids(max_len, d):
    """Entry by entry, in float64: column j uses pair i = j // 2, sine if j is even."""
    P = onp.empty((max_len, d))
    for pos, j in onp.ndindex(max_len, d):
        angle = pos / 10000 ** (2 * (j // 2) / d)
        P[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return P


def make(cls, num_hiddens=8, dropout=0.0, max_len=50, ctx=None):
    layer = cls(num_hiddens, dropout, max_len)
    layer.initialize(mx.init.Normal(1), ctx=ctx or mx.cpu())
    return layer


def table(layer):
    """The vectors a layer adds, (max_len, num_hiddens) float64 NumPy."""
    if isinstance(layer, PositionalEncoding):
        return layer.P[0].asnumpy().astype(float)
    return value(layer.embedding.weight)


# --- the sinusoidal table -----------------------------------------------------------------------

def test_sinusoids_by_hand_for_4_dimensions():
    # [sin pos, cos pos, sin(pos / 100), cos(pos / 100)]: 10000^(2/4) = 100 for columns 2, 3.
    got = sinusoidal_encoding(4, 4)
    expected = [[0, 1, 0, 1], [0.8415, 0.5403, 0.0100, 1.0000],
                [0.9093, -0.4161, 0.0200, 0.9998], [0.1411, -0.9900, 0.0300, 0.9996]]
    onp.testing.assert_allclose(got, expected, atol=5e-5)


@pytest.mark.parametrize("d", [1, 2, 5, 8, 33, 64])
def test_sinusoids_match_the_closed_form_for_even_and_odd_sizes(d):
    onp.testing.assert_allclose(sinusoidal_encoding(100, d), np_sinusoids(100, d), atol=1e-12)
    layer = make(PositionalEncoding, num_hiddens=d, max_len=100)
    assert layer.P.shape == (1, 100, d)
    onp.testing.assert_allclose(layer.P[0].asnumpy(), np_sinusoids(100, d), atol=1e-6)


def test_odd_size_ends_with_a_sine():
    P = sinusoidal_encoding(30, 5)
    onp.testing.assert_allclose(P[:, 4], onp.sin(onp.arange(30) / 10000 ** (4 / 5)), atol=1e-12)


@pytest.mark.parametrize("d", [6, 7, 32])
@pytest.mark.parametrize("delta", [1, 3, 10, 57])
def test_a_shift_by_delta_rotates_every_sin_cos_pair_by_delta_times_its_frequency(d, delta):
    P = np_sinusoids(200, d)
    for i in range(d // 2):
        w = 1 / 10000 ** (2 * i / d)
        c, s = math.cos(delta * w), math.sin(delta * w)
        R = onp.array([[c, s], [-s, c]])  # independent of the position
        pairs = sinusoidal_encoding(200, d)[:, 2 * i:2 * i + 2]  # (positions, [sin, cos])
        onp.testing.assert_allclose(pairs[:-delta] @ R.T, P[delta:, 2 * i:2 * i + 2], atol=1e-9)


def test_values_lie_in_minus_1_to_1_and_position_0_alternates_0_and_1():
    P = make(PositionalEncoding, num_hiddens=513, max_len=1000).P.asnumpy()
    assert P.min() >= -1 and P.max() <= 1
    onp.testing.assert_array_equal(P[0, 0], [0, 1] * 256 + [0])


def test_every_position_has_its_own_encoding():
    P = sinusoidal_encoding(1000, 64)
    distances = ((P[:, None] - P[None]) ** 2).sum(-1) + onp.eye(1000)
    assert distances.min() > 1e-3


def test_sinusoidal_encoding_rejects_bad_sizes():
    with pytest.raises(ValueError, match="max_len must be an int >= 1, got 0"):
        sinusoidal_encoding(0, 4)
    with pytest.raises(ValueError, match="num_hiddens must be an int >= 1, got 2.5"):
        sinusoidal_encoding(4, 2.5)


# --- both layers --------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("offset", [0, 1, 7])
def test_adds_the_vectors_of_positions_offset_to_offset_plus_n(cls, offset):
    X = onp.random.default_rng(offset).normal(size=(2, 6, 5))
    layer = make(cls, num_hiddens=5)
    got = layer(as_np(X), offset).asnumpy()
    onp.testing.assert_allclose(got, X + table(layer)[offset:offset + 6], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_decoding_step_by_step_with_offsets_equals_the_whole_sequence(cls):
    X = as_np(onp.random.default_rng(0).normal(size=(2, 6, 8)))
    layer = make(cls)
    whole = layer(X).asnumpy()
    steps = onp.concatenate([layer(X[:, t:t + 1], t).asnumpy() for t in range(6)], axis=1)
    onp.testing.assert_array_equal(steps, whole)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_on_cpu1(cls, cpu1):
    layer = make(cls, ctx=cpu1, dropout=0.1)
    X = onp.random.default_rng(1).normal(size=(2, 4, 8))
    out = layer(as_np(X, cpu1), 2)
    assert out.ctx == cpu1
    onp.testing.assert_allclose(out.asnumpy(), X + table(layer)[2:6], rtol=1e-6, atol=1e-6)
    with autograd.record():
        assert layer(as_np(X, cpu1)).ctx == cpu1


def test_the_sinusoids_are_made_once_per_context_and_dtype_and_are_no_parameter(cpu1):
    layer = make(PositionalEncoding)
    assert list(layer.collect_params().keys()) == []
    layer(np.zeros((1, 3, 8), ctx=cpu1))
    layer(np.zeros((1, 3, 8), ctx=cpu1))
    out = layer(np.zeros((1, 3, 8), dtype="float64"))
    assert out.dtype == onp.float64
    onp.testing.assert_allclose(out.asnumpy()[0], np_sinusoids(3, 8), atol=1e-12)
    assert sorted(map(str, layer._P)) == ["(cpu(0), 'float64')", "(cpu(1), 'float32')"]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_dropout_acts_in_training_only(cls):
    X = onp.random.default_rng(2).normal(size=(4, 10, 8))
    layer = make(cls, dropout=0.5)
    expected = X + table(layer)[:10]
    onp.testing.assert_allclose(layer(as_np(X)).asnumpy(), expected, rtol=1e-6, atol=1e-6)
    with autograd.record(train_mode=False):
        onp.testing.assert_allclose(layer(as_np(X)).asnumpy(), expected, rtol=1e-6, atol=1e-6)
    mx.random.seed(0)
    with autograd.record():
        got = layer(as_np(X)).asnumpy()
    dropped, kept = got == 0, onp.isclose(got, 2 * expected, rtol=1e-5)
    assert (dropped | kept).all() and 0.3 < dropped.mean() < 0.7


def test_learned_embedding_gradient_reaches_only_the_positions_used():
    layer = make(LearnedPositionalEmbedding, max_len=10)
    X = as_np(onp.ones((3, 4, 8)))
    with autograd.record():
        loss = layer(X, 2).sum()
    loss.backward()
    grad = layer.embedding.weight.grad().asnumpy()
    onp.testing.assert_array_equal(grad[2:6], 3)  # d loss / d E[p] = batch size, for each entry
    assert (grad[:2] == 0).all() and (grad[6:] == 0).all()


def test_learned_embedding_is_one_vector_per_position():
    layer = make(LearnedPositionalEmbedding, num_hiddens=16, max_len=512)
    assert [p.shape for p in layer.collect_params().values()] == [(512, 16)]


# --- what positions are for ---------------------------------------------------------------------

def self_attention(X):
    """A MultiHeadAttention with random weights, initialised by a call on X."""
    net = MultiHeadAttention(8, 2, 0.0)
    net.initialize(mx.init.Normal(0.5))
    net(X, X, X)
    return net


def test_self_attention_without_positions_is_permutation_equivariant():
    rng = onp.random.default_rng(3)
    X, perm = as_np(rng.normal(size=(2, 7, 8))), onp.array([3, 0, 6, 1, 5, 2, 4])
    net = self_attention(X)
    out, weights = net(X, X, X).asnumpy(), net.attention_weights.asnumpy()
    Xp = X[:, perm]
    permuted, permuted_weights = net(Xp, Xp, Xp).asnumpy(), net.attention_weights.asnumpy()
    onp.testing.assert_allclose(permuted, out[:, perm], rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(permuted_weights, weights[:, :, perm][..., perm], rtol=1e-5,
                                atol=1e-7)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_adding_positions_breaks_the_permutation_equivariance(cls):
    rng = onp.random.default_rng(4)
    X, perm = as_np(rng.normal(size=(2, 7, 8))), onp.array([3, 0, 6, 1, 5, 2, 4])
    net, positions = self_attention(X), make(cls)
    Y, Yp = positions(X), positions(X[:, perm])
    out, permuted = net(Y, Y, Y).asnumpy(), net(Yp, Yp, Yp).asnumpy()
    assert onp.abs(permuted - out[:, perm]).max() > 0.1


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_rejects_sequences_longer_than_max_len(cls):
    layer = make(cls, max_len=10)
    layer(np.zeros((1, 10, 8)))
    layer(np.zeros((1, 1, 8)), 9)
    with pytest.raises(ValueError, match=r"positions 0 to 10 \(offset 0, 11 steps\) do not fit "
                                         r"max_len = 10"):
        layer(np.zeros((1, 11, 8)))
    with pytest.raises(ValueError, match=r"positions 8 to 10 \(offset 8, 3 steps\) do not fit"):
        layer(np.zeros((1, 3, 8)), 8)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_rejects_bad_inputs(cls):
    layer = make(cls)
    with pytest.raises(ValueError, match=r"X must have num_hiddens = 8 features on its last axis, "
                                         r"got X of shape \(2, 3, 7\)"):
        layer(np.zeros((2, 3, 7)))
    with pytest.raises(ValueError, match=r"X must be 3-D, got shape \(3, 8\)"):
        layer(np.zeros((3, 8)))
    with pytest.raises(TypeError, match="X must be an mxnet.np.ndarray, got ndarray"):
        layer(onp.zeros((2, 3, 8)))
    for dtype in ("int32", "int64", "bool"):  # int32 token ids gave garbage (issue 15)
        with pytest.raises(TypeError, match=f"X must hold floating-point numbers, got dtype "
                                            f"{dtype}"):
            layer(np.zeros((2, 3, 8), dtype=dtype))
    for offset in (-1, 1.0, None):
        with pytest.raises(ValueError, match=rf"offset must be an int >= 0, got {offset}"):
            layer(np.zeros((2, 3, 8)), offset)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("args, message", [
    ((0, 0.1, 10), "num_hiddens must be an int >= 1, got 0"),
    (("8", 0.1, 10), "num_hiddens must be an int >= 1, got '8'"),
    ((8, 1, 10), r"dropout must be a number in \[0, 1\), got 1"),
    ((8, 0.1, 0), "max_len must be an int >= 1, got 0"),
])
def test_rejects_bad_arguments(cls, args, message):
    with pytest.raises(ValueError, match=message):
        cls(*args)
