"""Draw transformer.svg: the Transformer of d2lattn.transformer, its three attention sites
coloured by the mask each needs.

    cd book/figures && python transformer.py

Coordinates are pixels of the drawing (760 wide); text is 10-11 pt, about 13-15 px when the
figure is shown at the page's width. The helpers below are shared with addnorm_placement.py.
"""
import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "d2lattn",
                     "font.family": "DejaVu Sans", "font.size": 10})

INK = "#222222"
# One colour per attention site (the mask it needs), used in the text and the legend too.
PADDING = ("#fde2c4", "#c2620a")   # encoder self-attention: source padding
CAUSAL = ("#e6dcf5", "#6a3fb0")    # decoder self-attention: causal
CROSS = ("#d3e8f8", "#1f6aa5")     # encoder-decoder attention: source padding
NORM = ("#fff6bf", "#9a8300")      # AddNorm
FFN = ("#d9f0d3", "#3b7d2a")       # PositionWiseFFN
EMBED = ("#eeeeee", "#666666")     # embeddings, positions, output layer


def canvas(width, height):
    """A figure of ``width`` x ``height`` px (100 px per inch) on an opaque white background,
    with axes in px, y upwards."""
    fig = plt.figure(figsize=(width / 100, height / 100))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set(xlim=(0, width), ylim=(0, height))
    ax.axis("off")
    ax.add_patch(Rectangle((0, 0), width, height, facecolor="white", edgecolor="none",
                           zorder=-10))
    return fig, ax


def box(ax, x, y, w, h, text, colours=EMBED, size=10, weight="normal", dashed=False):
    """A rounded box with lower-left corner (x, y) and centred text; returns its centre."""
    face, edge = colours
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=6",
                                facecolor=face, edgecolor=edge, linewidth=1.4,
                                linestyle="--" if dashed else "-"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", size=size, weight=weight,
            color=INK, linespacing=1.3)
    return x + w / 2, y + h / 2


def frame(ax, x, y, w, h, label, colour="#888888"):
    """A dashed frame around a repeated block, with its label above the top-left corner."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=10",
                                facecolor="#f7f7f7", edgecolor=colour, linewidth=1.2,
                                linestyle="--", zorder=-5))
    ax.text(x + 8, y + h - 8, label, ha="left", va="top", size=10, weight="bold", color=INK)


def arrow(ax, points, colour=INK, width=1.4, head=True):
    """A polyline through ``points`` ending in an arrow head."""
    for (x0, y0), (x1, y1) in zip(points[:-2], points[1:-1]):
        ax.plot([x0, x1], [y0, y1], color=colour, linewidth=width, solid_capstyle="butt")
    ax.add_patch(FancyArrowPatch(points[-2], points[-1], arrowstyle="-|>" if head else "-",
                                 mutation_scale=12, color=colour, linewidth=width,
                                 shrinkA=0, shrinkB=0))


def label(ax, x, y, text, size=10, ha="left", colour=INK, style="normal", weight="normal"):
    ax.text(x, y, text, ha=ha, va="center", size=size, color=colour, style=style,
            weight=weight, linespacing=1.3)


def save(fig, name):
    fig.savefig(f"{name}.svg", metadata={"Date": None})


def attention(ax, x, y, w, name, site, mask, colours, side, kv_from_left=False):
    """A MultiHeadAttention box with its Q, K, V inputs from a bar 18 px below it (only Q
    when K and V come from the left); the bar reaches ``side``, where the residual starts."""
    box(ax, x, y, w, 62, f"MultiHeadAttention  {name}\n{site}\n{mask}", colours)
    xs = [x + w / 2] if kv_from_left else [x + w * (i + 1) / 4 for i in range(3)]
    for xi, qkv in zip(xs, "QKV"):
        arrow(ax, [(xi, y - 18), (xi, y)])
        label(ax, xi + 5, y - 9, qkv, size=9)
    ax.plot([min(xs[0], side), max(xs[-1], side)], [y - 18, y - 18], color=INK, linewidth=1.4)


def line(ax, points, colour=INK, width=1.4):
    ax.plot(*zip(*points), color=colour, linewidth=width)


def residual(ax, x_side, y_from, y_to, x_into):
    """The residual path: from x_side at y_from up to y_to, into the AddNorm at x_into."""
    arrow(ax, [(x_side, y_from), (x_side, y_to), (x_into, y_to)], colour="#555555", width=1.2)


def main():
    fig, ax = canvas(770, 860)
    # ---------------- encoder (left) ----------------
    ex, ew = 50, 280
    ecx = ex + ew / 2
    box(ax, ex, 10, ew, 34, "source tokens (batch, T), padded;\nvalid_lens (batch,)", EMBED)
    arrow(ax, [(ecx, 44), (ecx, 62)])
    box(ax, ex, 62, ew, 30, "Embedding(V, d) × √d", EMBED)
    arrow(ax, [(ecx, 92), (ecx, 110)])
    box(ax, ex, 110, ew, 30, "+ PositionalEncoding, then dropout", EMBED)
    label(ax, ecx + 6, 158, "(batch, T, d)", size=9, style="italic")
    frame(ax, ex - 30, 176, ew + 42, 332, "TransformerEncoderBlock  × N")
    line(ax, [(ecx, 140), (ecx, 204)])
    attention(ax, ex, 222, ew, "attention", "self-attention: Q = K = V = X",
              "mask: source padding (valid_lens)", PADDING, side=ex - 16)
    arrow(ax, [(ecx, 284), (ecx, 300)])
    box(ax, ex, 300, ew, 42, "AddNorm  addnorm1\nLN(X + dropout(MHA(X)))", NORM)
    arrow(ax, [(ecx, 342), (ecx, 374)])
    box(ax, ex, 374, ew, 42, "PositionWiseFFN  ffn\nDense(d_ff), ReLU, Dense(d)", FFN)
    arrow(ax, [(ecx, 416), (ecx, 432)])
    box(ax, ex, 432, ew, 42, "AddNorm  addnorm2\nLN(Y + dropout(FFN(Y)))", NORM)
    residual(ax, ex - 16, 204, 321, ex)
    line(ax, [(ecx, 358), (ex - 16, 358)], colour="#555555", width=1.2)
    residual(ax, ex - 16, 358, 453, ex)
    # the last block's output: keys and values of every decoder block's attention2
    kx, route_x = ex + ew - 30, 362
    line(ax, [(kx, 474), (kx, 540), (route_x, 540), (route_x, 429)], CROSS[1], 1.8)
    arrow(ax, [(route_x, 429), (420, 429)], colour=CROSS[1], width=1.8)
    label(ax, route_x + 4, 441, "K, V", size=9, colour=CROSS[1], weight="bold")
    label(ax, ex - 20, 562, "enc_outputs (batch, T, d),\nthe last encoder block's output",
          size=9, style="italic")
    # ---------------- decoder (right) ----------------
    dx, dw = 420, 300
    dcx = dx + dw / 2
    side = dx + dw + 16
    box(ax, dx, 10, dw, 34, "target tokens shifted right: <bos>, y₁, …\n(batch, T′)", EMBED)
    arrow(ax, [(dcx, 44), (dcx, 62)])
    box(ax, dx, 62, dw, 30, "Embedding(V, d) × √d", EMBED)
    arrow(ax, [(dcx, 92), (dcx, 110)])
    box(ax, dx, 110, dw, 30, "+ PositionalEncoding, then dropout", EMBED)
    label(ax, dcx + 6, 158, "(batch, T′, d)", size=9, style="italic")
    frame(ax, dx - 15, 176, dw + 47, 508, "TransformerDecoderBlock  × N")
    line(ax, [(dcx, 140), (dcx, 204)])
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
    line(ax, [(dcx, 534), (side, 534)], colour="#555555", width=1.2)
    residual(ax, side, 534, 629, dx + dw)
    # output layer, entered off-centre so that the frame's label stays clear
    ox = dx + dw - 40
    arrow(ax, [(ox, 650), (ox, 730)])
    label(ax, ox + 6, 710, "(batch, T′, d)", size=9, style="italic")
    box(ax, dx, 730, dw, 56, "Dense(V)  dense\nshares the embedding's weight\n"
        "if tie_weights=True", EMBED)
    arrow(ax, [(dcx, 786), (dcx, 806)])
    box(ax, dx, 806, dw, 34, "logits (batch, T′, V)", EMBED)
    # ---------------- legend: one colour per mask ----------------
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
    save(fig, "transformer")


if __name__ == "__main__":
    main()
