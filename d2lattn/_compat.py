"""Let mxnet 1.9.1 import and run on numpy 1.24+ / 2.x and on Python 3.12+.

mxnet 1.9.1 (2022) is the last release of a retired framework. It reads numpy names that
numpy 1.24 and 2.x removed, both when it is imported and later at run time (for example
``numpy.bool`` in boolean indexing), and it imports ``distutils``, which Python 3.12 dropped.
:func:`apply` puts back exactly the names mxnet reads, each as an alias of its successor,
and only where numpy lacks it: on numpy 1.23 it changes nothing. It must run before
``import mxnet`` and the aliases must stay in place afterwards.
"""
import types

import numpy

# Constants and type aliases removed by numpy 1.24 (``bool``) and 2.0 (the rest).
CONSTANTS = {"bool": bool, "PZERO": 0.0, "NZERO": -0.0, "PINF": numpy.inf,
             "NINF": -numpy.inf, "NAN": numpy.nan, "NaN": numpy.nan, "Inf": numpy.inf}
# Functions renamed by numpy 2.0 and 2.4: old name -> current name.
RENAMED = {"sometrue": "any", "alltrue": "all", "product": "prod", "round_": "round",
           "cumproduct": "cumprod", "in1d": "isin", "trapz": "trapezoid"}
# Functions removed without a numpy successor; mxnet only registers them by name.
REMOVED = ("mirr", "npv", "pmt", "ppmt", "pv", "rate", "msort")


def _removed(name):
    def unavailable(*args, **kwargs):
        raise NotImplementedError(f"numpy.{name} was removed from numpy; "
                                  "use numpy_financial or numpy.sort instead")
    unavailable.__name__ = name
    return unavailable


def missing_names(module=numpy):
    """The names mxnet 1.9.1 reads that ``module`` (numpy) lacks."""
    names = [*CONSTANTS, *RENAMED, *REMOVED]
    missing = [name for name in names if name not in vars(module)]
    if not hasattr(module, "compat"):
        missing.append("compat")
    return missing


def apply(module=numpy):
    """Restore in ``module`` (numpy) every name from :func:`missing_names`; return them."""
    missing = missing_names(module)
    for name in missing:
        if name in CONSTANTS:
            setattr(module, name, CONSTANTS[name])
        elif name in RENAMED:
            setattr(module, name, getattr(module, RENAMED[name]))
        elif name == "compat":  # numpy.compat left in 2.5; mxnet reads compat.basestring
            setattr(module, name, types.SimpleNamespace(basestring=str))
        else:
            setattr(module, name, _removed(name))
    _check_distutils()
    return missing


def _check_distutils():
    try:
        import distutils.version  # noqa: F401  (mxnet imports it)
    except ImportError as err:
        raise ImportError(
            "mxnet 1.9.1 imports distutils, which Python 3.12+ no longer ships: "
            "install setuptools (pip install setuptools) and restart Python") from err


def fill_any_float_dtype():
    """Let mxnet's initializers fill float64 and float16 parameters (call after ``import
    mxnet``). They call ``mxnet.np.random.uniform(..., out=param)`` (or ``normal``), which
    draws float32 whatever ``out`` holds and fails on any other dtype with an operator error:
    a model cast to float64 could be neither initialised nor re-initialised. Here a missing
    ``dtype`` defaults to that of ``out``."""
    import mxnet.numpy.random as mx_random
    for name in ("uniform", "normal"):
        draw = getattr(mx_random, name)
        if getattr(draw, "_fills_out_dtype", False):
            continue

        def fill(*args, _draw=draw, dtype=None, out=None, **kwargs):
            if dtype is None and out is not None and out.dtype != numpy.float32 \
                    and len(args) < 4:  # (low, high, size): dtype not given by position
                dtype = out.dtype
            return _draw(*args, dtype=dtype, out=out, **kwargs)
        fill.__name__, fill.__doc__, fill._fills_out_dtype = name, draw.__doc__, True
        setattr(mx_random, name, fill)
