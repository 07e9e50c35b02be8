"""Draw multihead_attention.svg: MultiHeadAttention with the transpose_qkv reshape.

    python book/figures/multihead_attention.py

A batch of 2 sequences, 3 steps, num_hiddens = 6 and num_heads = 3 (p = 2 features per head),
drawn as grids of cells: one colour per head, so the reader can follow each head's block of
features through W_q, transpose_qkv, the attention, transpose_output and W_o.
"""
from functools import partial

from matplotlib.patches import Rectangle

import _draw
from _draw import INK

W, H = 750, 890  # canvas in 1/100 inch: 7.5 in wide, shown at about 720 px
HEADS = ["#3b75af", "#e07b39", "#3a9a5b"]  # head 1, 2, 3
MUTED, BOX = "#555555", "#f2f2f2"
CELL, STEPS, BATCH = 12, 3, 2
FONT, SMALL = 10.5, 9.5

fig, ax = _draw.canvas(W, H, y_down=True)
text = partial(_draw.text, ax, size=FONT, color=INK)


def arrow(x0, y0, x1, y1, label=None, side="right"):
    """An arrow with an optional monospace ``label`` beside it, on ``side``."""
    _draw.arrow(ax, [(x0, y0), (x1, y1)], MUTED, 1.2)
    if label:
        dx = 8 if side == "right" else -8
        text((x0 + x1) / 2 + dx, (y0 + y1) / 2, label, size=SMALL, color=MUTED,
             ha="left" if side == "right" else "right", family="monospace")


def box(x, y, w, h, label, size=FONT, face=BOX, edge="#888888", mono=False):
    """A rounded box with top-left corner (x, y)."""
    _draw.box(ax, x, y, w, h, label, face, edge, lw=1.0, size=size, color=INK,
              family="monospace" if mono else None)


def grid(x, y, rows, colours):
    """A rows x len(colours) grid of cells with its top-left corner at (x, y)."""
    for r in range(rows):
        for c, colour in enumerate(colours):
            ax.add_patch(Rectangle((x + c * CELL, y + r * CELL), CELL, CELL, facecolor=colour,
                                   edgecolor="white", linewidth=0.8))
    return len(colours) * CELL, rows * CELL


def full_tensor(cx, y, colours):
    """(batch, steps, num_hiddens): the two sequences side by side, centred on cx."""
    width = len(colours) * CELL
    left = cx - (BATCH * width + 12) / 2
    for b in range(BATCH):
        x = left + b * (width + 12)
        grid(x, y, STEPS, colours)
        text(x + width / 2, y + STEPS * CELL + 12, f"b={b}", size=SMALL, color=MUTED)


def head_tensor(cx, y):
    """(batch * num_heads, steps, p): one narrow grid per (sequence, head), heads coloured."""
    width, gap = 2 * CELL, 6
    n = BATCH * len(HEADS)
    left = cx - (n * width + (n - 1) * gap + 6) / 2
    for b in range(BATCH):
        for i, colour in enumerate(HEADS):
            x = left + (b * len(HEADS) + i) * (width + gap) + b * 6
            grid(x, y, STEPS, [colour, colour])
            text(x + width / 2, y + STEPS * CELL + 12, f"{b},{i + 1}", size=SMALL, color=MUTED)


GREY = ["#b9b9b9"] * 6
SPLIT = [c for c in HEADS for _ in range(2)]
MONO = dict(size=SMALL, color=MUTED, family="monospace")

text(W / 2, 16, "MultiHeadAttention(num_hiddens=6, num_heads=3) on a batch of 2 sequences "
     "of 3 steps", size=SMALL, color=MUTED)
for i, colour in enumerate(HEADS):  # legend: one colour per head
    ax.add_patch(Rectangle((150 + i * 95, 32), 12, 12, facecolor=colour))
    text(167 + i * 95, 38.5, f"head {i + 1}", size=SMALL, ha="left")
text(440, 38.5, "tile b,i: sequence b, head i", size=SMALL, ha="left", color=MUTED)

# y of each row: a tensor is 36 high, its tile labels 12 below it, its shape 30 below it.
for cx, name, layer, width in [(130, "queries", "W_q", "d_q"), (375, "keys", "W_k", "d_k"),
                               (620, "values", "W_v", "d_v")]:
    text(cx, 66, name, weight="bold")
    full_tensor(cx, 78, GREY)
    text(cx, 142, f"(batch, steps, {width})", **MONO)
    arrow(cx, 152, cx, 170)
    box(cx - 100, 170, 200, 28, f"{layer} = Dense(num_hiddens)", size=SMALL, mono=True)
    arrow(cx, 198, cx, 216)
    full_tensor(cx, 218, SPLIT)
    text(cx, 282, "(batch, steps, num_hiddens)", **MONO)
    arrow(cx, 292, cx, 326, "transpose_qkv")
    head_tensor(cx, 328)
    text(cx, 392, "(batch*num_heads, steps, p)", **MONO)
    arrow(cx, 402, cx, 426)

# The attention: one batched product for every (sequence, head) pair.
box(40, 426, W - 80, 114, "", face="#fbfbfb")
text(W / 2, 446, "DotProductAttention: one batched product for all 6 (sequence, head) pairs",
     weight="bold")
# √ as a character: mathtext's \sqrt draws its sign from glyph sizes a browser lacks.
text(W / 2, 473, r"head $i$:  softmax($Q_i K_i^\top$ / √$p$) $V_i$", size=FONT + 1)
text(W / 2, 498, r"$p$ = num_hiddens / num_heads = 2, the per-head key width", size=FONT)
text(W / 2, 522, "valid_lens repeated per head: [3, 2] -> [3, 3, 3, 2, 2, 2]", **MONO)

cx, y = W / 2, 22  # everything below the box moves down by y
arrow(cx, 518 + y, cx, 538 + y)
head_tensor(cx, 540 + y)
text(cx, 604 + y, "(batch*num_heads, steps, p): each head's output", **MONO)
arrow(cx, 614 + y, cx, 648 + y, "transpose_output")
full_tensor(cx, 650 + y, SPLIT)
text(cx, 714 + y, "(batch, steps, num_hiddens): the heads side by side", **MONO)
arrow(cx, 724 + y, cx, 742 + y)
box(cx - 100, 742 + y, 200, 28, "W_o = Dense(num_hiddens)", size=SMALL, mono=True)
arrow(cx, 770 + y, cx, 788 + y)
full_tensor(cx, 790 + y, ["#7d6a9c"] * 6)
text(cx, 854 + y, "output (batch, steps, num_hiddens): W_o mixes the heads", **MONO)

_draw.save(fig, __file__)
