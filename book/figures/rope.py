"""Draw rope.svg: the rotate-half layout of rotary positions (which features form a plane)
and, in one plane, a query rotated by m theta and a key by n theta.

    python book/figures/rope.py
"""
import math
from functools import partial

from matplotlib.patches import Arc, Rectangle

import _draw
from _draw import INK

W, H = 750, 300  # canvas in 1/100 inch, shown at about 720 px
PLANES = ["#3b75af", "#e07b39", "#3a9a5b", "#b04a8a"]  # one colour per plane i
MUTED, FONT, SMALL, CELL = "#555555", 10.5, 9.5, 34

fig, ax = _draw.canvas(W, H)  # y upwards, for the angles
text = partial(_draw.text, ax, size=FONT, color=INK)

# Left: a query of width 8, feature i and feature i + 4 in the same plane.
text(175, 280, "rotate-half layout, $d$ = 8", weight="bold")
for f in range(8):
    x = 40 + f * CELL
    ax.add_patch(Rectangle((x, 180), CELL - 3, CELL - 3, facecolor=PLANES[f % 4],
                           edgecolor=INK, linewidth=0.8))
    text(x + (CELL - 3) / 2, 180 + (CELL - 3) / 2, f"$x_{f}$", color="white")
for i in range(4):  # an arc under each pair
    x0, x1 = 40 + i * CELL + 15, 40 + (i + 4) * CELL + 15
    _draw.line(ax, [(x0, 176), (x0, 160 - 14 * i), (x1, 160 - 14 * i), (x1, 176)],
               PLANES[i], 1.4)
    text(x1 + 22, 160 - 14 * i, rf"$\theta_{i}$", size=SMALL, color=PLANES[i], ha="left")
text(175, 84, r"plane $i$: features $i$ and $i + d/2$,", size=SMALL, color=MUTED)
text(175, 62, r"rotated by $m\theta_i$ at position $m$, $\theta_i$ = base$^{-2i/d}$",
     size=SMALL, color=MUTED)
text(175, 36, r"fast planes ($\theta_0$ = 1) to slow ones", size=SMALL, color=MUTED)

# Right: one plane. q at position m, k at position n.
cx, cy, r = 540, 130, 110
_draw.line(ax, [(cx - 130, cy), (cx + 150, cy)], "#bbbbbb", 0.8)
_draw.line(ax, [(cx, cy - 120), (cx, cy + 140)], "#bbbbbb", 0.8)
text(cx + 10, 280, "one plane", weight="bold", ha="left")
angles = {"q": 15, "k": 35}  # the unrotated directions, in degrees
turns = {"q": 40, "k": 95}  # m theta and n theta
colours = {"q": "#3b75af", "k": "#c0504d"}
for name in ("q", "k"):
    a0, a1 = angles[name], angles[name] + turns[name]
    for a, style in ((a0, ":"), (a1, "-")):
        end = (cx + r * math.cos(math.radians(a)), cy + r * math.sin(math.radians(a)))
        if style == "-":
            _draw.arrow(ax, [(cx, cy), end], colours[name], 1.6)
        else:
            _draw.line(ax, [(cx, cy), end], colours[name], 1.0, linestyle=style)
    ax.add_patch(Arc((cx, cy), 2 * r * (0.45 if name == "q" else 0.62),
                     2 * r * (0.45 if name == "q" else 0.62), theta1=a0, theta2=a1,
                     color=colours[name], linewidth=1.0))
    label = r"$m\theta$" if name == "q" else r"$n\theta$"
    mid = math.radians((a0 + a1) / 2)
    rr = r * (0.45 if name == "q" else 0.62) + 14
    text(cx + rr * math.cos(mid), cy + rr * math.sin(mid), label, size=SMALL,
         color=colours[name])
    end = math.radians(a1)
    text(cx + (r + 16) * math.cos(end), cy + (r + 16) * math.sin(end),
         r"$\mathbf{R}(m\theta)\mathbf{q}$" if name == "q" else r"$\mathbf{R}(n\theta)\mathbf{k}$",
         size=SMALL, color=colours[name])
text(cx + 20, 22, r"angle between them: $(n - m)\theta$ + the angle of $\mathbf{q}, \mathbf{k}$",
     size=SMALL, color=MUTED)

_draw.save(fig, __file__)
