"""Drawing helpers shared by the figure scripts in this folder (not a figure itself).

A script draws on ``canvas`` and writes its SVG beside itself with ``save(fig, __file__)``.
Scripts run by path (``python book/figures/NAME.py``) import this module from their folder.
"""
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

# DejaVu Sans first; as SVG text, the rest of the list and sans-serif are the fallbacks of a
# reader whose system lacks it.
plt.rcParams["font.family"] = "sans-serif"
plt.rcParams["font.sans-serif"] = ["DejaVu Sans", "Verdana", "Arial", "Helvetica"]
INK = "#222222"  # near-black for text and lines


def canvas(width, height, y_down=False, per_inch=100):
    """A figure of ``width`` x ``height`` units, ``per_inch`` to the inch, with axes in those
    units (y upwards unless ``y_down``) on an opaque white background, for the dark mode."""
    fig = plt.figure(figsize=(width / per_inch, height / per_inch))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set(xlim=(0, width), ylim=(height, 0) if y_down else (0, height))
    ax.axis("off")
    ax.add_patch(Rectangle((0, 0), width, height, facecolor="white", edgecolor="none",
                           zorder=-10))
    return fig, ax


def text(ax, x, y, s, ha="center", va="center", **kw):
    """``s`` centred on (x, y) unless ``ha`` or ``va`` say otherwise."""
    ax.text(x, y, s, ha=ha, va=va, **kw)


def box(ax, x, y, w, h, s, face, edge, lw, rounding=6, ls="-", **text_kw):
    """A rounded box with corner (x, y) and ``s`` centred in it; returns its centre."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=f"round,pad=0,rounding_size={rounding}",
                                facecolor=face, edgecolor=edge, linewidth=lw, linestyle=ls))
    if s:
        text(ax, x + w / 2, y + h / 2, s, **text_kw)
    return x + w / 2, y + h / 2


def line(ax, points, color, lw, **kw):
    """A polyline through ``points``."""
    ax.plot(*zip(*points), color=color, linewidth=lw, **kw)


def arrow(ax, points, color, lw):
    """A polyline through ``points`` whose last segment ends in a filled head."""
    for segment in zip(points[:-2], points[1:-1]):
        line(ax, segment, color, lw, solid_capstyle="butt")
    ax.add_patch(FancyArrowPatch(points[-2], points[-1], arrowstyle="-|>", mutation_scale=12,
                                 color=color, linewidth=lw, shrinkA=0, shrinkB=0))


def save(fig, script):
    """Write ``fig`` to ``script``'s name with .svg: no date and fixed ids, so a rerun gives
    the same bytes; text stays SVG text (selectable and found by the browser's search)."""
    svg = {"svg.fonttype": "none", "svg.hashsalt": "d2lattn"}
    with plt.rc_context(svg):
        fig.savefig(Path(script).with_suffix(".svg"), metadata={"Date": None})
    plt.close(fig)
