"""Argument checks shared by several modules of the package: each raises an error that names
the argument. A check that one module alone uses is a private function at the end of that
module."""
import json
import numbers
import pathlib

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
    if not is_real(value) or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def check_rate(name, value):
    """``value`` as a float in [0, 1), e.g. a dropout rate; bools are rejected."""
    if not is_real(value) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def check_ndarray(name, x):
    """``x`` after checking that it is an mxnet.np array (not NumPy's, not a list)."""
    from mxnet import np  # here, not at the top: the package applies its numpy shim first
    if not isinstance(x, np.ndarray):
        hint = " from NumPy: convert it with mxnet.np.array()" \
            if isinstance(x, onp.ndarray) else ""
        raise TypeError(f"{name} must be an mxnet.np.ndarray, got {type(x).__name__}{hint}")
    return x


def check_float_array(name, x):
    """Raise unless ``x`` is an mxnet.np array of floating-point numbers."""
    if not onp.issubdtype(check_ndarray(name, x).dtype, onp.floating):
        raise TypeError(f"{name} must hold floating-point numbers, got dtype "
                        f"{onp.dtype(x.dtype).name}")
    return x


def check_integers(name, x, low, high, what=""):
    """Raise unless the array ``x`` holds integers (of any numeric dtype) in [low, high].

    One copy to the host, returned as float64 NumPy. ``what`` ends the message, e.g.
    " (token ids below vocab_size = 10)".
    """
    values = check_ndarray(name, x).asnumpy()
    if not onp.issubdtype(values.dtype, onp.number):
        raise TypeError(f"{name} must hold integers, got dtype {values.dtype.name}")
    values = values.astype("float64")
    bad = values[~((values >= low) & (values <= high) & (values == onp.floor(values)))]
    if bad.size:
        raise ValueError(f"{name} must hold integers in [{low}, {high}]{what}, got "
                         f"{bad[:5].tolist()}")
    return values


INT32_IDS = 2 ** 31  # ids are stored as int32: larger ones would wrap to other, valid ids


def check_id_list(name, ids, size=INT32_IDS):
    """``ids`` (a list, tuple or 1-D NumPy or mxnet array) as int64 NumPy, after checking
    that they are ints (not bools, floats or complex numbers) in [0, ``size``), e.g. a
    vocabulary size. Empty is fine: callers say how many they need."""
    values = onp.asarray(ids.asnumpy() if hasattr(ids, "asnumpy") else ids)
    if values.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of token ids, got "
                         f"{type(ids).__name__} of shape {values.shape}")
    if values.dtype == object:  # e.g. Python ints beyond int64, or mixed types
        if not all(isinstance(i, numbers.Integral) and not isinstance(i, bool)
                   for i in values):
            raise TypeError(f"{name} must hold ints, got {values[:5].tolist()}")
        values = values.astype("float64")  # exact enough to tell out-of-range ids
    elif values.size and values.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold ints, got dtype {values.dtype.name}")
    bad = values[(values < 0) | (values >= size)]
    if bad.size:
        raise ValueError(f"{name} must hold token ids in [0, {size - 1}], got "
                         f"{bad[:5].tolist()}")
    return values.astype("int64")


def check_token_ids(name, X, embedding):
    """Raise unless ``X`` is (batch, steps), neither empty, of ids that ``embedding`` (a Gluon
    Embedding) has rows for."""
    check_array(name, X, 2, "(batch, steps) token ids")
    size = embedding.weight.shape[0]
    check_integers(name, X, 0, size - 1, f" (token ids below the vocabulary size {size})")


def check_array(name, x, ndim=None, axes=None):
    """Raise unless ``x`` is an mxnet.np array (of ``ndim`` axes, if given) without an empty
    axis: zero-size arrays are refused before an MXNet operator sees them (some operators
    crash on them or leave the engine broken for the next, unrelated call). ``axes`` names
    the ``ndim`` axes in the message, e.g. "(batch, steps) token ids"."""
    check_ndarray(name, x)
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be {axes or f'{ndim}-D'}, got shape {x.shape}")
    if 0 in x.shape:
        raise ValueError(f"{name} must have no empty axis, got shape {x.shape}")
    return x


def check_lengths(name, lens, batch, steps, what=None):
    """Raise unless ``lens`` is an mxnet.np array of shape (``batch``,) holding integers in
    [0, ``steps``] (any numeric dtype: 3.0 is fine, 2.5, -1, NaN and inf are not).
    ``what`` ends the message (default: " (the number of steps, <steps>)"). Returns them as
    float64 NumPy."""
    if check_ndarray(name, lens).shape != (batch,):
        raise ValueError(f"{name} must have shape ({batch},), got {lens.shape}")
    return check_integers(name, lens, 0, steps, what or f" (the number of steps, {steps})")


def check_context(name, ctx):
    """Raise unless ``ctx`` is an mxnet Context such as ``mx.cpu()`` (not a str)."""
    import mxnet as mx
    if not isinstance(ctx, mx.Context):
        raise TypeError(f"{name} must be an mxnet Context such as d2lattn.cpu() or "
                        f"d2lattn.try_gpu(), got {ctx!r}")
    return ctx


def check_special_tokens(name, vocab, tokens):
    """Raise unless ``vocab`` (a Vocab, a tokenizer or a mapping token -> id) holds every token
    of ``tokens``: a missing one would silently become the id of the unknown token."""
    known = getattr(vocab, "token_to_idx", vocab)
    missing = [token for token in tokens if token not in known]
    if missing:
        raise ValueError(f"{name} must hold the tokens {missing} (reserve them when "
                         "building it)")


def check_tokens(name, X, valid_lens):
    """Raise unless ``X`` is (batch, steps) token ids, neither empty, and ``valid_lens`` None or
    (batch,) integers in [0, steps]: an encoder would otherwise hide a longer length by
    cutting it to steps."""
    check_array(name, X, 2, "(batch, steps) token ids")
    if valid_lens is not None:
        check_lengths("valid_lens", valid_lens, *X.shape, f" ({name} has {X.shape[1]} steps)")


def read_json_object(file):
    """The JSON object (a dict) in ``file``; ValueError naming the file if it holds none."""
    try:
        value = json.loads(pathlib.Path(file).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise ValueError(f"{file} is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{file} must hold a JSON object, got {type(value).__name__}")
    return value


def check_bool(name, value):
    """``value`` after checking it is True or False (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def check_layer_input(name, X, dense, layer):
    """Raise unless ``X`` (..., width) fits the Gluon Dense ``dense``, called ``layer`` in the
    message: the dtype of its weight and, once it has seen an input, its input width."""
    weight = dense.weight
    if onp.dtype(X.dtype) != onp.dtype(weight.dtype):
        raise TypeError(f"{name} has dtype {onp.dtype(X.dtype).name} but {layer}'s weight "
                        f"{onp.dtype(weight.dtype).name}: cast the inputs or the block "
                        "(block.cast(dtype))")
    width = weight.shape[1]  # -1 or 0 until the first call
    if width > 0 and X.shape[-1] != width:
        raise ValueError(f"{name} must have width {width}, the input width of {layer}, got "
                         f"{name} of shape {X.shape}")


def check_divisible(name, value, divisor_name, divisor):
    """Raise unless ``value`` (named ``name``) is a multiple of ``divisor``."""
    if value % divisor:
        raise ValueError(f"{name} must be divisible by {divisor_name}, got {name} = {value} and "
                         f"{divisor_name} = {divisor}")


def is_real(x):
    """True for a real number that is not a bool (True is an int in Python)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_hidden_states(name, X):
    """Raise unless ``X`` is a 3-D float array, (batch, steps, num_hiddens)."""
    check_float_array(name, X)
    if X.ndim != 3:
        raise ValueError(f"{name} must be (batch, steps, num_hiddens), got shape {X.shape}")


