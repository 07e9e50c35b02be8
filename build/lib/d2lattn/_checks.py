"""Argument checks shared by the package: each raises an error that names the argument."""
import numbers


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
