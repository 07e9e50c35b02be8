import random
import time

import mxnet as mx
import numpy as onp
import pytest

from d2lattn import Accumulator, Timer, set_seed

SLEEP = 0.01
# time.sleep sleeps at least the time asked; the margin only absorbs clock granularity.
AT_LEAST = 0.9 * SLEEP


def draws():
    """Five draws from each generator set_seed must control, mxnet's on two devices."""
    return {"mx_cpu0": mx.np.random.uniform(size=5).asnumpy(),
            "mx_cpu1": mx.np.random.uniform(size=5, ctx=mx.cpu(1)).asnumpy(),
            "numpy": onp.random.rand(5),
            "random": onp.array([random.random() for _ in range(5)])}


# --- set_seed ---------------------------------------------------------------------------------

def test_set_seed_reproduces_every_generator():
    set_seed(42)
    first = draws()
    set_seed(42)
    again = draws()
    for name in first:
        onp.testing.assert_array_equal(again[name], first[name], err_msg=name)


def test_different_seeds_give_different_draws():
    set_seed(42)
    first = draws()
    set_seed(43)
    other = draws()
    for name in first:
        assert not onp.array_equal(other[name], first[name]), name


@pytest.mark.parametrize("seed", [0, 2**32 - 1])
def test_set_seed_accepts_the_range_ends(seed):
    set_seed(seed)
    expected = onp.random.RandomState(seed).rand(3)  # numpy's own generator, seeded alike
    onp.testing.assert_array_equal(onp.random.rand(3), expected)


@pytest.mark.parametrize("bad", [-1, 2**32, 1.5, True, "1", None])
def test_set_seed_rejects_bad_seed(bad):
    with pytest.raises(ValueError, match="seed must be an int"):
        set_seed(bad)


# --- Timer ------------------------------------------------------------------------------------

def test_timer_is_running_from_creation():
    timer = Timer()
    time.sleep(SLEEP)
    assert timer.stop() >= AT_LEAST


def test_timer_records_each_run():
    timer = Timer()
    durations = []
    for n in (1, 2):
        timer.start()
        time.sleep(n * SLEEP)
        durations.append(timer.stop())
    assert timer.times == durations
    assert durations[0] >= AT_LEAST
    assert durations[1] >= 2 * AT_LEAST


def test_timer_stop_without_start_measures_from_last_start():
    timer = Timer()
    time.sleep(SLEEP)
    first = timer.stop()
    time.sleep(SLEEP)
    assert timer.stop() >= first + AT_LEAST


def test_timer_statistics_agree():
    timer = Timer()
    timer.times = [0.5, 1.5, 2.0]  # known durations: sum 4, mean 4/3, running totals 0.5, 2, 4
    assert timer.sum() == pytest.approx(4.0)
    assert timer.avg() == pytest.approx(4.0 / 3)
    assert timer.cumsum() == pytest.approx([0.5, 2.0, 4.0])


def test_timer_statistics_of_real_runs_are_consistent():
    timer = Timer()
    for _ in range(3):
        timer.start()
        time.sleep(SLEEP / 2)
        timer.stop()
    assert timer.sum() == pytest.approx(sum(timer.times))
    assert timer.avg() == pytest.approx(timer.sum() / 3)
    assert timer.cumsum()[-1] == pytest.approx(timer.sum())
    assert timer.cumsum() == sorted(timer.cumsum())


def test_timer_without_runs():
    timer = Timer()
    assert (timer.avg(), timer.sum(), timer.cumsum()) == (0.0, 0, [])


# --- Accumulator ------------------------------------------------------------------------------

def test_accumulator_adds_per_variable():
    acc = Accumulator(3)
    acc.add(1, 2.5, mx.np.array(4.0))
    acc.add(3, 0.5, onp.float32(-1.0))
    assert [acc[0], acc[1], acc[2]] == [4.0, 3.0, 3.0]
    assert all(type(v) is float for v in acc.data)


def test_accumulator_supports_negative_index_and_slice():
    acc = Accumulator(2)
    acc.add(1, 2)
    assert acc[-1] == 2.0
    assert acc[:] == [1.0, 2.0]


def test_accumulator_reset():
    acc = Accumulator(2)
    acc.add(5, 6)
    acc.reset()
    assert acc[:] == [0.0, 0.0]
    acc.add(1, 1)
    assert acc[:] == [1.0, 1.0]


@pytest.mark.parametrize("args", [(1,), (1, 2, 3)])
def test_accumulator_add_with_wrong_arity_raises(args):
    acc = Accumulator(2)
    with pytest.raises(ValueError, match=rf"add\(\) takes 2 values, got {len(args)}"):
        acc.add(*args)
    assert acc[:] == [0.0, 0.0]  # nothing was added


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_accumulator_rejects_bad_size(bad):
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        Accumulator(bad)
