"""GPT with rotary positions, grouped-query attention and sliding windows: logits against a
NumPy GPT, cached decoding equal to recomputation in every combination, the window's reach,
defaults that leave today's GPT unchanged, devices and bad arguments."""
import math

import mxnet as mx
import numpy as onp
import pytest
from mxnet import init, np

from d2lattn.gpt import GPT, generate
from d2lattn.positional import sinusoidal_encoding
from reference import np_gelu, np_grouped_heads, value
from test_transformer import np_add_norm, np_dense, np_layer_norm, randomize

VOCAB, D, FFN, HEADS, BLOCKS, MAX_LEN = 11, 16, 12, 4, 2, 32


def tokens(shape, seed=1, ctx=None):
    ids = onp.random.default_rng(seed).integers(0, VOCAB, size=shape)
    return np.array(ids, dtype="int32", ctx=ctx)


def make_gpt(positions="learned", num_kv_heads=None, window=None, blocks=BLOCKS, ctx=None,
             seed=0):
    mx.random.seed(seed)
    net = GPT(VOCAB, D, FFN, HEADS, blocks, 0.0, MAX_LEN, positions=positions,
              num_kv_heads=num_kv_heads, window=window)
    net.initialize(init.Xavier(), ctx=ctx)
    net(tokens((1, 2), ctx=ctx))  # finish the deferred initialisation
    randomize(net, seed)
    return net


def np_gpt(net, X, positions, window):
    """Logits (batch, steps, vocab) in float64: learned positions added to the embeddings, or
    rotary positions in every head (reference.np_grouped_heads)."""
    X = X.asnumpy()
    batch, steps = X.shape
    H = value(net.embedding.weight)[X] * math.sqrt(D)
    if positions == "learned":
        H = H + value(net.pos_encoding.embedding.weight)[:steps]
    if positions == "sinusoidal":
        H = H + sinusoidal_encoding(MAX_LEN, D)[:steps]
    rope = onp.arange(steps) if positions == "rope" else None
    causal = onp.broadcast_to(onp.arange(1, steps + 1), (batch, steps))
    for blk in net.blks:
        H = np_add_norm(blk.addnorm1, H, lambda Z: np_grouped_heads(
            blk.attention, Z, Z, Z, causal, window, rope)[0])
        H = np_add_norm(blk.addnorm2, H, lambda Z: np_dense(
            np_gelu(np_dense(Z, blk.ffn.dense1)), blk.ffn.dense2))
    return np_dense(np_layer_norm(H, net.norm), net.dense)


COMBINATIONS = [(positions, kv, window) for positions in ("learned", "rope")
                for kv in (None, 2, 1) for window in (None, 1, 3)] + [
                    ("sinusoidal", None, None), ("sinusoidal", 2, 3)]
COMBINATION_IDS = [f"{p}-kv{kv}-w{w}" for p, kv, w in COMBINATIONS]


@pytest.mark.parametrize("positions, num_kv_heads, window", COMBINATIONS, ids=COMBINATION_IDS)
def test_logits_match_numpy(positions, num_kv_heads, window):
    net, X = make_gpt(positions, num_kv_heads, window), tokens((2, 9))
    onp.testing.assert_allclose(net(X).asnumpy(), np_gpt(net, X, positions, window),
                                rtol=1e-4, atol=1e-4)
    assert [w.shape for w in net.attention_weights] == [(2, HEADS, 9, 9)] * BLOCKS


@pytest.mark.parametrize("positions, num_kv_heads, window", COMBINATIONS, ids=COMBINATION_IDS)
def test_cached_pieces_give_the_logits_of_one_call(positions, num_kv_heads, window):
    net, X = make_gpt(positions, num_kv_heads, window), tokens((2, 11), seed=2)
    expected = net(X).asnumpy()
    for pieces in ([1] * 11, [4, 1, 6], [2, 9]):
        caches, outputs, start = net.init_caches(), [], 0
        for n in pieces:
            outputs.append(net(X[:, start:start + n], caches).asnumpy())
            start += n
        onp.testing.assert_allclose(onp.concatenate(outputs, axis=1), expected, rtol=1e-5,
                                    atol=1e-5)
        kept = 11 if window is None else window
        kv = HEADS if num_kv_heads is None else num_kv_heads
        assert caches[0].keys.shape == (2 * kv, kept, D // HEADS)


@pytest.mark.parametrize("positions, num_kv_heads, window", [
    ("rope", 1, 2), ("learned", 2, 4), ("rope", None, None)])
def test_generate_with_the_cache_equals_recomputation(positions, num_kv_heads, window):
    net = make_gpt(positions, num_kv_heads, window)
    for kwargs in ({"temperature": 0}, {"temperature": 1.3, "seed": 3}):
        cached = generate(net, [1, 2, 3], 12, **kwargs)
        assert cached == generate(net, [1, 2, 3], 12, use_cache=False, **kwargs), kwargs


@pytest.mark.parametrize("positions", ["learned", "rope"])
@pytest.mark.parametrize("window", [1, 3])
def test_with_one_block_token_t_reaches_no_logit_at_t_plus_window_or_later(positions, window):
    net, X = make_gpt(positions, window=window, blocks=1), tokens((1, 9), seed=4)
    changed = X.asnumpy().copy()
    changed[0, 2] = (changed[0, 2] + 1) % VOCAB
    before, after = net(X).asnumpy(), net(np.array(changed, dtype="int32")).asnumpy()
    onp.testing.assert_array_equal(before[:, :2], after[:, :2])  # causal
    onp.testing.assert_array_equal(before[:, 2 + window:], after[:, 2 + window:])  # window
    assert not onp.allclose(before[:, 2 + window - 1], after[:, 2 + window - 1])


def test_rope_positions_are_relative_in_a_windowed_gpt():
    # With one block and a window of w, position t sees tokens t - w + 1 .. t only, and rotary
    # positions depend on distances only: the same w tokens give the same logits anywhere
    # (learned positions do not).
    window, X = 3, tokens((1, 12), seed=5).asnumpy()
    X[0, 8:11] = X[0, 2:5]
    for positions, same in (("rope", True), ("learned", False)):
        logits = make_gpt(positions, window=window, blocks=1)(np.array(X, dtype="int32"))
        assert onp.allclose(logits.asnumpy()[0, 4], logits.asnumpy()[0, 10],
                            rtol=1e-4, atol=1e-4) == same, positions


def test_the_defaults_are_todays_gpt(tmp_path):
    default = make_gpt()
    explicit = GPT(VOCAB, D, FFN, HEADS, BLOCKS, 0.0, MAX_LEN, pre_norm=True, tie_weights=True,
                   positions="learned", num_kv_heads=HEADS, window=None)

    def shapes(net):  # the names checkpoints are saved under
        return {name: param.shape for name, param in net._collect_params_with_prefix().items()}
    assert shapes(explicit) == shapes(GPT(VOCAB, D, FFN, HEADS, BLOCKS, 0.0, MAX_LEN))
    default.save_parameters(str(tmp_path / "gpt.params"))
    explicit.load_parameters(str(tmp_path / "gpt.params"))
    assert shapes(explicit) == shapes(default)
    assert shapes(default)["blks.0.attention.W_k.weight"] == (D, D)
    assert shapes(default)["pos_encoding.embedding.weight"] == (MAX_LEN, D)
    X = tokens((2, 7))
    onp.testing.assert_array_equal(explicit(X).asnumpy(), default(X).asnumpy())
    assert set(shapes(make_gpt("rope"))) == set(shapes(default)) - {
        "pos_encoding.embedding.weight"}


def test_a_windowed_cache_counts_every_position_towards_max_len():
    net, caches = make_gpt("rope", window=2), None
    caches = net.init_caches()
    net(tokens((1, 20)), caches)
    assert caches[0].keys.shape[1] == 2 and caches[0].offset == 20
    net(tokens((1, 12)), caches)
    with pytest.raises(ValueError, match="after 32 cached ones"):
        net(tokens((1, 1)), caches)
    short = net.init_caches()
    net(tokens((1, 3)), short)
    with pytest.raises(ValueError, match=r"as many steps in every block, got \[3, 32\]"):
        net(tokens((1, 1)), [short[0], caches[1]])


def test_runs_on_cpu1(cpu1):
    net, X = make_gpt("rope", 2, 3, ctx=cpu1), tokens((2, 6), ctx=cpu1)
    logits = net(X)
    assert logits.ctx == cpu1
    caches = net.init_caches()
    net(X[:, :4], caches)
    assert caches[1].keys.ctx == cpu1
    onp.testing.assert_allclose(logits.asnumpy(), make_gpt("rope", 2, 3)(tokens((2, 6)))
                                .asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"positions": "absolute"}, ValueError, "positions must be one of 'learned', "
                                            "'sinusoidal', 'rope', got 'absolute'"),
    ({"positions": None}, ValueError, "positions must be"),
    ({"num_kv_heads": 3}, ValueError, "num_heads must be divisible by num_kv_heads"),
    ({"num_kv_heads": 0}, ValueError, "num_kv_heads must be an int >= 1"),
    ({"window": 0}, ValueError, "window must be an int >= 1"),
    ({"window": 2.0}, ValueError, "window must be an int"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        GPT(VOCAB, D, FFN, HEADS, BLOCKS, 0.0, MAX_LEN, **kwargs)


def test_rope_needs_an_even_head_width():
    with pytest.raises(ValueError, match="head width.* must be even"):
        GPT(VOCAB, 12, FFN, 4, BLOCKS, 0.0, MAX_LEN, positions="rope")
