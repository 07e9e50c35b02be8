"""Shared fixtures: headless matplotlib, the second CPU context, d2l's regression data, the
book built once for the tests that read it and the grader's sample released once for those that
grade it; how pytest -n splits the suite between workers."""
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
    folder given as --path-output (the HTML is in its _build/html) and the build's result."""
    out = tmp_path_factory.mktemp("book")
    result = subprocess.run(
        [Path(sys.executable).parent / "jupyter-book", "build", ROOT, "--path-output", out,
         "-W", "-n", "--keep-going"], capture_output=True, text=True, timeout=900)
    return out, result


@pytest.fixture(scope="session")
def sample_release(tmp_path_factory):
    """The grader's sample master (tests/data/grading/sample.ipynb) released once per run, which
    runs it and its student version in the sandbox: the folder with the student notebook
    sample.ipynb and the bundle in autograder/. Tests only read it."""
    from d2lattn.grading import release
    from grading_support import SAMPLE, require_sandbox

    require_sandbox()
    out = tmp_path_factory.mktemp("sample_release")
    release(SAMPLE, out)
    return out


@pytest.fixture(scope="session")
def bundle(sample_release):
    """The sample's bundle folder (autograder/ of :func:`sample_release`)."""
    return sample_release / "autograder"


# pytest -n 2 (pyproject.toml) sends each test file, and each notebook with its cells in order,
# to a worker as one unit; these files go together: the readers of the book's build (one
# build), and the tests that run sandboxes (some count the machine's sandbox processes).
TOGETHER = {"test_book.py": "the book's build", "test_browser.py": "the book's build",
            "test_pdf.py": "the book's build", "test_exercises.py": "sandboxes",
            "test_gradebook.py": "sandboxes", "test_batch.py": "sandboxes",
            "test_release.py": "sandboxes", "test_identity.py": "sandboxes",
            "test_sandbox.py": "sandboxes", "test_variants.py": "sandboxes",
            "test_session.py": "grader sessions",
            "test_channels.py": "grader sessions"}


# The longest units start first, longest first, so that the two workers finish together
# (each takes minutes; pyproject.toml's --no-loadscope-reorder keeps this order); the rest,
# none longer than a minute, follow in collection order and fill the gaps. Seconds each took
# in a run with -n 2 on 2 cores at load average 7 to 10 (2026-11-28; 1918 s, the workers
# 1824 and 1829 s busy): 618, 414, 377, 312, 256, 237, 94. Chapter 3, 1177 s then, now loads
# its stored models and takes about 40 s (issue 34), so it is no longer among them. The
# grader's session and channel tests (issue 42, about two minutes together) follow.
LONGEST_FIRST = ["09_gpt.ipynb", "the book's build", "sandboxes", "08_bert_finetuning.ipynb",
                 "10_attention_at_scale.ipynb", "06_transformer.ipynb", "07_bert.ipynb",
                 "grader sessions"]


def pytest_collection_modifyitems(items):
    def rank(item):
        unit = TOGETHER.get(item.path.name, item.path.name)
        return LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)
    items.sort(key=rank)  # stable: a notebook's cells and a file's tests keep their order


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadFileScheduling

    class Together(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return TOGETHER.get(path.rsplit("/", 1)[-1], path)

    return Together(config, log)
