import mxnet as mx
import pytest

from d2lattn import device

BAD_INDICES = [-1, 1.5, True, "0", None]


@pytest.fixture
def two_gpus(monkeypatch):
    """Pretend mxnet sees two GPUs (device.num_gpus reads npx.num_gpus at call time)."""
    monkeypatch.setattr(device.npx, "num_gpus", lambda: 2)


def test_cpu_is_mxnet_cpu():
    assert device.cpu() == mx.cpu()
    assert device.cpu() != mx.cpu(1)


def test_gpu_has_requested_type_and_id():
    ctx = device.gpu(2)
    assert (ctx.device_type, ctx.device_id) == ("gpu", 2)
    assert device.gpu() == mx.gpu(0)


def test_no_gpu_in_this_environment():
    assert device.num_gpus() == 0


def test_try_gpu_falls_back_to_cpu():
    assert device.try_gpu() == mx.cpu()
    assert device.try_gpu(3) == mx.cpu()


def test_try_all_gpus_is_never_empty():
    assert device.try_all_gpus() == [mx.cpu()]


def test_num_gpus_reads_mxnet(two_gpus):
    assert device.num_gpus() == 2


def test_try_gpu_with_two_gpus(two_gpus):
    assert device.try_gpu(0) == mx.gpu(0)
    assert device.try_gpu(1) == mx.gpu(1)
    assert device.try_gpu(2) == mx.cpu()  # only indices 0 and 1 exist


def test_try_all_gpus_with_two_gpus(two_gpus):
    assert device.try_all_gpus() == [mx.gpu(0), mx.gpu(1)]


@pytest.mark.parametrize("bad", BAD_INDICES)
@pytest.mark.parametrize("func", [device.gpu, device.try_gpu])
def test_bad_gpu_index_raises(func, bad):
    with pytest.raises(ValueError, match="GPU index i must be an int >= 0"):
        func(bad)


@pytest.mark.parametrize("bad", BAD_INDICES)
def test_bad_gpu_index_raises_even_when_gpus_exist(two_gpus, bad):
    with pytest.raises(ValueError, match="GPU index"):
        device.try_gpu(bad)
