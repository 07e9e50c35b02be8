"""Argument checks shared by the package: each raises an error that names the argument."""
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
    if not _is_real(value) or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def check_rate(name, value):
    """``value`` as a float in [0, 1), e.g. a dropout rate; bools are rejected."""
    if not _is_real(value) or not 0 <= value < 1:
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


def check_real(name, value, minimum=None):
    """``value`` as a finite float (>= ``minimum`` if given); bools and NaN are rejected."""
    if not _is_real(value) or not onp.isfinite(float(value)) \
            or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return float(value)


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


def check_contexts(name, ctxs):
    """``ctxs`` as a list after checking it is a non-empty list or tuple of Contexts."""
    if not isinstance(ctxs, (list, tuple)) or not ctxs:
        raise ValueError(f"{name} must be a non-empty list of contexts, got {ctxs!r}")
    for i, ctx in enumerate(ctxs):
        check_context(f"{name}[{i}]", ctx)
    return list(ctxs)


def check_special_tokens(name, vocab, tokens):
    """Raise unless ``vocab`` (a Vocab, a tokenizer or a mapping token -> id) holds every token
    of ``tokens``: a missing one would silently become the id of the unknown token."""
    known = getattr(vocab, "token_to_idx", vocab)
    missing = [token for token in tokens if token not in known]
    if missing:
        raise ValueError(f"{name} must hold the tokens {missing} (reserve them when "
                         "building it)")


def nonempty(name, iterable):
    """Iterate over ``iterable``; raise ValueError at its end if it yielded nothing (a loop over
    it would divide by zero or, repeated until a number of steps, never end)."""
    empty = True
    for item in iterable:
        empty = False
        yield item
    if empty:
        raise ValueError(f"{name} yielded no batch: it is empty")


def check_tokens(name, X, valid_len):
    """Raise unless ``X`` is (batch, steps) token ids, neither empty, and ``valid_len`` None or
    (batch,) integers in [0, steps]: an encoder would otherwise hide a longer length by
    cutting it to steps."""
    check_array(name, X, 2, "(batch, steps) token ids")
    if valid_len is not None:
        check_lengths("valid_len", valid_len, *X.shape, f" ({name} has {X.shape[1]} steps)")


def check_labels(name, labels, logits):
    """Raise unless ``labels`` holds one class id in [0, classes) per row of ``logits``
    (..., classes): an id out of range would pick another row's score or garbage."""
    if labels.size * logits.shape[-1] != logits.size:
        raise ValueError(f"{name} must hold one label per prediction {logits.shape[:-1]}, got "
                         f"shape {labels.shape}")
    check_integers(name, labels, 0, logits.shape[-1] - 1,
                   f" (class ids below {logits.shape[-1]})")


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


def check_divisible(name, value, divisor_name, divisor):
    """Raise unless ``value`` (named ``name``) is a multiple of ``divisor``."""
    if value % divisor:
        raise ValueError(f"{name} must be divisible by {divisor_name}, got {name} = {value} and "
                         f"{divisor_name} = {divisor}")


def check_same_shape(X, Y):
    """Raise unless ``X`` and ``Y`` have one shape with a last axis (a width) >= 1, as a
    residual connection X + Y followed by a LayerNorm needs."""
    if X.shape != Y.shape:
        raise ValueError(f"X and Y must have the same shape, got X {X.shape}, Y {Y.shape}")
    check_width("X", X)  # nothing to normalise; the LayerNorm cannot be sized


def check_width(name, X):
    """Raise unless ``X`` (..., d) has a width d >= 1, as a layer on its rows needs (an empty
    batch or no steps are fine)."""
    if X.shape[-1:] in ((), (0,)):
        raise ValueError(f"{name} must have a width (last axis) >= 1, got shape {X.shape}")


def check_sequence_loss(pred, label, valid_len):
    """Raise unless ``pred`` is (batch, steps, vocab) float logits, ``label`` (batch, steps)
    class ids below vocab and ``valid_len`` (batch,) integers in [0, steps]."""
    for name, x in (("pred", pred), ("label", label), ("valid_len", valid_len)):
        check_ndarray(name, x)  # a list has no shape to report
    if pred.ndim != 3 or label.shape != pred.shape[:2] or valid_len.shape != pred.shape[:1]:
        raise ValueError("expected pred (batch, steps, vocab), label (batch, steps) and "
                         f"valid_len (batch,); got shapes {pred.shape}, {label.shape}, "
                         f"{valid_len.shape}")
    check_float_array("pred", pred)
    check_integers("label", label, 0, pred.shape[2] - 1, " (class ids below vocab)")
    check_lengths("valid_len", valid_len, pred.shape[0], pred.shape[1])


def check_step_tokens(name, X, batch, embedding):
    """Raise unless ``X`` is (``batch``, steps) ids, neither axis empty, that ``embedding`` (a
    Gluon Embedding) has rows for: a decoder's input, whose batch its state fixes."""
    if X.ndim != 2 or X.shape[0] != batch:
        raise ValueError(f"{name} must be (batch = {batch}, steps) token ids, got shape "
                         f"{X.shape}")
    check_token_ids(name, X, embedding)


def check_pred_positions(X, pred_positions):
    """Raise unless ``X`` is (batch, steps, num_hiddens) and ``pred_positions`` (batch, P)
    integers in [0, steps), neither with an empty axis."""
    if X.ndim != 3 or pred_positions.ndim != 2 or pred_positions.shape[0] != X.shape[0]:
        raise ValueError(f"X must be (batch, steps, num_hiddens) and pred_positions "
                         f"(batch, P), got X {X.shape}, pred_positions "
                         f"{pred_positions.shape}")
    check_array("X", X)
    check_array("pred_positions", pred_positions)
    check_integers("pred_positions", pred_positions, 0, X.shape[1] - 1,
                   f" (positions of X's {X.shape[1]} steps)")


def check_bert_inputs(encoder, tokens, segments, valid_lens):
    """Raise unless ``tokens`` and ``segments`` are (batch, steps) ids of one shape, with at
    most ``encoder.max_len`` steps, that ``encoder.token_embedding`` and
    ``encoder.segment_embedding`` have rows for, and ``valid_lens`` None or (batch,)
    integers in [0, steps]."""
    check_tokens("tokens", tokens, valid_lens)
    check_shaped_like("segments", segments, "tokens", tokens.shape)
    if tokens.shape[1] > encoder.max_len:
        raise ValueError(f"tokens has {tokens.shape[1]} steps, more than max_len = "
                         f"{encoder.max_len} learned positions")
    check_token_ids("tokens", tokens, encoder.token_embedding)
    check_token_ids("segments", segments, encoder.segment_embedding)


def check_shaped_like(name, x, like, shape):
    """Raise unless ``x`` is an mxnet.np array of ``shape``, that of the array ``like`` (a
    name)."""
    from mxnet import np
    if not isinstance(x, np.ndarray) or x.shape != shape:
        raise ValueError(f"{name} must be an mxnet array shaped like {like} {shape}, got "
                         f"{getattr(x, 'shape', x)!r:.80} ({type(x).__name__})")


def check_segment_pairs(X, segments, valid_lens):
    """Raise unless ``X`` is (batch, steps, d) floats, ``segments`` (batch, steps) of 0 (the
    first text) and 1 (the second) and ``valid_lens`` (batch,) integers in [0, steps]."""
    check_hidden_states("X", X)
    check_lengths("valid_lens", valid_lens, X.shape[0], X.shape[1])
    check_shaped_like("segments", segments, "the steps of X", X.shape[:2])
    check_integers("segments", segments, 0, 1, " (0: the first text, 1: the second)")


def check_sampling(logits, temperature, top_k, top_p):
    """``logits`` (vocab_size,) as float64 NumPy, after checking that they are finite real
    numbers (ints or floats) and not empty, ``temperature`` a finite number >= 0,
    ``top_k`` None or an int >= 1 and ``top_p`` None or a number in (0, 1]."""
    logits = onp.asarray(logits.asnumpy() if hasattr(logits, "asnumpy") else logits)
    if logits.dtype.kind not in "iuf":  # bools and complex numbers are no scores
        raise TypeError(f"logits must hold real numbers, got dtype {logits.dtype.name}")
    logits = logits.astype("float64")
    if logits.ndim != 1 or logits.size == 0 or not onp.isfinite(logits).all():
        raise ValueError(f"logits must be a non-empty 1-D array of finite numbers, got "
                         f"shape {logits.shape}")
    if not _is_real(temperature) or not 0 <= temperature < float("inf"):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        check_int("top_k", top_k, minimum=1)
    if top_p is not None and (not _is_real(top_p) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")
    return logits


def _is_real(x):
    """True for a real number that is not a bool (True is an int in Python)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_prompt(prompt_ids, num_tokens, max_len, embedding):
    """Raise unless ``prompt_ids`` is a non-empty list (or tuple) of ids that ``embedding``
    (a Gluon Embedding) has rows for and the prompt and ``num_tokens`` new tokens fit in
    ``max_len`` positions (the last new one is never fed)."""
    if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids:
        raise ValueError(f"prompt_ids must be a non-empty list of token ids, got "
                         f"{prompt_ids!r}")
    check_id_list("prompt_ids", prompt_ids, embedding.weight.shape[0])
    if len(prompt_ids) + num_tokens - 1 > max_len:
        raise ValueError(f"a prompt of {len(prompt_ids)} tokens and {num_tokens} new ones "
                         f"need {len(prompt_ids) + num_tokens - 1} positions, more than "
                         f"max_len = {max_len}")


def check_positions(X, offset, num_hiddens, max_len):
    """``offset`` as an int >= 0, after checking that ``X`` (batch, steps, d) has d =
    ``num_hiddens`` and that its positions offset .. offset + steps - 1 are below
    ``max_len``."""
    offset = check_int("offset", offset)
    if X.shape[-1] != num_hiddens:
        raise ValueError(f"X must have num_hiddens = {num_hiddens} features on its "
                         f"last axis, got X of shape {X.shape}")
    if offset + X.shape[1] > max_len:
        raise ValueError(f"positions {offset} to {offset + X.shape[1] - 1} (offset {offset}, "
                         f"{X.shape[1]} steps) do not fit max_len = {max_len}")
    return offset


def check_training_data(x_train, y_train, minimum=1):
    """Raise unless ``x_train`` and ``y_train`` (1-D arrays) have one length >= ``minimum``."""
    if x_train.shape != y_train.shape or x_train.shape[0] < minimum:
        length = "non-empty and of equal length" if minimum == 1 else \
            f"of equal length >= {minimum}"
        raise ValueError(f"x_train and y_train must be {length}, got shapes {x_train.shape} "
                         f"and {y_train.shape}")


def check_kernel(kernel):
    """Raise unless ``kernel`` is callable, a function of u."""
    if not callable(kernel):
        raise TypeError(f"kernel must be a function of u, got {kernel!r}")


def check_row_keys(queries, keys, values):
    """Raise unless ``queries`` is (m,) and ``keys`` and ``values`` (m, n), n >= 1: one row of
    keys and values per query."""
    if queries.ndim != 1 or keys.ndim != 2 or keys.shape != values.shape \
            or keys.shape[0] != queries.shape[0]:
        raise ValueError("expected queries (m,), keys and values (m, n); got shapes "
                         f"{queries.shape}, {keys.shape}, {values.shape}")
    check_array("keys", keys)


def check_kernel_values(values, u):
    """``values``, the kernel's K(u), after checking that they are an mxnet.np array of the
    shape of ``u`` holding finite numbers >= 0 (weights)."""
    from mxnet import np
    if not isinstance(values, np.ndarray) or values.shape != u.shape:
        raise TypeError(f"kernel must map u {u.shape} to an array of its shape, got {values!r}")
    bad = values.asnumpy()[~(np.isfinite(values) & (values >= 0)).asnumpy()]
    if bad.size:
        raise ValueError(f"kernel must return finite values >= 0, got {bad[:5].tolist()}")
    return values


def check_heads(X, axis, num_heads):
    """``num_heads`` as an int >= 1, after checking that it divides the ``axis`` ("first" or
    "last") of ``X``, the axis that holds the heads."""
    num_heads = check_int("num_heads", num_heads, minimum=1)
    size = X.shape[0 if axis == "first" else -1]
    if size % num_heads:
        raise ValueError(f"the {axis} axis of X ({size}) must be divisible by num_heads = "
                         f"{num_heads}, got X of shape {X.shape}")
    return num_heads


def check_given(name, value, what):
    """Raise unless ``value`` is not None; ``what`` says what it must be, e.g. "(batch,)
    lengths"."""
    if value is None:
        raise ValueError(f"{name} must be given: {what}, got None")


def check_hidden_states(name, X):
    """Raise unless ``X`` is a 3-D float array, (batch, steps, num_hiddens)."""
    check_float_array(name, X)
    if X.ndim != 3:
        raise ValueError(f"{name} must be (batch, steps, num_hiddens), got shape {X.shape}")


def check_same_width(queries, keys):
    """The width d of ``queries`` and ``keys`` (..., d), after checking that they share it."""
    d = queries.shape[-1]
    if keys.shape[-1] != d:
        raise ValueError("queries and keys must have the same width d, got "
                         f"queries {queries.shape}, keys {keys.shape}")
    return d
