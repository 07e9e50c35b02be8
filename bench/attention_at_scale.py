"""Attention at scale: tiled (online-softmax) attention against the full score matrix, and the
key/value cache of multi-head, grouped-query, multi-query and sliding-window attention.

Run from the repository root (no extra package):  cd bench && ../.venv/bin/python attention_at_scale.py
Prints two tables. 1: milliseconds per forward call and the peak resident memory it adds
(measured in a fresh child process per cell, Linux's VmHWM reset through /proc/self/clear_refs)
of ``tiled_attention`` and ``DotProductAttention`` (causal, dropout 0) at growing lengths,
next to the bytes of one (queries, keys) score matrix. 2: for a small GPT, the cache's bytes
per token from the formula and measured after decoding, and the tokens per second of cached
decoding, for each number of key/value heads and a window.
"""
import subprocess
import sys

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import mxnet as mx
from mxnet import np, npx

from d2lattn.attention import DotProductAttention, tiled_attention
from d2lattn.gpt import GPT

from _timing import interleaved_seconds, print_table, seconds_per_call

ROWS, WIDTH, BLOCK = 4, 64, 128  # batch * heads, head width, tiled_attention's block_size
LENGTHS = [512, 1024, 2048, 4096]
VOCAB, D, FFN, HEADS, LAYERS, MAX_LEN = 100, 256, 512, 8, 4, 1024
DECODE = 256  # tokens decoded for the cache table


def inputs(n):
    mx.random.seed(0)
    return [np.random.normal(size=(ROWS, n, WIDTH)) for _ in range(3)]


def attention_fn(method, n):
    q, k, v = inputs(n)
    lens = np.broadcast_to(np.arange(1, n + 1, dtype="int32").reshape(1, n), (ROWS, n))
    if method == "tiled":
        return lambda: tiled_attention(q, k, v, None, True, BLOCK)
    full = DotProductAttention(0.0)
    return lambda: full(q, k, v, lens)


def _kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


def child(method, n):
    """Print the peak resident memory one call adds, in MiB (run in a fresh process)."""
    fn = attention_fn(method, n)
    npx.waitall()
    with open("/proc/self/clear_refs", "w") as refs:  # reset VmHWM to the current VmRSS
        refs.write("5")
    before = _kib("VmRSS")
    fn()
    npx.waitall()
    print((_kib("VmHWM") - before) / 1024)


def peak_mib(method, n):
    out = subprocess.run([sys.executable, __file__, "--child", method, str(n)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def tiled_table():
    rows = []
    for n in LENGTHS:
        times = [seconds_per_call(attention_fn(m, n), repeat=3, warmup=1) for m in ("full",
                                                                                    "tiled")]
        peaks = [peak_mib(m, n) for m in ("full", "tiled")]
        scores = ROWS * n * n * 4 / 2 ** 20
        rows.append([n, f"{times[0] * 1e3:.1f}", f"{times[1] * 1e3:.1f}", f"{scores:.0f}",
                     f"{peaks[0]:.0f}", f"{peaks[1]:.0f}"])
    print(f"Causal attention, {ROWS} rows (batch * heads) of width {WIDTH}, float32, "
          f"tiled_attention block_size {BLOCK}:")
    print_table(["length", "full ms", "tiled ms", "scores MiB", "full peak MiB",
                 "tiled peak MiB"], rows)


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
    print(f"\nGPT, {LAYERS} blocks of width {D} and {HEADS} query heads, {DECODE} tokens "
          "decoded one at a time with the cache (tokens/s: the median of 3 interleaved "
          "rounds):")
    print_table(["attention", "kv heads", "window", "formula B/token", "held B/token",
                 "cache KiB", "tokens/s"], rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
    else:
        tiled_table()
        cache_table()
