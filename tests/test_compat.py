import math
import subprocess
import sys
import types
from pathlib import Path

import mxnet as mx
import numpy
import pytest

from d2lattn import _compat

REPO_ROOT = Path(__file__).resolve().parents[1]
# What mxnet 1.9.1 reads, written out here rather than taken from _compat's tables.
CONSTANT_CHECKS = {"bool": lambda v: v is bool,
                   "PZERO": lambda v: v == 0 and math.copysign(1, v) == 1,
                   "NZERO": lambda v: v == 0 and math.copysign(1, v) == -1,
                   "PINF": lambda v: v == math.inf, "Inf": lambda v: v == math.inf,
                   "NINF": lambda v: v == -math.inf,
                   "NAN": math.isnan, "NaN": math.isnan}
SUCCESSORS = {"sometrue": "any", "alltrue": "all", "product": "prod", "round_": "round",
              "cumproduct": "cumprod", "in1d": "isin", "trapz": "trapezoid"}
REMOVED = ["mirr", "npv", "pmt", "ppmt", "pv", "rate", "msort"]
ALL_NAMES = [*CONSTANT_CHECKS, *SUCCESSORS, *REMOVED, "compat"]


def fake_numpy(**present):
    """A bare module holding only numpy's current names that the aliases point to."""
    fake = types.ModuleType("fakenp")
    for name in ("any", "all", "prod", "round", "cumprod", "isin", "inf", "nan"):
        setattr(fake, name, getattr(numpy, name))
    fake.trapezoid = getattr(numpy, "trapezoid", None) or numpy.trapz  # trapezoid: numpy >= 2.0
    for name, value in present.items():
        setattr(fake, name, value)
    return fake


def run_python(code):
    """Run ``code`` in a fresh interpreter from the repository root; return the result."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)


# --- missing_names and apply on a fake numpy --------------------------------------------------

def test_missing_names_of_a_bare_module():
    assert sorted(_compat.missing_names(fake_numpy())) == sorted(ALL_NAMES)


def test_apply_restores_every_missing_name():
    fake = fake_numpy()
    assert sorted(_compat.apply(fake)) == sorted(ALL_NAMES)
    assert _compat.missing_names(fake) == []


@pytest.mark.parametrize("name", CONSTANT_CHECKS)
def test_apply_restores_constants(name):
    fake = fake_numpy()
    _compat.apply(fake)
    assert CONSTANT_CHECKS[name](getattr(fake, name))


@pytest.mark.parametrize("old, new", SUCCESSORS.items())
def test_apply_aliases_renamed_functions(old, new):
    fake = fake_numpy()
    _compat.apply(fake)
    assert getattr(fake, old) is getattr(fake, new)


def test_aliases_compute_like_their_successors():
    fake = fake_numpy()
    _compat.apply(fake)
    assert fake.product([2, 3, 4]) == 24
    assert fake.alltrue([True, False]) == numpy.False_
    assert fake.trapz([0, 1, 2]) == 2.0  # trapezoids of areas 0.5 and 1.5


@pytest.mark.parametrize("name", REMOVED)
def test_removed_functions_raise_when_called(name):
    fake = fake_numpy()
    _compat.apply(fake)
    assert getattr(fake, name).__name__ == name
    with pytest.raises(NotImplementedError, match=f"numpy.{name} was removed"):
        getattr(fake, name)(0.05, [1, 2])


def test_apply_restores_compat_basestring():
    fake = fake_numpy()
    _compat.apply(fake)
    assert fake.compat.basestring is str


def test_apply_keeps_names_already_present():
    mine = {"bool": object(), "sometrue": lambda a: "mine", "npv": lambda *a: 0.0,
            "compat": types.SimpleNamespace(basestring=bytes)}
    fake = fake_numpy(**mine)
    restored = _compat.apply(fake)
    assert not set(restored) & set(mine)
    for name, value in mine.items():
        assert getattr(fake, name) is value, name


def test_apply_twice_changes_nothing():
    fake = fake_numpy()
    _compat.apply(fake)
    before = dict(vars(fake))
    assert _compat.apply(fake) == []
    assert vars(fake) == before


# --- the real numpy after import d2lattn ------------------------------------------------------

def test_real_numpy_has_every_name_mxnet_reads():
    assert _compat.missing_names() == []
    assert _compat.missing_names(numpy) == []
    assert numpy.compat.basestring is str


def test_numpy_bool_is_numpys_own_or_the_builtin():
    has_own_bool = int(numpy.__version__.split(".")[0]) >= 2  # removed in 1.24, back in 2.0
    assert numpy.bool is (numpy.bool_ if has_own_bool else bool)


def test_boolean_mask_indexing_of_mxnet_arrays():
    x = mx.np.array([3.0, -1.0, 4.0, -1.5, 5.0])
    numpy.testing.assert_array_equal(x[x > 0].asnumpy(), [3, 4, 5])  # reads numpy.bool


def test_check_distutils_passes_here():
    assert _compat._check_distutils() is None


# --- fresh interpreters -----------------------------------------------------------------------

def test_import_without_mxnet_says_what_to_install():
    result = run_python("import sys; sys.modules['mxnet'] = None; import d2lattn")
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError:")
    assert "mxnet 1.9.1" in last_line.lower()
    assert "pip install mxnet==1.9.1" in last_line and "d2lattn[cpu]" not in last_line


def test_check_distutils_without_distutils_says_install_setuptools():
    # Load _compat.py on its own: importing the package would already call _check_distutils.
    path = str(REPO_ROOT / "d2lattn" / "_compat.py")
    result = run_python(
        "import importlib.util, sys\n"
        "sys.modules['distutils'] = sys.modules['distutils.version'] = None\n"
        f"spec = importlib.util.spec_from_file_location('alone', {path!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "module._check_distutils()\n")
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError:") and "setuptools" in last_line


def test_import_without_distutils_says_install_setuptools():
    result = run_python("import sys\n"
                        "sys.modules['distutils'] = sys.modules['distutils.version'] = None\n"
                        "import d2lattn\n")
    assert result.returncode != 0
    assert "ImportError: mxnet 1.9.1 imports distutils" in result.stderr
    assert "pip install setuptools" in result.stderr
