"""Encoder-decoder models for sequence-to-sequence learning, with and without attention.

The interfaces are d2l's: an encoder maps source tokens to outputs and a state, the decoder's
``init_state`` turns those into its own state, and ``decoder(X, state)`` returns logits for
every target position and the new state. Decoding one token at a time is the same call with
one step, so greedy and beam search (:mod:`d2lattn.decoding`) work on any of these models.
Every tensor is batch-major: tokens (batch, steps), encoder outputs (batch, steps, hidden),
RNN states (layers, batch, hidden).
"""
import pathlib

import numpy as onp
from mxnet import cpu, np
from mxnet.gluon import nn, rnn

from ._checks import (check_array, check_context, check_int, check_integers, check_lengths,
                      check_ndarray, check_token_ids, read_json_object)
from .attention import AdditiveAttention
from .checkpoint import load_parameters, required_entries


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

    def forward(self, enc_X, dec_X, enc_valid_lens=None):
        enc_outputs = self.encoder(enc_X, enc_valid_lens)
        state = self.decoder.init_state(enc_outputs, enc_valid_lens)
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

    def forward(self, X, valid_lens=None):
        check_token_ids("X", X, self.embedding)
        if valid_lens is None:  # one input format for the cached graph: always lengths
            valid_lens = np.full(X.shape[:1], X.shape[1], ctx=X.ctx)
        else:
            check_lengths("valid_lens", valid_lens, *X.shape, f" (X has {X.shape[1]} steps)")
        return nn.HybridBlock.forward(self, X, valid_lens)

    def hybrid_forward(self, F, X, valid_lens):
        lengths = F.np.maximum(valid_lens.astype("float32"), 1)  # a length of 0 counts as 1
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
        self.num_hiddens, self.num_layers = num_hiddens, num_layers
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout, layout="NTC")
        self.dense = nn.Dense(vocab_size, flatten=False)

    def init_state(self, enc_outputs, *args):
        _, hidden = enc_outputs
        return hidden[-1], hidden

    def forward(self, X, state):
        check_token_ids("X", X, self.embedding)
        _check_state(state, self._state_shapes(X))
        return nn.HybridBlock.forward(self, X, state)

    def _state_shapes(self, X):
        """The parts of the state for the batch of X: {name: (shape, batch axis, dtype)}."""
        batch, dtype = X.shape[0], self.embedding.weight.dtype
        return {"context": ((batch, self.num_hiddens), 0, dtype),
                "hidden": ((self.num_layers, batch, self.num_hiddens), 1, dtype)}

    def hybrid_forward(self, F, X, state):
        context, hidden = state
        embs = self.embedding(X)
        # the context (batch, h) repeated at every step: (batch, steps, h)
        context = F.np.expand_dims(context, 1) + F.np.zeros_like(embs[:, :, :1])
        outputs, (hidden,) = self.rnn(F.np.concatenate((embs, context), axis=-1), [hidden])
        return self.dense(outputs), (state[0], hidden)

    def reorder_state(self, state, indices):
        context, hidden = state
        _check_indices(indices, hidden.shape[1])
        return context[indices], hidden[:, indices]


class Seq2SeqAttentionDecoder(AttentionDecoder):
    """Bahdanau's decoder: at each step the previous hidden state queries the encoder outputs.

    query = top-layer decoder state s_{t-1} (batch, 1, h); keys = values = all encoder
    outputs (batch, src steps, h, or 2h from a bidirectional encoder), masked beyond each
    source's valid length. The context and the embedded input token feed the GRU; the
    context also feeds the output layer. ``attention`` defaults to additive attention.
    state = (enc_outputs, hidden (layers, batch, h), enc_valid_lens).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0,
                 attention=None, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens, self.num_layers = num_hiddens, num_layers
        self.attention = attention or AdditiveAttention(num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout, layout="NTC")
        self.dense = nn.Dense(vocab_size, flatten=False)
        self._attention_weights = []

    def init_state(self, enc_outputs, enc_valid_lens=None):
        outputs, hidden = enc_outputs
        return outputs, hidden, enc_valid_lens

    def forward(self, X, state):
        check_token_ids("X", X, self.embedding)
        _check_state(state, self._state_shapes(X))
        enc_outputs, hidden, enc_valid_lens = state
        embs = self.embedding(X)
        outputs, self._attention_weights = [], []
        for t in range(X.shape[1]):
            query = np.expand_dims(hidden[-1], axis=1)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            step = np.concatenate((context, embs[:, t:t + 1]), axis=-1)
            out, (hidden,) = self.rnn(step, [hidden])
            outputs.append(np.concatenate((out, context), axis=-1))
            self._attention_weights.append(self.attention.attention_weights)
        logits = self.dense(np.concatenate(outputs, axis=1))
        return logits, (enc_outputs, hidden, enc_valid_lens)

    def _state_shapes(self, X):
        """The parts of the state for the batch of X: {name: (shape, batch axis, dtype)}."""
        batch, dtype = X.shape[0], self.embedding.weight.dtype
        return {"enc_outputs": ((batch, "source steps", "width"), 0, dtype),
                "hidden": ((self.num_layers, batch, self.num_hiddens), 1, dtype),
                "enc_valid_lens": ((batch,), 0, None)}

    def reorder_state(self, state, indices):
        enc_outputs, hidden, enc_valid_lens = state
        _check_indices(indices, hidden.shape[1])
        valid = None if enc_valid_lens is None else enc_valid_lens[indices]
        return enc_outputs[indices], hidden[:, indices], valid

    @property
    def attention_weights(self):
        return np.concatenate(self._attention_weights, axis=1)


def _check_state(state, parts):
    """Raise unless ``state`` is the tuple of arrays ``parts`` names, ``{name: (shape,
    batch axis, dtype)}`` in order: a str in a shape is an axis of any size, a dtype of
    None any dtype; "enc_valid_lens" may be None."""
    if not isinstance(state, tuple) or len(state) != len(parts):
        size = f" of {len(state)}" if isinstance(state, (tuple, list)) else ""
        raise TypeError(f"state must be the tuple ({', '.join(parts)}) of init_state, got "
                        f"{type(state).__name__}{size}")
    for (name, (shape, axis, dtype)), array in zip(parts.items(), state):
        if array is None and name == "enc_valid_lens":
            continue
        check_ndarray(f"state's {name}", array)
        if array.ndim == len(shape) and array.shape[axis] != shape[axis]:
            raise ValueError(f"state is for a batch of {array.shape[axis]} (its {name} has "
                             f"shape {array.shape}), X has {shape[axis]} rows")
        if array.ndim != len(shape) or any(isinstance(want, int) and want != got
                                           for want, got in zip(shape, array.shape)):
            wanted = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
            raise ValueError(f"state's {name} must have shape ({wanted}), got {array.shape}")
        if dtype is not None and array.dtype != dtype:
            raise ValueError(f"state's {name} must be {onp.dtype(dtype).name}, the dtype of "
                             f"the decoder's parameters, got {onp.dtype(array.dtype).name}")


def _check_indices(indices, batch):
    """Raise unless ``indices`` (beams,) are rows of a state's batch of ``batch``."""
    check_array("indices", indices, 1, "(beams,) row indices")
    check_integers("indices", indices, 0, batch - 1, f" (rows of the state's batch of {batch})")


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


def load_nmt_run(name, path=NMT_RUNS, device=None):
    """Chapter 3's trained model ``name`` ("plain", "wide" or "attention"), stored by
    ``tools/nmt_runs.py``: ``(net, record)``, the net's parameters in float32 on ``device``
    (default: the CPU) and ``record`` the JSON record of all runs (``record["models"][name]``
    holds the model's sizes and per-epoch losses)."""
    path = pathlib.Path(path)
    device = cpu() if device is None else check_context("device", device)
    file = path.with_name(path.name + ".json")
    record = required_entries(file, read_json_object(file), ["models", "settings"])
    if name not in required_entries(file, record["models"], [], "models"):
        raise ValueError(f"name must be one of {sorted(record['models'])}, got {name!r}")
    model = required_entries(file, record["models"][name], ["decoder", "num_hiddens"],
                             f"settings of {name!r}")
    settings = required_entries(file, record["settings"], [
        "src_vocab_size", "tgt_vocab_size", "embed_size", "num_layers"], "settings")
    net = seq2seq_model(model["decoder"], settings["src_vocab_size"],
                        settings["tgt_vocab_size"], settings["embed_size"],
                        model["num_hiddens"], settings["num_layers"])
    net.initialize(ctx=device)
    tokens = np.ones((1, 1), dtype="int32", ctx=device)
    net(tokens, tokens, np.ones((1,), dtype="int32", ctx=device))  # infers the deferred shapes
    load_parameters(net, path.with_name(f"{path.name}_{name}.safetensors"))
    return net, record
