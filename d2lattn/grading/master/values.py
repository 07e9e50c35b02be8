"""Plain values in the grader's process: is a submission's value (as the sandbox encoded it,
see :func:`d2lattn.grading.master.steps.encode`) the expected one, and how to show it.

Nothing here calls a submission's object: both sides are JSON data, and the comparison runs on
the grader's own NumPy. Numbers, booleans, arrays and (nested) lists or tuples of numbers are
compared as float arrays: same shape, within rtol 1e-5 and atol 1e-8 (1e-5 if either side is a
float32 or float16 array), NaN equal only to NaN.
Anything else must have the same kind and equal parts.
"""
import numpy

from ..limits import ATOL, ATOL_SINGLE, RTOL, SHOWN

KINDS = {"none", "bool", "str", "num", "dtype", "array", "context", "list", "tuple", "set",
         "dict", "type", "object"}


LEAF = {"none": type(None), "bool": bool, "str": str, "num": (int, float), "dtype": str,
        "context": str, "type": str, "object": str, "list": list, "tuple": list, "set": list,
        "dict": list, "array": (list, int, float)}  # a 0-d array holds one number


class BadValue(ValueError):
    """Data that is not a value the runner could have encoded."""


def same(got, want):
    """True if the plain value ``got`` equals the expected plain value ``want``."""
    try:
        a, b = _numeric(got), _numeric(want)
        if a is not None and b is not None:
            atol = ATOL_SINGLE if {_dtype(got), _dtype(want)} & {"float32", "float16"} else ATOL
            return a.shape == b.shape and bool(numpy.allclose(a, b, rtol=RTOL, atol=atol,
                                                              equal_nan=True))
        if _kind(got) != _kind(want):
            return False
        if want["t"] in ("list", "tuple", "set"):
            return len(got["v"]) == len(want["v"]) and all(map(same, got["v"], want["v"]))
        if want["t"] == "dict":
            return len(got["v"]) == len(want["v"]) and all(
                any(same(k, key) and same(v, value) for k, v in got["v"])
                for key, value in want["v"])
        return got["v"] == want["v"] and got.get("type") == want.get("type")
    except (BadValue, TypeError, ValueError, KeyError, RecursionError, OverflowError):
        return False


def show(value, limit=SHOWN):
    """A short text for a plain value: Python-like, on one line, cut to ``limit`` characters."""
    try:
        text = _text(value)
    except (BadValue, TypeError, ValueError, KeyError, RecursionError, OverflowError):
        text = "<not a value>"
    return one_line(text, limit)


def one_line(text, limit=SHOWN):
    """``text`` (a submission's, say) safe to show in a report: cut to ``limit`` characters
    (None: no cut), then every character that is not printable (a line break, a control
    character) escaped as Python would, so it stays on one line and can close nothing."""
    text = str(text)
    cut = text if limit is None or len(text) <= limit else text[:limit]
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                    for c in cut)
    return shown if cut is text else shown + " ..."


def _kind(value):
    if not isinstance(value, dict) or value.get("t") not in KINDS or "v" not in value \
            or not isinstance(value["v"], LEAF.get(value["t"], object)):
        raise BadValue(f"not a plain value: {str(value)[:80]}")
    return value["t"]


def _numeric(value):
    """A float array for numbers, booleans, arrays and lists of them; None otherwise."""
    kind = _kind(value)
    if kind in ("num", "bool"):
        if isinstance(value["v"], (int, float)):  # bool is an int
            return numpy.asarray(float(value["v"]))
        raise BadValue("a number that is not a number")
    if kind == "array":
        data = numpy.asarray(value["v"], dtype=object)
        if list(data.shape) != value["shape"] or not all(
                isinstance(x, (int, float)) for x in data.ravel()):
            raise BadValue("an array whose data does not fit its shape")
        return data.astype(float)
    if kind in ("list", "tuple") and value["v"]:
        parts = [_numeric(item) for item in value["v"]]
        if any(part is None for part in parts) or len({part.shape for part in parts}) > 1:
            return None
        return numpy.stack(parts)
    return None


def _dtype(value):
    return value.get("dtype") if value.get("t") == "array" else None


def _text(value):
    kind = _kind(value)
    if kind in ("none", "bool", "num", "str"):
        return repr(value["v"])
    if kind == "array":
        return " ".join(repr(_numeric(value)).split())
    if kind in ("list", "tuple", "set"):
        inner = ", ".join(_text(item) for item in value["v"])
        return {"list": f"[{inner}]", "set": "{" + inner + "}",
                "tuple": f"({inner}{',' if len(value['v']) == 1 else ''})"}[kind]
    if kind == "dict":
        return "{" + ", ".join(f"{_text(k)}: {_text(v)}" for k, v in value["v"]) + "}"
    if kind == "type":
        return f"<class '{value['v'].removeprefix('builtins.')}'>"
    if kind == "dtype":
        return f"dtype('{value['v']}')"
    if kind == "object":
        return f"{value['v']} (type {value.get('type', '?').removeprefix('builtins.')})"
    return str(value["v"])
