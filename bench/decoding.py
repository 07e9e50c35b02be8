"""Transformer decoding: time per token with the key/value cache and recomputing the prefix.

Run from the repository root:  python bench/decoding.py
With the cache each step projects only the new token and attends to the stored keys and
values: O(n) work per token. Without it, step n re-runs the decoder on all n tokens so far.
"cached, hybridized": the same after ``net.decoder.hybridize()``, each block's step one
cached graph. The same for a GPT with rotary positions, 2 key/value heads and a sliding window
(``GPT_CONFIG``), hybridized with ``net.hybridize()``. Goal: recomputed / cached hybridized >= 3x
at 64 tokens for every model.
"""
import sys

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import mxnet as mx
from mxnet import init, np

from _timing import interleaved_seconds, print_table
from d2lattn.gpt import GPT
from d2lattn.seq2seq import EncoderDecoder
from d2lattn.transformer import TransformerDecoder, TransformerEncoder

VOCAB, SRC_LEN = 50, 10
CONFIGS = [  # (d, ffn, heads, blocks, batch)
    (64, 128, 4, 2, 1),
    (256, 1024, 8, 2, 8),
]
LENGTHS = [16, 64, 256]
GPT_CONFIG = dict(vocab_size=VOCAB, num_hiddens=64, ffn_num_hiddens=128, num_heads=4,
                  num_blks=2, dropout=0.1, max_len=512, positions="rope", num_kv_heads=2,
                  window=32)


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


def make_gpt():
    mx.random.seed(0)
    net = GPT(**GPT_CONFIG)
    net.initialize(init.Xavier())
    return net


def gpt_cached(net, n):
    caches, token = net.init_caches(), np.ones((1, 1), dtype="int32")
    for _ in range(n):
        token = net(token, caches)[:, -1:].argmax(axis=-1).astype("int32")
    return token


def gpt_recomputed(net, n):
    tokens = np.ones((1, 1), dtype="int32")
    for _ in range(n):
        tokens = np.concatenate([tokens, net(tokens)[:, -1:].argmax(axis=-1).astype("int32")],
                                axis=1)
    return tokens


def gpt_rows():
    net, hybrid = make_gpt(), make_gpt()
    hybrid.hybridize()
    name = "GPT d=64 h=4 kv=2 rope window=32 blocks=2 batch=1"
    rows = []
    for n in LENGTHS:
        times = [t / n for t in interleaved_seconds(
            [lambda f=f, m=m: f(m, n) for f, m in ((gpt_cached, net), (gpt_cached, hybrid),
                                                  (gpt_recomputed, net))],
            rounds=3 if n < 256 else 1)]
        rows.append([name, str(n)] + [f"{t * 1e3:.2f}" for t in times]
                    + [f"{times[2] / times[0]:.1f}x", f"{times[2] / times[1]:.1f}x"])
    return rows


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
    rows += gpt_rows()
    print("Greedy Transformer decoding, ms per token (source of 10 tokens, float32, CPU); the "
          "three ways are timed in turn (median of 3 rounds, 1 at 256 tokens). Goal: "
          "recomputed / cached hybridized >= 3x at 64 tokens.")
    print_table(["model", "tokens", "cached", "cached, hybridized", "recomputed",
                 "recomputed / cached", "recomputed / hybridized"], rows)


if __name__ == "__main__":
    sys.exit(main())
