"""Multi-head self-attention, forward + backward: d2lattn against d2l and MXNet's fused kernels.

Run from the repository root after `pip install -r bench/requirements.txt` and
`pip install --no-deps d2l==1.0.3`:  python bench/mha.py
Prints one row per sequence length: milliseconds per forward+backward and achieved GFLOP/s
for each implementation (d2lattn as it is and after ``hybridize()``), next to the machine's
measured GEMM rate, and d2l's time over each d2lattn's (goal: >= 1.5x hybridized at n 128).
"""
import sys

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import mxnet as mx
import numpy as onp
from d2l import mxnet as d2l
from mxnet import autograd, gluon, np

from d2lattn.attention import MultiHeadAttention

from _timing import gemm_gflops, interleaved_seconds, print_table

BATCH, HIDDEN, HEADS = 32, 256, 8
LENGTHS = [32, 64, 128, 256]


class InterleavedSelfAttention(gluon.nn.Block):
    """Self-attention through MXNet's fused kernels (interleaved_matmul_selfatt_*)."""

    def __init__(self, num_hiddens, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.W_qkv = gluon.nn.Dense(3 * num_hiddens, use_bias=False, flatten=False)
        self.W_o = gluon.nn.Dense(num_hiddens, use_bias=False, flatten=False)

    def forward(self, X, valid_lens):
        # The kernels want time-major input with q, k, v interleaved per head.
        qkv = self.W_qkv(X).swapaxes(0, 1).as_nd_ndarray()
        scores = mx.nd.contrib.interleaved_matmul_selfatt_qk(qkv, heads=self.num_heads)
        lens = valid_lens.repeat(self.num_heads).reshape(-1, 1).astype("int32")
        lens = np.broadcast_to(lens, scores.shape[:2]).as_nd_ndarray()
        weights = mx.nd.softmax(scores, length=lens, axis=-1, use_length=True)
        out = mx.nd.contrib.interleaved_matmul_selfatt_valatt(qkv, weights, heads=self.num_heads)
        return self.W_o(out.as_np_ndarray().swapaxes(0, 1))


def forward_backward(layer, call, X):
    def run():
        with autograd.record():
            out = call(layer, X)
        out.backward()
    return run


def hybridized(layer):
    layer.hybridize()
    return layer


def main():
    gemm = gemm_gflops()
    implementations = {
        "d2lattn": (MultiHeadAttention(HIDDEN, HEADS, 0),
                    lambda m, X, L: m(X, X, X, L)),
        "hybridized": (hybridized(MultiHeadAttention(HIDDEN, HEADS, 0)),
                       lambda m, X, L: m(X, X, X, L)),
        "d2l 1.0.3": (d2l.MultiHeadAttention(HIDDEN, HEADS, 0),
                      lambda m, X, L: m(X, X, X, L)),
        "interleaved": (InterleavedSelfAttention(HIDDEN, HEADS), lambda m, X, L: m(X, L)),
    }
    for layer, _ in implementations.values():
        layer.initialize(mx.init.Xavier())
    rows = []
    for n in LENGTHS:
        X = np.random.normal(size=(BATCH, n, HIDDEN))
        # padded batches, as in training: valid lengths spread over n/2..n, one of them n
        lens = np.array(onp.linspace(n // 2, n, BATCH).round(), dtype="int32")
        # forward: 4 projections (2 B n d^2 each) + scores and pooling (2 B n^2 d each);
        # backward about twice the forward.
        flops = 3 * (4 * 2 * BATCH * n * HIDDEN ** 2 + 2 * 2 * BATCH * n * n * HIDDEN)
        runs = [forward_backward(layer, lambda m, X, call=call: call(m, X, lens), X)
                for layer, call in implementations.values()]
        times = interleaved_seconds(runs)
        row = [str(n)]
        for t in times:
            row += [f"{t * 1e3:.1f}", f"{flops / t / 1e9:.1f}"]
        row += [f"{times[2] / times[0]:.2f}x", f"{times[2] / times[1]:.2f}x"]
        rows.append(row)
    print(f"Multi-head self-attention forward+backward: batch {BATCH}, hidden {HIDDEN}, "
          f"{HEADS} heads, valid lengths n/2..n, float32, {mx.context.num_gpus()} GPUs; "
          f"measured GEMM rate {gemm:.1f} GFLOP/s (MXNet np.dot, 1024x1024); the "
          f"implementations are timed in turn, median of 9 rounds")
    header = ["length"]
    for name in implementations:
        header += [f"{name} ms", "GFLOP/s"]
    print_table(header + ["d2l / d2lattn", "d2l / hybridized"], rows)
    print("Goal: d2l / hybridized >= 1.5x at length 128.")


if __name__ == "__main__":
    sys.exit(main())
