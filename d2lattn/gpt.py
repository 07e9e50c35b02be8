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

from ._checks import (check_array, check_bool, check_context, check_divisible,
                      check_hidden_states, check_id_list, check_int, check_layer_input,
                      check_ndarray, check_positive, check_rate, check_token_ids, check_tokens,
                      is_real)
from ._ops import (Dense, Dropout, checked, checked_call, is_symbol, operators,
                   unused_parameters_allowed)
from .attention import (KVCache, attention_pooling, check_cache, merge_heads, split_heads)
from .positional import (LearnedPositionalEmbedding, NoPositionalEncoding, PositionalEncoding,
                         rotate)
from .train import MaskedSoftmaxCELoss, grad_clipping
from .transformer import AddNorm, PositionWiseFFN, embed


class CausalSelfAttention(nn.HybridBlock):
    """Causal multi-head self-attention with a key/value cache: GPT's attention, and the
    variants of Chapter 10 as options.

    The token at position t attends to positions 0..t. ``num_kv_heads``: grouped-query
    attention (Ainslie et al., 2023): ``W_k`` and ``W_v`` project to ``num_kv_heads`` heads
    of width p = num_hiddens / num_heads (None: ``num_heads``, multi-head attention; 1:
    multi-query attention, Shazeer 2019), query head i using key/value head i // (num_heads /
    num_kv_heads). ``window``: each token sees only the last ``window`` positions up to
    itself (Longformer's and Mistral's sliding window), and the cache keeps that many.
    ``rope_base``: rotary positions (:func:`~d2lattn.positional.apply_rope`, the head width
    even) with this base, None: none (positions are added to the inputs instead).

    Call ``(X (batch, steps, num_hiddens), cache=None)`` -> (batch, steps, num_hiddens):
    with a :class:`~d2lattn.attention.KVCache` from :meth:`init_cache`, X continues the
    cached positions and the cache is extended in place. ``attention_weights``: the last
    call's, (batch, num_heads, steps, keys), before dropout. ``hybridize()`` makes every
    call one cached graph (:meth:`cached`, which takes and returns the cached keys and
    values); ``attention_weights`` is then None.
    """

    def __init__(self, num_hiddens, num_heads, dropout, use_bias=False, num_kv_heads=None,
                 window=None, rope_base=None, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        check_divisible("num_hiddens", num_hiddens, "num_heads", num_heads)
        self.num_kv_heads = num_heads if num_kv_heads is None else \
            check_int("num_kv_heads", num_kv_heads, minimum=1)
        check_divisible("num_heads", num_heads, "num_kv_heads", self.num_kv_heads)
        self.window = None if window is None else check_int("window", window, minimum=1)
        self.rope_base = None if rope_base is None else check_positive("rope_base", rope_base)
        self.head_width = num_hiddens // num_heads
        if self.rope_base is not None and self.head_width % 2:
            raise ValueError(f"num_hiddens / num_heads (the head width) must be even for "
                             f"rotary positions, got {num_hiddens} / {num_heads}")
        self.dropout = Dropout(check_rate("dropout", dropout))
        self.W_q = Dense(num_hiddens, use_bias=use_bias)
        self.W_k = Dense(self.num_kv_heads * self.head_width, use_bias=use_bias)
        self.W_v = Dense(self.num_kv_heads * self.head_width, use_bias=use_bias)
        self.W_o = Dense(num_hiddens, use_bias=use_bias)
        self.attention_weights = None

    def cached(self, F, X, cache_k, cache_v, offset):
        """The computation: X (batch, steps, num_hiddens) at positions offset .. offset +
        steps - 1 (offset (1,) float32) after the cached keys and values ``cache_k``,
        ``cache_v`` (batch * num_kv_heads, cached, p). Returns (output, keys, values), the
        keys and values to cache."""
        positions = offset + F.npx.arange_like(X, axis=1)  # (steps,)
        q = self.rotate(F, split_heads(F, self.W_q(X), self.num_heads), positions)
        k = self.rotate(F, split_heads(F, self.W_k(X), self.num_kv_heads), positions)
        k = F.np.concatenate([cache_k, k], axis=1)
        v = F.np.concatenate([cache_v, split_heads(F, self.W_v(X), self.num_kv_heads)], axis=1)
        # Causal: step j sees the cached keys and its own up to itself, the last `window`.
        lens = F.npx.shape_array(cache_k)[1:2].astype("float32") + positions - offset + 1
        # The `group` query heads of a key/value head attend to it as one stack of queries.
        group = self.num_heads // self.num_kv_heads
        stacked = F.npx.reshape(F.npx.reshape(q, (-6, -1, group, -2, -2)), (-2, -5, -2))
        scores = F.npx.batch_dot(stacked, k, transpose_b=True) / math.sqrt(self.head_width)
        out, weights = attention_pooling(F, scores, v, F.np.tile(lens, (1, group)),
                                         self.dropout, self.window)
        self.attention_weights = None if is_symbol(weights) else weights
        out = operators(F).reshape_like(out.as_nd_ndarray(), q.as_nd_ndarray()).as_np_ndarray()
        return self.W_o(merge_heads(F, out, self.num_heads)), k, v

    def rotate(self, F, X, positions):
        """Per-head queries or keys X (rows, steps, p) rotated at their positions (rotary
        positions), or X itself."""
        if self.rope_base is None:
            return X
        return rotate(F, X, positions, self.rope_base, onp.dtype(self.W_q.weight.dtype).name)

    def hybrid_forward(self, F, X, cache_k, cache_v, offset):
        return self.cached(F, X, cache_k, cache_v, offset)

    def init_cache(self):
        """An empty :class:`~d2lattn.attention.KVCache` for this layer."""
        return KVCache(self.num_kv_heads, self.head_width, self.window)

    def forward(self, X, cache=None):
        return call_with_cache(self, self, X, cache)

    def check_input(self, X):
        """Raise unless ``X`` is (batch, steps, num_hiddens) floats of the layer's dtype."""
        check_hidden_states("X", X)
        if X.shape[-1] != self.num_hiddens:
            raise ValueError(f"X must have num_hiddens = {self.num_hiddens} features, got "
                             f"shape {X.shape}")
        check_layer_input("X", X, self.W_q, "W_q")

    def graph_inputs(self, X, cache):
        """Check a call's X (batch, steps, num_hiddens) and cache; return the arrays
        :meth:`cached` takes: X, the cached keys and values, the offset."""
        if not checked(X):  # not called by GPT, which checked its tokens and caches
            self.check_input(X)
            cache = None if cache is None else check_cache(cache, self)
        cache = self.init_cache() if cache is None else cache
        offset = np.array([cache.offset], dtype="float32", ctx=X.ctx)
        self.attention_weights = None  # a cached graph does not set them
        return (X, *cache.arrays(X.shape[0], X), offset)


class GPTBlock(nn.HybridBlock):
    """Causal self-attention then a GELU FFN, each inside an :class:`AddNorm` (pre-norm:
    X + attention(LN(X)), then Y + FFN(LN(Y)), as nanoGPT's block).

    forward(X (batch, steps, num_hiddens), cache=None) -> same shape: see
    :class:`CausalSelfAttention`, whose options ``num_kv_heads``, ``window`` and
    ``rope_base`` it passes on. ``ffn_num_hiddens=0`` leaves the FFN out: an
    attention-only block. ``hybridize()``: one cached graph per block, cache included.
    """

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, pre_norm=True,
                 **attention_options):
        super().__init__()
        self.attention = CausalSelfAttention(num_hiddens, num_heads, dropout, True,
                                             **attention_options)
        self.addnorm1 = AddNorm(dropout, pre_norm)
        self.ffn, self.addnorm2 = None, None
        if check_int("ffn_num_hiddens", ffn_num_hiddens):
            self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation="gelu")
            self.addnorm2 = AddNorm(dropout, pre_norm)

    def hybrid_forward(self, F, X, cache_k, cache_v, offset):
        Y, k, v = self.attention.cached(F, self.addnorm1.sublayer_input(X), cache_k, cache_v,
                                        offset)
        Y = self.addnorm1(X, Y)
        return (Y if self.ffn is None else self.addnorm2.wrap(Y, self.ffn)), k, v

    def forward(self, X, cache=None):
        return call_with_cache(self, self.attention, X, cache)


def call_with_cache(block, attention, X, cache):
    """The call ``block(X, cache)`` of a :class:`CausalSelfAttention` or a :class:`GPTBlock`
    (whose ``attention`` checks X and the cache): its ``hybrid_forward`` on X, the cached keys
    and values and the offset, imperative or as the block's cached graph; the cache, if
    any, extended in place. Returns the output."""
    if is_symbol(X):
        raise NotImplementedError(f"{type(block).__name__} is a cached graph of its own: "
                                  "hybridize it, not a parent")
    inputs = attention.graph_inputs(X, cache)
    with unused_parameters_allowed(), checked_call():
        out, k, v = nn.HybridBlock.forward(block, *inputs)
    if cache is not None:
        cache.append(k, v, X.shape[1])
    return out


# GPT's ``positions``: what is added to the embeddings (rotary positions add nothing there)
_POSITIONS = {"learned": LearnedPositionalEmbedding, "sinusoidal": PositionalEncoding,
              "rope": NoPositionalEncoding}


class GPT(nn.Block):
    """A decoder-only Transformer language model.

    ``net(tokens (batch, steps) ids, caches=None)`` -> logits (batch, steps, vocab_size):
    row t scores the token that follows tokens[:, :t + 1]. ``caches``: None, or
    ``net.init_caches()`` (one :class:`~d2lattn.attention.KVCache` per block) to decode
    piece by piece: each call extends them in place and its tokens continue the cached
    ones, so feeding a sequence in one call or one token per call gives the same logits.
    Embeddings are scaled by sqrt(num_hiddens) as in the course's Transformer.
    The sizes are positional; the rest keyword-only. ``positions``: "learned" (``max_len``
    learned vectors added to the embeddings), "sinusoidal" (the fixed sinusoids of
    :class:`~d2lattn.positional.PositionalEncoding` added) or "rope" (queries and keys
    rotated in every attention by :func:`~d2lattn.positional.apply_rope`, base 10000;
    ``max_len`` still bounds the positions).
    ``num_kv_heads``: grouped-query attention; ``window``: sliding-window attention whose
    caches keep ``window`` keys (see :class:`CausalSelfAttention`).
    ``ffn_num_hiddens=0``: attention-only blocks. ``pre_norm``: see :class:`AddNorm` (a
    pre-norm GPT ends with a LayerNorm, ``norm``). ``tie_weights``: the output layer shares
    the embedding's weight. ``attention_weights``: one (batch, num_heads, steps, keys) array
    per block, from the last call. ``hybridize()`` makes each block one cached graph.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                 dropout, max_len, *, pre_norm=True, tie_weights=True, positions="learned",
                 num_kv_heads=None, window=None, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.max_len = check_int("max_len", max_len, minimum=1)
        vocab_size = check_int("vocab_size", vocab_size, minimum=1)
        if not isinstance(positions, str) or positions not in _POSITIONS:
            raise ValueError(f"positions must be one of {', '.join(map(repr, _POSITIONS))}, "
                             f"got {positions!r}")
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = _POSITIONS[positions](num_hiddens, dropout, max_len)
        self.blks = nn.HybridSequential()
        rope_base = 10000.0 if positions == "rope" else None
        for _ in range(check_int("num_blks", num_blks, minimum=1)):
            self.blks.add(GPTBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, pre_norm,
                                   num_kv_heads=num_kv_heads, window=window,
                                   rope_base=rope_base))
        self.norm = nn.LayerNorm() if check_bool("pre_norm", pre_norm) else None
        # Sharing the embedding's ParameterDict makes Dense's weight the embedding's weight.
        shared = self.embedding.params if check_bool("tie_weights", tie_weights) else None
        self.dense = nn.Dense(vocab_size, flatten=False, params=shared)

    def init_caches(self):
        """Empty key/value caches, one :class:`~d2lattn.attention.KVCache` per block."""
        return [blk.attention.init_cache() for blk in self.blks]

    def forward(self, tokens, caches=None):
        offset = self._check(tokens, caches)
        X = embed(self, tokens, offset)
        with checked_call():
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
        """The number of positions ``caches`` have seen, after checking that they are a
        list of one KVCache per block (from :meth:`init_caches`), each at that offset."""
        blocks = len(self.blks)
        if not isinstance(caches, list) or len(caches) != blocks \
                or not all(isinstance(cache, KVCache) for cache in caches):
            raise ValueError(f"caches must be None or a list of {blocks} KVCaches (from "
                             f"init_caches()), got {caches!r:.80}")
        for cache, blk in zip(caches, self.blks):
            check_cache(cache, blk.attention)
        offsets = [cache.offset for cache in caches]
        if len(set(offsets)) > 1:
            raise ValueError(f"caches must hold as many steps in every block, got {offsets}")
        return offsets[0]

    @property
    def attention_weights(self):
        return [_per_head(blk.attention) for blk in self.blks]


def _per_head(attention):
    """The last weights of a :class:`CausalSelfAttention` as (batch, num_heads, steps, keys)
    (they are kept as (batch * num_kv_heads, group * steps, keys)), None after a graph."""
    weights = attention.attention_weights
    if weights is None:
        return None
    rows, n_q, n_k = weights.shape
    group = attention.num_heads // attention.num_kv_heads
    return weights.reshape(rows // attention.num_kv_heads, attention.num_heads,
                           n_q // group, n_k)


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
    logits = _check_sampling(logits, temperature, top_k, top_p)  # float64 NumPy
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
    _check_prompt(prompt_ids, num_tokens, net.max_len, net.embedding)
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


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_sampling(logits, temperature, top_k, top_p):
    """``logits`` (vocab_size,) as float64 NumPy, after checking that they are finite real
    numbers (ints or floats) and not empty, ``temperature`` a finite number >= 0,
    ``top_k`` None or an int >= 1 and ``top_p`` None or a number in (0, 1]."""
    logits = onp.asarray(logits.asnumpy() if hasattr(logits, "asnumpy") else logits)
    if logits.dtype.kind not in "iuf":  # bools and complex numbers are no scores
        raise TypeError(f"logits must hold real numbers, got dtype {logits.dtype.name}")
    logits = logits.astype("float64")
    if logits.ndim != 1 or logits.size == 0 or not onp.isfinite(logits).all():
        raise ValueError(f"logits must be a non-empty 1-D array of finite numbers, got "
                         f"shape {logits.shape}")
    if not is_real(temperature) or not 0 <= temperature < float("inf"):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        check_int("top_k", top_k, minimum=1)
    if top_p is not None and (not is_real(top_p) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")
    return logits


def _check_prompt(prompt_ids, num_tokens, max_len, embedding):
    """Raise unless ``prompt_ids`` is a non-empty list (or tuple) of ids that ``embedding``
    (a Gluon Embedding) has rows for and the prompt and ``num_tokens`` new tokens fit in
    ``max_len`` positions (the last new one is never fed)."""
    if not isinstance(prompt_ids, (list, tuple)) or not prompt_ids:
        raise ValueError(f"prompt_ids must be a non-empty list of token ids, got "
                         f"{prompt_ids!r}")
    check_id_list("prompt_ids", prompt_ids, embedding.weight.shape[0])
    if len(prompt_ids) + num_tokens - 1 > max_len:
        raise ValueError(f"a prompt of {len(prompt_ids)} tokens and {num_tokens} new ones "
                         f"need {len(prompt_ids) + num_tokens - 1} positions, more than "
                         f"max_len = {max_len}")
