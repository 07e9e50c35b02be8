"""The Transformer blocks, encoder and decoder: values against a NumPy Transformer written from
the paper, causal masking in training and prediction, cached decoding == one call on the whole
target, greedy and beam search with the cache == without it, weight tying, devices, bad input."""
import math

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, init, np

from d2lattn.attention import transpose_qkv
from d2lattn.decoding import beam_search, greedy_search
from d2lattn.seq2seq import Decoder, EncoderDecoder
from d2lattn.text import Vocab
from d2lattn.transformer import (AddNorm, PositionWiseFFN, TransformerDecoder,
                                 TransformerDecoderBlock, TransformerEncoder,
                                 TransformerEncoderBlock)
from reference import np_gelu, value

VOCAB, D, FFN, HEADS, BLKS = 13, 8, 12, 2, 2


def tokens(shape, seed=1, ctx=None):
    ids = onp.random.default_rng(seed).integers(1, VOCAB, size=shape)
    return np.array(ids, dtype="int32", ctx=ctx)


def randomize(block, seed=0):
    """Give every parameter random values (gammas around 1), so no weight hides a mistake."""
    rng = onp.random.default_rng(seed)
    for name, param in block.collect_params().items():
        values = rng.normal(scale=0.4, size=param.shape) + name.endswith("gamma")
        param.set_data(np.array(values, dtype="float32"))


# --- A NumPy Transformer, float64, from the paper's equations ---------------------------------

def np_dense(X, dense):
    out = X @ value(dense.weight).T
    return out if dense.bias is None else out + value(dense.bias)


def np_layer_norm(X, ln):
    mean, var = X.mean(-1, keepdims=True), X.var(-1, keepdims=True)
    return (X - mean) / onp.sqrt(var + 1e-5) * value(ln.gamma) + value(ln.beta)


def np_mha(mha, queries, keys, values, lens):
    """lens: (batch, queries) numbers of visible keys. Returns (output, weights (b, h, q, k))."""
    def heads(X):
        b, n, _ = X.shape
        return X.reshape(b, n, mha.num_heads, -1).transpose(0, 2, 1, 3)
    Q, K, V = (heads(np_dense(x, layer)) for x, layer in
               ((queries, mha.W_q), (keys, mha.W_k), (values, mha.W_v)))
    scores = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(Q.shape[-1])
    visible = onp.arange(K.shape[2]) < lens[:, None, :, None]
    scores = onp.where(visible, scores, -onp.inf)
    weights = onp.exp(scores - scores.max(-1, keepdims=True)) * visible
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ V).transpose(0, 2, 1, 3).reshape(queries.shape[0], queries.shape[1], -1)
    return np_dense(out, mha.W_o), weights


def np_add_norm(add_norm, X, sublayer):
    if add_norm.pre_norm:
        return X + sublayer(np_layer_norm(X, add_norm.ln))
    return np_layer_norm(X + sublayer(X), add_norm.ln)


def np_ffn(ffn, X):
    return np_dense(onp.maximum(np_dense(X, ffn.dense1), 0), ffn.dense2)


def np_encoder_block(blk, X, lens):
    Y = np_add_norm(blk.addnorm1, X, lambda Z: np_mha(blk.attention, Z, Z, Z, lens)[0])
    return np_add_norm(blk.addnorm2, Y, lambda Z: np_ffn(blk.ffn, Z))


def np_positions(steps, d):
    """P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    P = onp.zeros((steps, d))
    for pos in range(steps):
        for j in range(d):
            angle = pos / 10000 ** (2 * (j // 2) / d)
            P[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return P


def np_embed(coder, X):
    X = X.asnumpy()
    return value(coder.embedding.weight)[X] * math.sqrt(D) + np_positions(X.shape[1], D)


def per_query(lens, batch, queries, keys):
    lens = onp.full(batch, keys) if lens is None else lens.asnumpy()
    return onp.broadcast_to(lens[:, None], (batch, queries))


def np_encoder(enc, X, valid_lens):
    H = np_embed(enc, X)
    lens = per_query(valid_lens, *X.shape, X.shape[1])
    for blk in enc.blks:
        H = np_encoder_block(blk, H, lens)
    return H if enc.norm is None else np_layer_norm(H, enc.norm)


def np_decoder(dec, Y, enc_outputs, enc_valid_lens):
    """Teacher forcing: logits (batch, steps, vocab) and each block's two attention weights."""
    H, (batch, steps) = np_embed(dec, Y), Y.shape
    causal = onp.broadcast_to(onp.arange(1, steps + 1), (batch, steps))
    src = per_query(enc_valid_lens, batch, steps, enc_outputs.shape[1])
    weights = []
    for blk in dec.blks:
        self_att, cross = [], []
        H = np_add_norm(blk.addnorm1, H, lambda Z: keep(np_mha(blk.attention1, Z, Z, Z, causal),
                                                         self_att))
        H = np_add_norm(blk.addnorm2, H, lambda Z: keep(
            np_mha(blk.attention2, Z, enc_outputs, enc_outputs, src), cross))
        H = np_add_norm(blk.addnorm3, H, lambda Z: np_ffn(blk.ffn, Z))
        weights.append((self_att[0], cross[0]))
    H = H if dec.norm is None else np_layer_norm(H, dec.norm)
    return np_dense(H, dec.dense), weights


def keep(output_and_weights, store):
    store.append(output_and_weights[1])
    return output_and_weights[0]


# --- Models -----------------------------------------------------------------------------------

def make_net(pre_norm=False, tie_weights=False, dropout=0.0, ctx=None, seed=0):
    mx.random.seed(seed)
    net = EncoderDecoder(TransformerEncoder(VOCAB, D, FFN, HEADS, BLKS, dropout,
                                            pre_norm=pre_norm),
                         TransformerDecoder(VOCAB, D, FFN, HEADS, BLKS, dropout,
                                            pre_norm=pre_norm, tie_weights=tie_weights))
    net.initialize(init.Xavier(), ctx=ctx)
    net(tokens((1, 2), ctx=ctx), tokens((1, 2), ctx=ctx))  # finish the deferred initialisation
    randomize(net, seed)
    return net


SRC, SRC_LENS, TGT = tokens((3, 5)), np.array([5, 2, 4], dtype="int32"), tokens((3, 6), seed=2)
NORMS = pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])


def decode_in_pieces(net, pieces, src=SRC, src_lens=SRC_LENS, tgt=TGT):
    """Feed the target in consecutive pieces of the given lengths; concatenated logits."""
    state = net.decoder.init_state(net.encoder(src, src_lens), src_lens)
    outputs, start = [], 0
    for n in pieces:
        logits, state = net.decoder(tgt[:, start:start + n], state)
        outputs.append(logits.asnumpy())
        start += n
    return onp.concatenate(outputs, axis=1), state


# --- PositionWiseFFN and AddNorm --------------------------------------------------------------

def test_ffn_matches_numpy_and_its_input_gradient(cpu1):
    ffn = PositionWiseFFN(5, 3)
    ffn.initialize(init.Normal(0.5), ctx=cpu1)
    X = np.array(onp.random.default_rng(0).normal(size=(2, 4, 6)), dtype="float32", ctx=cpu1)
    X.attach_grad()
    with autograd.record():
        out = ffn(X)
    out.backward()
    assert out.shape == (2, 4, 3) and out.ctx == cpu1 and X.grad.ctx == cpu1
    x = X.asnumpy().astype(float)
    onp.testing.assert_allclose(out.asnumpy(), np_ffn(ffn, x), rtol=1e-5, atol=1e-6)
    # d sum(out) / dX = (1[hidden > 0] * (1 W2)) W1
    hidden = np_dense(x, ffn.dense1)
    upstream = (hidden > 0) * value(ffn.dense2.weight).sum(axis=0)
    onp.testing.assert_allclose(X.grad.asnumpy(), upstream @ value(ffn.dense1.weight),
                                rtol=1e-5, atol=1e-6)


def test_gelu_ffn_matches_the_erf_gelu():
    ffn = PositionWiseFFN(5, 3, activation="gelu")
    ffn.initialize(init.Normal(0.5))
    x = onp.random.default_rng(1).normal(size=(2, 4, 6))
    out = ffn(np.array(x, dtype="float32")).asnumpy()
    hidden = np_dense(x, ffn.dense1)
    onp.testing.assert_allclose(out, np_dense(np_gelu(hidden), ffn.dense2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args, name", [((0, 3), "ffn_num_hiddens"),
                                        ((4, 2.5), "ffn_num_outputs")])
def test_ffn_rejects_bad_sizes(args, name):
    with pytest.raises(ValueError, match=f"{name} must be an int >= 1"):
        PositionWiseFFN(*args)
    with pytest.raises(ValueError, match=r"activation must be one of \['gelu', 'relu'\], "
                                         r"got 'tanh'"):
        PositionWiseFFN(4, 3, activation="tanh")


def step_on_empty_then_check(block, call, full, empty):
    """Train ``block`` one SGD step on ``call(block, full)``, then backward on ``call(block,
    empty)`` (``full``, ``empty``: one input each): the output must be empty, every parameter
    gradient 0 (not the last step's) and a second SGD step must leave the parameters as they
    were."""
    block.initialize(init.Normal(0.5))
    trainer = gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 1.0})
    for X in (full, empty):
        X.attach_grad()
        with autograd.record():
            out = call(block, X)
            (out ** 2).sum().backward()
        before = {name: value(p) for name, p in block.collect_params().items()}
        trainer.step(1)
    assert out.shape[:-1] == empty.shape[:-1] and X.grad.shape == empty.shape
    for name, param in block.collect_params().items():
        onp.testing.assert_array_equal(param.grad().asnumpy(), 0, err_msg=name)
        onp.testing.assert_array_equal(value(param), before[name], err_msg=name)


FULL = np.array(onp.random.default_rng(0).normal(size=(2, 3, 4)), dtype="float32")


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4), (0, 4)])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_ffn_of_an_empty_batch_gives_empty_output_and_zero_gradients(shape, activation):
    # MXNet's Dense alone leaves its weight gradients unwritten there: stale, or unallocated.
    step_on_empty_then_check(PositionWiseFFN(5, 3, activation), lambda ffn, X: ffn(X),
                             FULL.copy(), np.ones(shape))


@NORMS
@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4)])
def test_add_norm_of_an_empty_batch_gives_empty_output_and_zero_gradients(pre_norm, shape):
    step_on_empty_then_check(AddNorm(0.0, pre_norm), lambda a, X: a.wrap(X, lambda Z: Z * Z),
                             FULL.copy(), np.ones(shape))


@pytest.mark.parametrize("shape", [(2, 3, 0), ()])
def test_ffn_rejects_an_input_without_width(shape):
    ffn = PositionWiseFFN(5, 3)
    ffn.initialize()
    with pytest.raises(ValueError, match=r"X must have a width \(last axis\) >= 1, got shape"):
        ffn(np.ones(shape))


def test_add_norm_uses_its_epsilon():
    # A row with variance 1e-6: LN gives (x - mean) / sqrt(1e-6 + eps), far from 1 for eps 1e-5.
    x = np.array([[[0.0, 0.002]]]) - 0.001
    for eps in (1e-5, 1e-12):
        add_norm = AddNorm(0.0, norm_eps=eps)
        add_norm.initialize()
        out = add_norm(x, np.zeros_like(x)).asnumpy()
        onp.testing.assert_allclose(out, [[[-1, 1]]] / onp.sqrt(1 + eps / 1e-6), rtol=1e-3)
    with pytest.raises(ValueError, match="norm_eps must be a positive finite number, got 0"):
        AddNorm(0.1, norm_eps=0)


def test_post_norm_by_hand():
    # Rows X + Y = [2, 2] and [2, 6]: layer norm gives [0, 0] and (x - 4) / sqrt(4 + 1e-5).
    add_norm = AddNorm(0.0)
    add_norm.initialize()
    out = add_norm(np.array([[[1.0, 2.0], [2.0, 5.0]]]), np.array([[[1.0, 0.0], [0.0, 1.0]]]))
    unit = 2 / math.sqrt(4 + 1e-5)
    onp.testing.assert_allclose(out.asnumpy(), [[[0, 0], [-unit, unit]]], atol=1e-6)


@NORMS
def test_add_norm_wrap_matches_its_definition(pre_norm, cpu1):
    add_norm = AddNorm(0.0, pre_norm)
    add_norm.initialize(ctx=cpu1)
    add_norm.ln.gamma.set_data(np.array([0.5, 2.0, -1.0], ctx=cpu1))
    add_norm.ln.beta.set_data(np.array([0.1, 0.0, 0.3], ctx=cpu1))
    x = onp.random.default_rng(0).normal(size=(2, 4, 3))
    out = add_norm.wrap(np.array(x, dtype="float32", ctx=cpu1), lambda Z: Z * Z)
    assert out.ctx == cpu1
    sub_in = np_layer_norm(x, add_norm.ln) if pre_norm else x
    expected = x + sub_in ** 2 if pre_norm else np_layer_norm(x + x ** 2, add_norm.ln)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-5)


def test_add_norm_drops_the_sublayer_output_only():
    pre, post = AddNorm(0.5, pre_norm=True), AddNorm(0.5)
    pre.initialize()
    post.initialize()
    X = np.array(onp.random.default_rng(0).normal(size=(4, 50, 3)), dtype="float32")
    with autograd.record():
        # Kept values of Y are scaled by 1 / (1 - 0.5): X + 0 or X + 2, the residual intact.
        gaps = onp.unique((pre(X, np.ones_like(X)) - X).asnumpy().round(5))
        normed = post(X, np.zeros_like(X)).asnumpy()
    assert set(gaps) == {0.0, 2.0}
    onp.testing.assert_allclose(normed, np_layer_norm(X.asnumpy(), post.ln), rtol=1e-4,
                                atol=1e-5)
    onp.testing.assert_allclose(pre(X, np.ones_like(X)).asnumpy(), X.asnumpy() + 1, rtol=1e-6)


def test_add_norm_rejects_bad_input():
    add_norm = AddNorm(0.1)
    add_norm.initialize()
    with pytest.raises(ValueError, match=r"X and Y must have the same shape, got X \(2, 3, 4\)"):
        add_norm(np.ones((2, 3, 4)), np.ones((2, 3, 5)))
    with pytest.raises(TypeError, match="pre_norm must be a bool, got 'yes'"):
        AddNorm(0.1, pre_norm="yes")
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\)"):
        AddNorm(1.0)


# --- Encoder ----------------------------------------------------------------------------------

@NORMS
def test_encoder_block_matches_numpy(pre_norm):
    blk = TransformerEncoderBlock(D, FFN, HEADS, 0.0, pre_norm=pre_norm)
    blk.initialize()
    X = np.array(onp.random.default_rng(3).normal(size=(3, 5, D)), dtype="float32")
    blk(X)
    randomize(blk)
    out = blk(X, SRC_LENS)
    lens = per_query(SRC_LENS, 3, 5, 5)
    onp.testing.assert_allclose(out.asnumpy(), np_encoder_block(blk, X.asnumpy(), lens),
                                rtol=1e-4, atol=1e-4)


@NORMS
def test_encoder_matches_numpy_and_keeps_weights_per_block(pre_norm):
    net = make_net(pre_norm)
    out = net.encoder(SRC, SRC_LENS)
    assert (net.encoder.norm is not None) == pre_norm  # a pre-norm stack ends with a norm
    onp.testing.assert_allclose(out.asnumpy(), np_encoder(net.encoder, SRC, SRC_LENS),
                                rtol=1e-4, atol=1e-4)
    weights = net.encoder.attention_weights
    assert len(weights) == BLKS and all(w.shape == (3, HEADS, 5, 5) for w in weights)
    assert (weights[-1][1, :, :, 2:] == 0).all()  # the second source has 2 real tokens


def test_no_attention_weights_before_the_first_call():
    encoder = TransformerEncoder(VOCAB, D, FFN, HEADS, BLKS, 0.0)
    decoder = TransformerDecoder(VOCAB, D, FFN, HEADS, BLKS, 0.0)
    assert encoder.attention_weights == [None] * BLKS and decoder.attention_weights is None
    assert decoder.self_attention_weights == decoder.enc_dec_attention_weights == [None] * BLKS


# --- Decoder: values, causality, cache ---------------------------------------------------------

@pytest.mark.parametrize("pre_norm, tie_weights", [(False, False), (True, False), (False, True)])
def test_decoder_matches_numpy_with_causal_and_source_masks(pre_norm, tie_weights):
    net = make_net(pre_norm, tie_weights)
    enc_outputs = net.encoder(SRC, SRC_LENS)
    logits, state = net.decoder(TGT, net.decoder.init_state(enc_outputs, SRC_LENS))
    expected, weights = np_decoder(net.decoder, TGT, enc_outputs.asnumpy().astype(float),
                                   SRC_LENS)
    onp.testing.assert_allclose(logits.asnumpy(), expected, rtol=1e-4, atol=1e-4)
    for i, (self_att, cross) in enumerate(weights):
        onp.testing.assert_allclose(net.decoder.self_attention_weights[i].asnumpy(), self_att,
                                    rtol=1e-4, atol=1e-6)
        onp.testing.assert_allclose(net.decoder.enc_dec_attention_weights[i].asnumpy(), cross,
                                    rtol=1e-4, atol=1e-6)
    onp.testing.assert_allclose(net.decoder.attention_weights.asnumpy(),
                                weights[-1][1].mean(axis=1), rtol=1e-4, atol=1e-6)
    assert state[3] == 6
    for cache in state[2]:
        kv = cache.self_attention
        assert kv.keys.shape == kv.values.shape == (3 * HEADS, 6, D // HEADS)
        cross = cache.cross_attention
        assert cross.keys.shape == cross.values.shape == (3 * HEADS, SRC.shape[1], D // HEADS)


@pytest.mark.parametrize("training", [False, True], ids=["predict", "train"])
def test_later_target_tokens_do_not_change_earlier_outputs(training):
    # Dropout is on in training mode: reseeding gives both calls the same dropout masks.
    net = make_net(dropout=0.2)
    changed = TGT.copy()
    changed[:, 3:] = (changed[:, 3:] + 1) % VOCAB
    outputs = []
    for tgt in (TGT, changed):
        mx.random.seed(7)
        with autograd.record(train_mode=training):
            outputs.append(net(SRC, tgt, SRC_LENS)[0].asnumpy())
    onp.testing.assert_array_equal(outputs[0][:, :3], outputs[1][:, :3])
    assert onp.abs(outputs[0][:, 3:] - outputs[1][:, 3:]).min() > 0
    assert (onp.triu(net.decoder.self_attention_weights[0].asnumpy(), k=1) == 0).all()


def test_padded_source_tokens_do_not_change_the_translation():
    net = make_net()
    changed = SRC.copy()
    changed[1, 2:] = (changed[1, 2:] + 3) % VOCAB  # beyond the second source's length 2
    logits, _ = net(SRC, TGT, SRC_LENS)
    again, _ = net(changed, TGT, SRC_LENS)
    onp.testing.assert_allclose(again.asnumpy(), logits.asnumpy(), rtol=1e-6)
    assert (net.decoder.attention_weights[1, :, 2:] == 0).all()


@NORMS
@pytest.mark.parametrize("pieces", [[1] * 6, [2, 1, 3]], ids=["token by token", "chunks"])
def test_cached_decoding_equals_one_call_on_the_whole_target(pre_norm, pieces):
    net = make_net(pre_norm)
    whole, _ = decode_in_pieces(net, [6])
    stepwise, state = decode_in_pieces(net, pieces)
    onp.testing.assert_allclose(stepwise, whole, rtol=1e-5, atol=1e-5)
    assert state[3] == 6 and state[2][0].self_attention.keys.shape[1] == 6


def test_encoder_outputs_are_projected_once_per_block_when_decoding():
    net = make_net()
    calls = []
    for blk in net.decoder.blks:
        blk.attention2.W_k.register_forward_hook(lambda block, x, y: calls.append(x[0].shape))
    state = net.decoder.init_state(net.encoder(SRC, SRC_LENS), SRC_LENS)
    for t in range(4):
        _, state = net.decoder(TGT[:, t:t + 1], state)
    # the first step projects the source; the later ones one position, which the lengths mask
    assert calls == [(3, SRC.shape[1], D)] * 2 + [(3, 1, D)] * 6
    blk = net.decoder.blks[0]
    lens = SRC_LENS.asnumpy()[:, None, None]
    source = np.array(onp.where(onp.arange(SRC.shape[1])[:, None] < lens, state[0].asnumpy(), 0))
    expected = transpose_qkv(blk.attention2.W_k(source), HEADS)  # padding zeroed first
    onp.testing.assert_allclose(state[2][0].cross_attention.keys.asnumpy(), expected.asnumpy(),
                                rtol=1e-6)


def test_decoder_leaves_the_given_state_unchanged():
    net = make_net()
    state = net.decoder.init_state(net.encoder(SRC, SRC_LENS), SRC_LENS)
    first, _ = net.decoder(TGT[:, :2], state)
    again, _ = net.decoder(TGT[:, :2], state)
    onp.testing.assert_array_equal(again.asnumpy(), first.asnumpy())
    assert state[3] == 0 and all(cache.self_attention.keys is None for cache in state[2])


def test_reorder_state_reorders_the_caches():
    net = make_net()
    _, state = decode_in_pieces(net, [2])
    order = np.array([2, 2, 0], dtype="int32")
    picked, _ = net.decoder(TGT[order, 2:4], net.decoder.reorder_state(state, order))
    everything, _ = net.decoder(TGT[:, 2:4], state)
    onp.testing.assert_allclose(picked.asnumpy(), everything.asnumpy()[[2, 2, 0]], rtol=1e-5)


# --- Greedy and beam search: with the cache == recomputing the prefix --------------------------

WORDS = Vocab(list("abcdefghij"), reserved_tokens=["<pad>", "<bos>", "<eos>"])
SOURCES = [list("abc"), list("j"), list("badge")]


class RecomputingDecoder(Decoder):
    """The same decoder without a cache: every step reruns it on the whole prefix."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def init_state(self, enc_outputs, enc_valid_lens=None):
        return enc_outputs, enc_valid_lens, None

    def forward(self, X, state):
        enc_outputs, enc_valid_lens, prefix = state
        prefix = X if prefix is None else np.concatenate([prefix, X], axis=1)
        logits, _ = self.decoder(prefix, self.decoder.init_state(enc_outputs, enc_valid_lens))
        return logits[:, -X.shape[1]:], (enc_outputs, enc_valid_lens, prefix)

    def reorder_state(self, state, indices):
        return tuple(None if s is None else s[indices] for s in state)

    @property
    def attention_weights(self):
        return self.decoder.attention_weights[:, -1:]


def search_nets(ctx=None):
    mx.random.seed(5)
    net = EncoderDecoder(TransformerEncoder(len(WORDS), D, FFN, HEADS, BLKS, 0.1),
                         TransformerDecoder(len(WORDS), D, FFN, HEADS, BLKS, 0.1))
    net.initialize(init.Xavier(), ctx=ctx)
    return net, EncoderDecoder(net.encoder, RecomputingDecoder(net.decoder))


def test_greedy_search_with_the_cache_equals_recomputing():
    cached, recomputing = search_nets()
    got, weights = greedy_search(cached, SOURCES, WORDS, WORDS, 7, mx.cpu())
    expected, expected_weights = greedy_search(recomputing, SOURCES, WORDS, WORDS, 7, mx.cpu())
    assert got == expected and any(len(t) > 1 for t in got)
    for w, e, src in zip(weights, expected_weights, SOURCES):
        assert w.shape[1] == len(src) + 1  # source tokens and <eos>
        onp.testing.assert_allclose(w, e, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_beam_search_with_the_cache_equals_recomputing(beam_size):
    cached, recomputing = search_nets()
    for src in SOURCES:
        got, weights = beam_search(cached, src, WORDS, WORDS, 7, mx.cpu(), beam_size)
        expected, expected_weights = beam_search(recomputing, src, WORDS, WORDS, 7, mx.cpu(),
                                                 beam_size)
        assert got == expected
        onp.testing.assert_allclose(weights, expected_weights, rtol=1e-4, atol=1e-6)


# --- Weight tying -----------------------------------------------------------------------------

def num_params(net):
    return sum(p.data().size for p in net.collect_params().values())


def test_tied_output_layer_shares_the_embedding_weight():
    tied, untied = make_net(tie_weights=True), make_net(tie_weights=False)
    decoder = tied.decoder
    assert decoder.dense.weight is decoder.embedding.weight
    assert num_params(untied) - num_params(tied) == VOCAB * D
    # The shared weight's gradient is the sum of its two uses: untie it and compare.
    tied_params = tied._collect_params_with_prefix()  # structural names, e.g. decoder.dense.weight
    for name, param in untied._collect_params_with_prefix().items():
        param.set_data(tied_params[name].data())
    for net in (tied, untied):
        with autograd.record():
            net(SRC, TGT, SRC_LENS)[0].sum().backward()
    expected = (untied.decoder.embedding.weight.grad() + untied.decoder.dense.weight.grad())
    onp.testing.assert_allclose(decoder.embedding.weight.grad().asnumpy(), expected.asnumpy(),
                                rtol=1e-4, atol=1e-4)
    gluon.Trainer(tied.collect_params(), "sgd", {"learning_rate": 0.5}).step(1)
    onp.testing.assert_array_equal(decoder.dense.weight.data().asnumpy(),
                                   decoder.embedding.weight.data().asnumpy())


# --- Devices and bad input --------------------------------------------------------------------

@NORMS
def test_model_trains_and_decodes_on_cpu1(pre_norm, cpu1):
    net = make_net(pre_norm, tie_weights=True, dropout=0.1, ctx=cpu1)
    src, lens, tgt = SRC.as_in_ctx(cpu1), SRC_LENS.as_in_ctx(cpu1), TGT.as_in_ctx(cpu1)
    with autograd.record():
        logits, state = net(src, tgt, lens)
        logits.sum().backward()
    assert logits.ctx == cpu1 and state[0].ctx == cpu1
    assert all(x.ctx == cpu1 for c in state[2]
               for x in (c.self_attention.keys, c.self_attention.values, c.cross_attention.keys))
    assert all(p.grad().ctx == cpu1 for p in net.collect_params().values())
    net, _ = search_nets(ctx=cpu1)
    translations, weights = greedy_search(net, SOURCES, WORDS, WORDS, 5, cpu1)
    assert len(translations) == 3 and weights[0].shape[1] == 4
    beam, _ = beam_search(net, SOURCES[0], WORDS, WORDS, 3, cpu1, beam_size=2)
    assert isinstance(beam, list)


def test_heads_must_divide_num_hiddens():
    with pytest.raises(ValueError, match="num_hiddens must be divisible by num_heads"):
        TransformerEncoder(VOCAB, 10, FFN, 4, 1, 0.0)
    with pytest.raises(ValueError, match="num_hiddens must be divisible by num_heads"):
        TransformerDecoder(VOCAB, 10, FFN, 4, 1, 0.0)


@pytest.mark.parametrize("make, match", [
    (lambda: TransformerEncoder(VOCAB, D, FFN, HEADS, 0, 0.0), "num_blks must be an int >= 1"),
    (lambda: TransformerDecoder(0, D, FFN, HEADS, 1, 0.0), "vocab_size must be an int >= 1"),
    (lambda: TransformerDecoderBlock(D, FFN, HEADS, 0.0, -1), "i must be an int >= 0"),
])
def test_bad_sizes(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_flags():
    with pytest.raises(TypeError, match="tie_weights must be a bool, got 1"):
        TransformerDecoder(VOCAB, D, FFN, HEADS, 1, 0.0, tie_weights=1)
    with pytest.raises(TypeError, match="pre_norm must be a bool, got None"):
        TransformerEncoder(VOCAB, D, FFN, HEADS, 1, 0.0, pre_norm=None)


def test_bad_token_and_state_shapes():
    net = make_net()
    with pytest.raises(ValueError, match=r"X must be \(batch, steps\) token ids, got shape"):
        net.encoder(tokens((3,)))
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(3,\), got \(2,\)"):
        net.encoder(SRC, SRC_LENS[:2])
    state = net.decoder.init_state(net.encoder(SRC, SRC_LENS), SRC_LENS)
    with pytest.raises(ValueError, match=r"X must be \(batch = 3, steps\) token ids, got shape "
                                         r"\(2, 4\)"):
        net.decoder(TGT[:2, :4], state)
    with pytest.raises(ValueError, match=r"X must be \(batch = 3, steps\) token ids, got shape "
                                         r"\(3,\)"):
        net.decoder(TGT[:, 0], state)
    with pytest.raises(ValueError, match=r"enc_outputs must be \(batch, steps, num_hiddens = "
                                         r"8\), got shape \(3, 5, 4\)"):
        net.decoder.init_state(np.zeros((3, 5, 4)))
    with pytest.raises(ValueError, match=r"enc_valid_lens must have shape \(3,\), got \(3, 1\)"):
        net.decoder.init_state(np.zeros((3, 5, D)), np.ones((3, 1)))


def test_decoding_past_max_len_is_an_error():
    net = make_net()
    state = net.decoder.init_state(net.encoder(SRC, SRC_LENS), SRC_LENS)
    state = state[:3] + (999,)
    with pytest.raises(ValueError, match="max_len = 1000"):
        net.decoder(TGT[:, :2], state)


def test_valid_lengths_are_checked_by_every_block_and_full_lengths_mask_nothing(monkeypatch):
    import d2lattn.attention as attention
    calls = []
    check = attention.lengths
    monkeypatch.setattr(attention, "lengths",
                        lambda lens, shape, ctx: calls.append(shape) or check(lens, shape, ctx))
    encoder = TransformerEncoder(VOCAB, D, FFN, HEADS, 3, 0.0)
    encoder.initialize()
    X = tokens((2, 5))
    full = np.array([5, 5], dtype="int32")
    out = encoder(X, full)
    assert calls == [(2, 5, 5)] * 3  # no cache: lengths changed in place are seen (issue 15)
    onp.testing.assert_allclose(out.asnumpy(), encoder(X).asnumpy(), rtol=1e-6)
    full[0] = 6
    with pytest.raises(ValueError, match=r"valid_lens? must hold integers in \[0, 5\]"):
        encoder(X, full)


def test_dropout_returns_its_input_where_it_changes_nothing():
    from d2lattn._ops import Dropout
    X = np.ones((2, 50))
    for layer in (Dropout(0.0), Dropout(0.5)):
        assert layer(X) is X  # outside training: no copy
    with autograd.record():
        assert Dropout(0.0)(X) is X
        dropped = Dropout(0.5)(X)
    assert set(onp.unique(dropped.asnumpy())) == {0.0, 2.0}
