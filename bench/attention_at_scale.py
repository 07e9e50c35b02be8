"""Attention at scale: tiled (online-softmax) attention against the full score matrix, and the
key/value cache of multi-head, grouped-query, multi-query and sliding-window attention.

Run from the repository root (no extra package):  cd bench && ../.venv/bin/python attention_at_scale.py
Prints two tables. 1: for ``tiled_attention`` and ``DotProductAttention`` (causal, dropout 0)
at growing lengths, each measured in a fresh child process per method, length and mode
(inference: the forward call; training: forward under ``autograd.record()`` and backward),
the peak resident memory of the first call at that length after a warm-up call at 64 tokens
(Linux's VmHWM reset through /proc/self/clear_refs) and the best of 5 more calls'
milliseconds, next to the bytes of one
(queries, keys) score matrix. 2: for a small GPT, the cache's bytes per token from the
formula and measured after decoding, and the tokens per second of cached decoding, for each
number of key/value heads and a window.
"""
import subprocess
import sys
import time

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import mxnet as mx
from mxnet import autograd, np, npx

from d2lattn.attention import DotProductAttention
from d2lattn.gpt import GPT
from d2lattn.tiled import tiled_attention

from _timing import interleaved_seconds, print_table

ROWS, WIDTH, BLOCK = 4, 64, 128  # batch * heads, head width, tiled_attention's block_size
LENGTHS = [512, 1024, 2048, 4096]
METHODS, MODES = ("full", "tiled"), ("forward", "training")
REPEAT = 5  # timed calls after the measured one; the best is printed
WARMUP = 64  # the length of the warm-up call
VOCAB, D, FFN, HEADS, LAYERS, MAX_LEN = 100, 256, 512, 8, 4, 1024
DECODE = 256  # tokens decoded for the cache table


def attention_call(method, n, mode):
    """One call of ``method`` at length ``n``: the forward pass, or (mode "training") the
    forward pass recorded and its backward pass."""
    mx.random.seed(0)
    q, k, v = (np.random.normal(size=(ROWS, n, WIDTH)) for _ in range(3))
    lens = np.broadcast_to(np.arange(1, n + 1, dtype="int32").reshape(1, n), (ROWS, n))
    full = DotProductAttention(0.0)
    attend = (lambda: tiled_attention(q, k, v, None, True, BLOCK)) if method == "tiled" \
        else (lambda: full(q, k, v, lens))
    if mode == "forward":
        return lambda: attend().wait_to_read()
    for x in (q, k, v):
        x.attach_grad()

    def train():
        with autograd.record():
            out = attend()
        out.backward()
        npx.waitall()
    return train


def _kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


def child(method, n, mode):
    """Print the peak resident memory one call at length ``n`` adds (MiB) and the best time
    of REPEAT more calls (ms), in a fresh process. The warm-up (libraries, oneDNN's kernels)
    is a call at length WARMUP: memory that a call at ``n`` frees stays with the process and
    would serve the next one, so the memory is that of the first call at ``n``."""
    attention_call(method, WARMUP, mode)()
    call = attention_call(method, n, mode)
    npx.waitall()
    with open("/proc/self/clear_refs", "w") as refs:  # reset VmHWM to the current VmRSS
        refs.write("5")
    before = _kib("VmRSS")
    call()
    peak = (_kib("VmHWM") - before) / 1024
    best = float("inf")
    for _ in range(REPEAT):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    print(peak, best * 1e3)


def measure(method, n, mode):
    """(peak MiB, best ms) of one call, measured in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--child", method, str(n), mode],
                         capture_output=True, text=True, check=True)
    peak, ms = out.stdout.split()[-2:]
    return float(peak), float(ms)


def tiled_table(lengths=LENGTHS):
    for mode in MODES:
        rows = []
        for n in lengths:
            (full_mib, full_ms), (tiled_mib, tiled_ms) = (measure(m, n, mode)
                                                          for m in METHODS)
            rows.append([n, f"{ROWS * n * n * 4 / 2 ** 20:.0f}", f"{full_mib:.0f}",
                         f"{tiled_mib:.0f}", f"{full_ms:.1f}", f"{tiled_ms:.1f}"])
        what = "forward" if mode == "forward" else "training (forward recorded, backward)"
        print(f"Causal attention, {what}, {ROWS} rows (batch * heads) of width {WIDTH}, float32, tiled_attention "
              f"block_size {BLOCK}, each cell in a fresh process:")
        print_table(["length", "scores MiB", "full peak MiB", "tiled peak MiB", "full ms",
                     "tiled ms"], rows)
        print()


def decode(net, n):
    """Decode ``n`` tokens one at a time from an empty cache; return the caches."""
    caches, step = net.init_caches(), np.array([[1]], dtype="int32")
    for _ in range(n):
        net(step, caches)
    npx.waitall()
    return caches


def cache_table():
    settings = (("multi-head", HEADS, None), ("grouped-query", 2, None),
                ("multi-query", 1, None), ("multi-head, window 64", HEADS, 64))
    nets = []
    for _, kv, window in settings:
        mx.random.seed(0)
        net = GPT(VOCAB, D, FFN, HEADS, LAYERS, 0.0, MAX_LEN, num_kv_heads=kv, window=window)
        net.initialize(mx.init.Xavier())
        nets.append(net)
    # Each round decodes DECODE tokens with every net in turn: load from other processes
    # slows them alike.
    seconds = interleaved_seconds([lambda net=net: decode(net, DECODE) for net in nets],
                                  rounds=3)
    rows = []
    for (name, kv, window), net, total in zip(settings, nets, seconds):
        caches = decode(net, DECODE)
        formula = 2 * LAYERS * kv * (D // HEADS) * 4  # keys and values, float32
        held = sum((c.keys.size + c.values.size) * 4 for c in caches)  # float32
        rows.append([name, kv, window or "-", formula, f"{held / DECODE:.0f}",
                     f"{held / 2 ** 10:.0f}", f"{DECODE / total:.0f}"])
    print(f"GPT, {LAYERS} blocks of width {D} and {HEADS} query heads, {DECODE} tokens "
          "decoded one at a time with the cache (tokens/s: the median of 3 interleaved "
          "rounds):")
    print_table(["attention", "kv heads", "window", "formula B/token", "held B/token",
                 "cache KiB", "tokens/s"], rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1:2] == ["--tiled"]:  # the first table only, at the lengths given
        tiled_table([int(n) for n in sys.argv[2:]] or LENGTHS)
    else:
        tiled_table()
        cache_table()
