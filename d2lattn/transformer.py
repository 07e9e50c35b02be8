"""The Transformer (Vaswani et al., 2017): position-wise FFN, add & norm, encoder and decoder.

Shapes are batch-major: tokens (batch, steps), hidden states (batch, steps, num_hiddens).
Masks are explicit and do not depend on the training mode: encoder self-attention and
encoder-decoder attention skip source padding (``valid_lens`` (batch,)); decoder
self-attention is causal, the token at position t sees positions 0..t (valid lengths
t + 1 per query). The decoder keeps each block's projected keys and values in its state (and
the encoder outputs projected once for encoder-decoder attention), so decoding one token at
a time costs O(n) per token and gives the same logits as one call on the whole target.

Every block is a Gluon ``HybridBlock`` whose ``hybrid_forward`` is its one computation, for
the imperative call and the cached graph of ``hybridize()`` alike; ``forward`` checks a call
with arrays first, and the blocks it calls then skip their checks (``_ops.checked_call``).
"""
import copy
import math

import numpy as onp
from mxnet import nd, np
from mxnet.gluon import nn

from ._checks import (check_bool, check_int, check_layer_input, check_ndarray, check_positive,
                      check_rate, check_token_ids, check_tokens)
from ._ops import (Dense, Dropout, LayerNorm, checked, checked_call, is_symbol, on_rows,
                   unused_parameters_allowed)
from .attention import MultiHeadAttention, lengths, without_padding
from .positional import PositionalEncoding
from .seq2seq import AttentionDecoder, Encoder


# GELU(x) = x * Phi(x), Phi the standard normal CDF (MXNet's is the exact, erf-based one).
# F: mxnet.ndarray (imperative) or mxnet.symbol (cached graph).
_ACTIVATIONS = {"relu": lambda F, X: F.npx.relu(X),
                "gelu": lambda F, X: F.npx.leaky_relu(X, act_type="gelu")}


class PositionWiseFFN(nn.HybridBlock):
    """The same two-layer MLP at every position: Dense(ffn_num_hiddens), activation, Dense.

    X (..., steps, d) -> (..., steps, ffn_num_outputs); an empty X (a batch of 0, or no
    steps) gives an empty output and gradients of 0. ``activation``: "relu" (Vaswani et
    al.) or "gelu" (BERT, GPT). A HybridBlock: ``hybridize()`` makes it one cached graph.
    """

    def __init__(self, ffn_num_hiddens, ffn_num_outputs, activation="relu", **kwargs):
        super().__init__(**kwargs)
        self.dense1 = Dense(check_int("ffn_num_hiddens", ffn_num_hiddens, minimum=1))
        self.dense2 = Dense(check_int("ffn_num_outputs", ffn_num_outputs, minimum=1))
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got "
                             f"{activation!r}")
        self.activation = activation

    def forward(self, X):
        if checked(X):  # called by a block that checked its inputs
            return super().forward(X)
        _check_width("X", check_ndarray("X", X))
        if X.ndim < 2:
            raise ValueError(f"X must be (..., steps, d), at least 2-D, got shape {X.shape}")
        check_layer_input("X", X, self.dense1, "dense1")
        with checked_call():
            return on_rows(super().forward, X)  # an empty X: gradients of 0, also in a graph

    def hybrid_forward(self, F, X):
        return self.dense2(_ACTIVATIONS[self.activation](F, self.dense1(X)))


class AddNorm(nn.HybridBlock):
    """A residual connection with layer normalisation around a sublayer f.

    post-norm (``pre_norm=False``; Vaswani et al., d2l): LN(X + dropout(f(X))).
    pre-norm (``pre_norm=True``; Xiong et al., 2020): X + dropout(f(LN(X))). The residual
    path is never normalised, which keeps gradients well scaled in deep stacks and makes
    warm-up less critical; a stack of pre-norm blocks therefore ends with one LayerNorm
    (:class:`TransformerEncoder` and :class:`TransformerDecoder` add it).

    ``add_norm(X, Y)`` is d2l's call for a sublayer output Y already computed from
    ``add_norm.sublayer_input(X)``: LN(X + dropout(Y)) post-norm, X + dropout(Y) pre-norm.
    ``add_norm.wrap(X, f)`` applies the whole connection; the blocks use it.
    X, Y: (batch, steps, d), the same shape. ``norm_eps``: the epsilon of the LayerNorm
    (1e-5 here and in PyTorch, 1e-12 in BERT). A HybridBlock (one cached graph after
    ``hybridize()``).
    """

    def __init__(self, dropout, pre_norm=False, norm_eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.dropout = Dropout(check_rate("dropout", dropout))
        self.ln = LayerNorm(epsilon=check_positive("norm_eps", norm_eps))
        self.pre_norm = check_bool("pre_norm", pre_norm)

    def sublayer_input(self, X):
        """What the sublayer sees: LN(X) with pre-norm, X itself with post-norm."""
        return self.ln(X) if self.pre_norm else X

    def forward(self, X, Y):
        with unused_parameters_allowed():  # pre-norm: the LN acts in sublayer_input
            if checked(X):  # called by a block that checked its inputs
                return super().forward(X, Y)
            _check_same_shape(check_ndarray("X", X), check_ndarray("Y", Y))
            dtypes = [onp.dtype(x).name for x in (X.dtype, Y.dtype, self.ln.gamma.dtype)]
            if len(set(dtypes)) > 1:
                raise TypeError(f"X, Y and the layer's parameters must have one dtype, got X "
                                f"{dtypes[0]}, Y {dtypes[1]} and parameters {dtypes[2]}")
            width = self.ln.gamma.shape[0]  # 0 until the first call
            if width > 0 and X.shape[-1] != width:
                raise ValueError(f"X and Y must have width {width}, the width of the "
                                 f"LayerNorm, got shape {X.shape}")
            if self.pre_norm:  # no parameter in X + dropout(Y)
                return super().forward(X, Y)
            return on_rows(super().forward, X, Y)  # an empty X: LN's gradients of 0

    def hybrid_forward(self, F, X, Y):
        Z = X + self.dropout(Y)
        return Z if self.pre_norm else self.ln(Z)

    def wrap(self, X, sublayer):
        """The connection around ``sublayer`` (a callable (batch, steps, d) -> same)."""
        return self(X, sublayer(self.sublayer_input(X)))


class TransformerEncoderBlock(nn.HybridBlock):
    """Multi-head self-attention then the FFN, each inside an :class:`AddNorm`.

    forward(X (batch, steps, num_hiddens), valid_lens None or (batch,)) -> same shape as X;
    keys beyond a sequence's valid length (padding) get no attention. ``activation`` (of the
    FFN) and ``norm_eps``: see :class:`PositionWiseFFN` and :class:`AddNorm`.
    ``hybridize()`` makes the block one cached graph (the attention checks its inputs
    first; its ``attention_weights`` are then None, see :class:`MultiHeadAttention`).
    """

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False,
                 pre_norm=False, activation="relu", norm_eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(dropout, pre_norm, norm_eps)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation)
        self.addnorm2 = AddNorm(dropout, pre_norm, norm_eps)

    def forward(self, X, valid_lens=None):
        if checked(X):  # called by a block that checked its inputs
            return super().forward(X, valid_lens)
        valid_lens = self.attention.check_call(X, X, X, valid_lens)  # as the graph takes them
        with checked_call():
            return super().forward(X, valid_lens)

    def hybrid_forward(self, F, X, valid_lens):
        Y = self.addnorm1.wrap(X, lambda Z: self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.wrap(Y, self.ffn)


class TransformerEncoder(Encoder):
    """Token embedding * sqrt(num_hiddens) + positional encoding, then ``num_blks`` blocks.

    forward(X (batch, steps) token ids, valid_lens None or (batch,)) -> (batch, steps,
    num_hiddens). ``attention_weights``: one (batch, num_heads, steps, steps) array per block,
    from the last call. ``use_bias``: biases in the attention projections. ``pre_norm``: see
    :class:`AddNorm`; a pre-norm encoder ends with a LayerNorm, ``norm``.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 use_bias=False, pre_norm=False, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.embedding = nn.Embedding(check_int("vocab_size", vocab_size, minimum=1),
                                      num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.HybridSequential()
        for _ in range(check_int("num_blks", num_blks, minimum=1)):
            self.blks.add(TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads,
                                                  dropout, use_bias, pre_norm))
        self.norm = nn.LayerNorm() if check_bool("pre_norm", pre_norm) else None

    def forward(self, X, valid_lens=None):
        check_tokens("X", X, valid_lens)
        check_token_ids("X", X, self.embedding)
        X = embed(self, X, 0)
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X if self.norm is None else self.norm(X)

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]


class TransformerDecoderBlock(nn.HybridBlock):
    """Block ``i`` of the decoder: causal self-attention, encoder-decoder attention, FFN.

    forward(X (batch, steps, num_hiddens), state) -> (same shape as X, state), with
    state = (enc_outputs (batch, src steps, num_hiddens), enc_valid_lens (batch,), caches,
    offset) as :meth:`TransformerDecoder.init_state` makes it. ``X[:, j]`` is the token at
    position offset + j: it attends to the keys at positions 0..offset + j, those in
    ``caches[i].self_attention`` (a :class:`~d2lattn.attention.KVCache` of the projected keys
    and values of earlier calls) and those of X up to itself. Encoder-decoder attention skips
    source padding; it projects the encoder outputs on the first call and keeps them in
    ``caches[i].cross_attention``. The returned state holds a new ``caches[i]``; the given
    state is left unchanged.

    ``hybridize()`` makes every call one cached graph (:meth:`hybrid_forward`) that takes
    and returns the cached keys and values: the same computation; the attentions'
    ``attention_weights`` are then None.
    """

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i, pre_norm=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.i = check_int("i", i)
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(dropout, pre_norm)
        self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm2 = AddNorm(dropout, pre_norm)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm3 = AddNorm(dropout, pre_norm)

    def hybrid_forward(self, F, X, causal_lens, self_k, self_v, enc, enc_lens, cross_k,
                       cross_v):
        """The block's computation -> (output, then the self-attention's and the
        cross-attention's keys and values to cache). ``enc``: the encoder outputs, or one of
        their positions (masked by ``enc_lens``) once ``cross_k`` and ``cross_v`` hold them
        projected."""
        kv = {}

        def self_attention(Z):
            out, kv["self_k"], kv["self_v"] = self.attention1.cached(
                F, Z, Z, Z, causal_lens, self_k, self_v)
            return out

        def cross_attention(Z):
            out, kv["cross_k"], kv["cross_v"] = self.attention2.cached(
                F, Z, enc, enc, enc_lens, cross_k, cross_v)
            return out
        Y = self.addnorm1.wrap(X, self_attention)
        Y = self.addnorm2.wrap(Y, cross_attention)
        return (self.addnorm3.wrap(Y, self.ffn), kv["self_k"], kv["self_v"], kv["cross_k"],
                kv["cross_v"])

    def forward(self, X, state):
        if is_symbol(X):
            raise NotImplementedError("TransformerDecoderBlock is a cached graph of its own: "
                                      "hybridize it, not a parent")
        enc_outputs, enc_lens, caches, offset = state
        cache = caches[self.i]
        if not checked(X):  # called by TransformerDecoder, which checked its tokens
            self.attention1.check_call(X, X, X)
            self.attention2.check_call(X, enc_outputs, enc_outputs)
        for attention in (self.attention1, self.attention2):
            attention.attention.attention_weights = None  # a cached graph does not set them
        self_k, self_v = cache.self_attention.arrays(X.shape[0], X)
        cross_k, cross_v = cache.cross_attention.arrays(X.shape[0], X)
        # The source is projected on the first call. Later calls add one position to the
        # cached ones, which enc_lens mask, so that no graph sees an empty input.
        enc = cache.source_position if cross_k.shape[1] else enc_outputs
        with checked_call():
            Y, *kv = super().forward(X, _causal_lens(X, self_k.shape[1]), self_k, self_v, enc,
                                     enc_lens, cross_k, cross_v)
        new = DecoderCache(copy.copy(cache.self_attention), cache.cross_attention,
                           cache.source_position)
        new.self_attention.append(kv[0], kv[1], X.shape[1])
        weights = self.attention2.attention.attention_weights  # None after a graph
        if cross_k.shape[1] and weights is not None:  # without the added position
            self.attention2.attention.attention_weights = weights[:, :, :-1]
        if not cross_k.shape[1]:
            new.cross_attention = copy.copy(cache.cross_attention)
            new.cross_attention.append(kv[2], kv[3], enc.shape[1])
        return Y, (enc_outputs, enc_lens, caches[:self.i] + [new] + caches[self.i + 1:], offset)


class DecoderCache:
    """What one decoder block keeps between calls: the :class:`~d2lattn.attention.KVCache`
    of its self-attention, ``self_attention``, and of its encoder-decoder attention,
    ``cross_attention`` (the encoder outputs projected on the first call), and
    ``source_position``, the first position of the encoder outputs (batch, 1, num_hiddens),
    which calls after the first project in its place."""

    def __init__(self, self_attention, cross_attention, source_position):
        self.self_attention, self.cross_attention = self_attention, cross_attention
        self.source_position = source_position

    def reordered(self, indices):
        """The cache of the sequences ``indices`` (beam search), heads kept together."""
        return DecoderCache(self.self_attention.reordered(indices),
                            self.cross_attention.reordered(indices),
                            self.source_position[indices])


class TransformerDecoder(AttentionDecoder):
    """The Transformer decoder: embedding * sqrt(d) + positions, ``num_blks`` blocks, Dense.

    ``init_state(enc_outputs, enc_valid_lens=None)`` -> state = (enc_outputs with their
    padding zeroed, enc_valid_lens as float32 lengths (batch,), per block an empty
    :class:`DecoderCache`, offset 0). ``forward(X (batch, steps), state)`` ->
    (logits (batch, steps, vocab_size), state with the caches extended and the offset
    advanced by ``steps``): feeding a target in one call or one token per call gives the same
    logits. ``reorder_state(state, indices)`` keeps the batch rows ``indices`` (caches
    included). ``tie_weights=True`` makes the output layer share the embedding's weight
    (vocab_size x num_hiddens fewer parameters). ``pre_norm``: see :class:`AddNorm`; a
    pre-norm decoder applies a LayerNorm, ``norm``, before the output layer.

    Attention weights of the last call: ``self_attention_weights`` and
    ``enc_dec_attention_weights``, one (batch, num_heads, steps, keys) array per block;
    ``attention_weights`` is the last block's encoder-decoder attention averaged over heads,
    (batch, steps, src steps), what :mod:`d2lattn.decoding` returns per token.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 pre_norm=False, tie_weights=False, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.num_blks = check_int("num_blks", num_blks, minimum=1)
        vocab_size = check_int("vocab_size", vocab_size, minimum=1)
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.HybridSequential()
        for i in range(self.num_blks):
            self.blks.add(TransformerDecoderBlock(num_hiddens, ffn_num_hiddens, num_heads,
                                                  dropout, i, pre_norm))
        self.norm = nn.LayerNorm() if check_bool("pre_norm", pre_norm) else None
        # Sharing the embedding's ParameterDict makes Dense's weight the embedding's weight.
        shared = self.embedding.params if check_bool("tie_weights", tie_weights) else None
        self.dense = nn.Dense(vocab_size, flatten=False, params=shared)

    def init_state(self, enc_outputs, enc_valid_lens=None):
        if enc_outputs.ndim != 3 or enc_outputs.shape[-1] != self.num_hiddens:
            raise ValueError(f"enc_outputs must be (batch, steps, num_hiddens = "
                             f"{self.num_hiddens}), got shape {enc_outputs.shape}")
        if enc_valid_lens is not None and enc_valid_lens.shape != enc_outputs.shape[:1]:
            raise ValueError(f"enc_valid_lens must have shape ({enc_outputs.shape[0]},), got "
                             f"{enc_valid_lens.shape}")
        enc_lens = lengths(enc_valid_lens, enc_outputs.shape[:2] + enc_outputs.shape[1:2],
                           enc_outputs.ctx)
        enc_outputs, _ = without_padding(nd, enc_outputs, enc_outputs, enc_lens)
        first = enc_outputs[:, :1]  # what later calls project: see TransformerDecoderBlock
        caches = [DecoderCache(blk.attention1.init_cache(), blk.attention2.init_cache(), first)
                  for blk in self.blks]
        return enc_outputs, enc_lens, caches, 0

    def forward(self, X, state):
        _check_step_tokens("X", X, state[0].shape[0], self.embedding)
        offset = state[3]
        X = embed(self, X, offset)
        with checked_call():
            for blk in self.blks:
                X, state = blk(X, state)
        X = X if self.norm is None else self.norm(X)
        return self.dense(X), state[:3] + (offset + X.shape[1],)

    def reorder_state(self, state, indices):
        enc_outputs, enc_lens, caches, offset = state
        return (enc_outputs[indices], enc_lens[indices],
                [cache.reordered(indices) for cache in caches], offset)

    @property
    def self_attention_weights(self):
        return [blk.attention1.attention_weights for blk in self.blks]

    @property
    def enc_dec_attention_weights(self):
        return [blk.attention2.attention_weights for blk in self.blks]

    @property
    def attention_weights(self):
        weights = self.blks[-1].attention2.attention_weights
        return None if weights is None else weights.mean(axis=1)


def embed(coder, X, offset):
    """Token ids (batch, steps) -> embeddings * sqrt(d) + encodings of positions offset.."""
    return coder.pos_encoding(coder.embedding(X) * math.sqrt(coder.num_hiddens), offset)


def _causal_lens(X, cached):
    """Causal float32 valid lengths (batch, steps) for X (batch, steps, d) after ``cached``
    cached keys: the query of step j sees cached + j + 1 keys."""
    batch, steps = X.shape[:2]
    lens = onp.arange(cached + 1, cached + steps + 1, dtype="float32")
    return np.array(onp.broadcast_to(lens, (batch, steps)), ctx=X.ctx)  # one copy to X.ctx


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_same_shape(X, Y):
    """Raise unless ``X`` and ``Y`` have one shape with a last axis (a width) >= 1, as a
    residual connection X + Y followed by a LayerNorm needs."""
    if X.shape != Y.shape:
        raise ValueError(f"X and Y must have the same shape, got X {X.shape}, Y {Y.shape}")
    _check_width("X", X)  # nothing to normalise; the LayerNorm cannot be sized


def _check_width(name, X):
    """Raise unless ``X`` (..., d) has a width d >= 1, as a layer on its rows needs (an empty
    batch or no steps are fine)."""
    if X.shape[-1:] in ((), (0,)):
        raise ValueError(f"{name} must have a width (last axis) >= 1, got shape {X.shape}")


def _check_step_tokens(name, X, batch, embedding):
    """Raise unless ``X`` is (``batch``, steps) ids, neither axis empty, that ``embedding`` (a
    Gluon Embedding) has rows for: a decoder's input, whose batch its state fixes."""
    if X.ndim != 2 or X.shape[0] != batch:
        raise ValueError(f"{name} must be (batch = {batch}, steps) token ids, got shape "
                         f"{X.shape}")
    check_token_ids(name, X, embedding)
