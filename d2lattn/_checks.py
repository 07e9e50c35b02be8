"""Argument checks shared by the package: each raises an error that names the argument."""
import numbers

import numpy as onp


def check_int(name, value, minimum=0, maximum=None):
    """``value`` as an int in [``minimum``, ``maximum``]; bools are rejected."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum \
            or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an int {bounds}, got {value!r}")
    return int(value)


def check_positive(name, value):
    """``value`` as a positive finite float; bools are rejected."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def check_rate(name, value):
    """``value`` as a float in [0, 1), e.g. a dropout rate; bools are rejected."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def check_float_array(name, x):
    """Raise unless ``x`` is an mxnet.np array of floating-point numbers."""
    from mxnet import np  # here, not at the top: the package applies its numpy shim first
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be an mxnet.np.ndarray, got {type(x).__name__}")
    if not onp.issubdtype(x.dtype, onp.floating):
        raise TypeError(f"{name} must hold floating-point numbers, got dtype "
                        f"{onp.dtype(x.dtype).name}")
    return x


def check_integers(name, x, low, high, what=""):
    """Raise unless the array ``x`` holds integers (of any numeric dtype) in [low, high].

    One copy to the host, returned as float64 NumPy. ``what`` ends the message, e.g.
    " (token ids below vocab_size = 10)".
    """
    values = x.asnumpy()
    if not onp.issubdtype(values.dtype, onp.number):
        raise TypeError(f"{name} must hold integers, got dtype {values.dtype.name}")
    values = values.astype("float64")
    bad = values[~((values >= low) & (values <= high) & (values == onp.floor(values)))]
    if bad.size:
        raise ValueError(f"{name} must hold integers in [{low}, {high}]{what}, got "
                         f"{bad[:5].tolist()}")
    return values


def check_token_ids(name, X, embedding):
    """Raise unless ``X`` holds ids that ``embedding`` (a Gluon Embedding) has rows for."""
    size = embedding.weight.shape[0]
    check_integers(name, X, 0, size - 1, f" (token ids below the vocabulary size {size})")
