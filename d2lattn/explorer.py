"""An interactive attention explorer that works offline: record every block's and head's
attention weights of one input through a model of the package, then look at them as a
notebook output (one self-contained HTML fragment: the JavaScript and CSS in
``d2lattn/explorer_assets/``, plain DOM and SVG, no network) or as a static matplotlib picture
for the PDF and for viewers without JavaScript.

``attention_explorer(net, inputs, tokens)`` does both steps; :func:`record_attention` records,
:class:`AttentionExplorer` shows. Shapes: ``inputs`` are the arguments of one call of ``net``,
a batch of one; a record's weights are (heads, queries, keys) NumPy float32 per block.
"""
import hashlib
import html
import importlib.resources
import json
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as onp
from mxnet import autograd

from ._checks import check_int, check_ndarray
from .bert import BERTEncoder, BERTModel
from .gpt import GPT
from .plotting import WEIGHTS_CMAP, show_heatmaps
from .seq2seq import EncoderDecoder
from .transformer import TransformerDecoder, TransformerEncoder

# The kinds of attention a record holds, and how the view names them.
KINDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
         "cross": "cross-attention (encoder-decoder)", "bert": "BERT self-attention",
         "gpt": "GPT causal self-attention"}
SCALE = 1000  # the view's data holds weights in thousandths: rounded to 3 decimals
HEADS_WIDTH = 6.4  # inches of the static picture of every head of a block (7.5 with its colorbar)
MIN_TICK_PX = 14  # a token label's room in that picture: a 10 pt label is 13.9 px at 100 dpi
_ASSETS = "explorer_assets"
_ROOT_CLASS = "d2lattn-explorer"  # the class of the fragment's root, its id the same + a hash
_NOTE = ("This interactive attention explorer needs JavaScript (its draw() method makes a "
         "static picture of it).")


@dataclass(frozen=True)
class BlockAttention:
    """The weights of one attention ``kind`` (a key of ``KINDS``) in block ``block`` (from 0):
    ``weights`` (heads, queries, keys) float32, rows summing to 1 over the keys a query sees;
    ``queries`` and ``keys`` the tokens of the two axes."""
    kind: str
    block: int
    weights: onp.ndarray
    queries: tuple
    keys: tuple

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, got "
                             f"{self.kind!r}")
        shape = getattr(self.weights, "shape", None)
        if shape is None or len(shape) != 3 or shape[1:] != (len(self.queries), len(self.keys)):
            raise ValueError(f"weights must be (heads, queries = {len(self.queries)}, keys = "
                             f"{len(self.keys)}), got shape {shape}")

    @property
    def num_heads(self):
        return self.weights.shape[0]


@dataclass(frozen=True)
class AttentionRecord:
    """Every block's attention of one input through ``model`` (the class name): ``blocks``,
    ordered by kind, then block."""
    model: str
    blocks: tuple

    def kinds(self):
        """The kinds recorded, in order."""
        return list(dict.fromkeys(b.kind for b in self.blocks))

    def get(self, kind=None, block=0):
        """The :class:`BlockAttention` of ``kind`` (default: the first recorded) and ``block``."""
        kinds = self.kinds()
        kind = kinds[0] if kind is None else kind
        if kind not in kinds:
            raise ValueError(f"kind must be one of {', '.join(map(repr, kinds))} (recorded "
                             f"for {self.model}), got {kind!r}")
        blocks = [b for b in self.blocks if b.kind == kind]
        return blocks[check_int("block", block, maximum=len(blocks) - 1)]


def record_attention(net, inputs, tokens, target_tokens=None):
    """Run ``net(*inputs)`` once in prediction mode (no dropout) and record its attention.

    ``net``: an :class:`~d2lattn.seq2seq.EncoderDecoder` of a
    :class:`~d2lattn.transformer.TransformerEncoder` and a
    :class:`~d2lattn.transformer.TransformerDecoder` (inputs (src (1, S), tgt input (1, T)[,
    src valid_lens (1,)]): encoder self-, decoder self- and cross-attention), a
    ``TransformerEncoder`` ((src (1, S)[, valid_lens])), a
    :class:`~d2lattn.bert.BERTModel` or :class:`~d2lattn.bert.BERTEncoder` ((tokens (1, S),
    segments (1, S)[, valid_lens])) or a :class:`~d2lattn.gpt.GPT` ((tokens (1, S),)).
    ``tokens``: the S strings of the input (the source); ``target_tokens``: the T strings of
    the decoder's input, for an encoder-decoder only. Returns an :class:`AttentionRecord`.
    A hybridized model keeps no weights: un-hybridize it first (``net.hybridize(False)``).
    """
    kinds = _kinds_of(net)
    inputs = _check_inputs(inputs)
    tokens = _check_tokens("tokens", tokens, inputs[0])
    if "cross" in kinds:
        if len(inputs) < 2:
            raise ValueError(f"inputs must be (src, tgt input[, src valid_lens]) for an "
                             f"encoder-decoder, got {len(inputs)} array(s)")
        target_tokens = _check_tokens("target_tokens", target_tokens, inputs[1])
    elif target_tokens is not None:
        raise ValueError(f"target_tokens is for an encoder-decoder, not a "
                         f"{type(net).__name__}: pass None")
    with autograd.predict_mode():
        net(*inputs)
    axes = {"encoder": (tokens, tokens), "bert": (tokens, tokens), "gpt": (tokens, tokens),
            "decoder": (target_tokens, target_tokens), "cross": (target_tokens, tokens)}
    blocks = []
    for kind, weights in kinds.items():
        for block, w in enumerate(weights()):
            if w is None:
                raise ValueError(f"net ({type(net).__name__}) kept no attention weights: a "
                                 "hybridized block runs a cached graph, which does not return "
                                 "them; call net.hybridize(False) before recording")
            blocks.append(BlockAttention(kind, block, w[0].asnumpy().astype("float32"),
                                         *axes[kind]))
    return AttentionRecord(type(net).__name__, tuple(blocks))


def _kinds_of(net):
    """{kind: a function returning the per-block weights of net's last call} for ``net``."""
    if isinstance(net, EncoderDecoder) and isinstance(net.encoder, TransformerEncoder) \
            and isinstance(net.decoder, TransformerDecoder):
        return {"encoder": lambda: net.encoder.attention_weights,
                "decoder": lambda: net.decoder.self_attention_weights,
                "cross": lambda: net.decoder.enc_dec_attention_weights}
    if isinstance(net, TransformerEncoder):
        return {"encoder": lambda: net.attention_weights}
    if isinstance(net, (BERTModel, BERTEncoder)):
        encoder = net.encoder if isinstance(net, BERTModel) else net
        return {"bert": lambda: encoder.attention_weights}
    if isinstance(net, GPT):
        return {"gpt": lambda: net.attention_weights}
    raise TypeError(f"net must be an EncoderDecoder of a TransformerEncoder and a "
                    f"TransformerDecoder, a TransformerEncoder, a BERTModel, a BERTEncoder or "
                    f"a GPT, got {type(net).__name__}")


def _check_inputs(inputs):
    """``inputs`` as a tuple of mxnet.np arrays, a batch of one each."""
    if not isinstance(inputs, (tuple, list)) or not inputs:
        raise TypeError(f"inputs must be a tuple of the arrays net is called with, got "
                        f"{type(inputs).__name__}")
    for i, x in enumerate(inputs):
        check_ndarray(f"inputs[{i}]", x)
        if x.ndim == 0 or x.shape[0] != 1:
            raise ValueError(f"inputs[{i}] must be a batch of one (first axis 1), got shape "
                             f"{x.shape}")
    return tuple(inputs)


def _check_tokens(name, tokens, ids):
    """``tokens`` as a tuple of one str per step of ``ids`` (1, steps)."""
    if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)) \
            or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"{name} must be a list of str, got {tokens!r:.80}")
    if ids.ndim != 2 or len(tokens) != ids.shape[1]:
        raise ValueError(f"{name} must have one token per step of its ids, shape {ids.shape}: "
                         f"got {len(tokens)} tokens")
    return tuple(tokens)


class AttentionExplorer:
    """The view of an :class:`AttentionRecord`: in a notebook, an interactive explorer
    (``_repr_html_``); :meth:`draw` and :meth:`save` make its static picture.

    ``kind``, ``block`` and ``head`` (from 0) are the view shown first (default: the first
    kind, block 0, head 0); ``title`` heads the view.
    """

    def __init__(self, record, kind=None, block=0, head=0, title=None):
        if not isinstance(record, AttentionRecord):
            raise TypeError(f"record must be an AttentionRecord, got {type(record).__name__}")
        self.record = record
        first = record.get(kind, block)
        self.kind, self.block = first.kind, first.block
        self.head = check_int("head", head, maximum=first.num_heads - 1)
        if title is not None and not isinstance(title, str):
            raise TypeError(f"title must be a str or None, got {type(title).__name__}")
        self.title = title

    def __repr__(self):
        kinds = "".join(f"\n  {KINDS[k]}: {self._count(k)} blocks" for k in self.record.kinds())
        return f"<AttentionExplorer of a {self.record.model}:{kinds}>"

    def _count(self, kind):
        return sum(b.kind == kind for b in self.record.blocks)

    def data(self):
        """What the view holds, JSON-ready: per kind its tokens and, per block, the weights
        [head][query][key] as integers in thousandths (``SCALE``)."""
        kinds = []
        for kind in self.record.kinds():
            blocks = [b for b in self.record.blocks if b.kind == kind]
            kinds.append({"kind": kind, "label": KINDS[kind], "queries": list(blocks[0].queries),
                          "keys": list(blocks[0].keys),
                          "blocks": [onp.rint(b.weights.astype("float64") * SCALE)
                                     .astype(int).tolist() for b in blocks]})
        return {"title": self.title or f"Attention of a {self.record.model}",
                "scale": SCALE, "kinds": kinds,
                "initial": {"kind": self.record.kinds().index(self.kind), "block": self.block,
                            "head": self.head}}

    def _repr_html_(self):
        """One HTML fragment: the CSS, the data, a note for viewers without JavaScript and
        the script that builds the view. Its id is a hash of the data: the same record gives
        the same fragment."""
        data = json.dumps(self.data(), separators=(",", ":"), ensure_ascii=False)
        data = data.replace("<", "\\u003c")  # no "</script>" inside the script
        uid = f"{_ROOT_CLASS}-{hashlib.sha256(data.encode()).hexdigest()[:12]}"
        css, js = _asset("explorer.css"), _asset("explorer.js")
        return (f'<div class="{_ROOT_CLASS} tex2jax_ignore mathjax_ignore" id="{uid}">'
                f"<style>{css}</style>"
                f'<script type="application/json" class="{_ROOT_CLASS}-data">{data}</script>'
                f'<p class="d2lx-note">{html.escape(_NOTE)}</p>'
                f"<script>{js}\nd2lattnExplorer.mount(document.currentScript ? "
                f'document.currentScript.parentNode : document.getElementById("{uid}"));'
                "</script></div>")

    def draw(self, kind=None, block=None, head=None, all_heads=False):
        """A matplotlib figure of one head (default: the view shown first): the lines from
        each query to the keys, opacity by weight, beside the weight matrix; with
        ``all_heads=True`` the matrices of every head of the block. Returns the figure."""
        kind = self.kind if kind is None else kind
        entry = self.record.get(kind, self.block if block is None else block)
        if all_heads:
            return _draw_heads(entry)
        head = check_int("head", self.head if head is None else head,
                         maximum=entry.num_heads - 1)
        return _draw_head(entry, head)

    def save(self, path, kind=None, block=None, head=None, all_heads=False):
        """Save :meth:`draw`'s figure to ``path`` (PNG, SVG or PDF by its suffix); returns
        the figure."""
        fig = self.draw(kind, block, head, all_heads)
        fig.savefig(path, bbox_inches="tight")
        return fig


def _draw_heads(entry):
    """The weight matrices of every head of a :class:`BlockAttention`, two to a row, the
    tokens on the axes where each gets ``MIN_TICK_PX``, else their positions."""
    heads, n_q, n_k = entry.weights.shape
    cols = 2 if heads % 2 == 0 else 1
    panel = HEADS_WIDTH / cols
    named = panel * 100 / max(n_q, n_k) >= MIN_TICK_PX  # at the notebooks' 100 dpi
    show_heatmaps(entry.weights.reshape(heads // cols, cols, n_q, n_k), "keys", "queries",
                  figsize=(panel, panel), xticklabels=entry.keys if named else None,
                  yticklabels=entry.queries if named else None)
    fig = plt.gcf()
    for h, ax in enumerate(fig.axes[:heads]):  # row by row; the colorbar's axes come last
        ax.set_title(f"head {h + 1}")
    fig.suptitle(f"{KINDS[entry.kind]}, block {entry.block + 1}")
    return fig


def _draw_head(entry, head):
    """Lines (left) and matrix (right) of head ``head`` of a :class:`BlockAttention`."""
    w = entry.weights[head]
    n_q, n_k = w.shape
    rows = max(n_q, n_k)
    fig, (lines, matrix) = plt.subplots(
        1, 2, figsize=(7.5, max(3.0, 0.24 * rows + 1.2)), layout="constrained",
        gridspec_kw={"width_ratios": [1, 1.15]})
    colour = plt.get_cmap(WEIGHTS_CMAP)(0.85)
    for q in range(n_q):
        for k in range(n_k):
            if w[q, k] > 0:
                lines.plot([0, 1], [q, k], color=colour, alpha=float(min(w[q, k], 1.0)),
                           linewidth=1.5, solid_capstyle="butt")
    for q, token in enumerate(entry.queries):
        lines.text(-0.04, q, token, ha="right", va="center")
    for k, token in enumerate(entry.keys):
        lines.text(1.04, k, token, ha="left", va="center")
    lines.set(xlim=(0, 1), ylim=(rows - 0.5, -0.5), title="queries → keys")
    lines.axis("off")
    image = matrix.imshow(w, cmap=WEIGHTS_CMAP, vmin=0, vmax=1)
    matrix.set_xticks(range(n_k), entry.keys, rotation=90)
    matrix.set_yticks(range(n_q), entry.queries)
    matrix.set(xlabel="keys", ylabel="queries")
    fig.colorbar(image, ax=matrix, shrink=0.8, label="weight")
    fig.suptitle(f"{KINDS[entry.kind]}, block {entry.block + 1}, head {head + 1}")
    return fig


def _asset(name):
    """The text of a file of ``d2lattn/explorer_assets``."""
    return importlib.resources.files(__package__).joinpath(_ASSETS, name).read_text("utf-8")


def attention_explorer(net, inputs, tokens, target_tokens=None, **view):
    """Record one input's attention through ``net`` (:func:`record_attention`) and return its
    :class:`AttentionExplorer` (``view``: its kind, block, head and title), which a notebook
    shows as an interactive view; ``.draw()`` / ``.save(path)`` make the static picture."""
    return AttentionExplorer(record_attention(net, inputs, tokens, target_tokens), **view)
