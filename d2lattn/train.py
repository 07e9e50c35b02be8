"""Training utilities: reproducible seeds, a timer and running sums."""
import random
import time

import mxnet as mx
import numpy as onp

from ._checks import check_int


def set_seed(seed):
    """Seed mxnet (every device), numpy and Python's ``random`` with ``seed``."""
    seed = check_int("seed", seed, 0, 2**32 - 1)
    mx.random.seed(seed)
    onp.random.seed(seed)
    random.seed(seed)


class Timer:
    """Record the durations of several runs: ``start()``, then ``stop()`` per run."""

    def __init__(self):
        self.times = []
        self.start()

    def start(self):
        """Start the clock."""
        self.tik = time.perf_counter()

    def stop(self):
        """Stop the clock, record the run's duration in seconds and return it."""
        self.times.append(time.perf_counter() - self.tik)
        return self.times[-1]

    def avg(self):
        """Mean duration of the recorded runs."""
        return sum(self.times) / len(self.times) if self.times else 0.0

    def sum(self):
        """Total duration of the recorded runs."""
        return sum(self.times)

    def cumsum(self):
        """Running totals: the time elapsed at the end of each run."""
        return onp.cumsum(self.times).tolist()


class Accumulator:
    """Running sums over ``n`` variables, e.g. (loss sum, token count)."""

    def __init__(self, n):
        self.data = [0.0] * check_int("n", n, minimum=1)

    def add(self, *args):
        """Add one value to each of the ``n`` sums."""
        if len(args) != len(self.data):
            raise ValueError(f"add() takes {len(self.data)} values, got {len(args)}")
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self):
        """Set every sum back to 0."""
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]
