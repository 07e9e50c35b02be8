"""Draw grouped_query.svg: which key/value head each of 8 query heads reads, in multi-head,
grouped-query (2 key/value heads) and multi-query attention, and what the cache keeps.

    python book/figures/grouped_query.py
"""
from functools import partial

from matplotlib.patches import Rectangle

import _draw
from _draw import INK

W, H = 750, 300  # canvas in 1/100 inch, shown at about 720 px
GROUPS = ["#3b75af", "#e07b39", "#3a9a5b", "#b04a8a", "#7d6a9c", "#8c6d31", "#2f8f9d",
          "#c0504d"]  # one colour per key/value head of multi-head attention
MUTED, FONT, SMALL, CELL = "#555555", 10.5, 9.5, 20

fig, ax = _draw.canvas(W, H, y_down=True)
text = partial(_draw.text, ax, size=FONT, color=INK)


def square(x, y, colour):
    ax.add_patch(Rectangle((x, y), CELL, CELL, facecolor=colour, edgecolor=INK, linewidth=0.8))


PANELS = [("multi-head", 8, 30), ("grouped-query", 2, 280), ("multi-query", 1, 530)]
for title, kv_heads, left in PANELS:
    group = 8 // kv_heads
    text(left + 95, 22, title, weight="bold")
    text(left + 95, 42, f"$n_h$ = 8 query heads, $n_{{kv}}$ = {kv_heads}", size=SMALL,
         color=MUTED)
    query_x = [left + 6 + i * 23 for i in range(8)]
    for i, x in enumerate(query_x):  # query heads, coloured by the kv head they read
        square(x, 62, GROUPS[i // group] if kv_heads > 1 else GROUPS[0])
        text(x + CELL / 2, 72, "q", size=SMALL, color="white")
    text(left + 95, 98, "query heads", size=SMALL, color=MUTED)
    kv_x = [left + 95 - (kv_heads * 23 - 3) / 2 + j * 23 for j in range(kv_heads)]
    for i, x in enumerate(query_x):  # each query head's line to its kv head
        j = i // group
        _draw.line(ax, [(x + CELL / 2, 108), (kv_x[j] + CELL / 2, 168)], MUTED, 0.9)
    for j, x in enumerate(kv_x):
        square(x, 170, GROUPS[j])
        text(x + CELL / 2, 180, "k", size=SMALL, color="white")
        square(x, 193, GROUPS[j])
        text(x + CELL / 2, 203, "v", size=SMALL, color="white")
    text(left + 95, 232, "key/value heads (cached)", size=SMALL, color=MUTED)
    text(left + 95, 258, f"cache: {2 * kv_heads}$p$ numbers per token", size=SMALL)
    text(left + 95, 280, f"{8 // kv_heads} query head{'s' if group > 1 else ''} per "
         f"key/value head", size=SMALL, color=MUTED)

_draw.save(fig, __file__)
