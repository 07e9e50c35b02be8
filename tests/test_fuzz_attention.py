"""Seeded property-based fuzz of the attention API against float64 NumPy references (issue 15).

Every input is either handled correctly (values and gradients match tests/reference.py) or
refused with a ValueError/TypeError naming the argument. Hypothesis runs derandomized with a
bounded number of examples, so a run is deterministic. Calls that used to kill the process
(zero-size inputs, float16 lengths beyond float16's range) run first in a child process: a
regression is then reported as a failure and the in-process tests of those cases are skipped,
instead of the whole test run dying.
"""
import numpy as onp
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st
from mxnet import autograd, np

from child_probe import failing_cases
from reference import (np_additive_scores, np_dot_scores, np_masked_softmax, np_multihead,
                       np_softmax_grad)
from d2lattn.attention import (AdditiveAttention, DotProductAttention, MultiHeadAttention,
                               masked_softmax)
from d2lattn.bert import BERTEncoder
from d2lattn.positional import PositionalEncoding
from d2lattn.seq2seq import Seq2SeqEncoder
from d2lattn.train import MaskedSoftmaxCELoss
from d2lattn.transformer import TransformerEncoder

FUZZ = settings(derandomize=True, max_examples=50, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
FUZZ_MANY = settings(FUZZ, max_examples=150)  # for the cheap masked_softmax cases
FUZZ_LAYER = settings(FUZZ, max_examples=35)  # per attention layer
TOL = {"float16": dict(rtol=0, atol=2e-3), "float32": dict(rtol=1e-5, atol=1e-6),
       "float64": dict(rtol=1e-10, atol=1e-12)}
JUNK = [None, onp.inf, -onp.inf, onp.nan, 1e30]  # written over every masked score


# --- strategies ---------------------------------------------------------------------------------

@st.composite
def lengths(draw, rng, batch, queries, keys):
    """None, (batch,) or (batch, queries) lengths in [0, keys], 0 and keys often, any dtype."""
    kind = draw(st.sampled_from(["per-sequence", "per-query", "none"]))
    if kind == "none":
        return None
    shape = (batch,) if kind == "per-sequence" else (batch, queries)
    lens = rng.choice([0, keys, *range(keys + 1)], size=shape)
    return lens.astype(draw(st.sampled_from(["int32", "int64", "float32", "float64"])))


@st.composite
def score_cases(draw, dtypes=("float32", "float64"), min_size=1):
    """(X float64 holding the dtype's values, lens, dtype, junk): junk written where masked."""
    rng = onp.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    b, q = draw(st.integers(min_size, 3)), draw(st.integers(min_size, 4))
    k = draw(st.integers(1, 6))
    dtype = draw(st.sampled_from(dtypes))
    X = rng.normal(size=(b, q, k)) * draw(st.sampled_from([1.0, 30.0, 1e4, 1e30]))
    X = X.clip(*{"float16": (-6e4, 6e4), "float32": (-3e38, 3e38)}.get(dtype, (-1e300, 1e300)))
    lens = draw(lengths(rng, b, q, k))
    junk = draw(st.sampled_from(JUNK))
    if junk is not None:
        X[~key_mask(lens, X.shape)] = junk
    with onp.errstate(over="ignore"):  # 1e30 is inf in float16: meant
        return X.astype(dtype).astype("float64"), lens, dtype, junk


def describe(api, lens, dtype, junk=None):
    """Label the example for --hypothesis-show-statistics: what it covered."""
    kind = "no lengths" if lens is None else f"{onp.ndim(lens)}-D lengths"
    event(f"{api}: {dtype}, {kind}" + (", a length 0" if lens is not None and
                                         (onp.asarray(lens) == 0).any() else ""))
    event(f"{api}: junk {junk!r} where masked")


def key_mask(lens, shape):
    """(batch, queries, keys) bool: True where the key is within the valid length."""
    b, q, k = shape
    lens = onp.full((b, q), k) if lens is None else onp.broadcast_to(onp.reshape(lens, (b, -1)),
                                                                       (b, q))
    return onp.arange(k) < lens[..., None]


def as_np(x, dtype="float32"):
    return None if x is None else np.array(x, dtype=dtype)


def new_mha():
    net = MultiHeadAttention(8, 2, 0.0, use_bias=True)
    net.initialize()
    return net


def softmax_and_grad(X, lens, dtype, G):
    """masked_softmax(X) and d sum(weights * G) / dX, as float64 NumPy."""
    x = as_np(X, dtype)
    x.attach_grad()
    with autograd.record():
        w = masked_softmax(x, as_np(lens, None if lens is None else lens.dtype))
        (w * as_np(G, dtype)).sum().backward()
    assert w.dtype == x.dtype and w.shape == x.shape
    return w.asnumpy().astype(float), x.grad.asnumpy().astype(float)


# --- masked_softmax -----------------------------------------------------------------------------

@FUZZ_MANY
@given(score_cases(), st.integers(0, 2 ** 32 - 1))
def test_masked_softmax_values_and_gradients_match_the_reference(case, seed):
    X, lens, dtype, junk = case
    describe("masked_softmax", lens, dtype, junk)
    G = onp.random.default_rng(seed).normal(size=X.shape)
    w, grad = softmax_and_grad(X, lens, dtype, G)
    expected = np_masked_softmax(X, lens)
    mask = key_mask(lens, X.shape)
    onp.testing.assert_allclose(w, expected, **TOL[dtype])
    assert (w[~mask] == 0).all()  # exactly 0, whatever the masked score held
    assert onp.isfinite(grad).all() and (grad[~mask] == 0).all()
    onp.testing.assert_allclose(grad, np_softmax_grad(expected, G), rtol=1e-4, atol=1e-5)


@FUZZ_MANY
@given(score_cases(dtypes=("float16",)))
def test_masked_softmax_in_float16_matches_the_reference(case):
    X, lens, dtype, junk = case
    describe("masked_softmax", lens, dtype, junk)
    w, grad = softmax_and_grad(X, lens, dtype, onp.ones(X.shape))
    onp.testing.assert_allclose(w, np_masked_softmax(X, lens), **TOL[dtype])
    assert onp.isfinite(grad).all()


@pytest.mark.parametrize("length", [2049, 2050, 2051])
def test_float16_masks_long_rows_at_the_exact_length(length):
    # Lengths cast to float16 rounded 2049 down (a valid key masked) and 2051 up.
    w = masked_softmax(np.zeros((1, 1, 2053), dtype="float16"), np.array([length]))
    assert (w.asnumpy()[0, 0, :length] > 0).all() and (w.asnumpy()[0, 0, length:] == 0).all()


def test_float16_sums_a_long_row_in_float32():
    w = masked_softmax(np.zeros((1, 1, 60001), dtype="float16"), np.array([60001]))
    assert w.dtype == onp.float16
    assert abs(w.asnumpy().astype(float).sum() - 1) < 0.01  # float16 sums gave 29.3


# --- calls that used to kill the process --------------------------------------------------------

CRASH_CASES = {
    "masked_softmax, 0 queries": "masked_softmax(np.zeros((2, 0, 4)), np.array([1, 2]))",
    "masked_softmax, batch 0": "masked_softmax(np.zeros((0, 3, 4)), np.zeros((0, 3)))",
    "masked_softmax, float16 length 70000": "masked_softmax(np.zeros((1, 1, 70001), "
                                             "dtype='float16'), np.array([70000]))",
    "DotProductAttention, 0 queries": "DotProductAttention(0)(np.zeros((2, 0, 3)), "
                                      "np.ones((2, 4, 3)), np.ones((2, 4, 3)), np.array([1, 0]))",
    "DotProductAttention, 0 keys, backward": """
q = np.ones((2, 3, 3)); q.attach_grad()
with autograd.record():
    out = DotProductAttention(0)(q, np.ones((2, 0, 3)), np.ones((2, 0, 5)))
out.backward()""",
}
SETUP = """
import d2lattn
from mxnet import autograd, np, npx
from d2lattn.attention import DotProductAttention, masked_softmax
"""


@pytest.fixture(scope="module")
def probe():
    """The formerly crashing calls, run in child processes: {case: exit code} of those that
    killed their process (the next child goes on after the case that crashed)."""
    return failing_cases(CRASH_CASES, SETUP)


def test_calls_that_crashed_the_kernel_return_or_raise_in_a_child_process(probe):
    assert probe == {}, f"these calls killed the process (exit codes): {probe}"


@pytest.fixture
def crash_free(probe):
    if probe:
        pytest.skip("these calls kill the process: see the child-process test")


@pytest.mark.parametrize("shape, lens", [((2, 0, 4), [1, 2]), ((2, 0, 4), onp.zeros((2, 0))),
                                         ((0, 3, 4), []), ((0, 3, 4), onp.zeros((0, 3)))])
def test_masked_softmax_of_zero_size_scores_is_empty_with_a_gradient(crash_free, shape, lens):
    w, grad = softmax_and_grad(onp.zeros(shape), onp.asarray(lens, "int32"), "float32",
                               onp.zeros(shape))
    assert w.shape == grad.shape == shape


def test_float16_length_beyond_float16s_range_in_process(crash_free):
    w = masked_softmax(np.zeros((1, 1, 70001), dtype="float16"), np.array([70000]))
    assert w.asnumpy()[0, 0, 70000] == 0 and w.asnumpy()[0, 0, 0] > 0


@pytest.mark.parametrize("layer", [lambda: DotProductAttention(0), new_mha])
@pytest.mark.parametrize("nq, nk", [(0, 4), (3, 0)])
def test_attention_refuses_zero_queries_or_keys_in_process(crash_free, layer, nq, nk):
    with pytest.raises(ValueError, match=f"{'queries' if nq == 0 else 'keys'} must have"):
        layer()(np.ones((2, nq, 4)), np.ones((2, nk, 4)), np.ones((2, nk, 4)), np.array([1, 0]))


# --- attention layers ---------------------------------------------------------------------------

def make_layer(name, dtype, q, k, v):
    """The layer, its parameters made for inputs shaped like q, k, v and cast to ``dtype``."""
    net = {"dot": lambda: DotProductAttention(0.0), "additive": lambda: AdditiveAttention(5, 0.0),
           "multihead": lambda: MultiHeadAttention(8, 2, 0.0, use_bias=True)}[name]()
    net.initialize()
    net(*(as_np(x) for x in (q, k, v)))  # deferred initialization, in float32
    net.cast(dtype)
    return net


def np_layer(name, net, q, k, v, lens):
    """(output, weights) of the layer in float64 NumPy."""
    if name == "multihead":
        return np_multihead(net, q, k, v, lens)
    score = np_dot_scores if name == "dot" else np_additive_scores
    w = np_masked_softmax(score(net, q, k), lens)
    return w @ v, w


@st.composite
def layer_cases(draw):
    rng = onp.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    b, nq, nk, d = (draw(st.integers(1, n)) for n in (3, 4, 5, 4))
    q, k, v = rng.normal(size=(b, nq, d)), rng.normal(size=(b, nk, d)), rng.normal(size=(b, nk, 3))
    lens = draw(lengths(rng, b, nq, nk))
    return q, k, v, lens, draw(st.sampled_from(["float32", "float64"]))


LAYERS = ["dot", "additive", "multihead"]


@pytest.mark.parametrize("name", LAYERS)
@FUZZ_LAYER
@given(layer_cases(), st.integers(0, 2 ** 32 - 1))
def test_attention_values_and_gradients_match_the_reference(name, case, seed):
    q, k, v, lens, dtype = case
    describe(name, lens, dtype)
    net = make_layer(name, dtype, q, k, v)
    inputs = [as_np(x, dtype) for x in (q, k, v)]
    G = onp.random.default_rng(seed).normal(size=(q.shape[0], q.shape[1],
                                                  8 if name == "multihead" else v.shape[-1]))
    for x in inputs:
        x.attach_grad()
    with autograd.record():
        out = net(*inputs, as_np(lens, "int32"))
        (out * as_np(G, dtype)).sum().backward()
    expected, weights = np_layer(name, net, q, k, v, lens)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-5)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-5)
    # directional derivatives of the float64 reference by central differences
    rng = onp.random.default_rng(seed + 1)
    for i, x in enumerate((q, k, v)):
        U = rng.normal(size=x.shape)
        plus, minus = ([y + h * U if j == i else y for j, y in enumerate((q, k, v))]
                       for h in (1e-6, -1e-6))
        f = (lambda args: (np_layer(name, net, *args, lens)[0] * G).sum())
        numeric = (f(plus) - f(minus)) / 2e-6
        analytic = (inputs[i].grad.asnumpy().astype(float) * U).sum()
        assert abs(numeric - analytic) <= 1e-3 * (1 + abs(numeric)), (i, numeric, analytic)


def outputs_and_gradients(net, q, k, v, lens, dtype, G):
    """The layer's output and the gradients of (output * G).sum() with respect to the inputs
    and to every parameter, as NumPy arrays."""
    inputs = [as_np(x, dtype) for x in (q, k, v)]
    for x in inputs:
        x.attach_grad()
    with autograd.record():
        out = net(*inputs, as_np(lens, "int32"))
        (out * as_np(G, dtype)).sum().backward()
    params = net.collect_params().values()
    return [out.asnumpy()] + [x.grad.asnumpy() for x in inputs] + [p.grad().asnumpy()
                                                                  for p in params]


@pytest.mark.parametrize("name", LAYERS)
@FUZZ_LAYER
@given(layer_cases(), st.sampled_from(JUNK[1:]))
def test_junk_in_padded_keys_and_values_reaches_no_output_and_no_gradient(name, case, junk):
    q, k, v, lens, dtype = case
    describe(name, lens, dtype, junk)
    if lens is None:
        lens = onp.full(q.shape[0], k.shape[1]).astype("int32")
    longest = onp.reshape(lens, (q.shape[0], -1)).max(axis=1)  # padding for every query
    padded = onp.arange(k.shape[1]) >= longest[:, None]
    dirty_k, dirty_v = k.copy(), v.copy()
    dirty_k[padded], dirty_v[padded] = junk, junk  # 0 * NaN made outputs and gradients NaN
    net = make_layer(name, dtype, q, k, v)
    width = net(*(as_np(x, dtype) for x in (q, k, v))).shape[-1]
    G = onp.random.default_rng(0).normal(size=(q.shape[0], q.shape[1], width))
    dirty = outputs_and_gradients(net, q, dirty_k, dirty_v, lens, dtype, G)
    clean = outputs_and_gradients(net, q, k, v, lens, dtype, G)
    for got, want in zip(dirty, clean):
        assert onp.isfinite(got).all()
        onp.testing.assert_array_equal(got, want)
    onp.testing.assert_allclose(dirty[0], np_layer(name, net, q, k, v, lens)[0], rtol=1e-4,
                                atol=1e-5)


@pytest.mark.parametrize("name", LAYERS)
@FUZZ_LAYER
@given(layer_cases(), st.data())
def test_lengths_changed_in_place_give_the_new_mask_or_an_error(name, case, data):
    q, k, v, lens, dtype = case
    shape = (q.shape[0],) if lens is None else lens.shape
    size = int(onp.prod(shape))
    new = onp.array(data.draw(st.lists(st.integers(0, k.shape[1] + 1), min_size=size,
                                       max_size=size))).reshape(shape)
    buffer = as_np(onp.full(shape, k.shape[1]) if lens is None else lens, "int32")
    net = make_layer(name, dtype, q, k, v)
    args = [as_np(x, dtype) for x in (q, k, v)]
    net(*args, buffer)
    buffer[:] = as_np(new, "int32")  # a reused buffer: same array, new lengths
    event(f"{name}: new lengths " + ("out of range" if (new > k.shape[1]).any() else "valid"))
    if (new > k.shape[1]).any():
        with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, "):
            net(*args, buffer)
        return
    out = net(*args, buffer)
    expected, weights = np_layer(name, net, q, k, v, new)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights, rtol=1e-4, atol=1e-5)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-5)


# --- MaskedSoftmaxCELoss ------------------------------------------------------------------------

def np_seq_loss(pred, label, valid_len, eps):
    """Sums over valid steps of (1 - eps)(-log p_label) + eps mean(-log p), and d/d pred."""
    b, steps, vocab = pred.shape
    loss, grad = onp.zeros(b), onp.zeros(pred.shape)
    for i, t in onp.ndindex(b, steps):
        if t < valid_len[i]:
            z = pred[i, t] - pred[i, t].max()
            log_p = z - onp.log(onp.exp(z).sum())
            loss[i] -= (1 - eps) * log_p[label[i, t]] + eps * log_p.mean()
            target = onp.full(vocab, eps / vocab)
            target[label[i, t]] += 1 - eps
            grad[i, t] = onp.exp(log_p) - target
    return loss, grad


@FUZZ
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from(JUNK), st.sampled_from([0.0, 0.1, 0.3]),
       st.sampled_from(["float32", "float64"]))
def test_sequence_loss_ignores_whatever_padded_steps_hold(seed, junk, eps, dtype):
    event(f"MaskedSoftmaxCELoss: {dtype}, junk {junk!r} at padded steps")
    rng = onp.random.default_rng(seed)
    b, steps, vocab = rng.integers(1, 4), rng.integers(1, 5), rng.integers(1, 6)
    pred = rng.normal(size=(b, steps, vocab)) * 3
    label, valid_len = rng.integers(0, vocab, size=(b, steps)), rng.integers(0, steps + 1, b)
    if junk is not None:  # one junk logit per padded step, or the whole step
        padded = onp.arange(steps) >= valid_len[:, None]
        pred[padded, rng.integers(0, vocab)] = junk
        pred[padded & (rng.random((b, steps)) < 0.5)] = junk
    x = as_np(pred, dtype)
    x.attach_grad()
    with autograd.record():
        loss = MaskedSoftmaxCELoss(eps)(x, np.array(label), np.array(valid_len))
        loss.sum().backward()
    expected, grad = np_seq_loss(pred, label, valid_len, eps)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else TOL[dtype]
    onp.testing.assert_allclose(loss.asnumpy(), expected, **tol)
    onp.testing.assert_allclose(x.grad.asnumpy(), grad, **tol)


@pytest.mark.parametrize("label", [[[0, 3]], [[-1, 0]], [[0, 1.5]]])
def test_sequence_loss_refuses_labels_outside_the_vocabulary(label):
    with pytest.raises(ValueError, match=r"label must hold integers in \[0, 2\]"):
        MaskedSoftmaxCELoss()(np.zeros((1, 2, 3)), np.array(label), np.array([1]))


# --- bad input: a clear error naming the argument -----------------------------------------------

def seq2seq_encoder():
    net = Seq2SeqEncoder(10, 4, 4, 1)
    net.initialize()
    return net


def transformer_encoder():
    net = TransformerEncoder(10, 8, 16, 2, 1, 0.0)
    net.initialize()
    return net


def bert_encoder():
    net = BERTEncoder(10, 8, 16, 2, 1, 0.0, max_len=8)
    net.initialize()
    return net


F32 = np.ones((2, 3, 4))
BAD_INPUT = {
    "integer scores": (lambda: masked_softmax(F32.astype("int32"), None), TypeError,
                       "X must hold floating-point numbers, got dtype int32"),
    "integer queries": (lambda: DotProductAttention(0)(F32.astype("int32"), F32, F32), TypeError,
                        "queries must hold floating-point numbers"),
    "mixed dtypes": (lambda: DotProductAttention(0)(F32, F32.astype("float64"), F32), TypeError,
                     "queries, keys and values must have one dtype, got float32, float64"),
    "float16 on the CPU": (lambda: new_mha()(*[F32.astype("float16")] * 3), TypeError,
                           "float16, which MXNet's matrix products do not support on the CPU"),
    "float64 inputs, float32 weights": (lambda: new_mha()(*[F32.astype("float64")] * 3),
                                        TypeError, "queries have dtype float64 but .* has "
                                                   "dtype float32"),
    "batch 0": (lambda: AdditiveAttention(4, 0)(*[np.ones((0, 3, 4))] * 3),
                ValueError, r"queries must have no empty axis"),
    "keys 0, empty cache": (lambda: (lambda mha: mha(F32, *[np.ones((2, 0, 4))] * 2, None,
                                                      mha.init_cache()))(new_mha()),
                            ValueError, "keys must have at least one position, or the cache"),
    "lengths 2.5": (lambda: masked_softmax(F32, np.array([2.5, 1])), ValueError,
                    r"valid_lens must hold integers in \[0, 4\] \(the number of keys\)"),
    "lengths NaN": (lambda: DotProductAttention(0)(F32, F32, F32, np.array([onp.nan, 1])),
                    ValueError, r"valid_lens must hold integers in \[0, 3\]"),
    "out-of-vocabulary tokens, Seq2SeqEncoder": (
        lambda: seq2seq_encoder()(np.array([[1, 10]])), ValueError,
        r"X must hold integers in \[0, 9\] \(token ids below the vocabulary size 10\), got "
        r"\[10.0\]"),
    "out-of-vocabulary tokens, TransformerEncoder": (
        lambda: transformer_encoder()(np.array([[-1, 3]])), ValueError,
        r"X must hold integers in \[0, 9\]"),
    "out-of-vocabulary tokens, BERTEncoder": (
        lambda: bert_encoder()(np.array([[1, 12]]), np.zeros((1, 2))), ValueError,
        r"tokens must hold integers in \[0, 9\]"),
    "integer input to PositionalEncoding": (
        lambda: PositionalEncoding(4, 0)(F32.astype("int32")), TypeError,
        "X must hold floating-point numbers, got dtype int32"),
}


@pytest.mark.parametrize("case", BAD_INPUT, ids=list(BAD_INPUT))
def test_bad_input_is_refused_with_an_error_naming_the_argument(case):
    call, error, message = BAD_INPUT[case]
    with pytest.raises(error, match=message):
        call()
