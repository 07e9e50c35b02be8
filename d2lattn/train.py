"""Training: reproducible seeds, timers and running sums, the masked sequence loss,
gradient clipping and the sequence-to-sequence training loop."""
import random
import time

import mxnet as mx
import numpy as onp
from mxnet import autograd, gluon, np, npx
from tqdm import tqdm

from ._checks import check_int, check_positive
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
    """

    def forward(self, pred, label, valid_len):
        if pred.ndim != 3 or label.shape != pred.shape[:2] or valid_len.shape != pred.shape[:1]:
            raise ValueError("expected pred (batch, steps, vocab), label (batch, steps) and "
                             f"valid_len (batch,); got shapes {pred.shape}, {label.shape}, "
                             f"{valid_len.shape}")
        steps = np.arange(pred.shape[1], ctx=pred.ctx).reshape(1, -1)
        mask = steps < valid_len.reshape(-1, 1).astype(steps.dtype)
        nll = -npx.pick(npx.log_softmax(pred, axis=-1), label, axis=-1)
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


def seq2seq_batch_loss(net, batch, bos, device):
    """Teacher-forced loss of one batch (X, X_valid_len, Y, Y_valid_len): (sum, real tokens).

    The decoder input is <bos> followed by the target shifted right by one. Columns that
    hold only padding are dropped first: they cost time and change nothing.
    """
    X, X_valid_len, Y, Y_valid_len = (a.as_in_ctx(device) for a in batch)
    X, Y = X[:, :int(X_valid_len.max())], Y[:, :int(Y_valid_len.max())]  # drop padding columns
    bos_column = np.full((Y.shape[0], 1), bos, dtype=Y.dtype, ctx=device)
    Y_hat, _ = net(X, np.concatenate((bos_column, Y[:, :-1]), axis=1), X_valid_len)
    return _SEQ_LOSS(Y_hat, Y, Y_valid_len).sum(), Y_valid_len.astype(Y_hat.dtype).sum()


def seq2seq_loss(net, data_iter, tgt_vocab, device):
    """Mean teacher-forced cross-entropy per real target token over ``data_iter``."""
    total = Accumulator(2)
    for batch in data_iter:
        loss, tokens = seq2seq_batch_loss(net, batch, tgt_vocab["<bos>"], device)
        total.add(loss, tokens)
    return total[0] / total[1]


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device, val_iter=None,
                  clip=1.0):
    """Train a sequence-to-sequence model with Adam, drawing the loss per token live.

    ``net`` is (re)initialised with Xavier on ``device`` (d2l's behaviour). The gradient of
    the mean loss per real token is clipped to norm ``clip``. Returns the per-epoch losses,
    ``{"train": [...], "val": [...]}`` (``val`` empty without ``val_iter``).
    """
    num_epochs = check_int("num_epochs", num_epochs, minimum=1)
    net.initialize(mx.init.Xavier(), force_reinit=True, ctx=device)
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
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
                loss, tokens = seq2seq_batch_loss(net, batch, bos, device)
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
