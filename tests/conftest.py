"""Shared fixtures: headless matplotlib, the second CPU context and d2l's regression data."""
import matplotlib

matplotlib.use("Agg")  # before pyplot is imported (d2lattn imports it): no window, no display

import d2lattn  # noqa: E402,F401  (must come first: it makes mxnet importable on new numpy)
import matplotlib.pyplot as plt  # noqa: E402
import mxnet as mx  # noqa: E402
import numpy as onp  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    """Close every figure a test opened."""
    yield
    plt.close("all")


@pytest.fixture
def cpu1():
    """A second CPU context: mxnet treats mx.cpu(1) as a device distinct from mx.cpu(0)."""
    return mx.cpu(1)


@pytest.fixture
def regression_data():
    """d2l's toy data, float32 numpy: 50 sorted x in [0, 5), y = 2 sin x + x^0.8 + N(0, 0.5^2)."""
    rng = onp.random.default_rng(0)
    x = onp.sort(rng.uniform(0, 5, 50))
    y = 2 * onp.sin(x) + x ** 0.8 + rng.normal(0, 0.5, 50)
    return x.astype("float32"), y.astype("float32")
