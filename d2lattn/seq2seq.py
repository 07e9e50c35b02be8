"""Encoder-decoder models for sequence-to-sequence learning, with and without attention.

The interfaces are d2l's: an encoder maps source tokens to outputs and a state, the decoder's
``init_state`` turns those into its own state, and ``decoder(X, state)`` returns logits for
every target position and the new state. Decoding one token at a time is the same call with
one step, so greedy and beam search (:mod:`d2lattn.decoding`) work on any of these models.
Every tensor is batch-major: tokens (batch, steps), encoder outputs (batch, steps, hidden),
RNN states (layers, batch, hidden).
"""
import pathlib

from mxnet import cpu, np
from mxnet.gluon import nn, rnn

from ._checks import (check_context, check_int, check_token_ids, check_tokens,
                      read_json_object)
from .attention import AdditiveAttention
from .checkpoint import load_parameters


class Encoder(nn.Block):
    """The encoder interface: ``forward(X, *args)`` -> encoder outputs."""

    def forward(self, X, *args):
        raise NotImplementedError


class Decoder(nn.Block):
    """The decoder interface.

    ``init_state(enc_outputs, *args)`` -> state; ``forward(X, state)`` -> (logits, state);
    ``reorder_state(state, indices)`` keeps the batch rows ``indices`` of a state (beam search).
    """

    def init_state(self, enc_outputs, *args):
        raise NotImplementedError

    def forward(self, X, state):
        raise NotImplementedError

    def reorder_state(self, state, indices):
        raise NotImplementedError


class AttentionDecoder(Decoder):
    """A decoder that attends to the encoder outputs and keeps its weights."""

    @property
    def attention_weights(self):
        """Weights of the last forward call, (batch, target steps, source steps)."""
        raise NotImplementedError


class EncoderDecoder(nn.Block):
    """An encoder and a decoder trained together: (src, tgt input) -> (logits, state)."""

    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X, dec_X, enc_valid_len=None):
        enc_outputs = self.encoder(enc_X, enc_valid_len)
        state = self.decoder.init_state(enc_outputs, enc_valid_len)
        return self.decoder(dec_X, state)


class Seq2SeqEncoder(Encoder, nn.HybridBlock):
    """A GRU encoder: (batch, steps) tokens -> outputs (batch, steps, h), state (layers, batch, h).

    Each layer is its own fused GRU so that the state handed to the decoder is each layer's
    state at the last *real* token of each sequence, not after the padding (MXNet's CPU GRU
    ignores ``use_sequence_length``). With ``bidirectional=True`` each layer also runs a
    second GRU from each sequence's last real token back to its first, and the outputs
    concatenate both directions, (batch, steps, 2h), as in Bahdanau et al. (2015); the
    state stays the forward direction's, (layers, batch, h). A HybridBlock: after
    ``hybridize()`` MXNet runs ``hybrid_forward`` as one cached graph; the checks of the
    input stay in ``forward``, in Python, before it.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0,
                 bidirectional=False, **kwargs):
        super().__init__(**kwargs)
        check_int("num_layers", num_layers, minimum=1)
        if not isinstance(bidirectional, bool):
            raise TypeError(f"bidirectional must be a bool, got {bidirectional!r}")
        self.bidirectional, self.num_hiddens = bidirectional, num_hiddens
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnns, self.backward_rnns = nn.HybridSequential(), nn.HybridSequential()
        for _ in range(num_layers):
            self.rnns.add(rnn.GRU(num_hiddens, layout="NTC"))
            if bidirectional:
                self.backward_rnns.add(rnn.GRU(num_hiddens, layout="NTC"))
        self.dropout = nn.Dropout(dropout)  # its graph node obeys autograd's training mode

    def forward(self, X, valid_len=None):
        check_tokens("X", X, valid_len)
        check_token_ids("X", X, self.embedding)
        if valid_len is None:  # one input format for the cached graph: always lengths
            valid_len = np.full(X.shape[:1], X.shape[1], ctx=X.ctx)
        return nn.HybridBlock.forward(self, X, valid_len)

    def hybrid_forward(self, F, X, valid_len):
        lengths = F.np.maximum(valid_len.astype("float32"), 1)  # a length of 0 counts as 1
        steps = F.npx.arange_like(X, axis=1).astype("float32").reshape(1, -1)
        last = F.np.expand_dims(steps == lengths.reshape(-1, 1) - 1, -1)  # (batch, steps, 1)
        outputs, states = self.embedding(X), []
        # the GRUs' initial state, zeros (1, batch, h) of the embeddings' dtype: a graph has
        # no batch size to make it from
        h0 = F.np.tile(F.np.zeros_like(outputs[:, :1, :1]).reshape(1, -1, 1),
                       (1, 1, self.num_hiddens))
        for i, layer in enumerate(self.rnns):
            if i > 0:
                outputs = self.dropout(outputs)
            inputs, (outputs, _) = outputs, layer(outputs, [h0])
            states.append((outputs * last).sum(axis=1))
            if self.bidirectional:  # read each sequence backwards from its last real token
                backward, _ = self.backward_rnns[i](_reverse_within(F, inputs, lengths), [h0])
                backward = _reverse_within(F, backward, lengths)  # back to source order
                outputs = F.np.concatenate((outputs, backward), axis=-1)
        return outputs, F.np.stack(states)


def _reverse_within(F, X, lengths):
    """Reverse each sequence of X (batch, steps, ...) within its first ``lengths`` steps.

    Steps beyond a sequence's length stay in place, so reversing twice restores X.
    lengths: (batch,) float32 whole numbers in [1, steps]. F: mxnet.ndarray or mxnet.symbol.
    """
    steps = F.npx.arange_like(X, axis=1).astype("float32").reshape(1, -1)
    lengths = lengths.reshape(-1, 1)
    index = F.np.where(steps < lengths, lengths - 1 - steps, steps)  # (batch, steps)
    rows = F.np.zeros_like(index) + F.npx.arange_like(X, axis=0).astype("float32").reshape(-1, 1)
    return F.npx.gather_nd(X, F.np.stack((rows, index)))


class Seq2SeqDecoder(Decoder, nn.HybridBlock):
    """The plain GRU decoder: every step sees one fixed context, the encoder's final state.

    state = (context (batch, h), hidden (layers, batch, h)). The context stays the encoder's
    top-layer state at every step, in training and in prediction alike. A HybridBlock, as
    :class:`Seq2SeqEncoder`.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
        super().__init__(**kwargs)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout, layout="NTC")
        self.dense = nn.Dense(vocab_size, flatten=False)

    def init_state(self, enc_outputs, *args):
        _, hidden = enc_outputs
        return hidden[-1], hidden

    def forward(self, X, state):
        check_token_ids("X", X, self.embedding)
        return nn.HybridBlock.forward(self, X, state)

    def hybrid_forward(self, F, X, state):
        context, hidden = state
        embs = self.embedding(X)
        # the context (batch, h) repeated at every step: (batch, steps, h)
        context = F.np.expand_dims(context, 1) + F.np.zeros_like(embs[:, :, :1])
        outputs, (hidden,) = self.rnn(F.np.concatenate((embs, context), axis=-1), [hidden])
        return self.dense(outputs), (state[0], hidden)

    def reorder_state(self, state, indices):
        context, hidden = state
        return context[indices], hidden[:, indices]


class Seq2SeqAttentionDecoder(AttentionDecoder):
    """Bahdanau's decoder: at each step the previous hidden state queries the encoder outputs.

    query = top-layer decoder state s_{t-1} (batch, 1, h); keys = values = all encoder
    outputs (batch, src steps, h, or 2h from a bidirectional encoder), masked beyond each
    source's valid length. The context and the embedded input token feed the GRU; the
    context also feeds the output layer. ``attention`` defaults to additive attention.
    state = (enc_outputs, hidden (layers, batch, h), enc_valid_len).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0,
                 attention=None, **kwargs):
        super().__init__(**kwargs)
        self.attention = attention or AdditiveAttention(num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout, layout="NTC")
        self.dense = nn.Dense(vocab_size, flatten=False)
        self._attention_weights = []

    def init_state(self, enc_outputs, enc_valid_len=None):
        outputs, hidden = enc_outputs
        return outputs, hidden, enc_valid_len

    def forward(self, X, state):
        enc_outputs, hidden, enc_valid_len = state
        check_token_ids("X", X, self.embedding)
        embs = self.embedding(X)
        outputs, self._attention_weights = [], []
        for t in range(X.shape[1]):
            query = np.expand_dims(hidden[-1], axis=1)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_len)
            step = np.concatenate((context, embs[:, t:t + 1]), axis=-1)
            out, (hidden,) = self.rnn(step, [hidden])
            outputs.append(np.concatenate((out, context), axis=-1))
            self._attention_weights.append(self.attention.attention_weights)
        logits = self.dense(np.concatenate(outputs, axis=1))
        return logits, (enc_outputs, hidden, enc_valid_len)

    def reorder_state(self, state, indices):
        enc_outputs, hidden, enc_valid_len = state
        valid = None if enc_valid_len is None else enc_valid_len[indices]
        return enc_outputs[indices], hidden[:, indices], valid

    @property
    def attention_weights(self):
        return np.concatenate(self._attention_weights, axis=1)


# --- Chapter 3's three models, trained by tools/nmt_runs.py -------------------------------------
# Their weights (nmt_runs_<name>.safetensors) and the record of the runs (nmt_runs.json:
# settings, per-epoch losses, the loss of the first batches).
NMT_RUNS = pathlib.Path(__file__).with_name("data") / "nmt_runs"


def seq2seq_model(decoder, src_vocab_size, tgt_vocab_size, embed_size, num_hiddens,
                  num_layers):
    """A :class:`Seq2SeqEncoder` with a ``decoder``, "plain" (:class:`Seq2SeqDecoder`) or
    "attention" (:class:`Seq2SeqAttentionDecoder`), of the same sizes: Chapter 3's models."""
    decoders = {"plain": Seq2SeqDecoder, "attention": Seq2SeqAttentionDecoder}
    if decoder not in decoders:
        raise ValueError(f"decoder must be one of {sorted(decoders)}, got {decoder!r}")
    return EncoderDecoder(
        Seq2SeqEncoder(src_vocab_size, embed_size, num_hiddens, num_layers),
        decoders[decoder](tgt_vocab_size, embed_size, num_hiddens, num_layers))


def load_nmt_run(name, path=NMT_RUNS, ctx=None):
    """Chapter 3's trained model ``name`` ("plain", "wide" or "attention"), stored by
    ``tools/nmt_runs.py``: ``(net, record)``, the net's parameters in float32 on ``ctx``
    (default: the CPU) and ``record`` the JSON record of all runs (``record["models"][name]``
    holds the model's sizes and per-epoch losses)."""
    path = pathlib.Path(path)
    ctx = cpu() if ctx is None else check_context("ctx", ctx)
    record = read_json_object(path.with_name(path.name + ".json"))
    if name not in record["models"]:
        raise ValueError(f"name must be one of {sorted(record['models'])}, got {name!r}")
    model, settings = record["models"][name], record["settings"]
    net = seq2seq_model(model["decoder"], settings["src_vocab_size"],
                        settings["tgt_vocab_size"], settings["embed_size"],
                        model["num_hiddens"], settings["num_layers"])
    net.initialize(ctx=ctx)
    tokens = np.ones((1, 1), dtype="int32", ctx=ctx)
    net(tokens, tokens, np.ones((1,), dtype="int32", ctx=ctx))  # infers the deferred shapes
    load_parameters(net, path.with_name(f"{path.name}_{name}.safetensors"))
    return net, record
