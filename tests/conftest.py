"""Shared fixtures: headless matplotlib, the second CPU context, d2l's regression data and the
book built once for the tests that read it."""
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported (d2lattn imports it): no window, no display

import d2lattn  # noqa: E402,F401  (must come first: it makes mxnet importable on new numpy)
import matplotlib.pyplot as plt  # noqa: E402
import mxnet as mx  # noqa: E402
import numpy as onp  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.fixture(scope="session")
def book_build(tmp_path_factory):
    """The book built once per run as `jupyter-book build` does, with Sphinx warnings as
    errors (-W, -n nitpicky, --keep-going so that the pages are written all the same): the
    folder given as --path-output (the HTML is in its _build/html) and the build's result.
    Under pytest -n the workers share it: the first one builds, the others wait on a lock."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    out, saved = shared / "book", shared / "book-build.json"
    with open(shared / "book-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            result = subprocess.run(
                [Path(sys.executable).parent / "jupyter-book", "build", ROOT, "--path-output",
                 out, "-W", "-n", "--keep-going"], capture_output=True, text=True, timeout=900)
            saved.write_text(json.dumps({"args": [str(a) for a in result.args],
                                         "returncode": result.returncode,
                                         "stdout": result.stdout, "stderr": result.stderr}))
    return out, subprocess.CompletedProcess(**json.loads(saved.read_text()))
