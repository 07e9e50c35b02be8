"""hybridize(): every attention block as a cached graph gives its imperative results (issue 40).

Each block is called imperatively and hybridized with the same parameters and inputs on
mx.cpu(1); outputs and the gradients of the float inputs and of every parameter must agree to
float32 rounding, for every kind of lengths (None, per sequence (batch,), per query (batch,
queries), lengths of 0 and full), with NaN, inf and 1e38 in the masked positions (padding
keys and values, and for causal attention a position seen only by later queries). The
hybridized call must really run a cached graph. Empty batches give gradients of exactly 0 on
both paths; bad input after hybridize() raises a ValueError or TypeError naming the argument,
never an MXNetError. Blocks whose score has no graph (additive, concat) stay imperative.
float16: the masked softmax (the graph's softmax, through a tiny HybridBlock wrapping
attention._masked_softmax, in both modes) sums long float16 rows to 1; a float16 attention
call on the CPU, which MXNet's matrix products do not support, is a TypeError.
"""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np
from mxnet.base import MXNetError

from d2lattn.attention import (AdditiveAttention, ConcatAttention, DotProductAttention,
                               GeneralAttention, MultiHeadAttention, _masked_softmax)
from d2lattn.bert import BERTEncoder
from d2lattn.gpt import CausalSelfAttention, GPTBlock
from d2lattn.transformer import (AddNorm, PositionWiseFFN, TransformerDecoder,
                                 TransformerEncoderBlock)
from reference import (np_additive_scores, np_gelu, np_grouped_heads, np_masked_softmax,
                       value)

CTX = mx.cpu(1)
BATCH, NQ, NK = 3, 4, 5

# valid lengths of 3 sequences, 4 queries, 5 keys: 0 and full (5) in each kind
LENS = {None: None, "per-sequence": [0, 5, 3], "per-query": [[0, 5, 2, 1], [5, 5, 5, 5],
                                                             [3, 0, 1, 2]]}
POISON = [None, onp.nan, onp.inf, 1e38]
POISON_IDS = ["clean", "nan", "inf", "1e38"]


def as_np(x, dtype="float32"):
    return np.array(x, dtype=dtype, ctx=CTX)


def normal(shape, seed=0, scale=1.0):
    return as_np(onp.random.default_rng(seed).normal(size=shape) * scale)


def lens_array(kind, dtype="int32"):
    return None if LENS[kind] is None else as_np(LENS[kind], dtype)


def longest(kind, batch=BATCH, keys=NK):
    """Per sequence, the number of keys some query sees (the rest is padding)."""
    lens = LENS[kind]
    return [keys] * batch if lens is None else onp.max(onp.reshape(lens, (batch, -1)), axis=1)


def poisoned(x, kind, value):
    """A copy of keys or values ``x`` (batch, keys, d) with ``value`` in every padding key."""
    x = x.copy()
    if value is not None:
        for b, n in enumerate(longest(kind, x.shape[0], x.shape[1])):
            x[b, int(n):] = value
    return x


def run(block, args, hybrid):
    """Output, gradients of the float inputs and of every initialized parameter, for the loss
    sum(out * W) with fixed weights W."""
    block.hybridize(hybrid)
    floats = [a for a in args if isinstance(a, np.ndarray)
              and onp.issubdtype(a.dtype, onp.floating) and a.ndim == 3]
    for a in floats:
        a.attach_grad()
    with autograd.record():
        out = block(*args)
        out = out[0] if isinstance(out, tuple) else out
        W = onp.arange(out.size).reshape(out.shape) / out.size - 0.5
        loss = (out * as_np(W)).sum()
    loss.backward()
    params = [p for p in block.collect_params().values() if p._data is not None]
    return ([out.asnumpy()] + [a.grad.asnumpy() for a in floats]
            + [p.grad(CTX).asnumpy().copy() for p in params])


def assert_hybrid_equals_imperative(block, args, rtol=1e-5, atol=1e-5, finite=True):
    block(*args)  # deferred shapes
    expected = run(block, args, False)
    got = run(block, args, True)
    assert block._cached_op is not None  # the hybridized call ran a cached graph
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if finite:
            assert onp.isfinite(g).all() and onp.isfinite(e).all()
        onp.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return got


def init(block, seed=0, scale=0.5):
    mx.random.seed(seed)
    block.initialize(mx.init.Normal(scale), ctx=CTX)
    return block


# --- scoring attention and multi-head attention, every mask kind, poison in the padding ---------

KINDS = list(LENS)
KIND_IDS = ["none", "per-sequence", "per-query"]


@pytest.mark.parametrize("poison", POISON, ids=POISON_IDS)
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("lens_dtype", ["int32", "float32"])
def test_dot_product_attention(kind, poison, lens_dtype):
    q, k, v = normal((BATCH, NQ, 6), 1), normal((BATCH, NK, 6), 2), normal((BATCH, NK, 3), 3)
    k, v = poisoned(k, kind, poison), poisoned(v, kind, poison)
    net = DotProductAttention(0)
    out = assert_hybrid_equals_imperative(net, [q, k, v, lens_array(kind, lens_dtype)])[0]
    w = np_masked_softmax(q.asnumpy() @ onp.nan_to_num(k.asnumpy(), posinf=0).transpose(0, 2, 1)
                          / onp.sqrt(6), LENS[kind])
    onp.testing.assert_allclose(out, w @ onp.nan_to_num(v.asnumpy(), posinf=0), rtol=1e-5,
                                atol=1e-5)
    assert net.attention_weights is None  # the graph does not return them


@pytest.mark.parametrize("poison", POISON, ids=POISON_IDS)
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_general_attention(kind, poison):
    q, k, v = normal((BATCH, NQ, 4), 4), normal((BATCH, NK, 6), 5), normal((BATCH, NK, 3), 6)
    net = init(GeneralAttention(4, 0))
    args = [q, poisoned(k, kind, poison), poisoned(v, kind, poison), lens_array(kind)]
    out = assert_hybrid_equals_imperative(net, args)[0]
    W = net.W_a.weight.data().asnumpy().astype(float)
    k0, v0 = (onp.nan_to_num(x.asnumpy().astype(float), posinf=0) for x in args[1:3])
    expected = np_masked_softmax(q.asnumpy() @ (k0 @ W.T).transpose(0, 2, 1), LENS[kind]) @ v0
    onp.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("poison", POISON, ids=POISON_IDS)
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_multihead_attention(kind, poison):
    net = init(MultiHeadAttention(16, 4, 0, use_bias=True), seed=1)
    q, k, v = normal((BATCH, NQ, 6), 7), normal((BATCH, NK, 7), 8), normal((BATCH, NK, 5), 9)
    args = [q, poisoned(k, kind, poison), poisoned(v, kind, poison), lens_array(kind)]
    out = assert_hybrid_equals_imperative(net, args)[0]
    k0, v0 = (onp.nan_to_num(x.asnumpy().astype(float), posinf=0) for x in args[1:3])
    expected = np_grouped_heads(net, q.asnumpy().astype(float), k0, v0, LENS[kind])[0]
    onp.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    assert net.attention_weights is None


@pytest.mark.parametrize("pieces", [[1, 1, 1, 1, 1], [2, 3], [3, 1, 1]],
                         ids=["ones", "2-3", "3-1-1"])
def test_multihead_attention_with_a_cache(pieces):
    # A hybridized layer called with a cache: the same outputs, caches and gradients as the
    # imperative one, and as one causal call.
    net = init(MultiHeadAttention(16, 4, 0, use_bias=True), seed=2)
    X = normal((BATCH, NK, 16), 10)
    causal = as_np([list(range(1, NK + 1))] * BATCH, "int32")
    whole = net(X, X, X, causal).asnumpy()
    results = []
    for hybrid in (False, True):
        net.hybridize(hybrid)
        cache, outputs, start = net.init_cache(), [], 0
        x = X.copy()
        x.attach_grad()
        with autograd.record():
            for n in pieces:
                piece = x[:, start:start + n]
                lens = as_np([list(range(start + 1, start + n + 1))] * BATCH, "int32")
                outputs.append(net(piece, piece, piece, lens, cache))
                start += n
            out = np.concatenate(outputs, axis=1)
            (out * normal(out.shape, 11)).sum().backward()
        results.append([out.asnumpy(), cache.keys.asnumpy(), cache.values.asnumpy(),
                        x.grad.asnumpy()] + [p.grad(CTX).asnumpy().copy()
                                             for p in net.collect_params().values()])
    for got, expected in zip(results[1], results[0]):
        onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(results[1][0], whole, rtol=1e-5, atol=1e-5)
    # keys with no position attend to the cache as it is (encoder outputs projected once)
    q = normal((BATCH, 2, 16), 12)
    onp.testing.assert_allclose(net(q, X[:, :0], X[:, :0], None, cache).asnumpy(),
                                net(q, X, X).asnumpy(), rtol=1e-5, atol=1e-5)


# --- causal attention: a poisoned position seen only by later queries ---------------------------

T = 6
BAD = 3  # the poisoned position: queries 0 .. 2 do not see it


def causal_lens(batch=2):
    return as_np([list(range(1, T + 1))] * batch, "int32")


@pytest.mark.parametrize("value", [onp.nan, onp.inf, 1e38], ids=["nan", "inf", "1e38"])
def test_dot_product_attention_a_poisoned_key_seen_only_by_later_queries(value):
    # (A non-finite *value* there still reaches the earlier rows, 0 * NaN in the product of
    # the weights and the values, as in any matrix-product attention: attention_pooling says so.)
    q, k, v = normal((2, T, 4), 13), normal((2, T, 4), 14), normal((2, T, 3), 15)
    clean = [x.asnumpy() for x in (q, k, v)]
    k[0, BAD] = value
    net = DotProductAttention(0)
    outputs = []
    for hybrid in (False, True):
        net.hybridize(hybrid)
        outputs.append(net(q, k, v, causal_lens()).asnumpy())
    w = np_masked_softmax(clean[0] @ clean[1].transpose(0, 2, 1) / 2, causal_lens().asnumpy())
    for out in outputs:  # rows that do not see the poison: finite, the clean values
        assert onp.isfinite(out[0, :BAD]).all() and onp.isfinite(out[1]).all()
        onp.testing.assert_allclose(out[0, :BAD], (w @ clean[2])[0, :BAD], rtol=1e-5,
                                    atol=1e-6)
        onp.testing.assert_allclose(out[1], (w @ clean[2])[1], rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(outputs[1][0, :BAD], outputs[0][0, :BAD], rtol=1e-6)


OPTIONS = [dict(), dict(num_kv_heads=2), dict(num_kv_heads=1), dict(window=2),
           dict(rope_base=10000.0), dict(num_kv_heads=1, window=3, rope_base=10000.0)]
OPTION_IDS = ["mha", "gqa-2", "mqa", "window-2", "rope", "mqa-window-3-rope"]


def causal_block(kind, options, seed=3):
    if kind == "attention":
        return init(CausalSelfAttention(16, 4, 0, True, **options), seed)
    return init(GPTBlock(16, 24, 4, 0, **options), seed, scale=0.3)


# --- causal self-attention and GPT blocks with every option --------------------------------------

@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
@pytest.mark.parametrize("kind", ["attention", "gpt-block"])
def test_causal_blocks_one_call(kind, options):
    net = causal_block(kind, options)
    X = normal((2, T, 16), 18)
    out = assert_hybrid_equals_imperative(net, [X])[0]
    if kind == "attention":
        assert net.attention_weights is None
        positions = None if "rope_base" not in options else onp.arange(T)
        x = X.asnumpy().astype(float)
        expected = np_grouped_heads(net, x, x, x, causal_lens().asnumpy(),
                                    options.get("window"), positions)[0]
        onp.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pieces", [[1] * T, [2, 3, 1]], ids=["ones", "2-3-1"])
@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
@pytest.mark.parametrize("kind", ["attention", "gpt-block"])
def test_causal_blocks_decoding_in_pieces(kind, options, pieces):
    # Pieces through the cached graph (the cache's keys and values are graph inputs and
    # outputs) equal the imperative pieces (outputs, caches, gradients) and one call.
    net = causal_block(kind, options)
    X = normal((2, T, 16), 19)
    whole = net(X).asnumpy()
    results = []
    for hybrid in (False, True):
        net.hybridize(hybrid)
        cache, outputs, start = net.attention.init_cache() if kind == "gpt-block" \
            else net.init_cache(), [], 0
        x = X.copy()
        x.attach_grad()
        with autograd.record():
            for n in pieces:
                outputs.append(net(x[:, start:start + n], cache))
                start += n
            out = np.concatenate(outputs, axis=1)
            (out * normal(out.shape, 20)).sum().backward()
        assert cache.offset == T
        assert cache.keys.shape[1] == min(T, options.get("window") or T)
        results.append([out.asnumpy(), cache.keys.asnumpy(), cache.values.asnumpy(),
                        x.grad.asnumpy()] + [p.grad(CTX).asnumpy().copy()
                                             for p in net.collect_params().values()])
    assert net._cached_op is not None
    for got, expected in zip(results[1], results[0]):
        assert onp.isfinite(got).all()
        onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(results[1][0], whole, rtol=1e-5, atol=1e-5)


# --- FFN, AddNorm, encoder block, BERT encoder ---------------------------------------------------

@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("shape", [(2, 3, 8), (2, 2, 3, 8)], ids=["3-D", "4-D"])
def test_position_wise_ffn(activation, shape):
    ffn = init(PositionWiseFFN(12, 8, activation))
    X = normal(shape, 21)
    out = assert_hybrid_equals_imperative(ffn, [X])[0]
    W1, b1, W2, b2 = (p.data().asnumpy().astype(float) for p in ffn.collect_params().values())
    h = X.asnumpy() @ W1.T + b1
    if activation == "relu":
        h = onp.maximum(h, 0)
    else:
        h = np_gelu(h)
    onp.testing.assert_allclose(out, h @ W2.T + b2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
def test_add_norm(pre_norm):
    add_norm = init(AddNorm(0, pre_norm))
    X, Y = normal((2, 3, 8), 22), normal((2, 3, 8), 23)
    if not pre_norm:  # a LayerNorm with gamma and beta that are not 1 and 0
        add_norm(X, Y)
        add_norm.ln.gamma.set_data(normal((8,), 24))
        add_norm.ln.beta.set_data(normal((8,), 25))
    out = assert_hybrid_equals_imperative(add_norm, [X, Y])[0]
    Z = (X + Y).asnumpy().astype(float)
    if not pre_norm:
        Z = (Z - Z.mean(-1, keepdims=True)) / onp.sqrt(Z.var(-1, keepdims=True) + 1e-5)
        Z = Z * add_norm.ln.gamma.data().asnumpy() + add_norm.ln.beta.data().asnumpy()
    onp.testing.assert_allclose(out, Z, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("kind", [None, "per-sequence"])
def test_encoder_block(kind, pre_norm):
    blk = init(TransformerEncoderBlock(16, 24, 4, 0, use_bias=True, pre_norm=pre_norm,
                                       activation="gelu"), seed=2, scale=0.3)
    X = normal((BATCH, NK, 16), 26)
    lens = lens_array(kind)
    out = assert_hybrid_equals_imperative(blk, [X, lens])[0]
    # padding rows hold NaN: the valid rows are finite and unchanged, on both paths
    bad = poisoned(X, kind, onp.nan)
    for hybrid in (False, True):
        blk.hybridize(hybrid)
        got = blk(bad, lens).asnumpy()
        for b, n in enumerate(longest(kind)):
            assert onp.isfinite(got[b, :n]).all()
            onp.testing.assert_allclose(got[b, :n], out[b, :n], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lens", [None, [4, 6, 0]], ids=["none", "per-sequence"])
def test_bert_encoder_one_graph(lens):
    enc = init(BERTEncoder(30, 16, 24, 4, 2, 0, max_len=8), seed=3, scale=0.3)
    tokens = as_np([[1, 5, 7, 2, 0, 0], [3, 4, 9, 9, 8, 2], [4, 4, 4, 4, 4, 4]], "int32")
    segments = as_np([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1], [0] * 6], "int32")
    valid = None if lens is None else as_np(lens, "int32")
    out = assert_hybrid_equals_imperative(enc, [tokens, segments, valid])[0]
    assert enc.attention_weights == [None, None]
    # other ids in the padding change nothing at the valid positions of the graph either
    other = tokens.copy()
    other[0, 4:] = 11
    if lens is not None:
        onp.testing.assert_allclose(enc(other, segments, valid)[0, :4].asnumpy(), out[0, :4],
                                    rtol=1e-5, atol=1e-5)


def test_dropout_acts_in_the_graph_in_training_mode_only():
    enc = BERTEncoder(30, 16, 24, 4, 2, 0.5, max_len=8)
    enc.initialize(ctx=CTX)
    tokens = as_np([[1, 5, 7, 2]], "int32")
    expected = enc(tokens, tokens * 0).asnumpy()
    enc.hybridize()
    onp.testing.assert_allclose(enc(tokens, tokens * 0).asnumpy(), expected, atol=1e-5)
    with autograd.record():
        trained = enc(tokens, tokens * 0).asnumpy()
    assert onp.abs(trained - expected).max() > 0.1


# --- the decoder: TransformerDecoderBlock graphs, decoding in pieces -----------------------------

@pytest.mark.parametrize("pieces", [[1, 1, 1, 1], [2, 2], [3, 1]], ids=["ones", "2-2", "3-1"])
@pytest.mark.parametrize("enc_lens, poison", [(None, None), ([5, 2, 0], onp.nan),
                                              ([5, 2, 0], onp.inf), ([1, 5, 3], 1e38)],
                         ids=["none", "nan", "inf", "1e38"])
@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
def test_decoder_in_pieces(pre_norm, enc_lens, poison, pieces):
    mx.random.seed(4)
    decoder = TransformerDecoder(20, 16, 24, 4, 2, 0, pre_norm=pre_norm)
    decoder.initialize(mx.init.Normal(0.3), ctx=CTX)
    enc = normal((BATCH, NK, 16), 27)
    lens = None if enc_lens is None else as_np(enc_lens, "int32")
    if poison is not None:
        for b, n in enumerate(enc_lens):
            enc[b, n:] = poison
    target = as_np([[1, 4, 2, 7], [3, 3, 9, 0], [5, 6, 8, 1]], "int32")
    whole = decoder(target, decoder.init_state(enc, lens))[0].asnumpy()
    results = []
    for hybrid in (False, True):
        decoder.hybridize(hybrid)
        e = enc.copy()
        e.attach_grad()
        with autograd.record():
            state, logits, start = decoder.init_state(e, lens), [], 0
            for n in pieces:
                out, state = decoder(target[:, start:start + n], state)
                logits.append(out)
                start += n
            out = np.concatenate(logits, axis=1)
            (out * normal(out.shape, 28)).sum().backward()
        assert state[3] == 4
        results.append([out.asnumpy(), state[2][1].self_attention.keys.asnumpy(),
                        e.grad.asnumpy()] + [p.grad(CTX).asnumpy().copy()
                                             for p in decoder.collect_params().values()])
        assert (decoder.self_attention_weights[0] is None) == hybrid
    assert all(blk._cached_op is not None for blk in decoder.blks)
    for got, expected in zip(results[1], results[0]):
        assert onp.isfinite(got).all()
        onp.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    onp.testing.assert_allclose(results[1][0], whole, rtol=1e-5, atol=1e-5)


def test_decoding_steps_with_a_beam_reorder_as_cached_graphs():
    mx.random.seed(5)
    decoder = TransformerDecoder(20, 16, 24, 4, 2, 0)
    decoder.initialize(mx.init.Normal(0.3), ctx=CTX)
    enc, enc_lens = normal((3, 5, 16), 29), as_np([5, 2, 1], "int32")
    runs = []
    for hybrid in (False, True):
        decoder.hybridize(hybrid)
        state = decoder.init_state(enc, enc_lens)
        tokens, logits = as_np([[1]] * 3, "int32"), []
        for step in range(5):
            out, state = decoder(tokens, state)
            logits.append(out.asnumpy())
            tokens = out.argmax(axis=-1).astype("int32")
            if step == 2:
                state = decoder.reorder_state(state, as_np([2, 0, 0], "int32"))
        runs.append((onp.concatenate(logits, axis=1),
                     state[2][1].self_attention.keys.asnumpy()))
    for got, expected in zip(runs[1], runs[0]):
        onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# --- empty batches -------------------------------------------------------------------------------

def empty_batch_blocks():
    return {"ffn": lambda: PositionWiseFFN(12, 8), "post-norm": lambda: AddNorm(0, False),
            "pre-norm": lambda: AddNorm(0, True)}


def backward(block, X):
    """Input and initialized parameters' gradients of sum(block(X...)^2)."""
    X = X.copy()
    X.attach_grad()
    args = (X,) if isinstance(block, PositionWiseFFN) else (X, X * 2)
    with autograd.record():
        out = block(*args)
        (out * out).sum().backward()
    assert out.shape == X.shape
    return X.grad.asnumpy(), [p.grad(CTX).asnumpy().copy()
                              for p in block.collect_params().values() if p._data is not None]


@pytest.mark.parametrize("hybrid", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("name", list(empty_batch_blocks()))
def test_an_empty_batch_after_a_normal_one_gives_gradients_of_exactly_0(name, hybrid):
    block = init(empty_batch_blocks()[name]())
    block.hybridize(hybrid)
    X = normal((2, 3, 8), 30)
    _, grads = backward(block, X)
    if name != "pre-norm":  # a pre-norm AddNorm has no parameter in X + Y
        assert grads and all(onp.abs(g).max() > 0 for g in grads)
    for empty in (X[:0], X[:, :0]):
        x_grad, grads = backward(block, empty)
        assert x_grad.size == 0
        assert all((g == 0).all() for g in grads)
    if name == "ffn":  # dense weights' gradients are readable, and 0
        for dense in (block.dense1, block.dense2):
            assert (dense.weight.grad(CTX).asnumpy() == 0).all()


@pytest.mark.parametrize("hybrid", [False, True], ids=["imperative", "hybridized"])
def test_a_first_call_on_an_empty_batch_leaves_readable_gradients_of_0(hybrid):
    ffn = init(PositionWiseFFN(12, 8))
    ffn.hybridize(hybrid)
    backward(ffn, normal((0, 3, 8), 31))
    assert (ffn.dense1.weight.shape, ffn.dense2.weight.shape) == ((12, 8), (8, 12))
    for dense in (ffn.dense1, ffn.dense2):
        assert (dense.weight.grad(CTX).asnumpy() == 0).all()
        assert (dense.bias.grad(CTX).asnumpy() == 0).all()


# --- bad input after hybridize() -----------------------------------------------------------------

def bad_calls():
    X = normal((2, 3, 8), 32)
    wide, f64 = normal((2, 3, 6), 33), X.astype("float64")

    def ffn():
        return init(PositionWiseFFN(12, 8))

    def add_norm(pre_norm):
        return lambda: init(AddNorm(0, pre_norm))

    def blocks(cls, *args):
        return lambda: init(cls(*args))
    tokens = as_np([[1, 2, 3]], "int32")
    return [
        ("ffn-width", ffn, (X,), (wide,), "X"),
        ("ffn-dtype", ffn, (X,), (f64,), "X"),
        ("ffn-vector", ffn, (X,), (X[0, 0],), "X"),
        ("post-norm-dtype", add_norm(False), (X, X), (f64, f64), "X"),
        ("post-norm-mixed-dtype", add_norm(False), (X, X), (X, f64), "Y"),
        ("pre-norm-dtype", add_norm(True), (X, X), (f64, f64), "X"),
        ("post-norm-shape", add_norm(False), (X, X), (X, X[:, :2]), "shape"),
        ("post-norm-width", add_norm(False), (X, X), (wide, wide), "X"),
        ("dot-width", lambda: DotProductAttention(0), (X, X, X), (wide, X, X), "queries"),
        ("dot-dtype", lambda: DotProductAttention(0), (X, X, X), (f64, X, X), "dtype"),
        ("general-query-width", blocks(GeneralAttention, 8, 0), (X, X, X), (wide, X, X),
         "queries"),
        ("general-key-width", blocks(GeneralAttention, 8, 0), (X, X, X), (X, wide, wide),
         "keys"),
        ("general-dtype", blocks(GeneralAttention, 8, 0), (X, X, X), (f64, f64, f64),
         "queries"),
        ("mha-width", blocks(MultiHeadAttention, 8, 2, 0), (X, X, X), (X, wide, X), "keys"),
        ("mha-dtype", blocks(MultiHeadAttention, 8, 2, 0), (X, X, X), (f64, f64, f64),
         "queries"),
        ("encoder-block-width", blocks(TransformerEncoderBlock, 8, 12, 2, 0), (X,), (wide,),
         "queries"),
        ("encoder-block-dtype", blocks(TransformerEncoderBlock, 8, 12, 2, 0), (X,), (f64,),
         "queries"),
        # token ids may be of any numeric dtype (3.0 is an id), 1.5 is none
        ("bert-fractional-tokens", blocks(BERTEncoder, 10, 8, 12, 2, 1, 0, 4),
         (tokens, tokens * 0), (tokens.astype("float32") + 0.5, tokens * 0), "tokens"),
        ("bert-3-D-tokens", blocks(BERTEncoder, 10, 8, 12, 2, 1, 0, 4),
         (tokens, tokens * 0), (tokens.reshape(1, 3, 1), tokens * 0), "tokens"),
        ("causal-width", blocks(CausalSelfAttention, 8, 2, 0), (X,), (wide,), "X"),
        ("causal-dtype", blocks(CausalSelfAttention, 8, 2, 0), (X,), (f64,), "X"),
        ("gpt-block-width", blocks(GPTBlock, 8, 12, 2, 0), (X,), (wide,), "X"),
        ("gpt-block-dtype", blocks(GPTBlock, 8, 12, 2, 0), (X,), (f64,), "X"),
    ]


BAD_CALLS = bad_calls()


@pytest.mark.parametrize("make, good, bad, name", [case[1:] for case in BAD_CALLS],
                         ids=[case[0] for case in BAD_CALLS])
def test_bad_input_after_hybridize_is_named_and_no_mxnet_error(make, good, bad, name):
    block = make()
    expected = block(*good).asnumpy()
    block.hybridize()
    onp.testing.assert_allclose(block(*good).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    try:
        block(*bad).asnumpy()
    except MXNetError as e:
        pytest.fail(f"MXNetError instead of an error naming {name}: {str(e)[:200]}")
    except (ValueError, TypeError) as e:
        assert name in str(e)
    else:
        pytest.fail(f"no error for bad {name}")
    # the block still works after the error
    onp.testing.assert_allclose(block(*good).asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_hybridized_blocks_still_check_lengths():
    net = init(MultiHeadAttention(8, 2, 0))
    net.hybridize()
    X = normal((2, 3, 8), 34)
    with pytest.raises(ValueError, match="valid_lens"):
        net(X, X, X, as_np([1, 4], "int32"))  # more than the 3 keys
    with pytest.raises(ValueError, match="valid_lens"):
        net(X, X, X, as_np([1, 2, 3], "int32"))
    blk = init(TransformerEncoderBlock(8, 12, 2, 0))
    blk.hybridize()
    with pytest.raises(ValueError, match="valid_lens"):
        blk(X, as_np([-1, 2], "int32"))
    enc = init(BERTEncoder(10, 8, 12, 2, 1, 0, max_len=4))
    enc.hybridize()
    tokens = as_np(onp.zeros((1, 3)), "int32")
    with pytest.raises(ValueError, match="tokens"):
        enc(tokens + 10, tokens)
    with pytest.raises(ValueError, match="valid_len"):
        enc(tokens, tokens, as_np([4], "int32"))


# --- what has no graph ---------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [AdditiveAttention, ConcatAttention])
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_scores_without_a_graph_stay_imperative_when_hybridized(cls, kind):
    net = init(cls(6, 0))
    assert net.has_graph is False
    q, k, v = normal((BATCH, NQ, 4), 35), normal((BATCH, NK, 5), 36), normal((BATCH, NK, 3), 37)
    args = [q, poisoned(k, kind, onp.nan), poisoned(v, kind, onp.nan), lens_array(kind)]
    net(*args)
    expected = run(net, args, False)
    weights = net.attention_weights.asnumpy()
    got = run(net, args, True)
    assert net._cached_op is None  # no graph was made ...
    onp.testing.assert_allclose(net.attention_weights.asnumpy(), weights)  # ... weights kept
    for g, e in zip(got, expected):
        assert onp.isfinite(g).all()
        onp.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)
    q0, k0, v0 = (onp.nan_to_num(x.asnumpy().astype(float)) for x in args[:3])
    if cls is AdditiveAttention:
        scores = np_additive_scores(net, q0, k0)
    else:  # v_a^T tanh(W_a [q; k]) for every pair
        Wa, va = value(net.W_a.weight), value(net.v_a.weight)
        pairs = onp.concatenate([onp.broadcast_to(q0[:, :, None], (BATCH, NQ, NK, 4)),
                                 onp.broadcast_to(k0[:, None], (BATCH, NQ, NK, 5))], axis=-1)
        scores = (onp.tanh(pairs @ Wa.T) @ va.T)[..., 0]
    w = np_masked_softmax(scores, LENS[kind])
    onp.testing.assert_allclose(weights, w, rtol=1e-4, atol=1e-6)
    onp.testing.assert_allclose(got[0], w @ v0, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", [AdditiveAttention, ConcatAttention])
def test_scores_without_a_graph_inside_a_hybridized_parent_say_so(cls):
    class Parent(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.attention = cls(6, 0)

        def hybrid_forward(self, F, q, k, v, lens):
            return self.attention(q, k, v, lens)

    parent = init(Parent())
    q, k = normal((1, 2, 4), 38), normal((1, 3, 4), 39)
    lens = as_np([3], "float32")
    expected = parent(q, k, k, lens).asnumpy()
    assert expected.shape == (1, 2, 4)
    parent.hybridize()
    with pytest.raises(NotImplementedError, match=f"{cls.__name__} has no cached-graph form"):
        parent(q, k, k, lens)


# --- float16 -------------------------------------------------------------------------------------

class MaskedSoftmax(gluon.HybridBlock):
    """attention._masked_softmax as a block: the graph's softmax in either mode."""

    def hybrid_forward(self, F, X, lens):
        return _masked_softmax(F, X, lens)


@pytest.mark.parametrize("hybrid", [False, True], ids=["imperative", "hybridized"])
def test_float16_masked_softmax_of_long_rows_sums_to_1(hybrid):
    # 8192 keys of nearly equal scores: each weight ~1.2e-4, below float16's spacing at 0.5
    # (4.9e-4), so float16 sums would stall; they are summed in float32.
    keys = 8192
    S = onp.random.default_rng(40).normal(size=(2, 3, keys)) * 0.01
    lens = as_np([[keys, 5000, 0], [1, keys - 1, keys]], "float32")
    block = MaskedSoftmax()
    block.hybridize(hybrid)
    got = block(as_np(S, "float16"), lens)
    assert got.dtype == onp.float16
    got = got.asnumpy().astype(float)
    expected = np_masked_softmax(S.astype("float16").astype(float), lens.asnumpy())
    onp.testing.assert_allclose(got, expected, rtol=2e-3, atol=1e-7)
    sums = got.sum(-1)
    onp.testing.assert_allclose(sums, [[1, 1, 0], [1, 1, 1]], atol=2e-3)
    assert sums[0, 2] == 0


@pytest.mark.parametrize("hybrid", [False, True], ids=["imperative", "hybridized"])
def test_float16_attention_on_the_cpu_is_a_type_error(hybrid):
    net = DotProductAttention(0)
    net.hybridize(hybrid)
    X = normal((1, 2, 4), 41).astype("float16")
    with pytest.raises(TypeError, match="float16"):
        net(X, X, X)
