"""Transformer decoding: time per token with the key/value cache and recomputing the prefix.

Run from the repository root:  python bench/decoding.py
With the cache each step projects only the new token and attends to the stored keys and
values: O(n) work per token. Without it, step n re-runs the decoder on all n tokens so far.
"cached, hybridized": the same after ``net.decoder.hybridize()``, each block's step one
cached graph. Goal: recomputed / cached hybridized >= 3x at 64 tokens for every model.
"""
import sys

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import mxnet as mx
from mxnet import init, np

from _timing import interleaved_seconds, print_table
from d2lattn.seq2seq import EncoderDecoder
from d2lattn.transformer import TransformerDecoder, TransformerEncoder

VOCAB, SRC_LEN = 50, 10
CONFIGS = [  # (d, ffn, heads, blocks, batch)
    (64, 128, 4, 2, 1),
    (256, 1024, 8, 2, 8),
]
LENGTHS = [16, 64, 256]


def make_net(d, ffn, heads, blocks):
    mx.random.seed(0)
    net = EncoderDecoder(TransformerEncoder(VOCAB, d, ffn, heads, blocks, 0.1),
                         TransformerDecoder(VOCAB, d, ffn, heads, blocks, 0.1))
    net.initialize(init.Xavier())
    return net


def cached(net, enc, lens, batch, n):
    state = net.decoder.init_state(enc, lens)
    token = np.ones((batch, 1), dtype="int32")
    for _ in range(n):
        logits, state = net.decoder(token, state)
        token = logits[:, -1:].argmax(axis=-1).astype("int32")
    return token


def recomputed(net, enc, lens, batch, n):
    tokens = np.ones((batch, 1), dtype="int32")
    for _ in range(n):
        logits, _ = net.decoder(tokens, net.decoder.init_state(enc, lens))
        tokens = np.concatenate([tokens, logits[:, -1:].argmax(axis=-1).astype("int32")], axis=1)
    return tokens


def main():
    rows = []
    for d, ffn, heads, blocks, batch in CONFIGS:
        net, hybrid = make_net(d, ffn, heads, blocks), make_net(d, ffn, heads, blocks)
        hybrid.decoder.hybridize()  # the same parameters (one seed), its own cached graphs
        X, lens = np.full((batch, SRC_LEN), 3), np.full((batch,), SRC_LEN)
        enc = net.encoder(X, lens)
        for n in LENGTHS:
            times = [t / n for t in interleaved_seconds(
                [lambda f=f, m=m: f(m, enc, lens, batch, n)
                 for f, m in ((cached, net), (cached, hybrid), (recomputed, net))],
                rounds=3 if n < 256 else 1)]
            rows.append([f"d={d} ffn={ffn} h={heads} blocks={blocks} batch={batch}", str(n)]
                        + [f"{t * 1e3:.2f}" for t in times]
                        + [f"{times[2] / times[0]:.1f}x", f"{times[2] / times[1]:.1f}x"])
    print("Greedy Transformer decoding, ms per token (source of 10 tokens, float32, CPU); the "
          "three ways are timed in turn (median of 3 rounds, 1 at 256 tokens). Goal: "
          "recomputed / cached hybridized >= 3x at 64 tokens.")
    print_table(["model", "tokens", "cached", "cached, hybridized", "recomputed",
                 "recomputed / cached", "recomputed / hybridized"], rows)


if __name__ == "__main__":
    sys.exit(main())
