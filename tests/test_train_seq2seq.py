"""The masked sequence loss, gradient clipping and the sequence-to-sequence training loop."""
import matplotlib.pyplot as plt
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, init, np

from d2lattn.data.nmt import load_data_nmt
from d2lattn.decoding import greedy_search
from d2lattn.seq2seq import (EncoderDecoder, Seq2SeqAttentionDecoder, Seq2SeqDecoder,
                             Seq2SeqEncoder)
from d2lattn.train import (MaskedSoftmaxCELoss, grad_clipping, seq2seq_loss, set_seed,
                           train_seq2seq)


def np_masked_ce(logits, labels, valid_len):
    logp = logits - onp.log(onp.exp(logits).sum(-1, keepdims=True))
    nll = -onp.take_along_axis(logp, labels[..., None], -1)[..., 0]
    return (nll * (onp.arange(labels.shape[1]) < valid_len[:, None])).sum(1)


def test_masked_loss_matches_numpy_and_ignores_padding():
    rng = onp.random.default_rng(0)
    logits, labels = rng.normal(size=(3, 4, 5)), rng.integers(0, 5, size=(3, 4))
    valid_len = onp.array([4, 2, 0])
    got = MaskedSoftmaxCELoss()(np.array(logits), np.array(labels), np.array(valid_len))
    onp.testing.assert_allclose(got.asnumpy(), np_masked_ce(logits, labels, valid_len),
                                rtol=1e-5)
    assert got[2] == 0  # a sequence with no real token costs nothing


def test_masked_loss_by_hand():
    # Uniform logits over 4 classes: each real token costs log 4; padding costs nothing.
    got = MaskedSoftmaxCELoss()(np.zeros((2, 3, 4)), np.zeros((2, 3)), np.array([3, 1]))
    onp.testing.assert_allclose(got.asnumpy(), [3 * onp.log(4), onp.log(4)], rtol=1e-5)


def test_masked_loss_gradient_is_zero_at_padding():
    logits = np.random.normal(size=(2, 4, 5))
    logits.attach_grad()
    with autograd.record():
        MaskedSoftmaxCELoss()(logits, np.ones((2, 4)), np.array([4, 2])).sum().backward()
    grad = logits.grad.asnumpy()
    assert (grad[1, 2:] == 0).all() and (onp.abs(grad[1, :2]).sum(-1) > 0).all()


def test_masked_loss_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"expected pred \(batch, steps, vocab\)"):
        MaskedSoftmaxCELoss()(np.zeros((2, 3, 4)), np.zeros((2, 2)), np.array([1, 1]))


def dense_with_grads(grads):
    net = gluon.nn.Dense(2, in_units=2)
    net.initialize()
    for param, g in zip(net.collect_params().values(), grads):
        param.grad()[:] = np.array(g)
    return net


def test_grad_clipping_scales_to_theta():
    net = dense_with_grads([[[3.0, 0.0], [0.0, 0.0]], [0.0, 4.0]])  # global norm 5
    norm = grad_clipping(net, 1.0)
    assert float(norm) == pytest.approx(5.0)
    grads = [p.grad().asnumpy() for p in net.collect_params().values()]
    onp.testing.assert_allclose(grads[0], [[0.6, 0], [0, 0]], rtol=1e-6)
    onp.testing.assert_allclose(grads[1], [0, 0.8], rtol=1e-6)


def test_grad_clipping_leaves_small_gradients_alone():
    net = dense_with_grads([[[0.3, 0.0], [0.0, 0.0]], [0.0, 0.4]])
    grad_clipping(net, 1.0)
    onp.testing.assert_allclose(net.weight.grad().asnumpy(), [[0.3, 0], [0, 0]], rtol=1e-6)


def test_grad_clipping_rejects_bad_theta():
    with pytest.raises(ValueError, match="theta must be a positive finite number"):
        grad_clipping(dense_with_grads([[[0, 0], [0, 0]], [0, 0]]), 0)


def reverse_task(n=64, seed=0):
    """Reverse sequences of 2-5 letters: a task that needs attention to align."""
    rng = onp.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        src = list(rng.choice(list("abcdef"), size=rng.integers(2, 6)))
        pairs.append((src, src[::-1]))
    return pairs


def attention_net():
    return EncoderDecoder(Seq2SeqEncoder(10, 16, 32, 1), Seq2SeqAttentionDecoder(10, 16, 32, 1))


def test_training_learns_to_reverse_and_reports_losses(capsys):
    set_seed(0)
    pairs = reverse_task()
    train_iter, src_vocab, tgt_vocab = load_data_nmt(pairs, 16)
    val_iter, _, _ = load_data_nmt(pairs[:16], 16, 6, src_vocab, tgt_vocab, is_train=False)
    net = attention_net()
    history = train_seq2seq(net, train_iter, 0.02, 40, tgt_vocab, mx.cpu(), val_iter=val_iter)
    assert len(history["train"]) == len(history["val"]) == 40
    assert history["train"][-1] < 0.2 * history["train"][0]
    assert seq2seq_loss(net, val_iter, tgt_vocab, mx.cpu()) == pytest.approx(history["val"][-1])
    translations, _ = greedy_search(net, [s for s, _ in pairs[:16]], src_vocab, tgt_vocab, 8,
                                    mx.cpu())
    correct = sum(t == ref for t, (_, ref) in zip(translations, pairs[:16]))
    assert correct >= 12
    assert "tokens/sec on cpu(0)" in capsys.readouterr().out


def test_training_on_cpu1(cpu1):
    set_seed(0)
    pairs = reverse_task(16)
    train_iter, src_vocab, tgt_vocab = load_data_nmt(pairs, 8)
    net = attention_net()
    history = train_seq2seq(net, train_iter, 0.01, 2, tgt_vocab, cpu1)
    assert len(history["train"]) == 2 and history["val"] == []
    assert all(p.list_ctx() == [cpu1] for p in net.collect_params().values())


def test_training_rejects_bad_epochs():
    train_iter, _, tgt_vocab = load_data_nmt(reverse_task(4), 2)
    with pytest.raises(ValueError, match="num_epochs must be an int >= 1"):
        train_seq2seq(attention_net(), train_iter, 0.01, 0, tgt_vocab, mx.cpu())


def plain_net():
    return EncoderDecoder(Seq2SeqEncoder(10, 8, 16, 1), Seq2SeqDecoder(10, 8, 16, 1))


@pytest.mark.parametrize("on_cpu1", [False, True])
def test_hybridized_training_gives_the_imperative_losses_without_drawing(on_cpu1, cpu1):
    """A hybridized model trains to the same losses; ``animate=False`` draws no figure."""
    device = cpu1 if on_cpu1 else mx.cpu()
    pairs = reverse_task(32)
    histories = []
    for hybridize in (False, True):
        set_seed(0)
        train_iter, src_vocab, tgt_vocab = load_data_nmt(pairs, 8)
        net = plain_net()
        if hybridize:
            net.hybridize()
        figures = plt.get_fignums()
        histories.append(train_seq2seq(net, train_iter, 0.01, 2, tgt_vocab, device,
                                       val_iter=train_iter, animate=False))
        assert plt.get_fignums() == figures
    onp.testing.assert_allclose(histories[1]["train"] + histories[1]["val"],
                                histories[0]["train"] + histories[0]["val"], rtol=1e-6)


def test_training_rejects_an_animate_flag_that_is_not_a_bool():
    train_iter, _, tgt_vocab = load_data_nmt(reverse_task(4), 2)
    with pytest.raises(TypeError, match="animate must be a bool, got 'no'"):
        train_seq2seq(plain_net(), train_iter, 0.01, 1, tgt_vocab, mx.cpu(), animate="no")
