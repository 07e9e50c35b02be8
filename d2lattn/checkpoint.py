"""A block's parameters to and from a safetensors file, named by their paths in the block
(``encoder.blks.0.ffn.dense1.weight``, ...): the format of the trained models that the
chapters load (Chapter 3's translators, Chapter 7's small BERT), each with a JSON record of
its settings. The paths come from Gluon 1.x's private ``Block._collect_params_with_prefix``,
what its own ``save_parameters`` uses; relying on it is safe because MXNet 1.9.1, the last
release of Gluon 1.x, will not change."""
import numpy as onp
from mxnet import np


def save_parameters(net, file, dtype="float16"):
    """Write the parameters of the initialised block ``net`` to the safetensors ``file`` in
    ``dtype``, a float dtype; :func:`load_parameters` reads them back. Raises ValueError,
    and writes nothing, if a parameter is not finite or has a value too large for ``dtype``
    (float16 holds at most 65504)."""
    from safetensors.numpy import save_file
    if not _is_float_dtype(dtype):
        raise TypeError(f"dtype must be a float dtype such as 'float16' or 'float32', got "
                        f"{dtype!r}")
    arrays = {name: _fitted(name, p.data().asnumpy(), onp.dtype(dtype))
              for name, p in net._collect_params_with_prefix().items()}
    save_file(arrays, str(file))


def _is_float_dtype(dtype):
    try:
        return onp.issubdtype(onp.dtype(dtype), onp.floating)
    except TypeError:  # not a dtype at all
        return False


def _fitted(name, value, dtype):
    """The parameter ``name``'s ``value`` in ``dtype``, after checking it fits."""
    if not onp.isfinite(value).all():
        raise ValueError(f"the parameter {name} holds values that are not finite (inf or "
                         "nan): nothing is written")
    largest = float(onp.abs(value).max(initial=0))
    if largest > onp.finfo(dtype).max:
        raise ValueError(f"the parameter {name} does not fit {dtype}: its largest |value| is "
                         f"{largest:g}, above {onp.finfo(dtype).max:g}; save it in float32 "
                         "(nothing is written)")
    return value.astype(dtype)


def read_tensors(file):
    """The tensors of the safetensors ``file``, ``{name: NumPy array}``. Raises ValueError
    naming the file if it is not a safetensors file, or the tensors of a dtype NumPy lacks
    (bfloat16, float8)."""
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(str(file), framework="numpy") as f:
            dtypes = {name: f.get_slice(name).get_dtype() for name in f.keys()}
            unreadable = [f"{name} ({dtype})" for name, dtype in sorted(dtypes.items())
                          if dtype.startswith(("BF", "F8"))]
            if unreadable:
                raise ValueError(f"{file} holds tensors of a dtype NumPy cannot read: "
                                 f"{', '.join(unreadable)}; convert them to float32 or "
                                 "float16")
            return {name: f.get_tensor(name) for name in dtypes}
    except SafetensorError as err:
        raise ValueError(f"{file} is not a safetensors file ({err})") from None


def load_parameters(net, file):
    """Set the parameters of the initialised block ``net``, whose shapes are known (call it
    once first if some were deferred), to those of the safetensors ``file``, in float32 on
    their contexts. Raises ValueError naming the file and the tensors unless the file holds
    exactly the net's parameters, each of its shape."""
    params = net._collect_params_with_prefix()
    arrays = read_tensors(file)
    if set(arrays) != set(params):
        raise ValueError(f"{file} does not fit the net: unknown tensors "
                         f"{sorted(set(arrays) - set(params))}, missing parameters "
                         f"{sorted(set(params) - set(arrays))}")
    for name, value in sorted(arrays.items()):
        if value.shape != params[name].shape:
            raise ValueError(f"{file} does not fit the net: {name} is {value.shape}, the "
                             f"parameter {params[name].shape}")
    for name, value in arrays.items():
        params[name].set_data(np.array(value, dtype="float32"))


def required_entries(file, mapping, names, what="entries"):
    """``mapping``, a JSON object read from ``file`` (its ``what``: "entries", "settings"),
    after checking it holds every key of ``names``: ValueError naming the file and the
    missing ones."""
    if not isinstance(mapping, dict):
        raise ValueError(f"{file}: {what} must be a JSON object, got {type(mapping).__name__}")
    missing = sorted(set(names) - set(mapping))
    if missing:
        raise ValueError(f"{file} lacks the {what} {missing}")
    return mapping
