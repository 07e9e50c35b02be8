"""Draw addnorm_placement.svg: where d2lattn.AddNorm puts the layer normalisation, post-norm
(pre_norm=False) and pre-norm (pre_norm=True), around one sublayer f.

    python book/figures/addnorm_placement.py

It is drawn in transformer.py's style, with its colours and helpers.
"""
from matplotlib.patches import Circle

import _draw
from _draw import INK
from transformer import EMBED, FFN, NORM, RESIDUAL, arrow, box, label, line


def column(ax, x, title, formula, pre_norm):
    """One placement: the stream from X (bottom) to the output (top), 300 px wide."""
    w, cx = 220, x + 150
    label(ax, cx, 470, title, size=11, ha="center", weight="bold")
    label(ax, cx, 446, formula, size=10, ha="center")
    box(ax, cx - w / 2, 20, w, 30, "X  (batch, steps, d)", EMBED)
    split = 80  # where the residual leaves the stream
    line(ax, [(cx, 50), (cx, split)])
    parts = ([("LayerNorm  ln", NORM)] if pre_norm else []) + [
        ("sublayer f: attention or FFN", FFN), ("dropout", EMBED)]
    y = 96
    for text, colours in parts:
        arrow(ax, [(cx, split if y == 96 else y - 22), (cx, y)])
        box(ax, cx - w / 2, y, w, 34, text, colours)
        y += 34 + 22
    # the sum
    add_y = y + 6
    arrow(ax, [(cx, y - 22), (cx, add_y - 14)])
    ax.add_patch(Circle((cx, add_y), 14, facecolor="white", edgecolor=INK, linewidth=1.4))
    label(ax, cx, add_y, "+", size=14, ha="center")
    side = cx - w / 2 - 22
    line(ax, [(cx, split), (side, split), (side, add_y)], color=RESIDUAL, lw=1.6)
    arrow(ax, [(side, add_y), (cx - 14, add_y)], color=RESIDUAL, lw=1.6)
    label(ax, side - 4, (split + add_y) / 2, "residual", size=10, ha="right", color=RESIDUAL,
          style="italic")
    if pre_norm:
        arrow(ax, [(cx, add_y + 14), (cx, 420 - 34)])
        box(ax, cx - w / 2, 420 - 34, w, 30, "output (batch, steps, d)", EMBED)
        label(ax, cx + 10, add_y + 60, "the residual path is\nnever normalised;\n"
              "one LayerNorm (norm)\nends the stack", size=9.5, style="italic")
    else:
        arrow(ax, [(cx, add_y + 14), (cx, add_y + 34)])
        box(ax, cx - w / 2, add_y + 34, w, 34, "LayerNorm  ln", NORM)
        arrow(ax, [(cx, add_y + 68), (cx, 420 - 34)])
        box(ax, cx - w / 2, 420 - 34, w, 30, "output (batch, steps, d)", EMBED)


def main():
    fig, ax = _draw.canvas(760, 490)
    column(ax, 80, "post-norm (pre_norm=False)", "LN(X + dropout(f(X)))", pre_norm=False)
    column(ax, 440, "pre-norm (pre_norm=True)", "X + dropout(f(LN(X)))", pre_norm=True)
    _draw.save(fig, __file__)


if __name__ == "__main__":
    main()
