"""Draw transformer.svg: the Transformer of d2lattn.transformer, its three attention sites
coloured by the mask each needs.

    python book/figures/transformer.py

Coordinates are pixels of the drawing (770 wide); text is 9-11 pt, about 12-15 px when the
figure is shown at the page's width. addnorm_placement.py uses this figure's style below.
"""
from functools import partial

from matplotlib.patches import FancyBboxPatch, Rectangle

import _draw
from _draw import INK

# One colour per attention site (the mask it needs), used in the text and the legend too.
PADDING = ("#fde2c4", "#c2620a")   # encoder self-attention: source padding
CAUSAL = ("#e6dcf5", "#6a3fb0")    # decoder self-attention: causal
CROSS = ("#d3e8f8", "#1f6aa5")     # encoder-decoder attention: source padding
NORM = ("#fff6bf", "#9a8300")      # AddNorm
FFN = ("#d9f0d3", "#3b7d2a")       # PositionWiseFFN
EMBED = ("#eeeeee", "#666666")     # embeddings, positions, output layer
RESIDUAL = "#555555"

# This figure's style: ink lines 1.4 wide, 10 pt text with the lines of a label 1.3 apart.
arrow = partial(_draw.arrow, color=INK, lw=1.4)
line = partial(_draw.line, color=INK, lw=1.4)
label = partial(_draw.text, ha="left", size=10, color=INK, linespacing=1.3)


def box(ax, x, y, w, h, text, colours=EMBED):
    """A rounded box with lower-left corner (x, y), coloured by ``colours`` (face, edge)."""
    return _draw.box(ax, x, y, w, h, text, *colours, lw=1.4, size=10, color=INK,
                     linespacing=1.3)


def frame(ax, x, y, w, h, title):
    """A dashed frame around a repeated block, its title inside the top-left corner."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=10",
                                facecolor="#f7f7f7", edgecolor="#888888", linewidth=1.2,
                                linestyle="--", zorder=-5))
    ax.text(x + 8, y + h - 8, title, ha="left", va="top", size=10, weight="bold", color=INK)


def attention(ax, x, y, w, name, site, mask, colours, side, kv_from_left=False):
    """A MultiHeadAttention box with its Q, K, V inputs from a bar 18 px below it (only Q
    when K and V come from the left); the bar reaches ``side``, where the residual starts."""
    box(ax, x, y, w, 62, f"MultiHeadAttention  {name}\n{site}\n{mask}", colours)
    xs = [x + w / 2] if kv_from_left else [x + w * (i + 1) / 4 for i in range(3)]
    for xi, qkv in zip(xs, "QKV"):
        arrow(ax, [(xi, y - 18), (xi, y)])
        label(ax, xi + 5, y - 9, qkv, size=9.5)
    line(ax, [(min(xs[0], side), y - 18), (max(xs[-1], side), y - 18)])


def residual(ax, x_side, y_from, y_to, x_into):
    """The residual path: from x_side at y_from up to y_to, into the AddNorm at x_into."""
    arrow(ax, [(x_side, y_from), (x_side, y_to), (x_into, y_to)], color=RESIDUAL, lw=1.2)


def inputs(ax, x, w, tokens, shape):
    """A column's tokens, embedding and positions, and the stream up to its block's first
    sublayer (y = 204); returns the column's centre x."""
    cx = x + w / 2
    box(ax, x, 10, w, 34, tokens)
    arrow(ax, [(cx, 44), (cx, 62)])
    box(ax, x, 62, w, 30, "Embedding(V, d) × √d")
    arrow(ax, [(cx, 92), (cx, 110)])
    box(ax, x, 110, w, 30, "+ PositionalEncoding, then dropout")
    label(ax, cx + 6, 158, shape, size=9.5, style="italic")
    line(ax, [(cx, 140), (cx, 204)])
    return cx


def encoder(ax):
    """The encoder column on the left, and its output's route to the decoder's attention2."""
    ex, ew = 50, 280
    ecx = inputs(ax, ex, ew, "source tokens (batch, T), padded;\nvalid_lens (batch,)",
                 "(batch, T, d)")
    frame(ax, ex - 30, 176, ew + 42, 332, "TransformerEncoderBlock  × N")
    attention(ax, ex, 222, ew, "attention", "self-attention: Q = K = V = X",
              "mask: source padding (valid_lens)", PADDING, side=ex - 16)
    arrow(ax, [(ecx, 284), (ecx, 300)])
    box(ax, ex, 300, ew, 42, "AddNorm  addnorm1\nLN(X + dropout(MHA(X)))", NORM)
    arrow(ax, [(ecx, 342), (ecx, 374)])
    box(ax, ex, 374, ew, 42, "PositionWiseFFN  ffn\nDense(d_ff), ReLU, Dense(d)", FFN)
    arrow(ax, [(ecx, 416), (ecx, 432)])
    box(ax, ex, 432, ew, 42, "AddNorm  addnorm2\nLN(Y + dropout(FFN(Y)))", NORM)
    residual(ax, ex - 16, 204, 321, ex)
    line(ax, [(ecx, 358), (ex - 16, 358)], color=RESIDUAL, lw=1.2)
    residual(ax, ex - 16, 358, 453, ex)
    # the last block's output: keys and values of every decoder block's attention2
    kx, route_x = ex + ew - 30, 362
    line(ax, [(kx, 474), (kx, 540), (route_x, 540), (route_x, 429)], color=CROSS[1], lw=1.8)
    arrow(ax, [(route_x, 429), (420, 429)], color=CROSS[1], lw=1.8)
    label(ax, route_x + 4, 441, "K, V", size=9.5, color=CROSS[1], weight="bold")
    label(ax, ex - 20, 562, "enc_outputs (batch, T, d),\nthe last encoder block's output",
          size=9.5, style="italic")


def decoder(ax):
    """The decoder column on the right, up to the logits."""
    dx, dw = 420, 300
    side = dx + dw + 16
    dcx = inputs(ax, dx, dw, "target tokens shifted right: <bos>, y₁, …\n(batch, T′)",
                 "(batch, T′, d)")
    frame(ax, dx - 15, 176, dw + 47, 508, "TransformerDecoderBlock  × N")
    attention(ax, dx, 222, dw, "attention1", "masked self-attention, cache['self']",
              "mask: causal, query t sees keys 0…t", CAUSAL, side=side)
    arrow(ax, [(dcx, 284), (dcx, 300)])
    box(ax, dx, 300, dw, 42, "AddNorm  addnorm1", NORM)
    line(ax, [(dcx, 342), (dcx, 380)])
    attention(ax, dx, 398, dw, "attention2", "encoder-decoder attention, cache['cross']",
              "mask: source padding (enc_valid_lens)", CROSS, side=side, kv_from_left=True)
    arrow(ax, [(dcx, 460), (dcx, 476)])
    box(ax, dx, 476, dw, 42, "AddNorm  addnorm2", NORM)
    arrow(ax, [(dcx, 518), (dcx, 550)])
    box(ax, dx, 550, dw, 42, "PositionWiseFFN  ffn", FFN)
    arrow(ax, [(dcx, 592), (dcx, 608)])
    box(ax, dx, 608, dw, 42, "AddNorm  addnorm3", NORM)
    residual(ax, side, 204, 321, dx + dw)
    residual(ax, side, 380, 497, dx + dw)
    line(ax, [(dcx, 534), (side, 534)], color=RESIDUAL, lw=1.2)
    residual(ax, side, 534, 629, dx + dw)
    # output layer, entered off-centre so that the frame's label stays clear
    ox = dx + dw - 40
    arrow(ax, [(ox, 650), (ox, 730)])
    label(ax, ox + 6, 710, "(batch, T′, d)", size=9.5, style="italic")
    box(ax, dx, 730, dw, 56, "Dense(V)  dense\nshares the embedding's weight\n"
        "if tie_weights=True", EMBED)
    arrow(ax, [(dcx, 786), (dcx, 806)])
    box(ax, dx, 806, dw, 34, "logits (batch, T′, V)", EMBED)


def legend(ax):
    """One colour per mask, bottom left."""
    ly = 800
    label(ax, 20, ly + 32, "Masks of the three attention sites", size=11, weight="bold")
    for i, (colours, text) in enumerate([
            (PADDING, "encoder self-attention:\nsource padding, valid_lens (batch,)"),
            (CAUSAL, "decoder self-attention: causal\n(target padding comes after, hidden)"),
            (CROSS, "encoder-decoder attention:\nsource padding only, no causal mask")]):
        y = ly - 6 - 44 * i
        ax.add_patch(Rectangle((20, y - 9), 22, 18, facecolor=colours[0], edgecolor=colours[1],
                               linewidth=1.4))
        label(ax, 52, y, text, size=10)


def main():
    fig, ax = _draw.canvas(770, 860)
    encoder(ax)
    decoder(ax)
    legend(ax)
    _draw.save(fig, __file__)


if __name__ == "__main__":
    main()
