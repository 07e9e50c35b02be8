"""Devices: where arrays and parameters live (d2l's helpers, never returning an empty list).

MXNet 1.9.1's GPU wheels (``mxnet-cu112`` and friends) link against CUDA 11 libraries that
today's machines, Colab included, no longer ship. NVIDIA's ``nvidia-*-cu11`` wheels provide them
under ``<site>/nvidia/<package>/lib/``, where the dynamic loader does not look, and a running
Jupyter kernel cannot change ``LD_LIBRARY_PATH``. So ``import d2lattn`` calls
:func:`preload_cuda_libraries` before it imports mxnet, and :func:`try_gpu` runs a small
kernel on a GPU before handing it out. This module imports mxnet only inside functions.
"""
import ctypes
import glob
import importlib.metadata
import os
import re
import sys
import warnings

from ._checks import check_int

# The CUDA 11 libraries MXNet's GPU build needs, as the nvidia-*-cu11 wheels ship them:
# (package directory, file patterns), in the order they depend on each other. The names carry
# CUDA 11's versions because the nvidia-*-cu12 wheels (PyTorch's) share these directories.
CUDA_LIBRARIES = (
    ("cuda_runtime", ("libcudart.so.11.0",)),
    ("cublas", ("libcublasLt.so.11", "libcublas.so.11")),
    ("cufft", ("libcufft.so.10",)),
    ("curand", ("libcurand.so.10",)),
    ("cusolver", ("libcusolver.so.11",)),
    ("cuda_nvrtc", ("libnvrtc.so.11.2", "libnvrtc-builtins.so.11.*")),
    # cuDNN 8.9 opens its sub-libraries lazily, by name: load them all, ops before cnn and adv.
    ("cudnn", ("libcudnn.so.8", "libcudnn_ops_*.so.8", "libcudnn_cnn_*.so.8",
               "libcudnn_adv_*.so.8")),
    ("nccl", ("libnccl.so.2",)),
    ("nvtx", ("libnvToolsExt.so.1",)),
)
_CUDA_HELP = ("install the CUDA 11 libraries (the nvidia-*-cu11 wheels, cuDNN 8.9) as the "
              "first cell of every chapter does on Colab")
# How dlopen and cuDNN name a library they cannot open; dlopen's names the file really missing.
_MISSING_LIBRARY = (re.compile(r"(lib[\w+-]+\.so[.\d]*): cannot open shared object file"),
                    re.compile(r"could not load library (lib[\w+-]+\.so[.\d]*)", re.I))
_verdicts = {}  # GPU index -> None if it ran the test kernel, else the reason it did not


def cpu():
    """The CPU context."""
    from mxnet import npx
    return npx.cpu()


def gpu(i=0):
    """The context of GPU ``i`` (it need not exist; see :func:`try_gpu`)."""
    from mxnet import npx
    return npx.gpu(check_int("GPU index i", i))


def num_gpus():
    """How many GPUs mxnet can see (0 with the CPU wheel)."""
    from mxnet import npx
    return npx.num_gpus()


def try_gpu(i=0):
    """GPU ``i`` if mxnet sees it and it runs a test kernel, else the CPU.

    When GPU ``i`` exists but cannot compute (a GPU newer than MXNet 1.9.1's code, a missing
    CUDA library), a ``RuntimeWarning`` says why, once per GPU.
    """
    i = check_int("GPU index i", i)
    return gpu(i) if i < num_gpus() and _works(i) else cpu()


def try_all_gpus():
    """Every GPU that runs a test kernel, or ``[cpu()]``: never an empty list."""
    return [gpu(i) for i in range(num_gpus()) if _works(i)] or [cpu()]


def _works(i):
    """Whether GPU ``i`` runs the test kernel; tried once per GPU, warning once if not."""
    if i not in _verdicts:
        _verdicts[i] = _why_not(i)
        if _verdicts[i]:
            warnings.warn(f"{_verdicts[i]}; using the CPU instead", RuntimeWarning, stacklevel=3)
    return _verdicts[i] is None


def _why_not(i):
    """None if GPU ``i`` runs the test kernel, else why it does not."""
    from mxnet.base import MXNetError
    try:
        _test_kernel(gpu(i))
    except MXNetError as err:
        return _explain(i, str(err))
    return None


def _test_kernel(ctx):
    """softmax(X X^T) for X = [[0, 1], [2, 3]] computed on ``ctx`` (a cuBLAS product and a
    kernel of MXNet's own) and copied back, which surfaces asynchronous errors: (2, 2) numpy."""
    from mxnet import np, npx
    X = np.arange(4, ctx=ctx).reshape(2, 2)
    return npx.softmax(np.dot(X, X.T)).asnumpy()


def _explain(i, message):
    """Why GPU ``i`` failed, from mxnet's error ``message``."""
    if "no kernel image is available" in message.lower():
        return (f"GPU {i} (compute capability {_compute_capability(i)}) is newer than the "
                "sm_50-86 code in MXNet 1.9.1's wheels: H100 and newer cannot run it")
    library = _missing_library(message)
    if library:
        return f"GPU {i} cannot load {library}: {_CUDA_HELP}"
    return f"GPU {i} failed a test kernel: {message.strip().splitlines()[-1]}"


def _missing_library(message):
    """The shared library an error ``message`` says could not be opened, or None."""
    for pattern in _MISSING_LIBRARY:
        found = pattern.search(message)
        if found:
            return found.group(1).rstrip(".")
    return None


def _compute_capability(i):
    """GPU ``i``'s compute capability as the CUDA driver reports it ('9.0'), or 'unknown'."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "unknown"
    device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if driver.cuInit(0) or driver.cuDeviceGet(ctypes.byref(device), i) \
            or driver.cuDeviceGetAttribute(ctypes.byref(major), 75, device) \
            or driver.cuDeviceGetAttribute(ctypes.byref(minor), 76, device):
        return "unknown"  # 75, 76: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
    return f"{major.value}.{minor.value}"


def find_cuda_libraries(site_dirs=None):
    """The CUDA 11 libraries of the ``nvidia-*-cu11`` wheels, in the order to load them.

    Looks in ``<site>/nvidia/<package>/lib/`` for every directory of ``site_dirs`` (default:
    ``sys.path``) and takes a library found twice from the first directory. Returns a list of
    paths (str): :data:`CUDA_LIBRARIES`' files that exist, packages that are absent skipped.
    """
    sites = _check_paths("site_dirs", sys.path if site_dirs is None else site_dirs)
    sites = [site for site in sites if os.path.isdir(os.path.join(site, "nvidia"))]
    found = {}  # file name -> path, in load order
    for package, patterns in CUDA_LIBRARIES:
        for pattern in patterns:
            for site in sites:
                lib = os.path.join(glob.escape(site), "nvidia", package, "lib", pattern)
                for path in sorted(glob.glob(lib)):
                    found.setdefault(os.path.basename(path), path)
    return list(found.values())


def preload_cuda_libraries(paths=None):
    """Load shared libraries into the process with ``RTLD_GLOBAL`` so that mxnet finds them.

    ``paths`` defaults to :func:`find_cuda_libraries` when a GPU build of mxnet (``mxnet-cu*``)
    is installed, else to nothing, so CPU users pay a few directory checks. A library that
    fails (its dependency is not loaded yet) is retried in later passes until a pass loads
    nothing new. Returns ``(loaded, failed)``: the paths loaded, in order, and a dict from
    each path that still fails to its error message.
    """
    if paths is None:
        paths = find_cuda_libraries()
        paths = paths if paths and _mxnet_gpu_build_installed() else []
    pending, loaded, failed = _check_paths("paths", paths), [], {}
    while pending:
        failed = {}
        for path in pending:
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                loaded.append(path)
            except OSError as err:
                failed[path] = str(err)
        if len(failed) == len(pending):  # no progress: another pass would fail the same way
            break
        pending = list(failed)
    return loaded, failed


def _mxnet_gpu_build_installed():
    """Whether a GPU build of mxnet (distribution ``mxnet-cu*``) is installed."""
    names = (dist.metadata["Name"] or "" for dist in importlib.metadata.distributions())
    return any(name.lower().replace("_", "-").startswith("mxnet-cu") for name in names)


def _check_paths(name, value):
    """``value`` as a list of str paths; a lone string is rejected, not read letter by letter."""
    if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, (list, tuple)) \
            or not all(isinstance(path, (str, os.PathLike)) for path in value):
        raise TypeError(f"{name} must be a list of paths (str or os.PathLike), got {value!r}")
    return [os.fspath(path) for path in value]


def _import_error(err, failed):
    """The ImportError ``import d2lattn`` raises when ``import mxnet`` raised ``err``, given
    the libraries :func:`preload_cuda_libraries` could not load (``failed``)."""
    library, module = _missing_library(str(err)), getattr(err, "name", None)
    if library is None and module and module.split(".")[0] != "mxnet":
        message = (f"mxnet is installed but cannot import {module}, which it needs: pip install "
                   f"{module.split('.')[0]} (pip install --no-deps skips mxnet's own needs).")
    elif library is None:
        message = ("d2lattn needs Apache MXNet 1.9.1. On a CPU: pip install mxnet==1.9.1 "
                   "(Python 3.11, numpy<2; with numpy 2: pip install --no-deps mxnet==1.9.1). "
                   "On Colab: run the first cell of any chapter.")
    else:
        message = (f"mxnet's GPU build cannot load {library}, a CUDA 11 library: {_CUDA_HELP} "
                   "(d2lattn preloads them), or use the CPU build "
                   "(pip install --no-deps mxnet==1.9.1 after uninstalling the GPU build).")
    if failed:
        message += " Preloading failed for: " + "; ".join(failed.values()) + "."
    return ImportError(f"{message} Original error: {err}")
