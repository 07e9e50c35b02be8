"""Training: reproducible seeds, timers and running sums, the masked sequence loss (with
optional label smoothing), gradient clipping, the Transformer's warm-up learning-rate schedule
and the training loops of sequence-to-sequence models and of BERT."""
import random
import time

import mxnet as mx
import numpy as onp
from mxnet import autograd, gluon, np, npx
from tqdm import tqdm

from ._checks import check_int, check_positive, check_rate
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

    pred: (batch, steps, vocab) logits; label: (batch, steps) ids; valid_len: (batch,).
    Returns (batch,) sums; divide their total by ``valid_len.sum()`` for the loss per token.
    With ``label_smoothing`` eps > 0 the target distribution of each token is 1 - eps on its
    label plus eps / vocab on every class (Szegedy et al., 2016): the loss per token is
    (1 - eps) * (-log p_label) + eps * mean over classes of (-log p_class).
    """

    def __init__(self, label_smoothing=0.0, **kwargs):
        super().__init__(**kwargs)
        self.label_smoothing = check_rate("label_smoothing", label_smoothing)

    def forward(self, pred, label, valid_len):
        if pred.ndim != 3 or label.shape != pred.shape[:2] or valid_len.shape != pred.shape[:1]:
            raise ValueError("expected pred (batch, steps, vocab), label (batch, steps) and "
                             f"valid_len (batch,); got shapes {pred.shape}, {label.shape}, "
                             f"{valid_len.shape}")
        steps = np.arange(pred.shape[1], ctx=pred.ctx).reshape(1, -1)
        mask = steps < valid_len.reshape(-1, 1).astype(steps.dtype)
        log_probs = npx.log_softmax(pred, axis=-1)
        nll = -npx.pick(log_probs, label, axis=-1)
        if self.label_smoothing:
            eps = self.label_smoothing
            nll = (1 - eps) * nll - eps * log_probs.mean(axis=-1)
        return (nll * mask).sum(axis=1)


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
    """The warm-up schedule of Vaswani et al. (2017), for a gluon Trainer's ``lr_scheduler``.

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
    """Teacher-forced loss of one batch (X, X_valid_len, Y, Y_valid_len): (sum, real tokens).

    The decoder input is <bos> followed by the target shifted right by one. Columns that
    hold only padding are dropped first: they cost time and change nothing. ``loss`` is a
    :class:`MaskedSoftmaxCELoss` (by default plain cross-entropy).
    """
    X, X_valid_len, Y, Y_valid_len = (a.as_in_ctx(device) for a in batch)
    X, Y = X[:, :int(X_valid_len.max())], Y[:, :int(Y_valid_len.max())]  # drop padding columns
    bos_column = np.full((Y.shape[0], 1), bos, dtype=Y.dtype, ctx=device)
    Y_hat, _ = net(X, np.concatenate((bos_column, Y[:, :-1]), axis=1), X_valid_len)
    return loss(Y_hat, Y, Y_valid_len).sum(), Y_valid_len.astype(Y_hat.dtype).sum()


def seq2seq_loss(net, data_iter, tgt_vocab, device):
    """Mean teacher-forced cross-entropy per real target token over ``data_iter``."""
    total = Accumulator(2)
    for batch in data_iter:
        loss, tokens = seq2seq_batch_loss(net, batch, tgt_vocab["<bos>"], device)
        total.add(loss, tokens)
    return total[0] / total[1]


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device, val_iter=None,
                  clip=1.0, lr_scheduler=None, label_smoothing=0.0):
    """Train a sequence-to-sequence model with Adam, drawing the loss per token live.

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
    optimizer_params = _optimizer_params(lr, lr_scheduler)
    loss_fn = MaskedSoftmaxCELoss(label_smoothing)
    net.initialize(mx.init.Xavier(), force_reinit=True, ctx=device)
    trainer = gluon.Trainer(net.collect_params(), "adam", optimizer_params)
    bos = tgt_vocab["<bos>"]
    legend = ["train", "validation"] if val_iter is not None else ["train"]
    animator = Animator(xlabel="epoch", ylabel="loss per token", legend=legend,
                        xlim=[1, num_epochs])
    history, timer = {"train": [], "val": []}, Timer()
    for epoch in tqdm(range(num_epochs), desc="epochs", mininterval=1):
        total = Accumulator(2)
        timer.start()
        for batch in data_iter:
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
    (``mlm_weights`` 1; padding slots weigh 0) and over the sentence pairs.
    """
    _, mlm_Y_hat, nsp_Y_hat = net(tokens, segments, valid_lens, pred_positions)
    weights = mlm_weights.reshape(-1)
    mlm = _CE(mlm_Y_hat.reshape(-1, mlm_Y_hat.shape[-1]), mlm_labels.reshape(-1)) * weights
    return mlm.sum() / np.maximum(weights.sum(), 1), _CE(nsp_Y_hat, nsp_labels).mean()


def train_bert(train_iter, net, num_steps, devices, lr=1e-3):
    """Pretrain BERT with Adam for ``num_steps`` minibatches, drawing both losses live.

    ``devices``: a list of contexts (e.g. ``try_all_gpus()``); each batch is split across
    them and the gradients of the per-device losses (MLM + NSP) are averaged. ``net`` is
    (re)initialised with Xavier on ``devices``.
    Returns ``{"mlm": [...], "nsp": [...]}``, the losses of every step.
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    if not isinstance(devices, (list, tuple)) or not devices:
        raise ValueError(f"devices must be a non-empty list of contexts, got {devices!r}")
    net.initialize(mx.init.Xavier(), force_reinit=True, ctx=list(devices))
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
    animator = Animator(xlabel="step", ylabel="loss", legend=["mlm", "nsp"],
                        xlim=[1, num_steps])
    history, timer, pairs = {"mlm": [], "nsp": []}, Timer(), 0
    with tqdm(total=num_steps, desc="steps", mininterval=1) as progress:
        while len(history["mlm"]) < num_steps:
            for batch in train_iter:
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
