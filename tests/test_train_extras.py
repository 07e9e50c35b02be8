"""Training extras: the Transformer's warm-up schedule, label smoothing, the new options of
train_seq2seq, and a small Transformer that learns to reverse letters with them."""
import json
import math
from pathlib import Path

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np

from d2lattn.data.nmt import load_data_nmt
from d2lattn.decoding import beam_search, greedy_search
from d2lattn.seq2seq import EncoderDecoder
from d2lattn.train import (MaskedSoftmaxCELoss, TransformerSchedule, seq2seq_batch_loss,
                           seq2seq_loss, set_seed, train_seq2seq)
from d2lattn.transformer import TransformerDecoder, TransformerEncoder
from test_train_seq2seq import reverse_task

TORCH_LOSS = json.loads((Path(__file__).parent / "data" / "loss_reference.json").read_text())

# --- TransformerSchedule ----------------------------------------------------------------------


def test_schedule_by_hand():
    # d = 16, warmup 4: lr = 1/4 * min(step^-1/2, step / 8).
    schedule = TransformerSchedule(16, 4)
    expected = {0: 0.0, 1: 1 / 32, 2: 1 / 16, 3: 3 / 32, 4: 1 / 8, 16: 1 / 16, 100: 1 / 40}
    for step, lr in expected.items():
        assert schedule(step) == pytest.approx(lr, rel=1e-12), step
    assert TransformerSchedule(16, 4, factor=2.5)(16) == pytest.approx(2.5 / 16, rel=1e-12)


@pytest.mark.parametrize("num_hiddens, warmup", [(512, 4000), (32, 37)])
def test_schedule_rises_linearly_peaks_at_warmup_then_decays_as_inverse_sqrt(num_hiddens,
                                                                            warmup):
    schedule = TransformerSchedule(num_hiddens, warmup, factor=0.7)
    lrs = onp.array([schedule(step) for step in range(1, 3 * warmup + 1)])
    assert lrs.argmax() + 1 == warmup
    assert lrs.max() == pytest.approx(0.7 / math.sqrt(num_hiddens * warmup), rel=1e-12)
    steps = onp.arange(1, warmup + 1)
    onp.testing.assert_allclose(lrs[:warmup], steps * lrs[0], rtol=1e-12)
    # Quadrupling the step after the peak halves the rate.
    assert schedule(4 * warmup) == pytest.approx(schedule(warmup) / 2, rel=1e-12)


def test_schedule_drives_a_gluon_trainer():
    net = gluon.nn.Dense(1, in_units=2)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam",
                            {"learning_rate": None, "lr_scheduler": TransformerSchedule(16, 4)})
    rates = []
    for _ in range(6):
        with autograd.record():
            net(np.ones((1, 2))).sum().backward()
        trainer.step(1)
        rates.append(trainer.learning_rate)
    onp.testing.assert_allclose(rates, [1 / 32, 1 / 16, 3 / 32, 1 / 8, 1 / (4 * math.sqrt(5)),
                                        1 / (4 * math.sqrt(6))], rtol=1e-12)


@pytest.mark.parametrize("args, match", [((0, 4), "num_hiddens must be an int >= 1"),
                                         ((16, 0), "warmup_steps must be an int >= 1"),
                                         ((16, 4.0), "warmup_steps must be an int >= 1"),
                                         ((16, 4, 0), "factor must be a positive finite")])
def test_schedule_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        TransformerSchedule(*args)
    with pytest.raises(ValueError, match="num_update must be an int >= 0"):
        TransformerSchedule(16, 4)(-1)


# --- Label smoothing --------------------------------------------------------------------------

def np_smoothed_ce(logits, labels, valid_len, eps):
    """Cross-entropy against the smoothed targets (1 - eps) one_hot + eps / V, summed over
    each sequence's real tokens (float64)."""
    vocab = logits.shape[-1]
    logp = logits - onp.log(onp.exp(logits).sum(-1, keepdims=True))
    at_label = onp.take_along_axis(logp, labels[..., None], -1)[..., 0]
    per_token = -(1 - eps) * at_label - eps / vocab * logp.sum(-1)
    return (per_token * (onp.arange(labels.shape[1]) < valid_len[:, None])).sum(1)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_label_smoothing_matches_numpy(eps, cpu1):
    rng = onp.random.default_rng(0)
    logits, labels = rng.normal(size=(3, 4, 6)), rng.integers(0, 6, size=(3, 4))
    valid_len = onp.array([4, 1, 0])
    got = MaskedSoftmaxCELoss(eps)(np.array(logits, ctx=cpu1), np.array(labels, ctx=cpu1),
                                   np.array(valid_len, ctx=cpu1))
    assert got.ctx == cpu1
    onp.testing.assert_allclose(got.asnumpy(), np_smoothed_ce(logits, labels, valid_len, eps),
                                rtol=1e-5)


def test_label_smoothing_by_hand_and_zero_is_the_plain_loss():
    # p = softmax([0, log 3]) = [1/4, 3/4], label 1, eps 0.2: targets [0.1, 0.9].
    logits = np.array([[[0.0, math.log(3)]]])
    got = MaskedSoftmaxCELoss(0.2)(logits, np.array([[1]]), np.array([1]))
    assert float(got[0]) == pytest.approx(-(0.1 * math.log(0.25) + 0.9 * math.log(0.75)),
                                          rel=1e-5)
    rng = onp.random.default_rng(1)
    args = (np.array(rng.normal(size=(2, 3, 5))), np.array(rng.integers(0, 5, size=(2, 3))),
            np.array([3, 2]))
    onp.testing.assert_array_equal(MaskedSoftmaxCELoss(0.0)(*args).asnumpy(),
                                   MaskedSoftmaxCELoss()(*args).asnumpy())


def test_label_smoothing_gradient_is_softmax_minus_targets_and_zero_at_padding():
    rng = onp.random.default_rng(2)
    logits, labels = rng.normal(size=(2, 3, 4)), rng.integers(0, 4, size=(2, 3))
    X = np.array(logits)
    X.attach_grad()
    with autograd.record():
        MaskedSoftmaxCELoss(0.3)(X, np.array(labels), np.array([3, 1])).sum().backward()
    probs = onp.exp(logits) / onp.exp(logits).sum(-1, keepdims=True)
    expected = probs - (0.7 * onp.eye(4)[labels] + 0.3 / 4)
    expected[1, 1:] = 0  # padding
    onp.testing.assert_allclose(X.grad.asnumpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("eps", [1.0, -0.1, True])
def test_label_smoothing_rejects_bad_rates(eps):
    with pytest.raises(ValueError, match=r"label_smoothing must be a number in \[0, 1\)"):
        MaskedSoftmaxCELoss(eps)


@pytest.mark.parametrize("vocab, eps", [(30522, 0.0), (50257, 0.0), (70000, 0.1)],
                         ids=["BERT", "GPT-2", "smoothed-70000"])
def test_float16_logits_are_summed_in_float32(vocab, eps):
    """Over large vocabularies MXNet's float16 sums saturate: zero logits over BERT's 30,522
    classes gave 7.625 instead of log 30522 = 10.33, and smoothing over 70,000 gave NaN."""
    rng = onp.random.default_rng(0)
    logits = (rng.normal(size=(2, 3, vocab)) * 3).astype("float16")
    labels, valid_len = rng.integers(0, vocab, size=(2, 3)), onp.array([3, 2])
    got = MaskedSoftmaxCELoss(eps)(np.array(logits), np.array(labels), np.array(valid_len))
    expected = np_smoothed_ce(logits.astype("float64"), labels, valid_len, eps)
    assert got.dtype == onp.float32
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5)
    zeros = MaskedSoftmaxCELoss(eps)(np.zeros((1, 1, vocab), dtype="float16"),
                                     np.array([[0]]), np.array([1]))
    assert float(zeros[0]) == pytest.approx(math.log(vocab), rel=1e-6)


@pytest.mark.parametrize("which", ["pred", "label", "valid_len"])
def test_python_lists_are_named(which):
    """Lists raised AttributeError ('list' object has no attribute 'ndim')."""
    args = {"pred": np.zeros((1, 1, 2)), "label": np.zeros((1, 1)), "valid_len": np.ones(1)}
    args[which] = args[which].tolist()
    with pytest.raises(TypeError, match=f"{which} must be an mxnet.np.ndarray, got list"):
        MaskedSoftmaxCELoss()(*args.values())


# --- Infinite and NaN logits, against PyTorch -------------------------------------------------

@pytest.mark.parametrize("case", TORCH_LOSS["cases"], ids=[
    f"{case['name']}, eps {case['label_smoothing']}" for case in TORCH_LOSS["cases"]])
def test_infinite_and_nan_logits_give_pytorchs_loss(case):
    """Recorded from F.cross_entropy(reduction="none", label_smoothing=eps) summed over the
    valid steps (data/make_loss_reference.py); the junk logits are followed by a valid and a
    padded step. Before: NaN where PyTorch gives inf (MXNet's sums make inf + 1 NaN)."""
    got = MaskedSoftmaxCELoss(case["label_smoothing"])(
        np.array(case["pred"], dtype="float32"), np.array(case["label"]),
        np.array(case["valid_len"])).asnumpy()
    onp.testing.assert_allclose(got, onp.array(case["loss"], dtype="float32"), rtol=1e-5)


# --- train_seq2seq options --------------------------------------------------------------------

def transformer(src_vocab, tgt_vocab, dropout=0.0):
    return EncoderDecoder(TransformerEncoder(len(src_vocab), 32, 64, 4, 2, dropout),
                          TransformerDecoder(len(tgt_vocab), 32, 64, 4, 2, dropout))


class ZeroSchedule(mx.lr_scheduler.LRScheduler):
    def __call__(self, num_update):
        return 0.0


def test_train_seq2seq_uses_the_scheduler_and_reports_the_smoothed_loss():
    # A learning rate of 0 keeps the initial weights: every epoch sees the same model, whose
    # smoothed loss (training) and plain loss (validation) we can compute afterwards.
    set_seed(0)
    data, src_vocab, tgt_vocab = load_data_nmt(reverse_task(16), 8)
    net = transformer(src_vocab, tgt_vocab)
    history = train_seq2seq(net, data, None, 2, tgt_vocab, mx.cpu(), val_iter=data,
                            lr_scheduler=ZeroSchedule(), label_smoothing=0.4)
    smoothed = MaskedSoftmaxCELoss(0.4)
    sums = [seq2seq_batch_loss(net, batch, tgt_vocab["<bos>"], mx.cpu(), smoothed)
            for batch in data]
    expected = sum(float(s) for s, _ in sums) / sum(float(n) for _, n in sums)
    onp.testing.assert_allclose(history["train"], [expected] * 2, rtol=1e-5)
    plain = seq2seq_loss(net, data, tgt_vocab, mx.cpu())
    onp.testing.assert_allclose(history["val"], [plain] * 2, rtol=1e-5)
    assert abs(plain - expected) > 0.01  # so the two checks above can tell them apart


def test_train_seq2seq_rejects_ambiguous_learning_rates():
    data, src_vocab, tgt_vocab = load_data_nmt(reverse_task(4), 2)
    net = transformer(src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match="lr must be None when lr_scheduler sets the learning "
                                         "rate, got 0.01"):
        train_seq2seq(net, data, 0.01, 1, tgt_vocab, mx.cpu(),
                      lr_scheduler=TransformerSchedule(32, 4))
    with pytest.raises(ValueError, match="lr must be a positive finite number, got None"):
        train_seq2seq(net, data, None, 1, tgt_vocab, mx.cpu())
    with pytest.raises(TypeError, match="lr_scheduler must be None or an "
                                        "mx.lr_scheduler.LRScheduler, got function"):
        train_seq2seq(net, data, None, 1, tgt_vocab, mx.cpu(), lr_scheduler=lambda n: 0.1)
    with pytest.raises(ValueError, match=r"label_smoothing must be a number in \[0, 1\)"):
        train_seq2seq(net, data, 0.01, 1, tgt_vocab, mx.cpu(), label_smoothing=1.5)


def test_train_seq2seq_checks_clip_before_any_step():
    """clip=nan was reported as theta, by grad_clipping after the first step."""
    data, src_vocab, tgt_vocab = load_data_nmt(reverse_task(4), 2)
    with pytest.raises(ValueError, match="clip must be a positive finite number, got nan"):
        train_seq2seq(transformer(src_vocab, tgt_vocab), data, 0.01, 1, tgt_vocab, mx.cpu(),
                      clip=float("nan"))


class Float16Logits(gluon.nn.Block):
    """A stand-in sequence-to-sequence model: zero float16 logits over 3 classes."""

    def forward(self, X, dec_X, X_valid_len):
        return np.zeros((*dec_X.shape, 3), dtype="float16"), None


def test_seq2seq_batch_loss_counts_float16_tokens_in_float32():
    """float16 counted 2049 tokens as 2048."""
    Y = np.zeros((1, 2049), dtype="int32")
    batch = (np.ones((1, 2), dtype="int32"), np.array([2]), Y, np.array([2049]))
    loss, count = seq2seq_batch_loss(Float16Logits(), batch, 1, mx.cpu())
    assert float(count) == 2049 and count.dtype == onp.float32
    assert float(loss) == pytest.approx(2049 * math.log(3), rel=1e-5)  # float32 sums


def test_small_transformer_learns_to_reverse(cpu1):
    # The GRU test's task and check: 64 pairs (one batch), then its first 16 translated.
    set_seed(0)
    pairs = reverse_task()
    train_iter, src_vocab, tgt_vocab = load_data_nmt(pairs, 64)
    net = transformer(src_vocab, tgt_vocab)
    history = train_seq2seq(net, train_iter, None, 60, tgt_vocab, cpu1,
                            lr_scheduler=TransformerSchedule(32, 8, factor=0.2),
                            label_smoothing=0.1)
    assert history["train"][-1] < 0.25 * history["train"][0]
    sources, targets = [s for s, _ in pairs[:16]], [t for _, t in pairs[:16]]
    translations, _ = greedy_search(net, sources, src_vocab, tgt_vocab, 8, cpu1)
    assert sum(t == ref for t, ref in zip(translations, targets)) >= 12
    beams = [beam_search(net, s, src_vocab, tgt_vocab, 8, cpu1, beam_size=3)[0] for s in sources]
    assert sum(t == ref for t, ref in zip(beams, targets)) >= 12
