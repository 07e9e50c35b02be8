"""Additive attention, forward + backward, against one tanh over its pairwise features.

Run from the repository root (no extra package):  python bench/additive.py
Prints one row per length n (n queries, n keys): milliseconds per forward+backward of
AdditiveAttention and of a tanh over features of the same shape (batch, n, n, h), and their
ratio. The features once came from products with 0/1 matrices, O(n^3 h): 80x the tanh at
n = 384; building them is O(n^2 h) now, so the ratio should stay a small constant as n grows.
"""
import sys

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
from mxnet import autograd, np, npx

from d2lattn.attention import AdditiveAttention

from _timing import interleaved_seconds, print_table

BATCH, WIDTH, HIDDEN = 2, 8, 16
LENGTHS = [96, 192, 384]


def forward_backward(fn, X):
    X.attach_grad()

    def run():
        with autograd.record():
            total = fn(X).sum()
        total.backward()
    return run


def main():
    net = AdditiveAttention(HIDDEN, 0)
    net.initialize()
    rows = []
    for n in LENGTHS:
        runs = [forward_backward(lambda X: net(X, X, X), np.ones((BATCH, n, WIDTH))),
                forward_backward(lambda F: npx.activation(F, act_type="tanh"),
                                 np.ones((BATCH, n, n, HIDDEN)))]
        attention, tanh = interleaved_seconds(runs)
        rows.append([str(n), f"{attention * 1e3:.1f}", f"{tanh * 1e3:.1f}",
                     f"{attention / tanh:.1f}x"])
    print(f"AdditiveAttention({HIDDEN}) forward+backward against a tanh over its features "
          f"(batch {BATCH}, queries = keys = n, width {WIDTH}), float32, median of 9 rounds")
    print_table(["n", "attention ms", "tanh ms", "ratio"], rows)


if __name__ == "__main__":
    sys.exit(main())
