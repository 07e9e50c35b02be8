"""Timing helpers shared by the benchmarks: wall time per call and the machine's GEMM rate."""
import time

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
from mxnet import np, npx


def seconds_per_call(fn, repeat=10, warmup=2):
    """Median wall time of ``fn()`` in seconds, waiting for MXNet's asynchronous engine."""
    for _ in range(warmup):
        fn()
    npx.waitall()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        npx.waitall()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def interleaved_seconds(runs, rounds=9):
    """Median seconds per call of each of ``runs``, called in turn round after round so that
    other processes' load slows them alike."""
    for run in runs:
        run()  # warm-up: oneDNN primitives, hybridized graphs
    times = [[seconds_per_call(run, repeat=1, warmup=0) for run in runs] for _ in range(rounds)]
    return [sorted(column)[rounds // 2] for column in zip(*times)]


def gemm_gflops(n=1024):
    """The machine's float32 matrix-multiply rate through MXNet, in GFLOP/s (2 n^3 per call)."""
    a, b = np.random.normal(size=(n, n)), np.random.normal(size=(n, n))
    return 2 * n ** 3 / seconds_per_call(lambda: np.dot(a, b)) / 1e9


def print_table(header, rows):
    """Print rows (lists of strings) under a header, columns right-aligned."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths]] + rows:
        print("  ".join(str(cell).rjust(w) for cell, w in zip(row, widths)))
