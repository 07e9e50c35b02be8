"""The Transformer (Vaswani et al., 2017): position-wise FFN, add & norm, encoder and decoder.

Shapes are batch-major: tokens (batch, steps), hidden states (batch, steps, num_hiddens).
Masks are explicit and do not depend on the training mode: encoder self-attention and
encoder-decoder attention skip source padding (``valid_lens`` (batch,)); decoder
self-attention is causal, the token at position t sees positions 0..t (valid lengths
t + 1 per query). The decoder keeps each block's projected keys and values in its state (and
the encoder outputs projected once for encoder-decoder attention), so decoding one token at
a time costs O(n) per token and gives the same logits as one call on the whole target.
"""
import contextlib
import math
import warnings

from mxnet import np
from mxnet.gluon import nn

from ._checks import (check_bool, check_int, check_ndarray, check_positive, check_rate,
                      check_same_shape, check_step_tokens, check_token_ids, check_tokens,
                      check_width)
from ._ops import Dense, Dropout, LayerNorm, full_lengths, is_symbol
from .attention import MultiHeadAttention
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
        if not is_symbol(X):
            check_width("X", check_ndarray("X", X))
        return super().forward(X)

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
        if not is_symbol(X):
            check_same_shape(check_ndarray("X", X), check_ndarray("Y", Y))
        with _unused_parameters_allowed():  # pre-norm: the LN acts in sublayer_input
            return super().forward(X, Y)

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
        if self._active and not is_symbol(X):  # the graph's arguments: checked, no None
            self.attention.check_call(X, X, X, valid_lens)
            valid_lens = full_lengths(valid_lens, X)
        return super().forward(X, valid_lens)

    def hybrid_forward(self, F, X, valid_lens=None):
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
        X = _embed(self, X, 0)
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X if self.norm is None else self.norm(X)

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]


class TransformerDecoderBlock(nn.HybridBlock):
    """Block ``i`` of the decoder: causal self-attention, encoder-decoder attention, FFN.

    forward(X (batch, steps, num_hiddens), state) -> (same shape as X, state), with
    state = (enc_outputs (batch, src steps, num_hiddens), enc_valid_lens None or (batch,),
    caches, offset). ``X[:, j]`` is the token at position offset + j: it attends to the
    keys at positions 0..offset + j, those cached in ``caches[i]["self"]`` (the projected
    keys and values of earlier calls) and those of X up to itself. Encoder-decoder attention
    skips source padding only; it projects the encoder outputs on the first call and keeps
    them in ``caches[i]["cross"]``. The returned state holds a new ``caches[i]``; the given
    state is left unchanged.

    ``hybridize()``: a call of one step whose caches are filled (every decoding step after
    the first) is one cached graph taking and returning the cached keys and values, the
    same results to float32 rounding; the attentions' ``attention_weights`` are then None.
    Other calls stay imperative.
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

    def forward(self, X, state):
        enc_outputs, enc_valid_lens, caches, offset = state
        # The attentions replace their cache entries: copies keep the given state intact.
        cache = {site: dict(entries) for site, entries in caches[self.i].items()}
        if self._active and X.shape[1] == 1 and "k" in cache["self"] \
                and "k" in cache["cross"]:  # one decoding step: the cached graph
            self.attention1.check_call(X, X, X, None, cache["self"])
            with _unused_parameters_allowed():  # the step uses no W_k, W_v of attention2
                Y, cache["self"]["k"], cache["self"]["v"] = super().forward(
                    X, cache["self"]["k"], cache["self"]["v"], cache["cross"]["k"],
                    cache["cross"]["v"], full_lengths(enc_valid_lens, enc_outputs))
            for attention in (self.attention1, self.attention2):
                attention.attention.attention_weights = None
            caches = caches[:self.i] + [cache] + caches[self.i + 1:]
            return Y, (enc_outputs, enc_valid_lens, caches, offset)
        causal = _causal_lens(X.shape[0], X.shape[1], offset, X.ctx)
        Y = self.addnorm1.wrap(X, lambda Z: self.attention1(Z, Z, Z, causal, cache["self"]))
        # Encoder outputs are projected once; later calls pass 0 positions: use the cache.
        enc = enc_outputs[:, :0] if "k" in cache["cross"] else enc_outputs
        Y = self.addnorm2.wrap(Y, lambda Z: self.attention2(Z, enc, enc, enc_valid_lens,
                                                            cache["cross"]))
        caches = caches[:self.i] + [cache] + caches[self.i + 1:]
        state = (enc_outputs, enc_valid_lens, caches, offset)
        return self.addnorm3.wrap(Y, self.ffn), state

    def hybrid_forward(self, F, X, self_k, self_v, cross_k, cross_v, enc_valid_lens):
        """One decoding step in a cached graph -> (output, self-attention keys and values)."""
        keys = {}

        def self_attention(Z):
            out, keys["k"], keys["v"] = self.attention1.graph_step(F, Z, self_k, self_v)
            return out
        Y = self.addnorm1.wrap(X, self_attention)
        Y = self.addnorm2.wrap(Y, lambda Z: self.attention2.graph_step(
            F, Z, cross_k, cross_v, enc_valid_lens, self_attention=False)[0])
        return self.addnorm3.wrap(Y, self.ffn), keys["k"], keys["v"]


class TransformerDecoder(AttentionDecoder):
    """The Transformer decoder: embedding * sqrt(d) + positions, ``num_blks`` blocks, Dense.

    ``init_state(enc_outputs, enc_valid_lens=None)`` -> state = (enc_outputs, enc_valid_lens,
    per block an empty key/value cache for each attention, ``{"self": {}, "cross": {}}``,
    offset 0). ``forward(X (batch, steps), state)`` ->
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
        caches = [{"self": {}, "cross": {}} for _ in range(self.num_blks)]
        return enc_outputs, enc_valid_lens, caches, 0

    def forward(self, X, state):
        check_step_tokens("X", X, state[0].shape[0], self.embedding)
        offset = state[3]
        X = _embed(self, X, offset)
        for blk in self.blks:
            X, state = blk(X, state)
        X = X if self.norm is None else self.norm(X)
        return self.dense(X), state[:3] + (offset + X.shape[1],)

    def reorder_state(self, state, indices):
        enc_outputs, enc_valid_lens, caches, offset = state
        valid = None if enc_valid_lens is None else enc_valid_lens[indices]
        caches = [{site: {key: _reorder_heads(value, indices, enc_outputs.shape[0])
                          for key, value in entries.items()}
                   for site, entries in cache.items()} for cache in caches]
        return enc_outputs[indices], valid, caches, offset

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


@contextlib.contextmanager
def _unused_parameters_allowed():
    """Silence Gluon's warning that a cached graph leaves parameters of the block unused."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Parameter .* is not used by any computation")
        yield


def _embed(coder, X, offset):
    """Token ids (batch, steps) -> embeddings * sqrt(d) + encodings of positions offset.."""
    return coder.pos_encoding(coder.embedding(X) * math.sqrt(coder.num_hiddens), offset)


def _causal_lens(batch, steps, offset, ctx):
    """Causal valid lengths (batch, steps): the query at position offset + j sees
    offset + j + 1 keys. None for one step: its query sees every cached key anyway."""
    if steps == 1:
        return None
    lens = np.arange(offset + 1, offset + steps + 1, dtype="int32", ctx=ctx)
    return np.broadcast_to(lens.reshape(1, steps), (batch, steps))


def _reorder_heads(cached, indices, batch):
    """Rows ``indices`` of a per-head cache (batch * num_heads, steps, p), heads kept together."""
    rows, steps, p = cached.shape
    return cached.reshape(batch, rows // batch, steps, p)[indices].reshape(-1, steps, p)
