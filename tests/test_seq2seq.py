"""Encoder-decoder models: shapes, the state at the last real token, train/predict
consistency (one call over all steps == one call per step), masks, reordering, devices."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, init, np

from d2lattn.attention import DotProductAttention
from d2lattn.seq2seq import (EncoderDecoder, Seq2SeqAttentionDecoder, Seq2SeqDecoder,
                             Seq2SeqEncoder, _reverse_within, seq2seq_model)

VOCAB, EMBED, HIDDEN = 11, 5, 6


def make_net(decoder_cls=Seq2SeqAttentionDecoder, layers=2, ctx=None, bidirectional=False,
             **kwargs):
    mx.random.seed(0)
    net = EncoderDecoder(Seq2SeqEncoder(VOCAB, EMBED, HIDDEN, layers, bidirectional=bidirectional),
                         decoder_cls(VOCAB, EMBED, HIDDEN, layers, **kwargs))
    net.initialize(init.Xavier(), ctx=ctx)
    return net


def tokens(shape, ctx=None, seed=1):
    ids = onp.random.default_rng(seed).integers(1, VOCAB, size=shape)
    return np.array(ids, dtype="int32", ctx=ctx)


def test_encoder_shapes_and_state_is_the_top_output_at_the_last_step():
    net = make_net()
    X = tokens((3, 7))
    outputs, state = net.encoder(X)
    assert outputs.shape == (3, 7, HIDDEN) and state.shape == (2, 3, HIDDEN)
    onp.testing.assert_allclose(state[-1].asnumpy(), outputs[:, -1].asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("layers", [1, 3])
def test_encoder_state_ignores_padding(layers):
    # The state of a padded sequence equals the state of the sequence without its padding.
    net = make_net(layers=layers)
    X = tokens((2, 6))
    _, padded = net.encoder(X, np.array([4, 6], dtype="int32"))
    _, short = net.encoder(X[:1, :4])
    _, full = net.encoder(X[1:])
    onp.testing.assert_allclose(padded[:, 0].asnumpy(), short[:, 0].asnumpy(), rtol=1e-5)
    onp.testing.assert_allclose(padded[:, 1].asnumpy(), full[:, 0].asnumpy(), rtol=1e-5)


@pytest.mark.parametrize("decoder_cls, bidirectional", [
    (Seq2SeqDecoder, False), (Seq2SeqAttentionDecoder, False), (Seq2SeqAttentionDecoder, True)])
def test_decoding_step_by_step_equals_one_call(decoder_cls, bidirectional):
    # Training calls the decoder once on the whole target; prediction calls it once per
    # token with the state carried over: both must give the same logits.
    net = make_net(decoder_cls, bidirectional=bidirectional)
    X, valid_lens, Y = tokens((2, 5)), np.array([5, 3], dtype="int32"), tokens((2, 4), seed=2)
    enc = net.encoder(X, valid_lens)
    logits, _ = net.decoder(Y, net.decoder.init_state(enc, valid_lens))
    assert logits.shape == (2, 4, VOCAB)
    state, steps = net.decoder.init_state(enc, valid_lens), []
    for t in range(4):
        step, state = net.decoder(Y[:, t:t + 1], state)
        steps.append(step.asnumpy())
    onp.testing.assert_allclose(onp.concatenate(steps, axis=1), logits.asnumpy(), rtol=1e-5,
                                atol=1e-6)


def test_attention_weights_mask_padding_and_sum_to_one():
    net = make_net()
    X, valid_lens = tokens((2, 5)), np.array([5, 2], dtype="int32")
    net(X, tokens((2, 3)), valid_lens)
    weights = net.decoder.attention_weights.asnumpy()
    assert weights.shape == (2, 3, 5)
    onp.testing.assert_allclose(weights.sum(axis=-1), 1, rtol=1e-5)
    assert (weights[1, :, 2:] == 0).all()


def test_attention_decoder_takes_another_scoring_function():
    net = make_net(attention=DotProductAttention(0))
    X = tokens((2, 5))
    logits, _ = net(X, tokens((2, 3)), np.array([5, 1], dtype="int32"))
    assert logits.shape == (2, 3, VOCAB)
    onp.testing.assert_allclose(net.decoder.attention_weights[1, :, 0].asnumpy(), 1)


def test_plain_decoder_context_is_the_encoder_state_at_every_step():
    # d2l's version took its context from the *decoder's* latest state when predicting.
    net = make_net(Seq2SeqDecoder)
    X = tokens((2, 5))
    enc = net.encoder(X)
    state = net.decoder.init_state(enc)
    for t in range(3):
        _, state = net.decoder(tokens((2, 1), seed=t), state)
    onp.testing.assert_array_equal(state[0].asnumpy(), enc[1][-1].asnumpy())


@pytest.mark.parametrize("decoder_cls", [Seq2SeqDecoder, Seq2SeqAttentionDecoder])
def test_reorder_state_selects_batch_rows(decoder_cls):
    net = make_net(decoder_cls)
    X, valid_lens, Y = tokens((3, 5)), np.array([5, 2, 4], dtype="int32"), tokens((3, 2))
    state = net.decoder.init_state(net.encoder(X, valid_lens), valid_lens)
    order = np.array([2, 2, 0], dtype="int32")
    picked, _ = net.decoder(Y[order], net.decoder.reorder_state(state, order))
    everything, _ = net.decoder(Y, state)
    onp.testing.assert_allclose(picked.asnumpy(), everything.asnumpy()[[2, 2, 0]], rtol=1e-5)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_gradients_reach_every_parameter(bidirectional):
    net = make_net(bidirectional=bidirectional)
    with autograd.record():
        logits, _ = net(tokens((2, 5)), tokens((2, 3)), np.array([5, 3], dtype="int32"))
        logits.sum().backward()
    for name, param in net.collect_params().items():
        assert float(np.abs(param.grad()).sum()) > 0, name


@pytest.mark.parametrize("decoder_cls, bidirectional", [
    (Seq2SeqDecoder, False), (Seq2SeqAttentionDecoder, False), (Seq2SeqAttentionDecoder, True)])
def test_models_run_on_cpu1(decoder_cls, bidirectional, cpu1):
    net = make_net(decoder_cls, ctx=cpu1, bidirectional=bidirectional)
    X, valid_lens = tokens((2, 5), ctx=cpu1), np.array([5, 3], dtype="int32", ctx=cpu1)
    with autograd.record():
        logits, state = net(X, tokens((2, 3), ctx=cpu1), valid_lens)
    assert logits.ctx == cpu1 and all(s.ctx == cpu1 for s in state if s is not None)


def test_encoder_rejects_bad_shapes():
    net = make_net()
    with pytest.raises(ValueError, match=r"X must be \(batch, steps\) token ids, got shape"):
        net.encoder(tokens((2, 3, 1)))
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(2,\), got \(3,\)"):
        net.encoder(tokens((2, 3)), np.array([1, 2, 3]))
    for lengths in ([1, 4], [-1, 2], [1.5, 2]):  # longer than the 3 steps, negative, fractional
        with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 3\] \(X has "
                                             r"3 steps\), got \[(4|-1|1.5)"):
            net.encoder(tokens((2, 3)), np.array(lengths))


def test_encoder_rejects_zero_layers():
    with pytest.raises(ValueError, match="num_layers must be an int >= 1"):
        Seq2SeqEncoder(VOCAB, EMBED, HIDDEN, 0)


def test_encoder_rejects_a_bidirectional_flag_that_is_not_a_bool():
    with pytest.raises(TypeError, match="bidirectional must be a bool, got 'yes'"):
        Seq2SeqEncoder(VOCAB, EMBED, HIDDEN, 1, bidirectional="yes")


def test_reverse_within_matches_numpy_and_undoes_itself():
    X = onp.arange(2 * 5 * 3, dtype="float32").reshape(2, 5, 3)
    lengths = onp.array([3, 5])
    expected = X.copy()
    for row, length in enumerate(lengths):
        expected[row, :length] = X[row, :length][::-1]
    reversed_ = _reverse_within(mx.ndarray, np.array(X), np.array(lengths, dtype="float32"))
    onp.testing.assert_array_equal(reversed_.asnumpy(), expected)
    twice = _reverse_within(mx.ndarray, reversed_, np.array(lengths, dtype="float32"))
    onp.testing.assert_array_equal(twice.asnumpy(), X)


@pytest.mark.parametrize("layers", [1, 2])
def test_bidirectional_encoder_shapes_and_state_is_the_forward_direction(layers):
    net = make_net(layers=layers, bidirectional=True)
    X, valid_lens = tokens((3, 7)), np.array([7, 4, 1], dtype="int32")
    outputs, state = net.encoder(X, valid_lens)
    assert outputs.shape == (3, 7, 2 * HIDDEN) and state.shape == (layers, 3, HIDDEN)
    for row, length in enumerate([7, 4, 1]):
        onp.testing.assert_allclose(state[-1, row].asnumpy(),
                                    outputs[row, length - 1, :HIDDEN].asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("layers", [1, 3])
def test_bidirectional_outputs_at_real_positions_ignore_padding(layers):
    # Padding after a sequence must change neither direction at its real positions: the
    # backward GRU starts at the last real token, not at the end of the padding.
    net = make_net(layers=layers, bidirectional=True)
    X = tokens((2, 6))
    padded, padded_state = net.encoder(X, np.array([4, 6], dtype="int32"))
    short, short_state = net.encoder(X[:1, :4])
    full, _ = net.encoder(X[1:])
    onp.testing.assert_allclose(padded[0, :4].asnumpy(), short[0].asnumpy(), rtol=1e-5,
                                atol=1e-7)
    onp.testing.assert_allclose(padded[1].asnumpy(), full[0].asnumpy(), rtol=1e-5, atol=1e-7)
    onp.testing.assert_allclose(padded_state[:, 0].asnumpy(), short_state[:, 0].asnumpy(),
                                rtol=1e-5)


def test_backward_direction_equals_a_loop_from_the_last_real_token():
    net = make_net(layers=1, bidirectional=True)
    X, length = tokens((1, 6)), 4
    outputs, _ = net.encoder(X, np.array([length], dtype="int32"))
    gru, embs = net.encoder.backward_rnns[0], net.encoder.embedding(X)
    hidden, expected = np.zeros((1, 1, HIDDEN)), {}
    for t in reversed(range(length)):  # one step at a time, last real token first
        out, (hidden,) = gru(embs[:, t:t + 1], [hidden])
        expected[t] = out[0, 0].asnumpy()
    for t in range(length):
        onp.testing.assert_allclose(outputs[0, t, HIDDEN:].asnumpy(), expected[t], rtol=1e-5,
                                    atol=1e-7)


def forward_and_grads(net, X, valid_lens, Y):
    """Logits, encoder state and every parameter gradient of one recorded forward pass."""
    with autograd.record():
        enc = net.encoder(X, valid_lens)
        logits, _ = net.decoder(Y, net.decoder.init_state(enc, valid_lens))
        (logits ** 2).sum().backward()
    return [logits.asnumpy(), enc[1].asnumpy()] + [
        p.grad().asnumpy().copy() for p in net.collect_params().values()]


@pytest.mark.parametrize("decoder_cls, layers, bidirectional", [
    (Seq2SeqDecoder, 1, False), (Seq2SeqDecoder, 2, True), (Seq2SeqAttentionDecoder, 2, False),
    (Seq2SeqAttentionDecoder, 1, True)])
@pytest.mark.parametrize("on_cpu1", [False, True])
def test_hybridized_blocks_equal_imperative(decoder_cls, layers, bidirectional, on_cpu1, cpu1):
    """The cached graph computes what the Python code computes: outputs and gradients, with
    and without valid lengths (the encoder's None becomes full lengths before the graph)."""
    ctx = cpu1 if on_cpu1 else mx.cpu()
    net = make_net(decoder_cls, layers, ctx=ctx, bidirectional=bidirectional)
    X, Y = tokens((3, 6), ctx=ctx), tokens((3, 4), ctx=ctx, seed=2)
    cases = [np.array([6, 2, 0], dtype="int32", ctx=ctx), None]
    imperative = [forward_and_grads(net, X, valid_lens, Y) for valid_lens in cases]
    net.hybridize()
    for _ in range(2):  # the first call builds the graph, the second runs the cached one
        for valid_lens, expected in zip(cases, imperative):
            for got, want in zip(forward_and_grads(net, X, valid_lens, Y), expected):
                onp.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert net.encoder._cached_op is not None
    if decoder_cls is Seq2SeqDecoder:
        assert net.decoder._cached_op is not None


def test_hybridized_blocks_still_check_their_input():
    net = make_net(Seq2SeqDecoder)
    net.hybridize()
    net(tokens((2, 3)), tokens((2, 2)), np.array([3, 1], dtype="int32"))
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 3\]"):
        net.encoder(tokens((2, 3)), np.array([1, 4]))
    with pytest.raises(ValueError, match=r"X must be \(batch, steps\) token ids"):
        net.encoder(tokens((2, 3, 1)))
    state = net.decoder.init_state(net.encoder(tokens((2, 3))))
    with pytest.raises(ValueError, match=r"X must hold integers in \[0, 10\]"):
        net.decoder(np.array([[1], [VOCAB]], dtype="int32"), state)


def test_hybridized_encoder_dropout_follows_the_training_mode():
    """Dropout between layers is a node of the graph: active when training, off otherwise,
    whichever mode the graph was built in."""
    mx.random.seed(0)
    net = Seq2SeqEncoder(VOCAB, EMBED, HIDDEN, 2, dropout=0.5)
    net.initialize()
    X = tokens((4, 5))
    plain = net(X)[0].asnumpy()
    net.hybridize()
    onp.testing.assert_allclose(net(X)[0].asnumpy(), plain, rtol=1e-6)
    with autograd.record():
        dropped = net(X)[0].asnumpy()
    assert not onp.allclose(dropped, plain, atol=1e-4)
    onp.testing.assert_allclose(net(X)[0].asnumpy(), plain, rtol=1e-6)


def test_seq2seq_model_builds_the_chapter_models_and_rejects_unknown_decoders():
    for decoder, cls in (("plain", Seq2SeqDecoder), ("attention", Seq2SeqAttentionDecoder)):
        net = seq2seq_model(decoder, VOCAB, VOCAB + 1, EMBED, HIDDEN, 2)
        assert isinstance(net.decoder, cls) and isinstance(net.encoder, Seq2SeqEncoder)
        net.initialize()
        logits, _ = net(tokens((2, 3)), tokens((2, 4)), np.array([3, 1], dtype="int32"))
        assert logits.shape == (2, 4, VOCAB + 1)
        assert len(net.encoder.rnns) == 2 and net.encoder.num_hiddens == HIDDEN
    with pytest.raises(ValueError, match="decoder must be one of \\['attention', 'plain'\\], "
                                         "got 'bahdanau'"):
        seq2seq_model("bahdanau", VOCAB, VOCAB, EMBED, HIDDEN, 1)


@pytest.mark.parametrize("dtype", ["float64"])  # the CPU has no float16 GEMM
def test_hybridized_encoder_keeps_the_models_dtype(dtype):
    net = make_net(Seq2SeqDecoder)
    net.cast(dtype)
    X, valid_lens = tokens((2, 4)), np.array([4, 2], dtype="int32")
    expected = [a.asnumpy() for a in net.encoder(X, valid_lens)]
    net.hybridize()
    got = net.encoder(X, valid_lens)
    assert all(a.dtype == onp.dtype(dtype) for a in got)
    for a, b in zip(got, expected):
        onp.testing.assert_array_equal(a.asnumpy(), b)


@pytest.mark.parametrize("decoder_cls", [Seq2SeqDecoder, Seq2SeqAttentionDecoder])
@pytest.mark.parametrize("hybrid", [False, True])
def test_decoders_refuse_a_state_of_another_batch(decoder_cls, hybrid):
    net = make_net(decoder_cls)
    if hybrid:
        net.hybridize()
    X, valid_lens = tokens((3, 5)), np.array([5, 2, 1], dtype="int32")
    state = net.decoder.init_state(net.encoder(X, valid_lens), valid_lens)
    first = "context" if decoder_cls is Seq2SeqDecoder else "enc_outputs"
    with pytest.raises(ValueError, match=rf"state is for a batch of 3 \(its {first} has shape "
                                         rf"\(3, .*\)\), X has 2 rows"):
        net.decoder(tokens((2, 4)), state)
    smaller = net.decoder.reorder_state(state, np.array([0, 2], dtype="int32"))
    logits, _ = net.decoder(tokens((2, 4)), smaller)
    assert logits.shape == (2, 4, VOCAB)


def test_decoders_refuse_states_of_another_width_dtype_or_form():
    plain = make_net(Seq2SeqDecoder).decoder
    context, hidden = np.zeros((3, HIDDEN)), np.zeros((2, 3, HIDDEN))
    Y = tokens((3, 2))
    with pytest.raises(ValueError, match=r"state's context must have shape \(3, 6\), got "
                                         r"\(3, 7\)"):
        plain(Y, (np.zeros((3, HIDDEN + 1)), hidden))
    with pytest.raises(ValueError, match=r"state's hidden must have shape \(2, 3, 6\), got "
                                         r"\(1, 3, 6\)"):
        plain(Y, (context, np.zeros((1, 3, HIDDEN))))
    with pytest.raises(ValueError, match=r"state's hidden must be float32, the dtype of the "
                                         r"decoder's parameters, got float16"):
        plain(Y, (context, hidden.astype("float16")))
    with pytest.raises(TypeError, match=r"state must be the tuple \(context, hidden\) of "
                                        r"init_state, got list of 2"):
        plain(Y, [context, hidden])
    with pytest.raises(TypeError, match=r"state's hidden must be an mxnet.np.ndarray, got "
                                        r"NoneType"):
        plain(Y, (context, None))
    attentive = make_net(Seq2SeqAttentionDecoder).decoder
    outputs, lens = np.zeros((3, 5, HIDDEN)), np.array([5, 2, 1])
    with pytest.raises(ValueError, match=r"state's hidden must have shape \(2, 3, 6\), got "
                                         r"\(2, 3, 7\)"):
        attentive(Y, (outputs, np.zeros((2, 3, HIDDEN + 1)), lens))
    with pytest.raises(ValueError, match=r"state is for a batch of 2 \(its enc_valid_lens has "
                                         r"shape \(2,\)\), X has 3 rows"):
        attentive(Y, (outputs, hidden, np.array([5, 2])))
    with pytest.raises(TypeError, match=r"state must be the tuple \(enc_outputs, hidden, "
                                        r"enc_valid_lens\) of init_state, got tuple of 2"):
        attentive(Y, (outputs, hidden))
    logits, _ = attentive(Y, (outputs, hidden, None))  # no lengths: every step counts
    assert logits.shape == (3, 2, VOCAB)


@pytest.mark.parametrize("decoder_cls", [Seq2SeqDecoder, Seq2SeqAttentionDecoder])
def test_reorder_state_refuses_rows_the_state_lacks(decoder_cls):
    net = make_net(decoder_cls)
    X, valid_lens = tokens((3, 5)), np.array([5, 2, 1], dtype="int32")
    state = net.decoder.init_state(net.encoder(X, valid_lens), valid_lens)
    with pytest.raises(ValueError, match=r"indices must hold integers in \[0, 2\] \(rows of "
                                         r"the state's batch of 3\), got \[3"):
        net.decoder.reorder_state(state, np.array([3, 0], dtype="int32"))
    with pytest.raises(ValueError, match=r"indices must be \(beams,\) row indices, got shape "
                                         r"\(1, 2\)"):
        net.decoder.reorder_state(state, np.array([[1, 0]], dtype="int32"))
