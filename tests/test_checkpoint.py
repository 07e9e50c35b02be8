"""d2lattn.checkpoint: parameters to a safetensors file and back, by their paths in the block."""
import json
import re

import mxnet as mx
import numpy as onp
import pytest
from mxnet import gluon, init, np
from safetensors.numpy import load_file, save_file

from d2lattn.checkpoint import load_parameters, save_parameters


def two_layers(seed):
    mx.random.seed(seed)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(3, in_units=4), gluon.nn.Dense(2, in_units=3, use_bias=False))
    net.initialize(init.Normal(1.0))
    return net


def test_parameters_round_trip_by_their_paths(tmp_path, cpu1):
    source = two_layers(0)
    save_parameters(source, tmp_path / "net.safetensors", dtype="float32")
    stored = load_file(str(tmp_path / "net.safetensors"))
    assert sorted(stored) == ["0.bias", "0.weight", "1.weight"]
    assert stored["0.weight"].dtype == onp.float32
    onp.testing.assert_array_equal(stored["1.weight"], source[1].weight.data().asnumpy())
    target = two_layers(1)
    target.collect_params().reset_ctx(cpu1)
    load_parameters(target, tmp_path / "net.safetensors")
    X = np.arange(8, dtype="float32").reshape(2, 4)
    onp.testing.assert_array_equal(target(X.as_in_ctx(cpu1)).asnumpy(), source(X).asnumpy())
    assert target[0].weight.list_ctx() == [cpu1]


def test_float16_halves_the_file_and_loads_as_float32(tmp_path):
    source = two_layers(0)
    save_parameters(source, tmp_path / "half.safetensors")  # float16 by default
    assert load_file(str(tmp_path / "half.safetensors"))["0.weight"].dtype == onp.float16
    target = two_layers(1)
    load_parameters(target, tmp_path / "half.safetensors")
    assert target[0].weight.data().dtype == onp.float32
    onp.testing.assert_allclose(target[0].weight.data().asnumpy(),
                                source[0].weight.data().asnumpy(), rtol=1e-3)


def test_a_file_that_does_not_fit_is_refused_naming_the_tensors(tmp_path):
    net = two_layers(0)
    arrays = {"0.weight": onp.zeros((3, 4), "float32"), "0.bias": onp.zeros(3, "float32"),
              "2.weight": onp.zeros((2, 3), "float32")}
    save_file(arrays, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match=r"other.safetensors does not fit the net: unknown "
                                         r"tensors \['2.weight'\], missing parameters "
                                         r"\['1.weight'\]"):
        load_parameters(net, tmp_path / "other.safetensors")
    arrays["1.weight"] = arrays.pop("2.weight").T
    save_file(arrays, str(tmp_path / "wide.safetensors"))
    before = net[1].weight.data().asnumpy()
    with pytest.raises(ValueError, match=r"wide.safetensors does not fit the net: 1.weight is "
                                         r"\(3, 2\), the parameter \(2, 3\)"):
        load_parameters(net, tmp_path / "wide.safetensors")
    onp.testing.assert_array_equal(net[1].weight.data().asnumpy(), before)  # nothing set
    with pytest.raises(FileNotFoundError):
        load_parameters(net, tmp_path / "missing.safetensors")


@pytest.mark.parametrize("dtype", ["int8", "uint16", bool, "bool", "complex64", "no-such-type"])
def test_a_dtype_that_is_not_a_float_is_refused(tmp_path, dtype):
    with pytest.raises(TypeError, match=r"dtype must be a float dtype such as 'float16' or "
                                        rf"'float32', got {re.escape(repr(dtype))}"):
        save_parameters(two_layers(0), tmp_path / "net.safetensors", dtype=dtype)
    assert not (tmp_path / "net.safetensors").exists()


def test_a_parameter_that_float16_cannot_hold_is_refused_and_no_file_written(tmp_path):
    net = two_layers(0)
    weight = net[1].weight.data().asnumpy()
    weight[1, 2] = -1e5
    net[1].weight.set_data(np.array(weight))
    with pytest.raises(ValueError, match=r"the parameter 1.weight does not fit float16: its "
                                         r"largest \|value\| is 100000, above 65504"):
        save_parameters(net, tmp_path / "net.safetensors")
    assert not (tmp_path / "net.safetensors").exists()
    save_parameters(net, tmp_path / "net.safetensors", dtype="float32")
    assert load_file(str(tmp_path / "net.safetensors"))["1.weight"][1, 2] == -1e5


@pytest.mark.parametrize("bad", [onp.inf, -onp.inf, onp.nan])
def test_a_parameter_that_is_not_finite_is_refused(tmp_path, bad):
    net = two_layers(0)
    net[0].bias.set_data(np.array([0.0, bad, 1.0]))
    with pytest.raises(ValueError, match=r"the parameter 0.bias holds values that are not "
                                         r"finite \(inf or nan\)"):
        save_parameters(net, tmp_path / "net.safetensors", dtype="float32")
    assert not (tmp_path / "net.safetensors").exists()


def test_a_file_that_is_not_safetensors_is_refused_naming_it(tmp_path):
    (tmp_path / "net.params").write_bytes(b"MXNet parameters, not safetensors")
    with pytest.raises(ValueError, match=r"net.params is not a safetensors file"):
        load_parameters(two_layers(0), tmp_path / "net.params")


def test_bfloat16_tensors_are_refused_naming_them(tmp_path):
    header = json.dumps({"0.weight": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                         "0.bias": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})
    header = header.encode()
    (tmp_path / "bf16.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + b"\x80\x3f\x00\x40\x00\x00\x80\x3f")
    with pytest.raises(ValueError, match=r"bf16.safetensors holds tensors of a dtype NumPy "
                                         r"cannot read: 0.weight \(BF16\); convert them to "
                                         r"float32 or float16"):
        load_parameters(two_layers(0), tmp_path / "bf16.safetensors")
