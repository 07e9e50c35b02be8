"""PairClassifier for ordered pairs: mean(a) - mean(b) against NumPy, padding and empty segments,
swapping the texts changes its answer, it learns an order-only toy task, bad input."""
import mxnet as mx
import numpy as onp
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from mxnet import init, np

from d2lattn.bert import BERTEncoder, PairClassifier, segment_mean_difference
from d2lattn.data.nmt import ArrayLoader
from d2lattn.train import evaluate_accuracy, train_classifier
from child_probe import failing_cases
from reference import value


def test_segment_mean_difference_matches_numpy_and_ignores_padding(cpu1):
    rng = onp.random.default_rng(0)
    X = rng.normal(size=(3, 5, 4))
    segments = onp.array([[0, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]])
    lens = onp.array([4, 3, 5])
    got = segment_mean_difference(np.array(X, ctx=cpu1), np.array(segments, ctx=cpu1),
                                  np.array(lens, ctx=cpu1))
    assert got.ctx == cpu1 and got.shape == (3, 4)
    expected = [X[0, :2].mean(0) - X[0, 2:4].mean(0),  # position 4 is padding
                X[1, :3].mean(0),  # no second text: its mean is zero
                X[2, :1].mean(0) - X[2, 1:].mean(0)]
    assert onp.allclose(got.asnumpy(), expected, atol=1e-6)


CRASHES = {  # issue 33: each of these killed the process (segfault, abort, SIGFPE)
    "NaN length": "segment_mean_difference(np.ones((1, 3, 2)), np.zeros((1, 3)), "
                  "np.array([onp.nan]))",
    "infinite length": "segment_mean_difference(np.ones((1, 3, 2)), np.zeros((1, 3)), "
                       "np.array([onp.inf]))",
    "length 1e10": "segment_mean_difference(np.ones((1, 3, 2)), np.zeros((1, 3)), "
                   "np.array([1e10]))",
    "0 steps": "segment_mean_difference(np.ones((2, 0, 4)), np.zeros((2, 0)), np.zeros((2,)))",
    "batch 0": "segment_mean_difference(np.ones((0, 3, 4)), np.zeros((0, 3)), np.zeros((0,)))",
}


@pytest.fixture(scope="module")
def probe():
    setup = ("import d2lattn\nimport numpy as onp\nfrom mxnet import np, npx\n"
             "from d2lattn.bert import segment_mean_difference")
    return failing_cases(CRASHES, setup, timeout=60)


def test_no_input_kills_the_process(probe):
    assert probe == {}, f"these calls killed their process or raised another error: {probe}"


@pytest.fixture(scope="module")
def crash_free(probe):
    if probe:
        pytest.skip("some calls kill the process: see the child-process test")


@pytest.mark.parametrize("shape", [(2, 0, 4), (0, 3, 4)])
def test_zero_size_input_gives_zeros(crash_free, shape):
    got = segment_mean_difference(np.ones(shape), np.zeros(shape[:2]), np.zeros(shape[:1]))
    assert got.shape == (shape[0], shape[2]) and not got.asnumpy().any()


@pytest.mark.parametrize("lens, match", [
    ([onp.nan], "valid_lens must hold integers in \\[0, 3\\]"), ([onp.inf], "got \\[inf\\]"),
    ([1e10], "got \\[10000000000.0\\]"), ([4], "got \\[4.0\\]"), ([-1], "got \\[-1.0\\]"),
    ([1.5], "got \\[1.5\\]")])
def test_lengths_that_are_not_steps_are_refused(crash_free, lens, match):
    with pytest.raises(ValueError, match=match):
        segment_mean_difference(np.ones((1, 3, 2)), np.zeros((1, 3)), np.array(lens))


@pytest.mark.parametrize("segments, match", [
    ([[0, 1, 2]], r"segments must hold integers in \[0, 1\] \(0: the first text, 1: the "
                  r"second\), got \[2.0\]"),
    ([[0, 0.5, 1]], r"got \[0.5\]"), ([[0, -1, 1]], r"got \[-1.0\]"),
    ([[0, 1]], r"segments must be an mxnet array shaped like the steps of X \(1, 3\), got "
               r"\(1, 2\)")])
def test_segments_other_than_0_and_1_are_refused(segments, match):
    """A segment id of 2 used to be counted in the first text's mean (and 0.5 half in each)."""
    with pytest.raises(ValueError, match=match):
        segment_mean_difference(np.ones((1, 3, 2)), np.array(segments), np.array([3]))


def test_missing_lengths_and_numpy_segments_are_named():
    with pytest.raises(TypeError, match="valid_lens must be an mxnet.np.ndarray, got NoneType"):
        segment_mean_difference(np.ones((1, 3, 2)), np.zeros((1, 3)), None)
    with pytest.raises(ValueError, match=r"segments must be .* got \(1, 3\) \(ndarray\)"):
        segment_mean_difference(np.ones((1, 3, 2)), onp.zeros((1, 3)), np.array([3]))


def test_a_third_segment_type_is_refused_by_the_pair_classifier():
    mx.random.seed(0)
    net = PairClassifier(BERTEncoder(12, 8, 12, 2, 1, 0.0, 16, type_vocab_size=3), 2, 0.0)
    net.initialize()
    tokens = np.array([[1, 4, 2, 5, 2, 6]], dtype="int32")
    with pytest.raises(ValueError, match=r"segments must hold integers in \[0, 1\]"):
        net(tokens, np.array([[0, 0, 0, 1, 1, 2]], dtype="int32"), np.array([6]))


def test_float16_sums_in_float32():
    """100 steps of 1000 sum to 1e5, beyond float16's 65504: the sums used to be inf."""
    X = onp.concatenate([onp.full((1, 100, 2), 1000.0), onp.full((1, 50, 2), -3.0)], axis=1)
    segments = onp.array([[0] * 100 + [1] * 50])
    got = segment_mean_difference(np.array(X, dtype="float16"), np.array(segments),
                                  np.array([150]))
    expected = X[0, :100].mean(0) - X[0, 100:].mean(0)
    assert got.dtype == onp.float16
    onp.testing.assert_allclose(got.asnumpy(), expected[None], rtol=1e-3)


@settings(derandomize=True, max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from(["float16", "float32", "float64"]),
       st.sampled_from(["int32", "int64", "float32"]))
def test_segment_mean_difference_fuzz_against_numpy(crash_free, seed, dtype, ids_dtype):
    rng = onp.random.default_rng(seed)
    b, steps, d = rng.integers(1, 4), rng.integers(1, 7), rng.integers(1, 5)
    X = rng.normal(size=(b, steps, d)) * rng.choice([1, 1e3])
    X = X.astype(dtype).astype("float64")  # the values the function sees
    segments, lens = rng.integers(0, 2, size=(b, steps)), rng.integers(0, steps + 1, size=b)
    got = segment_mean_difference(np.array(X, dtype=dtype), np.array(segments, dtype=ids_dtype),
                                  np.array(lens, dtype=ids_dtype))
    def mean(rows):  # a segment without tokens has mean zero
        return rows.mean(axis=0) if len(rows) else onp.zeros(d)

    expected = [mean(x[:n][s[:n] == 0]) - mean(x[:n][s[:n] == 1])
                for x, s, n in zip(X, segments, lens)]
    tol = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[dtype]
    assert got.dtype == dtype
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=tol, atol=tol * abs(X).max())


def make_pair_classifier(ctx=None):
    mx.random.seed(0)
    net = PairClassifier(BERTEncoder(12, 8, 12, 2, 1, 0.0, 16), 2, 0.0)
    net.initialize(init.Normal(0.3), ctx=ctx)
    return net


def test_logits_are_the_head_on_the_segment_difference_and_swapping_changes_them(cpu1):
    net = make_pair_classifier(cpu1)
    tokens = np.array([[1, 4, 5, 2, 6, 7, 2], [1, 6, 7, 2, 4, 5, 2]], dtype="int32", ctx=cpu1)
    segments = np.array([[0, 0, 0, 0, 1, 1, 1]] * 2, dtype="int32", ctx=cpu1)
    lens = np.array([7, 7], dtype="int32", ctx=cpu1)
    logits = net(tokens, segments, lens)
    pooled = segment_mean_difference(net.encoder(tokens, segments, lens), segments, lens)
    expected = pooled.asnumpy() @ value(net.output.weight).T + value(net.output.bias)
    assert logits.ctx == cpu1 and onp.allclose(logits.asnumpy(), expected, atol=1e-5)
    assert not onp.allclose(logits[0].asnumpy(), logits[1].asnumpy(), atol=1e-3)
    assert net.pooling == "pair"
    with pytest.raises(ValueError, match="valid_lens must be given"):
        net(tokens, segments, None)
    with pytest.raises(TypeError, match="encoder must be a BERTEncoder, got str"):
        PairClassifier("encoder", 2, 0.1)


def test_it_learns_which_text_comes_first():
    """Label 1 when the pair is (b, a) rather than (a, b): the same tokens, only the order."""
    rng = onp.random.default_rng(0)
    rows, labels = [], []
    for _ in range(64):
        a, b = rng.integers(4, 8, size=2), rng.integers(8, 12, size=2)
        swap = int(rng.integers(2))
        first, second = (b, a) if swap else (a, b)
        rows.append([1, *first, 2, *second, 2])
        labels.append(swap)
    tokens = np.array(rows, dtype="int32")
    data = (tokens, np.array([[0] * 4 + [1] * 3] * 64, dtype="int32"),
            np.full((64,), 7, dtype="int32"), np.array(labels, dtype="int32"))
    net = make_pair_classifier()
    history = train_classifier(net, ArrayLoader(data, 16), ArrayLoader(data, 16, False), 10,
                               0.01, [mx.cpu()])
    assert history["val_acc"][-1] == 1.0
    assert evaluate_accuracy(net, ArrayLoader(data, 64, False), [mx.cpu()]) == 1.0
