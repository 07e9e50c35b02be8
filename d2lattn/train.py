"""Training: reproducible seeds, timers and running sums, the masked sequence loss (with
optional label smoothing), gradient clipping, the Transformer's warm-up learning-rate schedule
and the training loops of sequence-to-sequence models and of BERT."""
import random
import time
import warnings

import mxnet as mx
import numpy as onp
from mxnet import autograd, gluon, np, npx
from tqdm import tqdm

from ._checks import (check_bool, check_context, check_float_array, check_int,
                      check_integers, check_lengths, check_ndarray, check_positive, check_rate,
                      check_special_tokens, check_tokens)
from ._ops import sequence_mask
from .plotting import Animator


def set_seed(seed):
    """Seed mxnet (every device), numpy and Python's ``random`` with ``seed``."""
    seed = check_int("seed", seed, 0, 2**32 - 1)
    mx.random.seed(seed)
    onp.random.seed(seed)
    random.seed(seed)


class Timer:
    """Record the durations of several runs: ``start()``, then ``stop()`` per run."""

    def __init__(self):
        self.times = []
        self.start()

    def start(self):
        """Start the clock."""
        self.tik = time.perf_counter()

    def stop(self):
        """Stop the clock, record the run's duration in seconds and return it."""
        self.times.append(time.perf_counter() - self.tik)
        return self.times[-1]

    def avg(self):
        """Mean duration of the recorded runs."""
        return sum(self.times) / len(self.times) if self.times else 0.0

    def sum(self):
        """Total duration of the recorded runs."""
        return sum(self.times)

    def cumsum(self):
        """Running totals: the time elapsed at the end of each run."""
        return onp.cumsum(self.times).tolist()


class Accumulator:
    """Running sums over ``n`` variables, e.g. (loss sum, token count)."""

    def __init__(self, n):
        self.data = [0.0] * check_int("n", n, minimum=1)

    def add(self, *args):
        """Add one value to each of the ``n`` sums."""
        if len(args) != len(self.data):
            raise ValueError(f"add() takes {len(self.data)} values, got {len(args)}")
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self):
        """Set every sum back to 0."""
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


class MaskedSoftmaxCELoss(gluon.nn.Block):
    """Cross-entropy summed over each sequence's real tokens: padding never counts.

    pred: (batch, steps, vocab) float logits; label: (batch, steps) ids in [0, vocab);
    valid_len: (batch,) integers in [0, steps]. Returns (batch,) sums; divide their total by
    ``valid_len.sum()`` for the loss per token. Float16 logits are computed in float32
    (float16 sums saturate: over BERT's 30,522 classes they give 7.6 for log 30522 = 10.3)
    and give float32 sums. The logits of padded steps are replaced before the softmax, so
    whatever they hold (-inf, NaN) the loss and its gradient stay finite. At valid steps the
    loss is PyTorch's: NaN for a NaN or +inf logit, inf for a -inf logit at the label (with
    label smoothing, at any class).
    With ``label_smoothing`` eps > 0 the target distribution of each token is 1 - eps on its
    label plus eps / vocab on every class (Szegedy et al., 2016): the loss per token is
    (1 - eps) * (-log p_label) + eps * mean over classes of (-log p_class).
    """

    def __init__(self, label_smoothing=0.0, **kwargs):
        super().__init__(**kwargs)
        self.label_smoothing = check_rate("label_smoothing", label_smoothing)

    def forward(self, pred, label, valid_len):
        _check_sequence_loss(pred, label, valid_len)
        pred = pred.astype("float32") if pred.dtype == onp.float16 else pred
        if 0 in pred.shape[:2]:  # no token: zero losses, without an operator on empty arrays
            return np.zeros(pred.shape[:1], dtype=pred.dtype, ctx=pred.ctx)
        steps = np.arange(pred.shape[1], ctx=pred.ctx).reshape(1, -1)
        mask = steps < valid_len.reshape(-1, 1).astype(steps.dtype)
        # padded steps' logits become 0 (a replacement: NaN there stays out); SequenceMask,
        # not a broadcasting np.where, which took 190 ms of a 490 ms GPT step (Chapter 9)
        pred = sequence_mask(pred, valid_len.astype("int32"), 0)
        log_probs = npx.log_softmax(pred, axis=-1)
        nll = -npx.pick(log_probs, label, axis=-1)
        if self.label_smoothing:
            eps = self.label_smoothing
            nll = (1 - eps) * nll - eps * _sum_last_axis(log_probs, mean=True)
        # Rounding can make the loss of a confident right answer slightly negative (-1e-6):
        # shift such values to 0, leaving the gradient as it is.
        nll = nll - np.minimum(nll.detach(), 0)
        return _sum_last_axis(_nan_where_pytorch_is(pred, nll) * mask)


def _float32_if_half(x):
    """``x`` in float32 if it is float16, else ``x`` itself: float16 sums saturate (over
    30,522 classes a log-sum-exp of zeros gives 7.6 for log 30522 = 10.3) and count 2049
    as 2048."""
    return x.astype("float32") if x.dtype == onp.float16 else x


def _nan_where_pytorch_is(pred, nll):
    """``nll`` (batch, steps) with NaN where a logit of ``pred`` is NaN or +inf: log_softmax
    skips a NaN logit and gives inf for a +inf one, where PyTorch's loss is NaN.

    With -inf raised to the lowest finite number (-inf logits are fine), pred @ 0 is NaN
    exactly there: cheaper than a reduction over the vocabulary, and no wait for the device.
    """
    probe = np.maximum(pred.detach(), onp.finfo(pred.dtype).min)  # keeps NaN
    invalid = np.isnan(_dot_last_axis(probe, 0))
    return np.where(invalid, np.full(nll.shape, onp.nan, dtype=nll.dtype, ctx=nll.ctx), nll)


def _sum_last_axis(x, mean=False):
    """The sum (with ``mean``: the mean) of ``x`` over its last axis, with the infinities of
    IEEE arithmetic: MXNet's compensated sum makes inf + 1 NaN (PyTorch: inf). Where a plain
    weighted sum, a product with a vector, is infinite, that (and its gradient, the same as
    the reduction's); elsewhere MXNet's reduction, bit for bit."""
    reduced = x.mean(axis=-1) if mean else x.sum(axis=-1)
    plain = _dot_last_axis(x, 1 / x.shape[-1] if mean else 1)
    return np.where(np.isinf(plain), plain, reduced)


def _dot_last_axis(x, fill):
    """``x`` times a vector of ``fill`` over its last axis."""
    return np.dot(x, np.full(x.shape[-1:], fill, dtype=x.dtype, ctx=x.ctx))


_SEQ_LOSS = MaskedSoftmaxCELoss()


def grad_clipping(net, theta):
    """Rescale the gradients of ``net`` (on one device) so their global L2 norm is <= theta.

    Returns the norm before clipping as a 0-d array (no synchronisation with the device).
    """
    theta = check_positive("theta", theta)
    grads = [p.grad() for p in net.collect_params().values() if p.grad_req != "null"]
    norm = np.sqrt(sum((g ** 2).sum() for g in grads))
    scale = theta / np.maximum(norm, theta)
    for g in grads:
        g *= scale
    return norm


class TransformerSchedule(mx.lr_scheduler.LRScheduler):
    """The warm-up schedule of Vaswani et al. (2017), for a Trainer's ``lr_scheduler``.

    lr(step) = factor * num_hiddens^-0.5 * min(step^-0.5, step * warmup_steps^-1.5): a
    linear rise to its peak factor * (num_hiddens * warmup_steps)^-0.5 at step =
    warmup_steps, then a decay as step^-0.5; lr(0) = 0. ``step`` is the optimizer's update
    count, from 1 at the first update. ``base_lr`` is ``factor`` (an optimizer given both
    a scheduler and a learning rate overwrites it with that rate).
    """

    def __init__(self, num_hiddens, warmup_steps, factor=1.0):
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        super().__init__(base_lr=check_positive("factor", factor),
                         warmup_steps=check_int("warmup_steps", warmup_steps, minimum=1))

    def __call__(self, num_update):
        step = check_int("num_update", num_update)
        if step == 0:
            return 0.0
        return (self.base_lr * self.num_hiddens ** -0.5
                * min(step ** -0.5, step * self.warmup_steps ** -1.5))


def seq2seq_batch_loss(net, batch, bos, device, loss=_SEQ_LOSS):
    """Teacher-forced loss of one batch (X, X_valid_len, Y, Y_valid_len): (sum, real
    tokens), both float32 for float16 logits (float16 counts 2049 as 2048).

    The decoder input is <bos> followed by the target shifted right by one. Columns that
    hold only padding are dropped first: they cost time and change nothing. ``loss`` is a
    :class:`MaskedSoftmaxCELoss` (by default plain cross-entropy).
    """
    X, X_valid_len, Y, Y_valid_len = (a.as_in_ctx(device) for a in batch)
    for name, tokens, lens in (("X", X, X_valid_len), ("Y", Y, Y_valid_len)):
        check_tokens(name, tokens, lens)  # before max(), which fails on an empty batch
    # Drop the columns that hold only padding.
    X, Y = X[:, :int(X_valid_len.max())], Y[:, :int(Y_valid_len.max())]
    bos_column = np.full((Y.shape[0], 1), bos, dtype=Y.dtype, ctx=device)
    Y_hat, _ = net(X, np.concatenate((bos_column, Y[:, :-1]), axis=1), X_valid_len)
    sums = loss(Y_hat, Y, Y_valid_len)  # float32 for float16 Y_hat
    return sums.sum(), Y_valid_len.astype(sums.dtype).sum()


def seq2seq_loss(net, data_iter, tgt_vocab, device):
    """Mean teacher-forced cross-entropy per real target token over ``data_iter``."""
    check_special_tokens("tgt_vocab", tgt_vocab, ["<bos>"])
    bos = tgt_vocab["<bos>"]
    check_context("device", device)
    total = Accumulator(2)
    for batch in _nonempty("data_iter", data_iter):
        loss, tokens = seq2seq_batch_loss(net, batch, bos, device)
        total.add(loss, tokens)
    return total[0] / total[1]


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device, val_iter=None,
                  clip=1.0, lr_scheduler=None, label_smoothing=0.0, animate=True):
    """Train a sequence-to-sequence model with Adam, drawing the loss per token live
    (``animate=False``: no drawing).

    ``net`` is (re)initialised with Xavier on ``device`` (d2l's behaviour). The gradient of
    the mean loss per real token is clipped to norm ``clip``. ``lr_scheduler``: None (the
    learning rate stays ``lr``) or an ``mx.lr_scheduler.LRScheduler`` such as
    :class:`TransformerSchedule` that sets it at every update; pass ``lr=None`` with it.
    ``label_smoothing``: see :class:`MaskedSoftmaxCELoss`; the training losses are then the
    smoothed loss being minimised, the validation losses stay plain cross-entropy. Returns
    the per-epoch losses, ``{"train": [...], "val": [...]}`` (``val`` empty without
    ``val_iter``).
    """
    num_epochs = check_int("num_epochs", num_epochs, minimum=1)
    clip = check_positive("clip", clip)
    check_bool("animate", animate)
    optimizer_params = _optimizer_params(lr, lr_scheduler)
    loss_fn = MaskedSoftmaxCELoss(label_smoothing)
    check_special_tokens("tgt_vocab", tgt_vocab, ["<bos>"])
    bos = tgt_vocab["<bos>"]
    net.initialize(mx.init.Xavier(), force_reinit=True, ctx=check_context("device", device))
    trainer = gluon.Trainer(net.collect_params(), "adam", optimizer_params)
    legend = ["train", "validation"] if val_iter is not None else ["train"]
    animator = Animator(xlabel="epoch", ylabel="loss per token", legend=legend,
                        xlim=[1, num_epochs]) if animate else None
    history, timer = {"train": [], "val": []}, Timer()
    for epoch in tqdm(range(num_epochs), desc="epochs", mininterval=1):
        total = Accumulator(2)
        timer.start()
        for batch in _nonempty("data_iter", data_iter):
            with autograd.record():
                loss, tokens = seq2seq_batch_loss(net, batch, bos, device, loss_fn)
                (loss / tokens).backward()
            grad_clipping(net, clip)
            trainer.step(1)
            total.add(loss, tokens)
        timer.stop()
        history["train"].append(total[0] / total[1])
        if val_iter is not None:
            history["val"].append(seq2seq_loss(net, val_iter, tgt_vocab, device))
        if animate:
            animator.add(epoch + 1, [history["train"][-1]] + history["val"][-1:])
    print(f"loss per token {history['train'][-1]:.3f}"
          + (f", validation {history['val'][-1]:.3f}" if val_iter is not None else "")
          + f"; {total[1] / timer.times[-1]:.0f} tokens/sec on {device}")
    return history


_CE = gluon.loss.SoftmaxCrossEntropyLoss()


def bert_batch_loss(net, tokens, segments, valid_lens, pred_positions, mlm_weights, mlm_labels,
                    nsp_labels):
    """The two pretraining losses of a :class:`d2lattn.bert.BERTModel` on one batch (arrays
    as yielded by :func:`d2lattn.data.pretrain.load_data_bert`, on the model's device).

    Returns ``(mlm, nsp)``: the cross-entropy averaged over the real prediction slots
    (``mlm_weights`` 1; padding slots weigh 0) and over the sentence pairs. Float16 logits
    and weights are computed in float32, as in :class:`MaskedSoftmaxCELoss`, and give
    float32 losses.
    """
    _, mlm_Y_hat, nsp_Y_hat = net(tokens, segments, valid_lens, pred_positions)
    _check_labels("mlm_labels", mlm_labels, mlm_Y_hat)
    _check_labels("nsp_labels", nsp_labels, nsp_Y_hat)
    if mlm_weights.shape != mlm_labels.shape:
        raise ValueError(f"mlm_weights must be shaped like mlm_labels {mlm_labels.shape}, got "
                         f"{mlm_weights.shape}")
    mlm_Y_hat, nsp_Y_hat = _float32_if_half(mlm_Y_hat), _float32_if_half(nsp_Y_hat)
    weights = _float32_if_half(mlm_weights.reshape(-1))
    mlm = _CE(mlm_Y_hat.reshape(-1, mlm_Y_hat.shape[-1]), mlm_labels.reshape(-1)) * weights
    return mlm.sum() / np.maximum(weights.sum(), 1), _CE(nsp_Y_hat, nsp_labels).mean()


def train_bert(train_iter, net, num_steps, devices, lr=1e-3, on_step=None):
    """Pretrain BERT with Adam for ``num_steps`` minibatches, drawing both losses live.

    ``devices``: a list of contexts (e.g. ``try_all_gpus()``); each batch is split across
    them and the gradients of the per-device losses (MLM + NSP) are averaged. ``net`` is
    (re)initialised with Xavier on ``devices``. ``on_step``, if given, is called as
    ``on_step(step, net)`` after every step (1, 2, ...), e.g. to evaluate held-out text.
    Returns ``{"mlm": [...], "nsp": [...]}``, the losses of every step.
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    devices = _check_contexts("devices", devices)
    lr = check_positive("lr", lr)
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be None or callable, got {type(on_step).__name__}")
    net.initialize(mx.init.Xavier(), force_reinit=True, ctx=devices)
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
    animator = Animator(xlabel="step", ylabel="loss", legend=["mlm", "nsp"],
                        xlim=[1, num_steps])
    history, timer, pairs = {"mlm": [], "nsp": []}, Timer(), 0
    with tqdm(total=num_steps, desc="steps", mininterval=1) as progress:
        while len(history["mlm"]) < num_steps:
            for batch in _nonempty("train_iter", train_iter):
                shards = [_split_and_load(x, devices) for x in batch]
                with autograd.record():
                    losses = [bert_batch_loss(net, *shard) for shard in zip(*shards)]
                    for mlm, nsp in losses:
                        (mlm + nsp).backward()
                trainer.step(len(losses))
                for key, i in (("mlm", 0), ("nsp", 1)):
                    history[key].append(sum(float(l[i]) for l in losses) / len(losses))
                pairs += batch[0].shape[0]
                animator.add(len(history["mlm"]), [history["mlm"][-1], history["nsp"][-1]])
                progress.update()
                if on_step is not None:
                    on_step(len(history["mlm"]), net)
                if len(history["mlm"]) == num_steps:
                    break
    timer.stop()
    print(f"MLM loss {history['mlm'][-1]:.3f}, NSP loss {history['nsp'][-1]:.3f}; "
          f"{pairs / timer.times[-1]:.1f} sentence pairs/sec on {list(devices)}")
    return history


def _split_and_load(X, devices):
    """Consecutive slices of X's first axis, one per device and moved there (the last devices
    get none when X has fewer rows). Gluon's split_and_load fails with numpy 2's integers."""
    bounds = [X.shape[0] * i // len(devices) for i in range(len(devices) + 1)]
    return [X[a:b].as_in_ctx(device)
            for a, b, device in zip(bounds, bounds[1:], devices) if b > a]


def _optimizer_params(lr, lr_scheduler):
    """Adam's parameters: a fixed learning rate ``lr``, or ``lr_scheduler`` (then lr is None)."""
    if lr_scheduler is None:
        return {"learning_rate": check_positive("lr", lr)}
    if not isinstance(lr_scheduler, mx.lr_scheduler.LRScheduler):
        raise TypeError("lr_scheduler must be None or an mx.lr_scheduler.LRScheduler, got "
                        f"{type(lr_scheduler).__name__}")
    if lr is not None:
        raise ValueError(f"lr must be None when lr_scheduler sets the learning rate, got {lr!r}")
    return {"learning_rate": None, "lr_scheduler": lr_scheduler}


# --- Fine-tuning a classifier (d2lattn.bert.BERTClassifier) ------------------------------------

def classifier_batch_loss(net, tokens, segments, valid_lens, labels):
    """Summed cross-entropy and number of correct predictions of a classifier on one batch
    (arrays on the net's device): ``(loss (), correct ())``. Padding columns are dropped;
    the first ([CLS]) stays, also when every length is 0."""
    check_tokens("tokens", tokens, valid_lens)  # before max(), which fails on an empty batch
    width = max(int(valid_lens.max()), 1)
    logits = net(tokens[:, :width], segments[:, :width], valid_lens)
    _check_labels("labels", labels, logits)
    correct = (logits.argmax(axis=1).astype("int32") == labels.astype("int32")).sum()
    return _CE(logits, labels).sum(), correct


def evaluate_accuracy(net, data_iter, devices):
    """Fraction of the examples of ``data_iter`` (batches tokens, segments, valid_lens,
    labels) that ``net`` classifies correctly, the batches split across ``devices``."""
    devices, correct = _check_contexts("devices", devices), Accumulator(2)
    for batch in _nonempty("data_iter", data_iter):
        for shard in zip(*(_split_and_load(x, devices) for x in batch)):
            correct.add(classifier_batch_loss(net, *shard)[1], shard[0].shape[0])
    return correct[0] / correct[1]


def train_classifier(net, train_iter, val_iter, num_epochs, lr, devices,
                     freeze_encoder=False):
    """Fine-tune a :class:`d2lattn.bert.BERTClassifier` with Adam on the cross-entropy.

    Batches are (tokens, segments, valid_lens, labels), split across ``devices`` as in
    :func:`train_bert`. Parameters not yet initialised (the new head) get Xavier; the
    pretrained ones are kept and copied to ``devices``. ``freeze_encoder``: the encoder's
    parameters get grad_req 'null' and stay unchanged (only the head trains); otherwise
    'write'. Returns ``{"loss": [...] per step, "val_acc": [...] per epoch}``.
    """
    num_epochs = check_int("num_epochs", num_epochs, minimum=1)
    devices = _check_contexts("devices", devices)
    check_bool("freeze_encoder", freeze_encoder)
    with warnings.catch_warnings():  # "already initialized": the pretrained parameters
        warnings.simplefilter("ignore")
        net.initialize(mx.init.Xavier(), ctx=list(devices))
    net.collect_params().reset_ctx(list(devices))
    net.encoder.collect_params().setattr("grad_req", "null" if freeze_encoder else "write")
    params = {name: p for name, p in net.collect_params().items() if p.grad_req != "null"}
    trainer = gluon.Trainer(params, "adam", {"learning_rate": check_positive("lr", lr)})
    history = {"loss": [], "val_acc": []}
    with tqdm(total=num_epochs * len(train_iter), desc="steps", mininterval=1) as progress:
        for _ in range(num_epochs):
            for batch in _nonempty("train_iter", train_iter):
                shards = list(zip(*(_split_and_load(x, devices) for x in batch)))
                with autograd.record():
                    losses = [classifier_batch_loss(net, *shard)[0] for shard in shards]
                for loss in losses:
                    loss.backward()
                trainer.step(batch[0].shape[0])
                history["loss"].append(sum(float(l) for l in losses) / batch[0].shape[0])
                progress.update()
            history["val_acc"].append(evaluate_accuracy(net, val_iter, devices))
            progress.set_postfix(val_acc=f"{history['val_acc'][-1]:.3f}")
    return history


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_contexts(name, ctxs):
    """``ctxs`` as a list after checking it is a non-empty list or tuple of Contexts."""
    if not isinstance(ctxs, (list, tuple)) or not ctxs:
        raise ValueError(f"{name} must be a non-empty list of contexts, got {ctxs!r}")
    for i, ctx in enumerate(ctxs):
        check_context(f"{name}[{i}]", ctx)
    return list(ctxs)


def _nonempty(name, iterable):
    """Iterate over ``iterable``; raise ValueError at its end if it yielded nothing (a loop over
    it would divide by zero or, repeated until a number of steps, never end)."""
    empty = True
    for item in iterable:
        empty = False
        yield item
    if empty:
        raise ValueError(f"{name} yielded no batch: it is empty")


def _check_labels(name, labels, logits):
    """Raise unless ``labels`` holds one class id in [0, classes) per row of ``logits``
    (..., classes): an id out of range would pick another row's score or garbage."""
    if labels.size * logits.shape[-1] != logits.size:
        raise ValueError(f"{name} must hold one label per prediction {logits.shape[:-1]}, got "
                         f"shape {labels.shape}")
    check_integers(name, labels, 0, logits.shape[-1] - 1,
                   f" (class ids below {logits.shape[-1]})")


def _check_sequence_loss(pred, label, valid_len):
    """Raise unless ``pred`` is (batch, steps, vocab) float logits, ``label`` (batch, steps)
    class ids below vocab and ``valid_len`` (batch,) integers in [0, steps]."""
    for name, x in (("pred", pred), ("label", label), ("valid_len", valid_len)):
        check_ndarray(name, x)  # a list has no shape to report
    if pred.ndim != 3 or label.shape != pred.shape[:2] or valid_len.shape != pred.shape[:1]:
        raise ValueError("expected pred (batch, steps, vocab), label (batch, steps) and "
                         f"valid_len (batch,); got shapes {pred.shape}, {label.shape}, "
                         f"{valid_len.shape}")
    check_float_array("pred", pred)
    check_integers("label", label, 0, pred.shape[2] - 1, " (class ids below vocab)")
    check_lengths("valid_len", valid_len, pred.shape[0], pred.shape[1])
