"""d2lattn.grading.master.values and the runner's encoding: plain values made in the sandbox,
compared and shown in the grader; objects that lie are never numbers."""

import mxnet as mx
import numpy as onp
import pytest
from grading_support import plain

from d2lattn.grading.master import values

# --- plain values: encoding in the sandbox, comparing in the grader ------------------------

@pytest.mark.parametrize("received, expected, ok", [
    (onp.array([0.25, 0.75]), [1 / 4, 3 / 4], True),              # array vs list
    (onp.array([1 / 3]), [0.333333], True),                        # within rtol 1e-5
    (onp.array([1 / 3]), [0.3333], False),                         # beyond it
    (onp.array([[0.5, 0.5]]), [0.5, 0.5], False),                  # shapes must match
    (onp.array([onp.nan, 0.0]), [1.0, 0.0], False),                # NaN never equals a number
    (onp.array([onp.nan]), [float("nan")], True),                  # ... only NaN
    ((2, 3), [2, 3], True), (3, 3.0, True), (True, 1, True),       # numbers are numbers
    ("abc", "abc", True), ("abc", "abd", False), (Ellipsis, 0.75, False),
    (None, None, True), (None, 0, False), ({"a": 1}, {"a": 1}, True),
    ({"a": 1, "b": [2]}, {"b": [2], "a": 1}, True), ({"a": 1}, {"a": 2}, False),
    ([1, "x"], [1, "x"], True), ([1, "x"], (1, "x"), False), ({3, 1}, {1, 3}, True),
    (float, float, True), (int, float, False), (onp.dtype("float64"), onp.dtype("float64"), True),
    (onp.float32(0.5), 0.5, True), ([], [], True), ([[1, 2], [3]], [[1, 2], [3]], True),
])
def test_same_compares_plain_values(received, expected, ok):
    assert values.same(plain(received), plain(expected)) is ok


def test_encode_reads_mxnet_arrays_and_contexts(cpu1):
    x = mx.np.array([0.25, 0.75], ctx=cpu1)
    assert plain(x) == {"t": "array", "dtype": "float32", "shape": [2], "v": [0.25, 0.75]}
    assert values.same(plain(x), plain([0.25, 0.75])) and not values.same(plain(x), plain([1, 0]))
    assert values.same(plain(cpu1), plain(mx.cpu(1))) and not values.same(plain(cpu1),
                                                                          plain(mx.cpu(0)))


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __repr__(self):
        return "[0.25, 0.25, 0.25, 0.25]"


class LyingArray:
    def __array__(self, dtype=None, copy=None):
        return onp.full(4, 0.25)

    def __len__(self):
        return 4


class LyingFloat(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


class LyingNumber:
    def __float__(self):
        return 0.75


@pytest.mark.parametrize("liar", [AlwaysEqual(), LyingArray(), LyingFloat(0.1), LyingNumber()])
def test_objects_that_lie_are_never_a_number_or_an_array(liar):
    """Whatever __eq__, __array__, __float__ or __repr__ say, the grader sees an object."""
    encoded = plain(liar)
    assert encoded["t"] == "object"
    for expected in ([0.25] * 4, 0.75, 0.1, "[0.25, 0.25, 0.25, 0.25]"):
        assert not values.same(encoded, plain(expected))


@pytest.mark.parametrize("forged", [
    {"t": "num", "v": "0.75"}, {"t": "array", "shape": [2], "v": [1.0]},
    {"t": "array", "shape": [1], "v": ["0.75"]}, {"t": "bogus", "v": 1}, {"v": 1}, [0.75],
    {"t": "list", "v": [{"t": "num"}]}, None,
])
def test_malformed_plain_values_never_match(forged):
    assert not values.same(forged, plain(0.75)) and not values.same(forged, plain([1.0]))
    assert values.show(forged) == "<not a value>"


def test_encode_refuses_huge_values_and_show_cuts_long_ones():
    with pytest.raises(ValueError, match="an array of 300000 numbers"):
        plain(onp.zeros(300_000))
    assert values.show(plain(list(range(1000)))).endswith(" ...")
    assert values.show(plain(onp.array([[1.0, 2.0]]))) == "array([[1., 2.]])"
