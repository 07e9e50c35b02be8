"""Draw scoring_and_masking.svg: (a) the masked softmax of one query over a padded sentence,
(b) additive and scaled dot-product scores side by side.

    python book/figures/scoring_and_masking.py

The weights are computed here (a plain softmax over the valid keys) and coloured with the
package's colour map for attention weights, on its 0..1 scale, as show_heatmaps draws them.
"""
import matplotlib
import numpy as onp

import _draw
from _draw import INK

from d2lattn.plotting import WEIGHTS_CMAP

W, H = 760, 530  # drawing units, 100 to the inch: shown 720 px wide, 1 pt = 1.32 px
FONT = 10  # points: 13 px as shown; sub- and superscripts 9 px
QUERY, KEY, SCORE, PARAM = ("#dbe9f6", "#2c6fbb"), ("#fde5cc", "#c8650b"), \
    ("#eeeeee", "#555555"), ("#f6f0d8", "#8a7321")
PAD = "#d0d0d0"  # the fill of padding cells

TOKENS = ["I", "love", "attention", ".", "<pad>", "<pad>"]
SCORES = onp.array([1.2, 0.3, 2.0, -0.5, 0.8, 0.1])
VALID_LEN = 4


def masked_weights(scores, valid_len):
    """Softmax over the first ``valid_len`` scores, exactly 0 beyond them."""
    e = onp.exp(scores[:valid_len] - scores[:valid_len].max())
    return onp.concatenate([e / e.sum(), onp.zeros(len(scores) - valid_len)])


def label(ax, x, y, s, **kw):
    _draw.text(ax, x, y, s, fontsize=kw.pop("fontsize", FONT), color=kw.pop("color", INK), **kw)


def cell(ax, x, y, s, face, text_color=INK, edge="#888888"):
    _draw.box(ax, x, y, 70, 30, s, face, edge, lw=1, rounding=3, fontsize=FONT,
              color=text_color)


def masking(ax):
    """(a): token, score, masked score and weight rows, one column per key."""
    label(ax, 20, 512, "(a) masked softmax: one query, 6 keys, valid length 4", ha="left",
          weight="bold", fontsize=FONT + 1)
    x0, step = 200, 84
    weights = masked_weights(SCORES, VALID_LEN)
    cmap = matplotlib.colormaps[WEIGHTS_CMAP]
    rows = [(470, "keys (tokens)"), (430, r"scores $a(\mathbf{q}, \mathbf{k}_i)$"),
            (390, "masked: position ≥ 4"), (350, r"weights $\alpha_i$")]
    for y, name in rows:
        label(ax, x0 - 12, y + 15, name, ha="right")
    for i, (token, score, weight) in enumerate(zip(TOKENS, SCORES, weights)):
        x, padding = x0 + i * step, i >= VALID_LEN
        label(ax, x + 35, 485, token, family="monospace", color="#777777" if padding else INK)
        cell(ax, x, 430, f"{score:.1f}", PAD if padding else SCORE[0])
        cell(ax, x, 390, "−∞" if padding else f"{score:.1f}", PAD if padding else SCORE[0])
        face = cmap(weight)  # the package's map on its 0..1 scale
        cell(ax, x, 350, f"{weight:.2f}" if weight else "0", face,
             text_color="white" if weight > 0.5 else INK)
    label(ax, x0 + 3 * step - 7, 334, "the weights sum to 1 over the 4 valid keys and are "
          "exactly 0 beyond them", color="#555555")


def additive(ax, x):
    """(b), left: a = w_v^T tanh(W_q q + W_k k)."""
    label(ax, x + 170, 274, "additive attention", weight="bold")
    label(ax, x + 170, 251, r"$a(\mathbf{q}, \mathbf{k}) = \mathbf{w}_v^\top"
          r" \tanh(\mathbf{W}_q \mathbf{q} + \mathbf{W}_k \mathbf{k})$")
    _draw.box(ax, x + 20, 40, 90, 32, r"$\mathbf{q}$  ($d_q$)", *QUERY, lw=1.3, fontsize=FONT)
    _draw.box(ax, x + 230, 40, 90, 32, r"$\mathbf{k}$  ($d_k$)", *KEY, lw=1.3, fontsize=FONT)
    _draw.box(ax, x + 20, 98, 90, 32, r"$\mathbf{W}_q$", *PARAM, lw=1.3, fontsize=FONT)
    _draw.box(ax, x + 230, 98, 90, 32, r"$\mathbf{W}_k$", *PARAM, lw=1.3, fontsize=FONT)
    for cx in (x + 65, x + 275):
        _draw.arrow(ax, [(cx, 72), (cx, 98)], INK, 1.2)
    _draw.box(ax, x + 110, 156, 120, 32, r"$+$,  $\tanh$  ($d_a$)", *SCORE, lw=1.3,
              fontsize=FONT)
    _draw.arrow(ax, [(x + 65, 130), (x + 65, 172), (x + 110, 172)], INK, 1.2)
    _draw.arrow(ax, [(x + 275, 130), (x + 275, 172), (x + 230, 172)], INK, 1.2)
    _draw.box(ax, x + 110, 206, 120, 30, r"$\mathbf{w}_v^\top$:  score", *PARAM, lw=1.3,
              fontsize=FONT)
    _draw.arrow(ax, [(x + 170, 188), (x + 170, 206)], INK, 1.2)
    label(ax, x + 170, 16, r"widths may differ;  parameters $\mathbf{W}_q, \mathbf{W}_k,"
          r" \mathbf{w}_v$", color="#555555")


def dot_product(ax, x):
    """(b), right: a = q^T k / sqrt(d_k)."""
    label(ax, x + 170, 274, "scaled dot-product attention", weight="bold")
    label(ax, x + 170, 251, r"$a(\mathbf{q}, \mathbf{k}) = \mathbf{q}^\top \mathbf{k}$ / √$d_k$")
    _draw.box(ax, x + 20, 40, 90, 32, r"$\mathbf{q}$  ($d_k$)", *QUERY, lw=1.3, fontsize=FONT)
    _draw.box(ax, x + 230, 40, 90, 32, r"$\mathbf{k}$  ($d_k$)", *KEY, lw=1.3, fontsize=FONT)
    _draw.box(ax, x + 110, 156, 120, 32, r"$\mathbf{q}^\top \mathbf{k}$", *SCORE, lw=1.3,
              fontsize=FONT)
    _draw.arrow(ax, [(x + 65, 72), (x + 65, 172), (x + 110, 172)], INK, 1.2)
    _draw.arrow(ax, [(x + 275, 72), (x + 275, 172), (x + 230, 172)], INK, 1.2)
    _draw.box(ax, x + 110, 206, 120, 30, r"÷ √$d_k$:  score", *SCORE, lw=1.3, fontsize=FONT)
    _draw.arrow(ax, [(x + 170, 188), (x + 170, 206)], INK, 1.2)
    label(ax, x + 170, 16, "equal widths;  no parameters;  one matrix product", color="#555555")


def main():
    fig, ax = _draw.canvas(W, H)
    masking(ax)
    _draw.line(ax, [(20, 316), (W - 20, 316)], "#cccccc", 1)
    label(ax, 20, 300, "(b) two scoring functions; either score then goes through (a)",
          ha="left", weight="bold", fontsize=FONT + 1)
    additive(ax, 20)
    _draw.line(ax, [(W / 2, 10), (W / 2, 286)], "#cccccc", 1)
    dot_product(ax, W / 2 + 20)
    _draw.save(fig, __file__)


if __name__ == "__main__":
    main()
