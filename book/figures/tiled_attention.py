"""Draw tiled_attention.svg: attention by blocks of keys with the online softmax.

    python book/figures/tiled_attention.py
"""
from functools import partial

from matplotlib.patches import Rectangle

import _draw
from _draw import INK

W, H = 750, 330  # canvas in 1/100 inch, shown at about 720 px
MUTED, FONT, SMALL, CELL = "#555555", 10.5, 9.5, 22
BLOCK, BLOCKS, QUERIES = 3, 3, 6
fig, ax = _draw.canvas(W, H, y_down=True)
text = partial(_draw.text, ax, size=FONT, color=INK)

left, top = 100, 70
text(left + BLOCK * BLOCKS * CELL / 2, 22, "scores $s_{ij}$ (queries × keys)", weight="bold")
for b in range(BLOCKS):
    x0 = left + b * BLOCK * CELL
    text(x0 + BLOCK * CELL / 2, 50, f"block {b + 1}", size=SMALL, color=MUTED)
    for r in range(QUERIES):
        for c in range(BLOCK):
            face = "#f4c59a" if b == 1 else "#f2f2f2"
            ax.add_patch(Rectangle((x0 + c * CELL, top + r * CELL), CELL, CELL,
                                   facecolor=face, edgecolor="#999999", linewidth=0.6))
    ax.add_patch(Rectangle((x0, top), BLOCK * CELL, QUERIES * CELL, facecolor="none",
                           edgecolor=INK, linewidth=1.4))
text(left - 10, top + QUERIES * CELL / 2, "queries", size=SMALL, color=MUTED, rotation=90,
     ha="right")
bottom = top + QUERIES * CELL
text(left + BLOCK * BLOCKS * CELL / 2, bottom + 22,
     "only the tile of the current block exists (shaded)", size=SMALL, color=MUTED)
text(left + BLOCK * BLOCKS * CELL / 2, bottom + 44,
     "memory: (queries, block) instead of (queries, keys)", size=SMALL, color=MUTED)
_draw.arrow(ax, [(left + BLOCKS * BLOCK * CELL + 10, top + QUERIES * CELL / 2),
                 (left + BLOCKS * BLOCK * CELL + 60, top + QUERIES * CELL / 2)], MUTED, 1.2)

bx = 372
_draw.box(ax, bx, 40, 370, 250, "", "#fbfbfb", "#888888", 1.0)
text(bx + 185, 62, "what each query carries from block to block", weight="bold")
rows = [
    (r"$m$: the largest score so far", 94),
    (r"$\ell$: the sum of $\exp(s_j - m)$ so far", 118),
    (r"$\mathbf{o}$: the sum of $\exp(s_j - m)\,\mathbf{v}_j$ so far", 142),
    (r"a block $B$: $M = \max(m, \max_{j \in B}\, s_j)$, then", 174),
    (r"$\ell \leftarrow \ell\, \exp(m - M) + \Sigma_{j \in B}\ \exp(s_j - M)$", 198),
    (r"$\mathbf{o} \leftarrow \mathbf{o}\, \exp(m - M) + \Sigma_{j \in B}\ \exp(s_j - M)\,"
     r"\mathbf{v}_j$,  $m \leftarrow M$", 224),
    (r"after the last block: output $\mathbf{o} / \ell$", 266),
]
for s, y in rows:
    text(bx + 20, y, s, ha="left")

_draw.save(fig, __file__)
