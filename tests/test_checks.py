import numpy as onp
import pytest

from d2lattn._checks import check_int, check_positive, check_rate


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
