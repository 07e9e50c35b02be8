import math
import re

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np, npx

from reference import (np_additive_scores, np_dot_scores, np_masked_softmax,
                       np_softmax_grad, value)
from d2lattn.attention import (AdditiveAttention, ConcatAttention, DotProductAttention,
                               GeneralAttention, ScoredAttention, lengths, masked_softmax)
from d2lattn.pooling import nadaraya_watson

B, Q, K, DQ, DK, V = 2, 3, 5, 4, 6, 3  # batch, queries, keys, query/key/value widths
# Valid lengths: none, one per sequence, one per query (with a 0 and a full row).
LENS = [None, [2, 5], [[1, 0, 5], [3, 4, 2]]]
LENS_IDS = ["none", "per-sequence", "per-query"]


def as_np(x, ctx=None, dtype="float32"):
    return np.array(x, dtype=dtype, ctx=ctx or mx.cpu())


def key_mask(lens, k=K):
    """(B, Q, k) bool: True where the key position is within the valid length."""
    lens = onp.full((B, Q), k) if lens is None else \
        onp.broadcast_to(onp.reshape(lens, (B, -1)), (B, Q))
    return onp.arange(k) < lens[..., None]


# --- NumPy scoring functions, from each layer's own weights -----------------------------------

def pairs(q, k):
    """Queries and keys broadcast to (batch, queries, keys, width) each."""
    shape = (q.shape[0], q.shape[1], k.shape[1])
    return (onp.broadcast_to(q[:, :, None], shape + q.shape[-1:]),
            onp.broadcast_to(k[:, None], shape + k.shape[-1:]))


def np_general_scores(net, q, k):
    return onp.einsum("bqd,de,bke->bqk", q, value(net.W_a.weight), k)  # q^T W_a k


def np_concat_scores(net, q, k):
    qk = onp.concatenate(pairs(q, k), axis=-1)
    return (onp.tanh(qk @ value(net.W_a.weight).T) @ value(net.v_a.weight).T)[..., 0]


NP_SCORES = {DotProductAttention: np_dot_scores, AdditiveAttention: np_additive_scores,
             GeneralAttention: np_general_scores, ConcatAttention: np_concat_scores}
CLASSES = list(NP_SCORES)
NEW = {DotProductAttention: DotProductAttention,
       AdditiveAttention: lambda dropout: AdditiveAttention(8, dropout),
       GeneralAttention: lambda dropout: GeneralAttention(DQ, dropout),
       ConcatAttention: lambda dropout: ConcatAttention(8, dropout)}


def make(cls, dropout=0.0, ctx=None):
    net = NEW[cls](dropout)
    net.initialize(mx.init.Normal(0.5), ctx=ctx or mx.cpu())  # scores far from uniform
    return net


def inputs(cls, seed=0):
    """float64 queries (B, Q, DQ), keys (B, K, DK or DQ), values (B, K, V)."""
    rng = onp.random.default_rng(seed)
    dk = DQ if cls is DotProductAttention else DK
    return rng.normal(size=(B, Q, DQ)), rng.normal(size=(B, K, dk)), rng.normal(size=(B, K, V))


def run(net, q, k, v, lens=None, ctx=None):
    lens = None if lens is None else as_np(lens, ctx)
    return net(as_np(q, ctx), as_np(k, ctx), as_np(v, ctx), lens)


# --- masked_softmax ---------------------------------------------------------------------------

def test_masked_softmax_by_hand():
    X = as_np([[[0, math.log(2), math.log(3), 5]] * 2])  # e^s = 1, 2, 3 (and e^5 masked)
    got = masked_softmax(X, as_np([3])).asnumpy()
    onp.testing.assert_allclose(got, [[[1 / 6, 2 / 6, 3 / 6, 0]] * 2], rtol=1e-6)
    got = masked_softmax(X, as_np([[2, 1]])).asnumpy()
    onp.testing.assert_allclose(got, [[[1 / 3, 2 / 3, 0, 0], [1, 0, 0, 0]]], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
def test_masked_softmax_matches_numpy(lens, dtype):
    X = onp.random.default_rng(1).normal(size=(B, Q, K)) * 3
    got = masked_softmax(as_np(X), None if lens is None else as_np(lens, dtype=dtype))
    assert got.shape == (B, Q, K)
    onp.testing.assert_allclose(got.asnumpy(), np_masked_softmax(X, lens), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("lens", LENS[1:], ids=LENS_IDS[1:])
def test_masked_softmax_is_exactly_zero_beyond_the_length_and_rows_sum_to_1_or_0(lens):
    X = onp.random.default_rng(2).normal(size=(B, Q, K)) * 5
    got = masked_softmax(as_np(X), as_np(lens)).asnumpy()
    mask = key_mask(lens)
    assert (got[~mask] == 0).all() and (got[mask] > 0).all()
    onp.testing.assert_allclose(got.sum(axis=-1), mask.any(axis=-1), rtol=1e-6)


def test_masked_softmax_length_zero_gives_a_zero_row_not_uniform():
    got = masked_softmax(as_np(onp.ones((2, 1, 4))), as_np([0, 4])).asnumpy()
    onp.testing.assert_array_equal(got, [[[0, 0, 0, 0]], [[0.25] * 4]])  # d2l: row 0 uniform too


def test_masked_softmax_without_lengths_is_plain_softmax():
    X = onp.random.default_rng(3).normal(size=(B, Q, K)) * 4
    e = onp.exp(X - X.max(axis=-1, keepdims=True))
    got = masked_softmax(as_np(X), None).asnumpy()
    onp.testing.assert_allclose(got, e / e.sum(axis=-1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("row, length, expected", [
    ([1e30, -1e30, 0, 1e30], 3, [1, 0, 0, 0]),
    ([-1e30, -1e30, 5, 1e30], 2, [0.5, 0.5, 0, 0]),
    ([3e38, -3e38, 0, -3e38], 4, [1, 0, 0, 0]),
    ([-3e38, -1e30, -3e38, 3e38], 3, [0, 1, 0, 0]),
    ([-1e7, -1e7, 0, 0], 2, [0.5, 0.5, 0, 0]),  # below d2l's -1e6 fill: d2l gives [0, 0, .5, .5]
    ([1e30, 1e30, 1e30, 1e30], 0, [0, 0, 0, 0]),
])
def test_masked_softmax_with_extreme_scores_is_exact(row, length, expected):
    got = masked_softmax(as_np([[row]]), as_np([length])).asnumpy()
    onp.testing.assert_array_equal(got, [[expected]])


@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
def test_masked_softmax_gradient_matches_the_softmax_jacobian(lens):
    rng = onp.random.default_rng(4)
    X, G = rng.normal(size=(B, Q, K)) * 2, rng.normal(size=(B, Q, K))
    x = as_np(X)
    x.attach_grad()
    with autograd.record():
        loss = (masked_softmax(x, None if lens is None else as_np(lens)) * as_np(G)).sum()
    loss.backward()
    grad = x.grad.asnumpy()
    onp.testing.assert_allclose(grad, np_softmax_grad(np_masked_softmax(X, lens), G), atol=1e-6)
    assert (grad[~key_mask(lens)] == 0).all()


def test_masked_softmax_gradient_with_extreme_scores_is_finite_and_zero_where_masked():
    x = as_np([[[1e30, -1e30, 0, 1e30], [-3e38, 3e38, 2, -1e30], [1e30, 1e30, -1e30, 0]]])
    x.attach_grad()
    with autograd.record():
        loss = (masked_softmax(x, as_np([[3, 1, 0]])) * as_np([1, 2, 3, 4])).sum()
    loss.backward()
    grad = x.grad.asnumpy()
    assert onp.isfinite(grad).all()
    onp.testing.assert_array_equal(grad[0, :, 3], 0)
    onp.testing.assert_array_equal(grad[0, 1:, 1:], 0)
    onp.testing.assert_array_equal(grad[0, 2], 0)


def test_masked_softmax_on_cpu1_with_lengths_from_any_context(cpu1):
    X = onp.random.default_rng(5).normal(size=(B, Q, K))
    for lens in (as_np([2, 5], cpu1), as_np([2, 5])):
        got = masked_softmax(as_np(X, cpu1), lens)
        assert got.ctx == cpu1
        onp.testing.assert_allclose(got.asnumpy(), np_masked_softmax(X, [2, 5]), rtol=1e-5)


def test_lengths_are_float32_on_the_context_asked_for(cpu1):
    for given, expected in ((None, [K, K]), (as_np([2, 5]), [2, 5]),
                            (as_np([[1, 2, 3], [0, 5, 5]], cpu1), [[1, 2, 3], [0, 5, 5]])):
        for ctx in (None, cpu1):
            got = lengths(given, (B, Q, K), ctx)
            where = ctx or (mx.current_context() if given is None else given.ctx)
            assert got.dtype == onp.float32 and got.ctx == where
            onp.testing.assert_array_equal(got.asnumpy(), expected)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4, 5)])
def test_masked_softmax_rejects_non_3d_scores(shape):
    with pytest.raises(ValueError, match=rf"X must be 3-D, got shape \({shape[0]}, "):
        masked_softmax(np.zeros(shape), None)


def test_masked_softmax_rejects_non_mxnet_scores_and_lengths():
    with pytest.raises(TypeError, match="X must be an mxnet.np.ndarray, got ndarray"):
        masked_softmax(onp.zeros((1, 2, 3)), None)
    with pytest.raises(TypeError, match="valid_lens must be None or an mxnet.np.ndarray, got list"):
        masked_softmax(np.zeros((1, 2, 3)), [2])


def test_masked_softmax_rejects_scores_without_keys():
    with pytest.raises(ValueError, match=r"X must have at least one key position, got shape "
                                         r"\(1, 2, 0\)"):
        masked_softmax(np.zeros((1, 2, 0)), None)


@pytest.mark.parametrize("shape", [(3,), (2, 4), (2, 3, 1), ()])
def test_masked_softmax_rejects_lengths_of_the_wrong_shape(shape):
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(batch,\) = \(2,\) or "
                                         r"\(batch, queries\) = \(2, 3\) for scores of shape "
                                         r"\(2, 3, 5\), got shape " + re.escape(str(shape))):
        masked_softmax(np.zeros((2, 3, 5)), np.ones(shape))


@pytest.mark.parametrize("lens, bad", [([-1, 2], r"\[-1.0\]"), ([6, 2], r"\[6.0\]"),
                                       ([1.5, 2], r"\[1.5\]"),
                                       ([float("nan"), 7], r"\[nan, 7.0\]")])
def test_masked_softmax_rejects_lengths_out_of_range(lens, bad):
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 5\] "
                                         rf"\(the number of keys\), got {bad}"):
        masked_softmax(np.zeros((2, 3, 5)), as_np(lens))


# --- the attention layers ---------------------------------------------------------------------

@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_matches_numpy(cls, lens):
    q, k, v = inputs(cls)
    net = make(cls)
    out = run(net, q, k, v, lens)
    weights = np_masked_softmax(NP_SCORES[cls](net, q, k), lens)
    assert out.shape == (B, Q, V) and net.attention_weights.shape == (B, Q, K)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-6)
    onp.testing.assert_allclose(out.asnumpy(), weights @ v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_weights_are_masked_distributions(cls):
    lens = LENS[2]
    net = make(cls)
    run(net, *inputs(cls, seed=1), lens)
    weights, mask = net.attention_weights.asnumpy(), key_mask(lens)
    assert (weights[~mask] == 0).all() and (weights[mask] > 0).all()
    onp.testing.assert_allclose(weights.sum(axis=-1), mask.any(axis=-1), rtol=1e-5)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_gradient_reaches_only_valid_values(cls):
    q, k, v = (as_np(a) for a in inputs(cls, seed=2))
    for a in (q, k, v):
        a.attach_grad()
    net = make(cls)
    with autograd.record():
        out = net(q, k, v, as_np([2, 4]))
    out.backward()  # d sum(out) / d v[b, j] = sum over queries of weight[b, :, j]
    weights = net.attention_weights.asnumpy()
    expected = onp.repeat(weights.sum(axis=1)[..., None], V, axis=-1)
    onp.testing.assert_allclose(v.grad.asnumpy(), expected, rtol=1e-5)
    assert (v.grad.asnumpy()[0, 2:] == 0).all() and (v.grad.asnumpy()[1, 4:] == 0).all()
    assert onp.isfinite(q.grad.asnumpy()).all() and onp.isfinite(k.grad.asnumpy()).all()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_dropout_acts_on_the_weights_in_training_only(cls):
    q, k, _ = inputs(cls, seed=3)
    eye = onp.broadcast_to(onp.eye(K), (B, K, K))  # identity values: output = (dropped) weights
    net = make(cls, dropout=0.5)
    out = run(net, q, k, eye)  # prediction: no dropout
    expected = np_masked_softmax(NP_SCORES[cls](net, q, k))
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-6)
    with autograd.record(train_mode=False):
        out = run(net, q, k, eye)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-6)
    mx.random.seed(0)
    with autograd.record():
        out = run(net, q, k, eye).asnumpy()
    dropped, kept = onp.isclose(out, 0), onp.isclose(out, 2 * expected, rtol=1e-4)
    assert (dropped | kept).all()  # each weight is dropped or scaled by 1 / (1 - 0.5)
    assert dropped.sum() > 5 and kept.sum() > 5
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), expected, rtol=1e-4, atol=1e-6)


def test_concat_attention_with_split_weights_is_additive_attention():
    q, k, v = inputs(ConcatAttention, seed=4)
    additive, concat = make(AdditiveAttention), make(ConcatAttention)
    expected = run(additive, q, k, v, [3, 5]).asnumpy()
    run(concat, q, k, v, [3, 5])  # initialises W_a: (8, DQ + DK)
    concat.W_a.weight.set_data(as_np(onp.concatenate([value(additive.W_q.weight),
                                                       value(additive.W_k.weight)], axis=1)))
    concat.v_a.weight.set_data(additive.w_v.weight.data())
    got = run(concat, q, k, v, [3, 5]).asnumpy()
    onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(concat.attention_weights.asnumpy(),
                                additive.attention_weights.asnumpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("d", [4, 64, 512])
def test_dot_product_scaling_keeps_the_score_variance_at_1(d):
    rng = onp.random.default_rng(d)
    q, k = rng.standard_normal((1, 300, d)), rng.standard_normal((1, 300, d))
    unscaled = q @ k.transpose(0, 2, 1)
    assert unscaled.var() == pytest.approx(d, rel=0.1)  # sum of d unit-variance products
    scaled = DotProductAttention(0).score(as_np(q), as_np(k)).asnumpy()
    assert scaled.var() == pytest.approx(1, rel=0.1)
    onp.testing.assert_allclose(scaled, unscaled / math.sqrt(d), rtol=1e-3, atol=1e-4)


def test_dot_product_attention_by_hand():
    q = as_np([[[1, 0, 0, 0]]])
    k = as_np([[[math.log(2) * 2, 0, 0, 0], [0, 1, 0, 0], [9, 9, 9, 9]]])  # scores: ln 2, 0, 4.5
    v = as_np([[[10], [40], [99]]])
    net = DotProductAttention(0.0)
    out = net(q, k, v, as_np([2]))  # q.k / sqrt(4): ln 2, 0 -> weights 2/3, 1/3
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), [[[2 / 3, 1 / 3, 0]]], rtol=1e-6)
    onp.testing.assert_allclose(out.asnumpy(), [[[20]]], rtol=1e-6)


def test_scored_attention_with_a_gaussian_score_is_nadaraya_watson():
    class GaussianAttention(ScoredAttention):
        def score(self, queries, keys):
            return -(queries - keys.transpose(0, 2, 1)) ** 2 / 2

    x, y, x_query = [0.0, 1.0, 2.5, 4.0], [1.0, 3.0, 2.0, 5.0], [0.5, 3.0]
    net = GaussianAttention(0.0)
    out = net(as_np(x_query).reshape(1, 2, 1), as_np(x).reshape(1, 4, 1), as_np(y).reshape(1, 4, 1))
    pred, weights = nadaraya_watson(x, y, x_query)
    onp.testing.assert_allclose(out.asnumpy().ravel(), pred.asnumpy(), rtol=1e-5)
    onp.testing.assert_allclose(net.attention_weights.asnumpy()[0], weights.asnumpy(), rtol=1e-5)


def test_scored_attention_needs_a_score():
    with pytest.raises(NotImplementedError):
        ScoredAttention(0.0)(np.zeros((1, 1, 2)), np.zeros((1, 3, 2)), np.zeros((1, 3, 2)))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_on_cpu1(cls, cpu1):
    q, k, v = inputs(cls, seed=5)
    net = make(cls, dropout=0.2, ctx=cpu1)
    out = run(net, q, k, v, LENS[2], ctx=cpu1)
    assert out.ctx == net.attention_weights.ctx == cpu1
    weights = np_masked_softmax(NP_SCORES[cls](net, q, k), LENS[2])
    onp.testing.assert_allclose(out.asnumpy(), weights @ v, rtol=1e-4, atol=1e-5)
    with autograd.record():
        out = run(net, q, k, v, LENS[1], ctx=cpu1)  # dropout masks too
    assert out.ctx == net.attention_weights.ctx == cpu1


# --- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("dropout", [-0.1, 1, 1.5, float("nan"), "0.1", None, True])
def test_attention_rejects_bad_dropout(cls, dropout):
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got "):
        NEW[cls](dropout)


@pytest.mark.parametrize("new, name", [(lambda n: AdditiveAttention(n, 0.1), "num_hiddens"),
                                       (lambda n: ConcatAttention(n, 0.1), "num_hiddens"),
                                       (lambda n: GeneralAttention(n, 0.1), "query_size")])
@pytest.mark.parametrize("n", [0, 2.0, "8", None])
def test_attention_rejects_bad_sizes(new, name, n):
    with pytest.raises(ValueError, match=rf"{name} must be an int >= 1, got "):
        new(n)


@pytest.mark.parametrize("arg", [0, 1, 2])
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_rejects_non_3d_inputs(cls, arg):
    args = [as_np(a) for a in inputs(cls)]
    args[arg] = args[arg][0]
    name = ["queries", "keys", "values"][arg]
    with pytest.raises(ValueError, match=rf"{name} must be 3-D, got shape \("):
        make(cls)(*args)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_rejects_mismatched_batches_and_positions(cls):
    q, k, v = (as_np(a) for a in inputs(cls))
    net = make(cls)
    with pytest.raises(ValueError, match=r"queries, keys and values must have the same batch "
                                         r"size, got queries \(1, 3, 4\), keys \(2, 5, "):
        net(q[:1], k, v)
    with pytest.raises(ValueError, match=r"same batch size, got .* values \(1, 5, 3\)"):
        net(q, k, v[:1])
    with pytest.raises(ValueError, match=r"keys and values must have the same number of positions, "
                                         r"got .* keys \(2, 5, \d\), values \(2, 4, 3\)"):
        net(q, k, v[:, :4])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_rejects_inputs_on_several_contexts(cls, cpu1):
    q, k, v = inputs(cls)
    with pytest.raises(ValueError, match=r"one context, got cpu\(0\), cpu\(1\), cpu\(0\)"):
        make(cls)(as_np(q), as_np(k, cpu1), as_np(v))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_attention_rejects_bad_valid_lens(cls):
    net = make(cls)
    with pytest.raises(ValueError, match=r"valid_lens must have shape .* got shape \(3,\)"):
        run(net, *inputs(cls), [1, 2, 3])
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 5\] .* "
                                         r"got \[6.0\]"):
        run(net, *inputs(cls), [[1, 2, 6], [0, 0, 0]])


def test_dot_product_attention_rejects_different_query_and_key_widths():
    with pytest.raises(ValueError, match=r"queries and keys must have the same width d, got "
                                         r"queries \(2, 3, 4\), keys \(2, 5, 3\)"):
        DotProductAttention(0.1)(np.zeros((2, 3, 4)), np.zeros((2, 5, 3)), np.zeros((2, 5, 1)))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("name, shapes", [  # keys of width DQ: valid for every class
    ("queries", [(0, Q, DQ), (0, K, DQ), (0, K, V)]),  # batch 0
    ("queries", [(B, 0, DQ), (B, K, DQ), (B, K, V)]),
    ("keys", [(B, Q, DQ), (B, 0, DQ), (B, 0, V)]),
    ("queries", [(B, Q, 0), (B, K, 0), (B, K, V)]),
    ("values", [(B, Q, DQ), (B, K, DQ), (B, K, 0)])])
def test_attention_rejects_empty_axes(cls, name, shapes):
    with pytest.raises(ValueError, match=f"{name} must have no empty axis"):
        make(cls)(*(np.zeros(s) for s in shapes))


def test_general_attention_rejects_queries_of_another_width():
    with pytest.raises(ValueError, match=r"queries must have width query_size = 4, got queries "
                                         r"\(2, 3, 5\)"):
        make(GeneralAttention)(np.zeros((2, 3, 5)), np.zeros((2, 5, 6)), np.zeros((2, 5, 1)))


def test_valid_lens_changed_in_place_give_the_new_mask_or_an_error():
    # A reused buffer: the same array object with new lengths (issue 15: the old mask was kept).
    attention = DotProductAttention(0)
    keys = np.array(onp.random.default_rng(0).normal(size=(2, 4, 3)), dtype="float32")
    lens = np.array([4, 3])
    attention(np.ones((2, 1, 3)), keys, keys, lens)
    lens[:] = np.array([2, 0])
    attention(np.ones((2, 1, 3)), keys, keys, lens)
    onp.testing.assert_allclose(attention.attention_weights.asnumpy(),
                                np_masked_softmax(keys.asnumpy().sum(-1)[:, None] / math.sqrt(3),
                                                  [2, 0]), rtol=1e-5, atol=1e-7)
    lens[:] = np.array([5, 3])
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 4\]"):
        attention(np.ones((2, 1, 3)), keys, keys, lens)
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 2\]"):
        attention(np.ones((2, 1, 3)), keys[:, :2], keys[:, :2], np.array([4, 3]))


def count_multiply_adds(monkeypatch, net):
    """A list that collects the multiply-adds of every matrix product (np.dot, np.matmul,
    npx.batch_dot) and of every Dense layer of ``net`` run from now on; np.einsum and
    np.tensordot fail, so that a product cannot escape the count."""
    counts = []

    def product(original, contracted):
        def counted(a, b, *args, **kwargs):
            out = original(a, b, *args, **kwargs)
            counts.append(out.size * contracted(a, *args, **kwargs))
            return out
        return counted

    def last(a, *args, **kwargs):
        return a.shape[-1]

    def batch(a, *args, transpose_a=False, **kwargs):
        return a.shape[-2] if transpose_a else a.shape[-1]

    for module, name, contracted in [(np, "dot", last), (np, "matmul", last),
                                     (npx, "batch_dot", batch)]:
        monkeypatch.setattr(module, name, product(getattr(module, name), contracted))
    for name in ("einsum", "tensordot"):
        monkeypatch.setattr(np, name, lambda *args, name=name, **kwargs: pytest.fail(
            f"np.{name} is not counted: count its multiply-adds in count_multiply_adds"))
    net.apply(lambda block: isinstance(block, gluon.nn.Dense) and block.register_forward_hook(
        lambda dense, inputs, out: counts.append(out.size * inputs[0].shape[-1])))
    return counts


@pytest.mark.parametrize("queries, keys", [(1, 96), (48, 96), (96, 48)])
def test_additive_attention_costs_a_few_multiply_adds_per_pairwise_feature(
        monkeypatch, queries, keys):
    # The features (batch, queries, keys, h) were built by products with 0/1 matrices of
    # queries * keys rows: queries * keys * (queries + keys) * h multiply-adds, 80x the time
    # of a tanh over the features at 384 x 384 (bench/additive.py times it now). The backward
    # pass costs twice the forward's products.
    batch, width, h = 2, 8, 16
    net = AdditiveAttention(h, 0)
    net.initialize()
    counts = count_multiply_adds(monkeypatch, net)
    q, k = np.ones((batch, queries, width)), np.ones((batch, keys, width))
    net(q, k, k).wait_to_read()
    projections = batch * (queries + keys) * width * h  # W_q and W_k
    pairs = batch * queries * keys
    # per pair: copying its query's features and w_v (h each), then weighing a value (width)
    assert pairs * h <= sum(counts) <= projections + pairs * (2 * h + width)
