"""Encoder-decoder models for sequence-to-sequence learning, with and without attention.

The interfaces are d2l's: an encoder maps source tokens to outputs and a state, the decoder's
``init_state`` turns those into its own state, and ``decoder(X, state)`` returns logits for
every target position and the new state. Decoding one token at a time is the same call with
one step, so greedy and beam search (:mod:`d2lattn.decoding`) work on any of these models.
Every tensor is batch-major: tokens (batch, steps), encoder outputs (batch, steps, hidden),
RNN states (layers, batch, hidden).
"""
from mxnet import np, npx
from mxnet.gluon import nn, rnn

from ._checks import check_int, check_token_ids, check_tokens
from ._ops import Dropout
from .attention import AdditiveAttention


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


class Seq2SeqEncoder(Encoder):
    """A GRU encoder: (batch, steps) tokens -> outputs (batch, steps, h), state (layers, batch, h).

    Each layer is its own fused GRU so that the state handed to the decoder is each layer's
    state at the last *real* token of each sequence, not after the padding (MXNet's CPU GRU
    ignores ``use_sequence_length``). With ``bidirectional=True`` each layer also runs a
    second GRU from each sequence's last real token back to its first, and the outputs
    concatenate both directions, (batch, steps, 2h), as in Bahdanau et al. (2015); the
    state stays the forward direction's, (layers, batch, h).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0,
                 bidirectional=False, **kwargs):
        super().__init__(**kwargs)
        check_int("num_layers", num_layers, minimum=1)
        if not isinstance(bidirectional, bool):
            raise TypeError(f"bidirectional must be a bool, got {bidirectional!r}")
        self.bidirectional = bidirectional
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnns, self.backward_rnns = nn.Sequential(), nn.Sequential()
        for _ in range(num_layers):
            self.rnns.add(rnn.GRU(num_hiddens, layout="NTC"))
            if bidirectional:
                self.backward_rnns.add(rnn.GRU(num_hiddens, layout="NTC"))
        self.dropout = Dropout(dropout)

    def forward(self, X, valid_len=None):
        check_tokens("X", X, valid_len)
        check_token_ids("X", X, self.embedding)
        batch, steps = X.shape
        lengths = (np.full((batch,), steps, ctx=X.ctx) if valid_len is None
                   else np.clip(valid_len, 1, steps)).astype("int32")
        rows = np.arange(batch, ctx=X.ctx)
        outputs, states = self.embedding(X), []
        for i, layer in enumerate(self.rnns):
            if i > 0:
                outputs = self.dropout(outputs)
            inputs, outputs = outputs, layer(outputs)
            states.append(outputs[rows, lengths - 1])
            if self.bidirectional:  # read each sequence backwards from its last real token
                backward = self.backward_rnns[i](_reverse_within(inputs, lengths))
                backward = _reverse_within(backward, lengths)  # back to source order
                outputs = np.concatenate((outputs, backward), axis=-1)
        return outputs, np.stack(states)


def _reverse_within(X, lengths):
    """Reverse each sequence of X (batch, steps, ...) within its first ``lengths`` steps.

    Steps beyond a sequence's length stay in place, so reversing twice restores X.
    lengths: (batch,) ints in [1, steps].
    """
    steps = np.arange(X.shape[1], ctx=X.ctx).reshape(1, -1)
    lengths = lengths.astype(steps.dtype).reshape(-1, 1)
    index = np.where(steps < lengths, lengths - 1 - steps, steps)
    return X[np.arange(X.shape[0], ctx=X.ctx).reshape(-1, 1), index]


class Seq2SeqDecoder(Decoder):
    """The plain GRU decoder: every step sees one fixed context, the encoder's final state.

    state = (context (batch, h), hidden (layers, batch, h)). The context stays the encoder's
    top-layer state at every step, in training and in prediction alike.
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
        context, hidden = state
        check_token_ids("X", X, self.embedding)
        embs = self.embedding(X)
        context = np.broadcast_to(np.expand_dims(context, 1), embs.shape[:2] + context.shape[-1:])
        outputs, (hidden,) = self.rnn(np.concatenate((embs, context), axis=-1), [hidden])
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
