"""Draw cnn_rnn_self_attention.svg: how far a signal travels in four kinds of layer.

    python book/figures/cnn_rnn_self_attention.py

n = 7 tokens x_1 .. x_7 at the bottom of each panel. Grey lines are the layer's connections;
orange marks how far a signal travels: the inputs that the top node above x_4 reads through 3
stacked convolutions of kernel k = 3 or 2 dilated ones (dilation 1 then 3), and x_1's path
along the recurrent chain or in one step of self-attention.
"""
from functools import partial

from matplotlib.patches import Circle

import _draw
from _draw import INK

W, H = 750, 656  # canvas in 1/100 inch: 7.5 in wide, shown at about 720 px
N = 7
MUTED, EDGE, PATH = "#555555", "#c4c4c4", "#e07b39"
NODE = "#dce6f2"
FONT, SMALL = 10.5, 9.5

fig, ax = _draw.canvas(W, H, y_down=True)
text = partial(_draw.text, ax, size=FONT, color=INK)


def line(a, b, on_path=False):
    """A connection from a to b: orange and on top if x_1's signal takes it."""
    _draw.line(ax, [a, b], PATH if on_path else EDGE, 2.2 if on_path else 1.0,
               zorder=3 if on_path else 1, solid_capstyle="round")


def node(p, on_path=False):
    ax.add_patch(Circle(p, 8, facecolor=PATH if on_path else NODE, edgecolor="#7a8aa0",
                        linewidth=0.8, zorder=4))


def panel(x0, y0, title, rows_y):
    """Node positions [row][position] for a panel at (x0, y0); rows_y from the bottom up."""
    text(x0 + 175, y0, title, weight="bold")
    xs = [x0 + 25 + 50 * i for i in range(N)]
    for i, x in enumerate(xs):
        text(x, y0 + rows_y[0] + 20, f"$x_{i + 1}$", size=FONT)
    return [[(x, y0 + y) for x in xs] for y in rows_y]


def costs(x0, y, computation, sequential, path):
    """The three columns of the complexity table, one line each."""
    for j, s in enumerate([f"computation per layer  {computation}",
                           f"sequential operations  {sequential}",
                           f"maximum path length  {path}"]):
        text(x0 + 175, y + 19 * j, s, size=SMALL, color=MUTED)


def convolution(x0, y0, title, dilations, cost_lines):
    """Stacked convolutions of kernel 3; the cone of the top middle node is on the path."""
    gap = 150 / len(dilations)
    grid = panel(x0, y0, title, [190 - gap * r for r in range(len(dilations) + 1)])
    cone = {N // 2}  # positions of the top node's receptive field, row by row going down
    for r in range(len(dilations), 0, -1):
        dil = dilations[r - 1]
        below = set()
        for i in range(N):
            for j in (i - dil, i, i + dil):
                if 0 <= j < N:
                    on = i in cone
                    line(grid[r][i], grid[r - 1][j], on)
                    below |= {j} if on else set()
        for i in range(N):
            node(grid[r][i], i in cone)
        cone = below
    for i in range(N):
        node(grid[0][i], i in cone)
    costs(x0, y0 + 238, *cost_lines)


convolution(0, 24, "convolution, kernel k = 3 (3 layers)", [1, 1, 1],
            [r"$O(knd^2)$", r"$O(1)$", r"$O(n/k)$"])
convolution(375, 24, "dilated convolution, k = 3 (dilation 1, 3)", [1, 3],
            [r"$O(knd^2)$", r"$O(1)$", r"$O(\log_k n)$"])

# Recurrent: a chain of states, x_1's signal passes through every one of them.
grid = panel(0, 344, "recurrent network (GRU, LSTM)", [190, 100])
for i in range(N):
    line(grid[0][i], grid[1][i], i == 0)
    if i + 1 < N:
        line(grid[1][i], grid[1][i + 1], True)
        ax.annotate("", grid[1][i + 1], grid[1][i], zorder=5,
                    arrowprops=dict(arrowstyle="-|>", color=PATH, shrinkA=8, shrinkB=8,
                                    linewidth=0))
    node(grid[0][i], i == 0)
    node(grid[1][i], True)
    text(grid[1][i][0], grid[1][i][1] - 20, f"$h_{i + 1}$", size=FONT)
costs(0, 344 + 238, r"$O(nd^2)$", r"$O(n)$", r"$O(n)$")

# Self-attention: every output reads every input in one step.
grid = panel(375, 344, "self-attention", [190, 60])
for i in range(N):
    for j in range(N):
        line(grid[0][j], grid[1][i], (i, j) == (N - 1, 0))
for i in range(N):
    node(grid[0][i], i == 0)
    node(grid[1][i], i == N - 1)
    text(grid[1][i][0], grid[1][i][1] - 20, f"$y_{i + 1}$", size=FONT)
costs(375, 344 + 238, r"$O(n^2d)$", r"$O(1)$", r"$O(1)$")
_draw.line(ax, [(375, 10), (375, H - 10)], "#e4e4e4", 1)
_draw.line(ax, [(10, 330), (W - 10, 330)], "#e4e4e4", 1)

_draw.save(fig, __file__)
