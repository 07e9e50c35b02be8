import math

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from d2lattn import (NWKernelRegression, boxcar, constant, epanechnikov, gaussian,
                     leave_one_out, nadaraya_watson, train_nw)
from d2lattn._ops import softmax_rows
from d2lattn.pooling import kernel_scores

# mxnet's own advanced indexing (used by leave_one_out) calls its deprecated as_in_context.
pytestmark = pytest.mark.filterwarnings("ignore:ndarray.as_in_context has been renamed")

# Independent NumPy versions of the kernels (float64), normalising constants left out.
NP_KERNELS = {gaussian: lambda u: onp.exp(-u ** 2 / 2),
              boxcar: lambda u: (onp.abs(u) < 1).astype(float),
              constant: onp.ones_like,
              epanechnikov: lambda u: onp.maximum(0, 1 - u ** 2)}
KERNELS = list(NP_KERNELS)


def as_np(x, ctx=None):
    return np.array(x, dtype="float32", ctx=ctx or mx.cpu())


def np_softmax(scores):
    e = onp.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_nadaraya_watson(x_train, y_train, x_query, np_kernel, bandwidth):
    """Textbook Nadaraya-Watson in float64: weights K(u_ij) / sum_j K(u_ij)."""
    x_train, y_train, x_query = (onp.asarray(a, float) for a in (x_train, y_train, x_query))
    k = np_kernel((x_query[:, None] - x_train[None]) / bandwidth)
    weights = k / k.sum(axis=1, keepdims=True)
    return weights @ y_train, weights


def np_leave_one_out(a):
    """Row i of a (n, n - 1) matrix holds every entry of ``a`` but the i-th, in order."""
    n = len(a)
    mask = ~onp.eye(n, dtype=bool)
    return onp.tile(a, (n, 1))[mask].reshape(n, n - 1)


def np_nw_gaussian(queries, keys, values, w):
    """NWKernelRegression's forward pass in float64."""
    weights = np_softmax(-((queries[:, None] - keys) * w) ** 2 / 2)
    return (weights * values).sum(axis=1), weights


def np_nw_gaussian_grad(queries, keys, values, w):
    """d prediction_i / dw of NWKernelRegression, analytically, in float64.

    With s_ij = -(d_ij w)^2 / 2 and a = softmax(s): d a_ij / dw = a_ij (s'_ij - sum_l a_il s'_il),
    where s'_ij = -d_ij^2 w.
    """
    _, a = np_nw_gaussian(queries, keys, values, w)
    ds = -(queries[:, None] - keys) ** 2 * w
    return (values * a * (ds - (a * ds).sum(axis=1, keepdims=True))).sum(axis=1)


def make_net(w=None, ctx=None):
    net = NWKernelRegression()
    net.initialize(ctx=ctx or mx.cpu())
    if w is not None:
        net.w.set_data(as_np([w], ctx))
    return net


# --- kernels ----------------------------------------------------------------------------------

def test_gaussian_kernel_values():
    got = gaussian(as_np([0, 1, -2])).asnumpy()
    onp.testing.assert_allclose(got, [1, math.exp(-0.5), math.exp(-2)], rtol=1e-6)


def test_boxcar_kernel_values():
    got = boxcar(as_np([-1, -0.5, 0, 0.999, 1, 2])).asnumpy()
    onp.testing.assert_array_equal(got, [0, 1, 1, 1, 0, 0])  # |u| < 1: open interval
    assert got.dtype == onp.float32


def test_constant_kernel_values():
    got = constant(as_np([[-3, 0], [2, 100]])).asnumpy()
    onp.testing.assert_array_equal(got, onp.ones((2, 2)))


def test_epanechnikov_kernel_values():
    got = epanechnikov(as_np([0, 0.5, -0.5, 1, 2])).asnumpy()
    onp.testing.assert_allclose(got, [1, 0.75, 0.75, 0, 0])  # max(0, 1 - u^2)


@pytest.mark.parametrize("bandwidth", [1.0, 0.5])
def test_kernel_scores_are_log_kernels(bandwidth):
    d = onp.array([[-2.5, -1, -0.3, 0, 0.7, 0.99, 1.5], [-3, 1.2, 2, 0.4, -1.1, 3, 0.5]])
    for kernel, np_kernel in NP_KERNELS.items():
        with onp.errstate(divide="ignore"):
            expected = onp.log(np_kernel(d / bandwidth))
        if kernel is gaussian:  # less each row's largest score, which the softmax ignores
            expected -= expected.max(axis=1, keepdims=True)
        got = kernel_scores(kernel, np.array(d), bandwidth).asnumpy()
        onp.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12,
                                    err_msg=kernel.__name__)


def test_gaussian_scores_stay_finite_where_the_kernel_underflows():
    got = kernel_scores(gaussian, np.array([[100.0, 1e4]]), 1.0).asnumpy()
    onp.testing.assert_allclose(got, [[0, -(1e8 - 1e4) / 2]])  # -u^2 / 2 + 5e3, not log 0


# Bandwidths where (q - k) / h or its square overflows float64, or that MXNet cannot read as
# a scalar (subnormal): the Gaussian weights are still the nearest key's (ties split).
TINY = [1e-155, 1e-200, 1e-300, 1e-310, 5e-324]


@pytest.mark.parametrize("bandwidth", TINY)
def test_tiny_and_subnormal_gaussian_bandwidths_give_the_nearest_key(bandwidth):
    pred, weights = nadaraya_watson([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0],
                                    [0.2, 1.9, 2.5, 1e3], bandwidth=bandwidth)
    onp.testing.assert_array_equal(weights.asnumpy(), [[1, 0, 0, 0], [0, 0, 1, 0],
                                                       [0, 0, 0.5, 0.5], [0, 0, 0, 1]])
    onp.testing.assert_array_equal(pred.asnumpy(), [1, 3, 3.5, 4])


@pytest.mark.parametrize("bandwidth", [1e-310, 5e-324])
@pytest.mark.parametrize("kernel", [boxcar, epanechnikov, constant], ids=lambda k: k.__name__)
def test_subnormal_bandwidths_work_with_every_kernel(kernel, bandwidth):
    # Only a training point equal to the query is within a compact kernel's support.
    pred, weights = nadaraya_watson([0.0, 1.0, 2.0], [5.0, 6.0, 7.0], [1.0, 0.5], kernel,
                                    bandwidth)
    expected = onp.full((2, 3), 1 / 3) if kernel is constant else [[0, 1, 0], [0, 0, 0]]
    onp.testing.assert_allclose(weights.asnumpy(), expected, rtol=1e-6)
    onp.testing.assert_allclose(pred.asnumpy(), [6, 6] if kernel is constant else [6, 0])


# --- softmax_rows -----------------------------------------------------------------------------

def test_softmax_rows_matches_numpy():
    scores = onp.random.default_rng(1).normal(size=(2, 3, 5)) * 3
    got = softmax_rows(as_np(scores)).asnumpy()
    onp.testing.assert_allclose(got, np_softmax(scores), rtol=1e-5)


def test_softmax_rows_of_all_minus_inf_is_zero():
    got = softmax_rows(as_np([[-onp.inf] * 3, [-onp.inf, 0, onp.log(3)]])).asnumpy()
    onp.testing.assert_allclose(got, [[0, 0, 0], [0, 0.25, 0.75]], rtol=1e-6)  # e^0 : e^log3


def test_softmax_rows_with_huge_scores_stays_finite():
    got = softmax_rows(as_np([[1e30, 0, -1e30], [3e38, -3e38, 0], [-1e30, -1e30 + 1e24, -3e38]]))
    onp.testing.assert_array_equal(got.asnumpy(), [[1, 0, 0], [1, 0, 0], [0, 1, 0]])


# --- nadaraya_watson --------------------------------------------------------------------------

def test_nadaraya_watson_by_hand():
    x, y = as_np([0, 1, 2]), as_np([0, 1, 4])
    pred, weights = nadaraya_watson(x, y, as_np([1]), kernel=constant)
    assert float(pred[0]) == pytest.approx(5 / 3)  # (0 + 1 + 4) / 3
    pred, weights = nadaraya_watson(x, y, as_np([0]), kernel=boxcar, bandwidth=1.5)
    assert float(pred[0]) == pytest.approx(0.5)  # |x - 0| < 1.5 keeps x = 0, 1: (0 + 1) / 2
    onp.testing.assert_allclose(weights.asnumpy(), [[0.5, 0.5, 0]])


@pytest.mark.parametrize("bandwidth", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
def test_nadaraya_watson_matches_numpy(regression_data, kernel, bandwidth):
    x, y = regression_data
    queries = onp.linspace(0, 5, 17)  # each within 0.21 of a training x: compact kernels see one
    pred, weights = nadaraya_watson(as_np(x), as_np(y), as_np(queries), kernel, bandwidth)
    exp_pred, exp_weights = np_nadaraya_watson(x, y, queries, NP_KERNELS[kernel], bandwidth)
    assert pred.shape == (17,) and weights.shape == (17, 50)
    onp.testing.assert_allclose(weights.asnumpy(), exp_weights, rtol=1e-4, atol=1e-6)
    onp.testing.assert_allclose(pred.asnumpy(), exp_pred, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
def test_nadaraya_watson_weights_are_a_distribution(regression_data, kernel):
    x, y = regression_data
    _, weights = nadaraya_watson(as_np(x), as_np(y), as_np(onp.linspace(-0.5, 5.5, 25)), kernel)
    weights = weights.asnumpy()
    assert (weights >= 0).all()
    onp.testing.assert_allclose(weights.sum(axis=1), 1, rtol=1e-5)


def test_constant_kernel_is_average_pooling(regression_data):
    x, y = regression_data
    pred, weights = nadaraya_watson(as_np(x), as_np(y), as_np([-10, 0, 2.5, 99]), constant)
    onp.testing.assert_allclose(weights.asnumpy(), 1 / 50, rtol=1e-6)
    onp.testing.assert_allclose(pred.asnumpy(), onp.full(4, y.mean()), rtol=1e-5)


def test_tiny_gaussian_bandwidth_gives_nearest_neighbour(regression_data):
    x, y = regression_data
    queries = onp.array([-1, 0.33, 1.7, 2.9, 4.1, 7])
    pred, weights = nadaraya_watson(as_np(x), as_np(y), as_np(queries), bandwidth=1e-4)
    nearest = onp.abs(queries[:, None] - x[None]).argmin(axis=1)
    assert onp.isfinite(pred.asnumpy()).all()
    onp.testing.assert_array_equal(weights.asnumpy(), onp.eye(50)[nearest])
    onp.testing.assert_array_equal(pred.asnumpy(), y[nearest])


@pytest.mark.parametrize("kernel", [boxcar, epanechnikov], ids=lambda k: k.__name__)
def test_query_outside_compact_support_gets_zero_weights(kernel):
    x, y = as_np([0, 1, 2]), as_np([5, 6, 7])
    # 1 is a training point, 0.5 is 0.5 / 1e-4 = 5000 bandwidths away from any.
    pred, weights = nadaraya_watson(x, y, as_np([1, 0.5]), kernel, bandwidth=1e-4)
    onp.testing.assert_array_equal(weights.asnumpy(), [[0, 1, 0], [0, 0, 0]])
    onp.testing.assert_array_equal(pred.asnumpy(), [6, 0])


def test_nadaraya_watson_accepts_lists_and_numpy():
    pred, weights = nadaraya_watson([0, 1, 2], onp.array([0, 1, 4]), [1.0], kernel=constant)
    assert isinstance(pred, np.ndarray) and isinstance(weights, np.ndarray)
    assert float(pred[0]) == pytest.approx(5 / 3)


def test_extreme_gaussian_bandwidth_still_gives_nearest_neighbour():
    # (0.2 / 1e-20)^2 overflows float32; the scores are computed in float64.
    pred, weights = nadaraya_watson([0, 1], [5, 7], [0.2], bandwidth=1e-20)
    onp.testing.assert_array_equal(weights.asnumpy(), [[1, 0]])
    onp.testing.assert_array_equal(pred.asnumpy(), [5])


def test_nadaraya_watson_casts_integer_targets_to_float():
    pred, _ = nadaraya_watson(as_np([0, 2]), np.array([1, 3], dtype="int32"), [1.0], constant)
    assert pred.dtype == onp.float32 and float(pred[0]) == 2.0


@pytest.mark.parametrize("bandwidth", [onp.float32(0.5), onp.float64(0.5), 1])
def test_nadaraya_watson_accepts_numpy_and_int_bandwidths(bandwidth):
    pred, _ = nadaraya_watson([0, 1], [0, 1], [0.5], bandwidth=bandwidth)
    assert float(pred[0]) == pytest.approx(0.5)


@pytest.mark.parametrize("name", ["x_train", "y_train", "x_query"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nadaraya_watson_rejects_non_finite_inputs(name, bad):
    args = {"x_train": [0.0, 1.0], "y_train": [2.0, 3.0], "x_query": [0.5]}
    args[name] = args[name][:-1] + [bad]
    with pytest.raises(ValueError, match=f"{name} must hold finite numbers only"):
        nadaraya_watson(**args)


@pytest.mark.parametrize("name", ["x_train", "y_train", "x_query"])
def test_nadaraya_watson_rejects_non_vectors(name):
    args = {"x_train": as_np([0, 1]), "y_train": as_np([2, 3]), "x_query": as_np([0.5])}
    args[name] = np.zeros((2, 1))
    with pytest.raises(ValueError, match=f"{name} must be 1-D, got shape \\(2, 1\\)"):
        nadaraya_watson(**args)


@pytest.mark.parametrize("x, y", [([0, 1, 2], [0, 1]), ([], [])])
def test_nadaraya_watson_rejects_mismatched_or_empty_training_data(x, y):
    with pytest.raises(ValueError, match="x_train and y_train must be non-empty and of equal"):
        nadaraya_watson(x, y, [0.5])


def test_nadaraya_watson_rejects_non_callable_kernel():
    with pytest.raises(TypeError, match="kernel must be a function"):
        nadaraya_watson([0, 1], [0, 1], [0.5], kernel="gaussian")


@pytest.mark.parametrize("bandwidth", [0, -1.0, float("inf"), float("nan"), "1", None, True])
def test_nadaraya_watson_rejects_bad_bandwidth(bandwidth):
    with pytest.raises(ValueError, match="bandwidth must be a positive finite number"):
        nadaraya_watson([0, 1], [0, 1], [0.5], bandwidth=bandwidth)


# --- leave_one_out ----------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 7])
def test_leave_one_out_rows_hold_the_other_examples(n):
    x = onp.arange(n, dtype="float32")  # x_i = i, so a key tells which example it is
    y = 10 * x + 1
    keys, values = leave_one_out(as_np(x), as_np(y))
    keys, values = keys.asnumpy(), values.asnumpy()
    assert keys.shape == values.shape == (n, n - 1)
    onp.testing.assert_array_equal(keys, np_leave_one_out(x))  # in index order
    onp.testing.assert_array_equal(values, 10 * keys + 1)  # each value stays with its key


def test_leave_one_out_on_regression_data(regression_data):
    x, y = regression_data
    keys, values = leave_one_out(as_np(x), as_np(y))
    keys, values = keys.asnumpy(), values.asnumpy()
    onp.testing.assert_array_equal(keys, np_leave_one_out(x))
    onp.testing.assert_array_equal(values, np_leave_one_out(y))


@pytest.mark.parametrize("x, y", [([1.0], [2.0]), ([1, 2, 3], [1, 2])])
def test_leave_one_out_rejects_bad_lengths(x, y):
    with pytest.raises(ValueError, match="x_train and y_train must be of equal length >= 2"):
        leave_one_out(as_np(x), as_np(y))


@pytest.mark.parametrize("x, y, name", [(onp.zeros((3, 1)), onp.zeros(3), "x_train"),
                                         ([1, 2], [[1], [2]], "y_train")])
def test_leave_one_out_rejects_2d_input(x, y, name):
    with pytest.raises(ValueError, match=f"{name} must be 1-D"):
        leave_one_out(as_np(x), as_np(y))


# --- NWKernelRegression -----------------------------------------------------------------------

def test_nw_regression_forward_matches_numpy(regression_data):
    x, y = regression_data
    keys, values = np_leave_one_out(x), np_leave_one_out(y)
    net = make_net(w=2.5)
    pred = net(as_np(x), as_np(keys), as_np(values))
    exp_pred, exp_weights = np_nw_gaussian(x.astype(float), keys, values, 2.5)
    onp.testing.assert_allclose(pred.asnumpy(), exp_pred, rtol=1e-4)
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), exp_weights, rtol=1e-4, atol=1e-7)


def test_nw_regression_with_unit_width_equals_gaussian_nadaraya_watson(regression_data):
    x, y = regression_data
    queries = onp.linspace(0, 5, 9, dtype="float32")
    pred = make_net()(as_np(queries), as_np(onp.tile(x, (9, 1))), as_np(onp.tile(y, (9, 1))))
    expected, _ = nadaraya_watson(as_np(x), as_np(y), as_np(queries), gaussian, bandwidth=1.0)
    onp.testing.assert_allclose(pred.asnumpy(), expected.asnumpy(), rtol=1e-5)


@pytest.mark.parametrize("w, bandwidth", [(1.0, 1.0), (4.0, 0.25), (-0.5, 2.0)])
def test_nw_regression_bandwidth_is_inverse_abs_w(w, bandwidth):
    assert make_net(w).bandwidth == pytest.approx(bandwidth)


@pytest.mark.parametrize("w", [1e20, -1e30, 3e38])
def test_nw_regression_with_a_tiny_bandwidth_weighs_the_nearest_key(w):
    # ((q - k) w)^2 overflows float32 for every key: the scores were all -inf, the weights NaN.
    net = make_net(w)
    with autograd.record():
        out = net(as_np([0.2, 1.5]), as_np([[0, 1, 2], [1, 2, 3]]), as_np([[5, 6, 7], [1, 2, 3]]))
    out.backward()
    onp.testing.assert_array_equal(net.attention_weights.asnumpy(), [[1, 0, 0], [0.5, 0.5, 0]])
    onp.testing.assert_array_equal(out.asnumpy(), [5, 1.5])
    assert float(net.w.grad()[0]) == 0  # the weights are saturated: a step in w changes nothing


def test_nw_regression_gradient_matches_numpy(regression_data):
    x, y = (a[::5].astype(float) for a in regression_data)  # 10 examples
    keys, values, w = np_leave_one_out(x), np_leave_one_out(y), 0.7
    net = make_net(w)
    with autograd.record():
        out = net(as_np(x), as_np(keys), as_np(values))
    out.backward()  # d(sum of predictions) / dw
    grad = float(net.w.grad()[0])
    analytic = np_nw_gaussian_grad(x, keys, values, w).sum()
    eps = 1e-6
    numeric = (np_nw_gaussian(x, keys, values, w + eps)[0].sum()
               - np_nw_gaussian(x, keys, values, w - eps)[0].sum()) / (2 * eps)
    assert analytic == pytest.approx(numeric, rel=1e-6)
    assert grad == pytest.approx(analytic, rel=1e-4)


@pytest.mark.parametrize("shapes", [((3, 1), (3, 2), (3, 2)), ((3,), (3,), (3,)),
                                    ((3,), (3, 2), (3, 4)), ((2,), (3, 2), (3, 2))])
def test_nw_regression_rejects_bad_shapes(shapes):
    queries, keys, values = (np.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=r"expected queries \(m,\), keys and values \(m, n\)"):
        make_net()(queries, keys, values)


# --- train_nw ---------------------------------------------------------------------------------

def test_train_nw_first_loss_is_the_untrained_squared_error(regression_data):
    x, y = regression_data
    losses = train_nw(make_net(), as_np(x), as_np(y), num_epochs=1)
    pred, _ = np_nw_gaussian(x.astype(float), np_leave_one_out(x), np_leave_one_out(y), 1.0)
    assert losses[0] == pytest.approx((0.5 * (pred - y) ** 2).sum(), rel=1e-4)  # L2Loss, summed


def test_train_nw_takes_one_sgd_step_per_epoch(regression_data):
    x, y = (a.astype(float) for a in regression_data)
    keys, values = np_leave_one_out(x), np_leave_one_out(y)
    net = make_net()
    train_nw(net, as_np(x), as_np(y), num_epochs=1, lr=0.5)
    # Loss sum_i (pred_i - y_i)^2 / 2 has gradient sum_i (pred_i - y_i) d pred_i / dw.
    pred, _ = np_nw_gaussian(x, keys, values, 1.0)
    grad = (pred - y) @ np_nw_gaussian_grad(x, keys, values, 1.0)
    assert float(net.w.data()[0]) == pytest.approx(1.0 - 0.5 * grad, rel=1e-4)


def test_train_nw_lowers_loss_and_narrows_the_kernel(regression_data):
    x, y = regression_data
    net = make_net()
    losses = train_nw(net, as_np(x), as_np(y), num_epochs=5, lr=0.5)
    assert len(losses) == 5 and all(isinstance(v, float) for v in losses)
    assert losses[-1] < losses[0]
    assert 0 < net.bandwidth < 1.0


def test_train_nw_calls_back_after_each_epoch(regression_data):
    x, y = regression_data
    calls = []
    losses = train_nw(make_net(), as_np(x), as_np(y), num_epochs=3,
                      callback=lambda epoch, loss: calls.append((epoch, loss)))
    assert calls == list(zip([1, 2, 3], losses))


@pytest.mark.parametrize("bad", [0, -1, 2.0, "5", None])
def test_train_nw_rejects_bad_num_epochs(bad):
    with pytest.raises(ValueError, match="num_epochs must be an int >= 1"):
        train_nw(make_net(), as_np([0, 1, 2]), as_np([0, 1, 2]), num_epochs=bad)


def test_train_nw_rejects_mismatched_data():
    with pytest.raises(ValueError, match="x_train and y_train"):
        train_nw(make_net(), as_np([0, 1, 2]), as_np([0, 1]))


# --- device placement: everything on mx.cpu(1) ------------------------------------------------

def test_nadaraya_watson_on_cpu1(regression_data, cpu1):
    x, y = regression_data
    pred, weights = nadaraya_watson(as_np(x, cpu1), as_np(y, cpu1), as_np([1.0, 2.0], cpu1))
    assert pred.ctx == weights.ctx == cpu1
    expected, _ = np_nadaraya_watson(x, y, [1.0, 2.0], NP_KERNELS[gaussian], 1.0)
    onp.testing.assert_allclose(pred.asnumpy(), expected, rtol=1e-4)


def test_nadaraya_watson_puts_list_queries_on_the_training_context(cpu1):
    pred, weights = nadaraya_watson(as_np([0, 1], cpu1), as_np([2, 3], cpu1), [0.5])
    assert pred.ctx == weights.ctx == cpu1


def test_nadaraya_watson_rejects_arrays_on_another_context(cpu1):
    with pytest.raises(ValueError, match=r"x_query is on cpu\(0\) but x_train is on cpu\(1\)"):
        nadaraya_watson(as_np([0, 1], cpu1), as_np([2, 3], cpu1), as_np([0.5]))


def test_leave_one_out_on_cpu1(cpu1):
    keys, values = leave_one_out(as_np([0, 1, 2], cpu1), as_np([3, 4, 5], cpu1))
    assert keys.ctx == values.ctx == cpu1
    onp.testing.assert_array_equal(keys.asnumpy(), [[1, 2], [0, 2], [0, 1]])
    onp.testing.assert_array_equal(values.asnumpy(), keys.asnumpy() + 3)


def test_nw_regression_forward_on_cpu1(regression_data, cpu1):
    x, y = regression_data
    keys, values = np_leave_one_out(x), np_leave_one_out(y)
    net = make_net(ctx=cpu1)
    pred = net(as_np(x, cpu1), as_np(keys, cpu1), as_np(values, cpu1))
    assert pred.ctx == net.attention_weights.ctx == cpu1
    expected, _ = np_nw_gaussian(x.astype(float), keys, values, 1.0)
    onp.testing.assert_allclose(pred.asnumpy(), expected, rtol=1e-4)


def test_train_nw_on_cpu1(regression_data, cpu1):
    x, y = regression_data
    net = make_net(ctx=cpu1)
    losses = train_nw(net, as_np(x, cpu1), as_np(y, cpu1), num_epochs=3)
    assert losses[-1] < losses[0]
    assert net.w.list_ctx() == [cpu1]
    assert net.w.grad(cpu1).ctx == cpu1
    assert net.attention_weights.ctx == cpu1
