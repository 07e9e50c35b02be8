import re

import numpy as onp
import pytest
from mxnet import gluon, np

from d2lattn._checks import (check_float_array, check_int, check_integers, check_layer_input,
                             check_positive, check_rate, check_token_ids)


@pytest.mark.parametrize("value", [0, 3, onp.int64(3), onp.int32(0)])
def test_check_int_accepts_python_and_numpy_ints(value):
    result = check_int("n", value)
    assert result == int(value) and type(result) is int


@pytest.mark.parametrize("value", [True, 1.0, "1", None, -1])
def test_check_int_rejects_non_ints_bools_and_values_below_the_minimum(value):
    with pytest.raises(ValueError, match=r"n must be an int >= 0, got "):
        check_int("n", value)


def test_check_int_bounds_in_the_message():
    assert check_int("seed", 7, 0, 7) == 7
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 7\], got 8"):
        check_int("seed", 8, 0, 7)
    with pytest.raises(ValueError, match=r"k must be an int >= 2, got 1"):
        check_int("k", 1, minimum=2)


@pytest.mark.parametrize("value", [0.5, 2, onp.float32(0.25), onp.float64(1e-300)])
def test_check_positive_accepts_positive_reals(value):
    assert check_positive("h", value) == pytest.approx(float(value))


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), True, "1", None])
def test_check_positive_rejects_the_rest(value):
    with pytest.raises(ValueError, match="h must be a positive finite number, got "):
        check_positive("h", value)


@pytest.mark.parametrize("value", [0, 0.5, onp.float32(0.1)])
def test_check_rate_accepts_rates_in_0_1(value):
    assert check_rate("dropout", value) == pytest.approx(float(value))


@pytest.mark.parametrize("value", [1, 1.5, -0.1, float("nan"), True, "0.1", None])
def test_check_rate_rejects_the_rest(value):
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got "):
        check_rate("dropout", value)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_check_float_array_returns_float_arrays(dtype):
    x = np.zeros((2,), dtype=dtype)
    assert check_float_array("X", x) is x


def test_check_float_array_names_the_argument_and_what_it_got():
    with pytest.raises(TypeError, match="X must hold floating-point numbers, got dtype int32"):
        check_float_array("X", np.zeros((2,), dtype="int32"))
    with pytest.raises(TypeError, match="X must be an mxnet.np.ndarray, got list"):
        check_float_array("X", [1.0])


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "uint8"])
def test_check_integers_accepts_integers_in_range_of_any_numeric_dtype(dtype):
    got = check_integers("n", np.array([0, 3, 2], dtype=dtype), 0, 3)
    assert got.dtype == onp.float64 and got.tolist() == [0, 3, 2]


@pytest.mark.parametrize("values, bad", [([0, 4], [4.0]), ([-1, 1], [-1.0]), ([1.5, 2], [1.5]),
                                         ([onp.nan, 1], [onp.nan]), ([onp.inf, 1], [onp.inf])])
def test_check_integers_lists_the_bad_values(values, bad):
    with pytest.raises(ValueError, match=re.escape(f"n must hold integers in [0, 3] (why), got "
                                                   f"{bad}")):
        check_integers("n", np.array(values, dtype="float64"), 0, 3, " (why)")


def test_check_integers_rejects_booleans():
    with pytest.raises(TypeError, match="n must hold integers, got dtype bool"):
        check_integers("n", np.array([True, False], dtype="bool"), 0, 3)


def test_check_token_ids_uses_the_embeddings_number_of_rows():
    embedding = gluon.nn.Embedding(5, 2)
    check_token_ids("X", np.array([[0, 4]], dtype="int32"), embedding)
    with pytest.raises(ValueError, match=re.escape("X must hold integers in [0, 4] (token ids "
                                                   "below the vocabulary size 5), got [5.0]")):
        check_token_ids("X", np.array([[0, 5]], dtype="int32"), embedding)


def test_check_layer_input_checks_the_dtype_then_the_width_once_known():
    dense = gluon.nn.Dense(3, flatten=False)
    dense.initialize()
    check_layer_input("X", np.ones((2, 5)), dense, "dense1")  # width unknown: any width
    dense(np.ones((2, 4)))
    check_layer_input("X", np.ones((0, 7, 4)), dense, "dense1")
    with pytest.raises(ValueError, match=r"X must have width 4, the input width of dense1, got "
                                         r"X of shape \(2, 5\)"):
        check_layer_input("X", np.ones((2, 5)), dense, "dense1")
    with pytest.raises(TypeError, match=r"X has dtype float64 but dense1's weight float32: "
                                        r"cast the inputs or the block"):
        check_layer_input("X", np.ones((2, 4), dtype="float64"), dense, "dense1")
