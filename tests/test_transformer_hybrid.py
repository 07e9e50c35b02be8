"""hybridize(): the Transformer's HybridBlocks as cached graphs give the imperative results.

Each converted block is called imperatively and hybridized with the same parameters and
inputs; outputs and input/parameter gradients must agree to float32 rounding, on mx.cpu(0)
and mx.cpu(1). Bad input still raises before the graph runs.
"""
import copy

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from d2lattn.attention import (AdditiveAttention, DotProductAttention, MultiHeadAttention,
                               SlidingWindowAttention)
from d2lattn.bert import BERTEncoder
from d2lattn.positional import RotaryMultiHeadAttention
from d2lattn.transformer import (AddNorm, PositionWiseFFN, TransformerDecoder,
                                 TransformerEncoderBlock)

CONTEXTS = [mx.cpu(0), mx.cpu(1)]


def run(block, args, hybrid):
    """Output, gradients of the float inputs and of every parameter, for sum(out * weights)."""
    block.hybridize(hybrid)
    floats = [a for a in args if a is not None and a.ndim == 3]  # not the lengths
    for a in floats:
        a.attach_grad()
    with autograd.record():
        out = block(*args)
        loss = (out * np.arange(out.size, ctx=out.ctx).reshape(out.shape) / out.size).sum()
    loss.backward()
    params = block.collect_params().values()
    return ([out.asnumpy()] + [a.grad.asnumpy() for a in floats]
            + [p.grad().asnumpy() for p in params if p._data is not None])  # used ones


def assert_hybrid_equals_imperative(block, args):
    block(*args)  # deferred shapes
    expected = run(block, args, False)
    got = run(block, args, True)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        onp.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    return got[0]


def lengths(kind, batch, n, ctx):
    if kind is None:
        return None
    if kind == "per query":
        return np.array(onp.minimum(onp.arange(n)[None] + onp.arange(batch)[:, None], n),
                        dtype="int32", ctx=ctx)
    return np.array(onp.arange(batch) % (n + 1), dtype="float32" if kind == "float" else "int32",
                    ctx=ctx)  # a length 0 included


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("kind", [None, "int", "float", "per query"])
def test_multihead_attention(ctx, kind):
    mx.random.seed(1)
    net = MultiHeadAttention(16, 4, 0, use_bias=True)
    net.initialize(mx.init.Normal(0.5), ctx=ctx)
    q, kv = np.random.normal(size=(3, 4, 6), ctx=ctx), np.random.normal(size=(3, 5, 7), ctx=ctx)
    lens = lengths(kind, 3, 5, ctx)
    if kind == "per query":
        lens = lens[:, :4]
    assert_hybrid_equals_imperative(net, [q, kv, kv.copy(), lens])
    assert net.attention_weights is None  # the graph does not return them


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_dot_product_attention(ctx):
    net = DotProductAttention(0)
    q, k, v = (np.random.normal(size=(2, 3, w), ctx=ctx) for w in (4, 4, 5))
    k, v = np.concatenate([k, k], axis=1), np.concatenate([v, v], axis=1)
    assert_hybrid_equals_imperative(net, [q, k, v, np.array([6, 2], ctx=ctx)])


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_ffn_and_add_norm(ctx, activation):
    X = np.random.normal(size=(2, 3, 8), ctx=ctx)
    ffn = PositionWiseFFN(12, 8, activation)
    ffn.initialize(ctx=ctx)
    assert_hybrid_equals_imperative(ffn, [X])
    for pre_norm in (False, True):
        add_norm = AddNorm(0, pre_norm)
        add_norm.initialize(ctx=ctx)
        assert_hybrid_equals_imperative(add_norm, [X, np.random.normal(size=X.shape, ctx=ctx)])


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("kind", [None, "int"])
def test_encoder_block(ctx, kind):
    mx.random.seed(2)
    blk = TransformerEncoderBlock(16, 24, 4, 0, use_bias=True, activation="gelu")
    blk.initialize(mx.init.Normal(0.3), ctx=ctx)
    X = np.random.normal(size=(3, 5, 16), ctx=ctx)
    assert_hybrid_equals_imperative(blk, [X, lengths(kind, 3, 5, ctx)])


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_bert_encoder_one_graph(ctx):
    mx.random.seed(3)
    enc = BERTEncoder(30, 16, 24, 4, 2, 0, max_len=8)
    enc.initialize(mx.init.Normal(0.3), ctx=ctx)
    tokens = np.array([[1, 5, 7, 2, 0, 0], [3, 4, 9, 9, 8, 2]], dtype="int32", ctx=ctx)
    segments = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]], dtype="int32", ctx=ctx)
    lens = np.array([4, 6], dtype="int32", ctx=ctx)
    for valid_lens in (lens, None):  # None: every position, through the same graph
        assert_hybrid_equals_imperative(enc, [tokens, segments, valid_lens])
    assert enc.attention_weights == [None, None]
    # padding changes nothing at the valid positions of the hybridized encoder either
    other = tokens.copy()
    other[0, 4:] = 11
    onp.testing.assert_allclose(enc(other, segments, lens)[0, :4].asnumpy(),
                                enc(tokens, segments, lens)[0, :4].asnumpy(), atol=1e-6)


def test_dropout_acts_in_the_graph_in_training_mode_only():
    enc = BERTEncoder(30, 16, 24, 4, 2, 0.5, max_len=8)
    enc.initialize()
    tokens = np.array([[1, 5, 7, 2]], dtype="int32")
    expected = enc(tokens, tokens * 0).asnumpy()
    enc.hybridize()
    onp.testing.assert_allclose(enc(tokens, tokens * 0).asnumpy(), expected, atol=1e-5)
    with autograd.record():
        trained = enc(tokens, tokens * 0).asnumpy()
    assert onp.abs(trained - expected).max() > 0.1


def test_inf_and_nan_in_padding_reach_nothing_when_hybridized():
    net = MultiHeadAttention(8, 2, 0)
    net.initialize()
    q, kv = np.random.normal(size=(2, 3, 8)), np.random.normal(size=(2, 4, 8))
    net(q, kv, kv)
    kv[0, 2:] = onp.nan
    kv[1, 3] = onp.inf
    net.hybridize()
    kv.attach_grad()
    with autograd.record():
        out = net(q, kv, kv.copy(), np.array([2, 3]))
    out.backward()
    assert onp.isfinite(out.asnumpy()).all() and onp.isfinite(kv.grad.asnumpy()).all()
    for layer in (net.W_q, net.W_k, net.W_v, net.W_o):
        assert onp.isfinite(layer.weight.grad().asnumpy()).all()


def test_hybridized_blocks_still_check_their_input():
    net = MultiHeadAttention(8, 2, 0)
    net.initialize()
    net.hybridize()
    X = np.random.normal(size=(2, 3, 8))
    with pytest.raises(ValueError, match="valid_lens"):
        net(X, X, X, np.array([1, 4]))  # more than the 3 keys
    with pytest.raises(ValueError, match="valid_lens"):
        net(X, X, X, np.array([1, 2, 3]))
    blk = TransformerEncoderBlock(8, 12, 2, 0)
    blk.initialize()
    blk.hybridize()
    with pytest.raises(ValueError, match="valid_lens"):
        blk(X, np.array([-1, 2]))
    with pytest.raises(ValueError, match="queries"):
        blk(X[0], None)
    enc = BERTEncoder(10, 8, 12, 2, 1, 0, max_len=4)
    enc.initialize()
    enc.hybridize()
    tokens = np.zeros((1, 3), dtype="int32")
    with pytest.raises(ValueError, match="tokens"):
        enc(tokens + 10, tokens)
    with pytest.raises(ValueError, match="valid_lens"):
        enc(tokens, tokens, np.array([4]))
    ffn = PositionWiseFFN(4, 8)
    ffn.initialize()
    ffn.hybridize()
    with pytest.raises(TypeError, match="X"):
        ffn(onp.zeros((1, 2, 8)))
    add_norm = AddNorm(0)
    add_norm.initialize()
    add_norm.hybridize()
    with pytest.raises(ValueError, match="shape"):
        add_norm(X, X[:, :2])


def test_what_has_no_graph_stays_imperative_or_says_so():
    X = np.random.normal(size=(1, 3, 8))
    for net in (MultiHeadAttention(8, 2, 0, window=2), MultiHeadAttention(8, 2, 0, num_kv_heads=1),
                RotaryMultiHeadAttention(8, 2, 0)):
        net.initialize()
        expected = net(X, X, X).asnumpy()
        net.hybridize()
        onp.testing.assert_allclose(net(X, X, X).asnumpy(), expected, atol=1e-6)
        assert net.attention_weights is not None
    # a cache call of a hybridized layer is the imperative one, weights kept
    net = MultiHeadAttention(8, 2, 0)
    net.initialize()
    cache = {}
    expected = net(X, X, X, None, copy.deepcopy(cache)).asnumpy()
    net.hybridize()
    onp.testing.assert_allclose(net(X, X, X, None, cache).asnumpy(), expected, atol=1e-6)
    assert cache["k"].shape == (2, 3, 4) and net.attention_weights.shape == (1, 2, 3, 3)
    # inside a hybridized parent there is no imperative fallback: a clear error
    blk = TransformerEncoderBlock(8, 12, 2, 0)
    blk.attention = MultiHeadAttention(8, 2, 0, window=2)
    blk.initialize()
    blk.hybridize()
    with pytest.raises(NotImplementedError, match="window"):
        blk(X, None)
    additive = AdditiveAttention(4, 0)
    additive.initialize()
    expected = additive(X, X, X).asnumpy()
    additive.hybridize()
    onp.testing.assert_allclose(additive(X, X, X).asnumpy(), expected, atol=1e-6)
    window = SlidingWindowAttention(2, 0)
    window.hybridize()
    assert window(X, X, X).shape == (1, 3, 8)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("pre_norm", [False, True])
def test_decoding_steps_as_cached_graphs(ctx, pre_norm):
    """Greedy steps of a hybridized decoder (one cached graph per block from the second step)
    give the imperative logits and caches; a beam reorder in between changes nothing."""
    mx.random.seed(4)
    decoder = TransformerDecoder(20, 16, 24, 4, 2, 0, pre_norm=pre_norm)
    decoder.initialize(mx.init.Normal(0.3), ctx=ctx)
    enc = np.random.normal(size=(3, 5, 16), ctx=ctx)
    enc_lens = np.array([5, 2, 1], ctx=ctx)
    runs = []
    for hybrid in (False, True):
        decoder.hybridize(hybrid)
        state = decoder.init_state(enc, enc_lens)
        tokens, logits = np.ones((3, 1), dtype="int32", ctx=ctx), []
        for step in range(5):
            out, state = decoder(tokens, state)
            logits.append(out.asnumpy())
            tokens = out.argmax(axis=-1).astype("int32")
            if step == 2:
                state = decoder.reorder_state(state, np.array([2, 0, 0], dtype="int32", ctx=ctx))
        runs.append((onp.concatenate(logits, axis=1), state[2][1]["self"]["k"].asnumpy()))
        assert (decoder.self_attention_weights[0] is None) == hybrid
    for got, expected in zip(runs[1], runs[0]):
        onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    state = decoder.init_state(enc, None)  # no source padding: the same graph, every key
    for _ in range(2):
        out, state = decoder(np.ones((3, 1), dtype="int32", ctx=ctx), state)
    decoder.hybridize(False)
    state = decoder.init_state(enc, None)
    for _ in range(2):
        expected, state = decoder(np.ones((3, 1), dtype="int32", ctx=ctx), state)
    onp.testing.assert_allclose(out.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-5)


def test_hybridized_decoding_step_gradients_equal_the_imperative_ones():
    decoder = TransformerDecoder(20, 16, 24, 4, 1, 0)
    decoder.initialize(mx.init.Normal(0.3))
    enc = np.random.normal(size=(2, 4, 16))
    grads = []
    for hybrid in (False, True):
        decoder.hybridize(hybrid)
        state = decoder.init_state(enc, np.array([4, 2]))
        _, state = decoder(np.ones((2, 1), dtype="int32"), state)
        with autograd.record():
            out, _ = decoder(np.ones((2, 1), dtype="int32") * 3, state)
            loss = (out * out).sum()
        loss.backward()
        grads.append([p.grad().asnumpy().copy() for p in decoder.collect_params().values()])
    for got, expected in zip(*grads):
        onp.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
