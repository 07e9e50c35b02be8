"""Devices: where arrays and parameters live (d2l's helpers, never returning an empty list)."""
from mxnet import npx

from ._checks import check_int


def cpu():
    """The CPU context."""
    return npx.cpu()


def gpu(i=0):
    """The context of GPU ``i`` (it need not exist; see :func:`try_gpu`)."""
    return npx.gpu(check_int("GPU index i", i))


def num_gpus():
    """How many GPUs mxnet can see (0 with the CPU wheel)."""
    return npx.num_gpus()


def try_gpu(i=0):
    """GPU ``i`` if it exists, else the CPU."""
    return gpu(i) if num_gpus() > check_int("GPU index i", i) else cpu()


def try_all_gpus():
    """Every GPU, or ``[cpu()]`` when there is none: never an empty list."""
    return [gpu(i) for i in range(num_gpus())] or [cpu()]

