"""Draw attention_pooling.svg: a query, n keys and values, scores, softmax, weighted sum.

Run with the course's Python from the repository root:
    python book/figures/attention_pooling.py
"""
from matplotlib.patches import Circle

import _draw

W, H = 750, 500  # canvas in drawing units; 7.5 x 5 inches, so 1 unit = 0.72 pt
FONT = 11  # points: about 14 px when the figure is shown 736 px wide

# One colour per role, used for the boxes' fill and edge.
COLORS = {
    "query": ("#dbe9f6", "#2c6fbb"),
    "key": ("#fde5cc", "#c8650b"),
    "score": ("#eeeeee", "#555555"),
    "softmax": ("#f6f0d8", "#8a7321"),
    "weight": ("#fadbd8", "#b03a2e"),
    "value": ("#dcf0dc", "#2e7d3a"),
    "output": ("#e8def8", "#5e35b1"),
}
ROWS = [(380, "1"), (270, "2"), (135, "n")]  # centre y of each drawn pair's score, its index
DOTS_Y = 207


def box(ax, x, y, w, h, role, text, size=FONT, rotation=0):
    """A rounded box centred at (x, y) with ``text`` inside, coloured by ``role``."""
    _draw.box(ax, x - w / 2, y - h / 2, w, h, text, *COLORS[role], lw=1.4, fontsize=size,
              rotation=rotation)


def arrow(ax, start, end, color="#444444"):
    """An arrow drawn as an annotation: above the boxes, its head a little smaller."""
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.2, shrinkA=0, shrinkB=0,
                                mutation_scale=11))


def main():
    fig, ax = _draw.canvas(W, H)

    header_y = 478
    for x, title in [(55, "query"), (240, "keys, then scores"), (470, "weights"),
                     (562, "values"), (705, "output")]:
        _draw.text(ax, x, header_y, title, fontsize=FONT, weight="bold")

    q_x, q_y = 55, ROWS[1][0]
    box(ax, q_x, q_y, 70, 44, "query", r"$\mathbf{q}$", size=FONT + 3)
    bus_x = 140
    for points in [(q_x + 35, q_y), (bus_x, q_y)], [(bus_x, ROWS[-1][0]), (bus_x, ROWS[0][0])]:
        _draw.line(ax, points, COLORS["query"][1], 1.2, solid_capstyle="butt")

    softmax_x = 385
    box(ax, softmax_x, (ROWS[0][0] + ROWS[-1][0]) / 2, 52, ROWS[0][0] - ROWS[-1][0] + 60,
        "softmax", r"softmax over the keys $i = 1, \ldots, n$", rotation=90)

    sum_x, sum_y = 640, q_y
    for y, i in ROWS:
        # key above its score box, the query from the bus on the left
        box(ax, 240, y + 42, 56, 28, "key", rf"$\mathbf{{k}}_{i}$")
        arrow(ax, (240, y + 28), (240, y + 18), COLORS["key"][1])
        box(ax, 240, y, 150, 36, "score", rf"$a(\mathbf{{q}}, \mathbf{{k}}_{i})$")
        arrow(ax, (bus_x, y), (165, y), COLORS["query"][1])
        arrow(ax, (315, y), (softmax_x - 26, y))
        box(ax, 470, y, 56, 34, "weight", rf"$\alpha_{i}$")
        arrow(ax, (softmax_x + 26, y), (442, y))
        # value above the product node, as the key above its score
        box(ax, 562, y + 42, 56, 28, "value", rf"$\mathbf{{v}}_{i}$")
        arrow(ax, (562, y + 28), (562, y + 13), COLORS["value"][1])
        ax.add_patch(Circle((562, y), 13, facecolor="white", edgecolor="#444444", lw=1.2))
        _draw.text(ax, 562, y, r"$\times$", fontsize=FONT)
        arrow(ax, (498, y), (549, y))
        arrow(ax, (575, y), (sum_x - 20, sum_y + (y - sum_y) * 0.25))
    for x in (240, 470, 562):
        _draw.text(ax, x, DOTS_Y, r"$\vdots$", fontsize=FONT + 3)

    ax.add_patch(Circle((sum_x, sum_y), 21, facecolor="white", edgecolor="#444444", lw=1.4))
    _draw.text(ax, sum_x, sum_y, r"$\Sigma$", fontsize=FONT + 3)
    box(ax, 705, sum_y, 70, 44, "output", r"$f(\mathbf{q})$", size=FONT + 2)
    arrow(ax, (sum_x + 21, sum_y), (670, sum_y))
    # \Sigma, not \sum: a browser draws the text-size glyph, far from \sum's limits
    _draw.text(ax, 705, sum_y - 45, r"$= \Sigma_{i=1}^{n}\, \alpha_i \mathbf{v}_i$", fontsize=FONT)
    _draw.text(ax, 470, ROWS[-1][0] - 38, r"$\alpha_i \geq 0$, summing to 1", fontsize=FONT - 1)

    # How Nadaraya-Watson regression fills in the roles.
    _draw.box(ax, 12, 6, W - 24, 76, "", "#f7f7f7", "#999999", lw=1)
    _draw.text(ax, 24, 66, "Nadaraya-Watson regression:", ha="left", fontsize=FONT,
               weight="bold")
    _draw.text(ax, 290, 66, r"query $x$,  keys $x_i$,  values $y_i$,  bandwidth $h$",
               ha="left", fontsize=FONT)
    _draw.text(ax, 24, 42, r"score $a(x, x_i) = \log K((x - x_i) / h)$;  "
               r"for the Gaussian kernel $a(x, x_i) = -(x - x_i)^2 / (2h^2)$",
               ha="left", fontsize=FONT)
    _draw.text(ax, 24, 18, r"where $K = 0$ (a compact kernel), the score is $-\infty$ "
               r"and the weight exactly 0: the key is masked", ha="left", fontsize=FONT)

    _draw.save(fig, __file__)


if __name__ == "__main__":
    main()
