"""A decoder-only Transformer language model: GPT (Radford et al., 2018, 2019).

GPT is the decoder of the Transformer without encoder-decoder attention: token embeddings
plus learned positions, blocks of causal self-attention and a GELU feed-forward network
(pre-norm, as in GPT-2), a last LayerNorm and an output layer that shares the embedding's
weight. Trained to predict every next token, it generates text one token at a time, each
step attending to the keys and values cached by the earlier steps. The blocks are the
package's own: :class:`~d2lattn.attention.MultiHeadAttention` (with its cache),
:class:`~d2lattn.transformer.AddNorm`, :class:`~d2lattn.transformer.PositionWiseFFN`.
"""
import math
import random

import mxnet as mx
import numpy as onp
from mxnet import autograd, gluon, np
from mxnet.gluon import nn

from ._checks import (check_array, check_bool, check_context, check_int, check_ndarray,
                      check_positive, check_prompt, check_rate, check_sampling,
                      check_token_ids, check_tokens)
from .attention import MultiHeadAttention, _cached_steps, _next_position
from .positional import (LearnedPositionalEmbedding, NoPositionalEncoding, PositionalEncoding,
                         RotaryMultiHeadAttention)
from .train import MaskedSoftmaxCELoss, grad_clipping
from .transformer import AddNorm, PositionWiseFFN, _causal_lens, _embed


class GPTBlock(nn.Block):
    """Causal multi-head self-attention then a GELU FFN, each inside an :class:`AddNorm`.

    forward(X (batch, steps, num_hiddens), cache=None) -> same shape. ``X[:, j]`` is the
    token at position offset + j, offset the number of positions in ``cache`` (a dict of
    :class:`MultiHeadAttention`, extended in place; None: no cache, offset 0); it attends
    to positions 0..offset + j (the last ``window`` of them with a window).
    ``ffn_num_hiddens=0`` leaves the FFN out: an attention-only block. ``rope``: rotary
    positions in the attention (:class:`~d2lattn.positional.RotaryMultiHeadAttention`).
    ``num_kv_heads``, ``window``: see :class:`MultiHeadAttention`.
    """

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, pre_norm=True,
                 rope=False, num_kv_heads=None, window=None, **kwargs):
        super().__init__(**kwargs)
        attention = RotaryMultiHeadAttention if check_bool("rope", rope) else MultiHeadAttention
        self.attention = attention(num_hiddens, num_heads, dropout, True, num_kv_heads, window)
        self.addnorm1 = AddNorm(dropout, pre_norm)
        self.ffn, self.addnorm2 = None, None
        if check_int("ffn_num_hiddens", ffn_num_hiddens):
            self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation="gelu")
            self.addnorm2 = AddNorm(dropout, pre_norm)

    def forward(self, X, cache=None):
        causal = _causal_lens(X.shape[0], X.shape[1], _cached_steps(cache), X.ctx)
        Y = self.addnorm1.wrap(X, lambda Z: self.attention(Z, Z, Z, causal, cache))
        return Y if self.ffn is None else self.addnorm2.wrap(Y, self.ffn)


# GPT's ``positions``: what is added to the embeddings (rotary positions add nothing there)
_POSITIONS = {"learned": LearnedPositionalEmbedding, "sinusoidal": PositionalEncoding,
              "rope": NoPositionalEncoding}


class GPT(nn.Block):
    """A decoder-only Transformer language model.

    ``net(tokens (batch, steps) ids, caches=None)`` -> logits (batch, steps, vocab_size):
    row t scores the token that follows tokens[:, :t + 1]. ``caches``: None, or
    ``net.init_caches()`` (one dict per block) to decode piece by piece: each call extends
    them in place and its tokens continue the cached ones, so feeding a sequence in one call
    or one token per call gives the same logits. Embeddings are scaled by sqrt(num_hiddens)
    as in the course's Transformer. ``positions``: "learned" (``max_len`` learned vectors
    added to the embeddings), "sinusoidal" (the fixed sinusoids of
    :class:`~d2lattn.positional.PositionalEncoding` added) or "rope" (queries and keys
    rotated in every attention by :func:`~d2lattn.positional.apply_rope`; ``max_len`` still
    bounds the positions).
    ``num_kv_heads``: grouped-query attention; ``window``: sliding-window attention whose
    caches keep ``window`` keys (see :class:`MultiHeadAttention`).
    ``ffn_num_hiddens=0``: attention-only blocks. ``pre_norm``: see :class:`AddNorm` (a
    pre-norm GPT ends with a LayerNorm, ``norm``). ``tie_weights``: the output layer shares
    the embedding's weight. ``attention_weights``: one (batch, num_heads, steps, keys) array
    per block, from the last call.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blocks,
                 dropout, max_len, pre_norm=True, tie_weights=True, positions="learned",
                 num_kv_heads=None, window=None, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.max_len = check_int("max_len", max_len, minimum=1)
        vocab_size = check_int("vocab_size", vocab_size, minimum=1)
        if positions not in _POSITIONS:
            raise ValueError(f"positions must be one of {', '.join(map(repr, _POSITIONS))}, "
                             f"got {positions!r}")
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = _POSITIONS[positions](num_hiddens, dropout, max_len)
        self.blks = nn.Sequential()
        for _ in range(check_int("num_blocks", num_blocks, minimum=1)):
            self.blks.add(GPTBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout,
                                   pre_norm, positions == "rope", num_kv_heads, window))
        self.norm = nn.LayerNorm() if check_bool("pre_norm", pre_norm) else None
        # Sharing the embedding's ParameterDict makes Dense's weight the embedding's weight.
        shared = self.embedding.params if check_bool("tie_weights", tie_weights) else None
        self.dense = nn.Dense(vocab_size, flatten=False, params=shared)

    def init_caches(self):
        """Empty key/value caches, one dict per block."""
        return [{} for _ in self.blks]

    def forward(self, tokens, caches=None):
        offset = self._check(tokens, caches)
        X = _embed(self, tokens, offset)
        for i, blk in enumerate(self.blks):
            X = blk(X, None if caches is None else caches[i])
        return self.dense(X if self.norm is None else self.norm(X))

    def _check(self, tokens, caches):
        """Raise unless ``tokens`` and ``caches`` fit the model; return the offset."""
        check_tokens("tokens", tokens, None)  # (batch, steps), neither empty
        check_token_ids("tokens", tokens, self.embedding)
        offset = 0 if caches is None else self._cache_offset(caches)
        if offset + tokens.shape[1] > self.max_len:
            raise ValueError(f"tokens has {tokens.shape[1]} steps after {offset} cached "
                             f"ones, more than max_len = {self.max_len} positions")
        return offset

    def _cache_offset(self, caches):
        """The number of steps in ``caches`` (those a window dropped included), after
        checking that they are a list of one dict per block (from :meth:`init_caches`),
        every block with as many steps."""
        blocks = len(self.blks)
        if not isinstance(caches, list) or len(caches) != blocks \
                or not all(isinstance(cache, dict) for cache in caches):
            raise ValueError(f"caches must be None or a list of {blocks} dicts (from "
                             f"init_caches()), got {caches!r:.80}")
        steps = [_next_position(cache) for cache in caches]
        if len(set(steps)) > 1:
            raise ValueError(f"caches must hold as many steps in every block, got {steps}")
        return steps[0]

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]


_LOSS = MaskedSoftmaxCELoss()


def lm_loss(logits, targets, valid_lens=None):
    """Mean cross-entropy per real target token: ``(loss (), number of real targets)``.

    logits (batch, steps, vocab_size), targets (batch, steps) ids, valid_lens None (every
    target is real) or (batch,): the first valid_lens[i] targets of row i are real, the rest
    is padding and counts for nothing. A batch with no real target has loss 0. Both are
    float32 for float16 logits too (float16 counts 2049 as 2048).
    """
    if valid_lens is None:
        valid_lens = np.full(check_ndarray("targets", targets).shape[:1], targets.shape[1],
                             dtype="int32", ctx=targets.ctx)
    sums = _LOSS(logits, targets, valid_lens)  # float32 for float16 logits
    count = valid_lens.astype(sums.dtype).sum()
    return sums.sum() / np.maximum(count, 1), count


def perplexity(net, tokens, valid_lens=None, batch_size=64):
    """exp(mean cross-entropy) of next-token prediction over sequences of token ids.

    tokens (n, steps + 1) ids: ``net`` reads row[:-1] and predicts row[1:]; valid_lens
    None or (n,) in [1, steps + 1], the real tokens of each row (padding follows). They
    are read on the device of ``net``'s parameters. Returns a float, inf if the mean loss
    is beyond exp's range.
    """
    check_tokens("tokens", tokens, valid_lens)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens must have at least 2 steps (one to read, one to "
                         f"predict), got shape {tokens.shape}")
    batch_size = check_int("batch_size", batch_size, minimum=1)
    ctx = _device_of(net)
    tokens = tokens.as_in_ctx(ctx)
    lens = np.full(tokens.shape[:1], tokens.shape[1], dtype="int32", ctx=ctx) \
        if valid_lens is None else valid_lens.as_in_ctx(ctx)
    total, count = 0.0, 0.0
    for i in range(0, tokens.shape[0], batch_size):
        rows, n = tokens[i:i + batch_size], lens[i:i + batch_size]
        loss, real = lm_loss(net(rows[:, :-1]), rows[:, 1:], np.maximum(n - 1, 0))
        total, count = total + float(loss) * float(real), count + float(real)
    if count == 0:
        raise ValueError("tokens holds no token to predict: every valid length is <= 1")
    try:
        return math.exp(total / count)
    except OverflowError:  # a mean loss above 709.78
        return math.inf


def _device_of(net):
    """The context of ``net``'s first parameter (a net on one device)."""
    return next(iter(net.collect_params().values())).list_ctx()[0]


def train_lm(net, batches, num_steps, lr, device, clip=1.0):
    """Train ``net`` on next-token prediction with Adam; return the loss of every step.

    ``batches``: an iterable of (batch, steps + 1) mxnet.np token-id arrays (e.g. a
    generator; not d2l's (X, Y) pairs); it is read ``num_steps`` times. ``net`` is
    (re)initialised with Xavier on ``device`` (a Context); the gradient norm is clipped to
    ``clip``.
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    clip = check_positive("clip", clip)
    net.initialize(mx.init.Xavier(), force_reinit=True, ctx=check_context("device", device))
    trainer = gluon.Trainer(net.collect_params(), "adam",
                            {"learning_rate": check_positive("lr", lr)})
    losses = []
    for _, rows in zip(range(num_steps), batches):
        rows = check_array("each batch", rows, 2, "(batch, steps + 1)").as_in_ctx(device)
        with autograd.record():
            loss, _ = lm_loss(net(rows[:, :-1]), rows[:, 1:])
        loss.backward()
        grad_clipping(net, clip)
        trainer.step(1)
        losses.append(float(loss))
    if len(losses) < num_steps:
        raise ValueError(f"batches ran out after {len(losses)} of num_steps = {num_steps}")
    return losses


# --- generation ------------------------------------------------------------------------

def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """The distribution a sampler draws the next token from, as float64 NumPy (vocab_size,).

    logits: (vocab_size,) floats (NumPy or mxnet). softmax(logits / temperature); then only
    the ``top_k`` most probable tokens (ties: the lower ids first) and, of those, only the
    smallest set of most probable tokens whose probabilities sum to at least ``top_p``
    (nucleus sampling, Holtzman et al., 2020) keep their probability, renormalised.
    temperature 0: all the probability on the most probable token (greedy decoding).
    """
    logits = check_sampling(logits, temperature, top_k, top_p)  # float64 NumPy
    keep = logits.size if top_k is None else int(top_k)
    order = onp.argsort(-logits, kind="stable")  # most probable first, ties by id
    if temperature == 0:
        return onp.eye(logits.size)[order[0]]
    probs = onp.exp((logits - logits.max()) / temperature)
    probs /= probs.sum()
    if top_p is not None:
        kept = probs[order[:keep]]
        keep = min(keep, int((onp.cumsum(kept / kept.sum()) < top_p).sum()) + 1)
    filtered = onp.zeros_like(probs)
    filtered[order[:keep]] = probs[order[:keep]]
    return filtered / filtered.sum()


def generate(net, prompt_ids, num_tokens, temperature=1.0, top_k=None, top_p=None,
             seed=None, use_cache=True):
    """Continue ``prompt_ids`` (a non-empty list of ids) by ``num_tokens`` sampled tokens.

    Each token is drawn from :func:`next_token_probs` of the logits of the last position
    (temperature 0: greedy) with Python's ``random.Random(seed)``, or with Python's global
    ``random`` (seeded by ``d2lattn.set_seed``) when ``seed`` is None. With ``use_cache``
    the prompt is read once and each new token is one step against the cached keys and
    values; without, the whole sequence is read again at every step (same result, more
    work).
    Returns the ``num_tokens`` new ids, a list of ints.
    """
    num_tokens = check_int("num_tokens", num_tokens)
    check_prompt(prompt_ids, num_tokens, net.max_len, net.embedding)
    rng = random if seed is None else random.Random(check_int("seed", seed))
    ctx = net.embedding.weight.list_ctx()[0]
    caches = net.init_caches() if check_bool("use_cache", use_cache) else None
    ids, new = list(prompt_ids), []
    step = np.array([ids], dtype="int32", ctx=ctx)
    for _ in range(num_tokens):
        logits = net(step, caches)[0, -1]
        new.append(_draw(next_token_probs(logits, temperature, top_k, top_p), rng))
        ids.append(new[-1])
        step = np.array([ids[-1:] if use_cache else ids], dtype="int32", ctx=ctx)
    return new


def _draw(probs, rng):
    """An index drawn with probabilities ``probs`` (NumPy, summing to 1) by inverting the
    cumulative sum at ``rng.random()``: the same draws on every NumPy version."""
    cumulative = onp.cumsum(probs)
    token = onp.searchsorted(cumulative, rng.random() * cumulative[-1], "right")
    return int(min(token, probs.size - 1))
