"""A block's parameters to and from a safetensors file, named by their paths in the block
(``encoder.blks.0.ffn.dense1.weight``, ...): the format of the trained models that the
chapters load (Chapter 3's translators, Chapter 7's small BERT)."""
from mxnet import np


def save_parameters(net, file, dtype="float16"):
    """Write the parameters of the initialised block ``net`` to the safetensors ``file`` in
    ``dtype``; :func:`load_parameters` reads them back."""
    from safetensors.numpy import save_file
    arrays = {name: p.data().asnumpy().astype(dtype)
              for name, p in net._collect_params_with_prefix().items()}
    save_file(arrays, str(file))


def load_parameters(net, file):
    """Set the parameters of the initialised block ``net``, whose shapes are known (call it
    once first if some were deferred), to those of the safetensors ``file``, in float32 on
    their contexts. Raises ValueError naming the file and the tensors unless the file holds
    exactly the net's parameters, each of its shape."""
    from safetensors.numpy import load_file
    params = net._collect_params_with_prefix()
    arrays = load_file(str(file))
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
