"""Draw gpt.svg: the decoder-only Transformer of d2lattn.gpt.GPT (Chapter 9).

Run with the course's Python: ``python book/figures/gpt.py`` writes ``gpt.svg`` beside it.
The input tokens are shifted by one to give the targets; the names and shapes are
d2lattn.gpt's.
"""
import _draw
from bert import arrow, box  # the boxes and arrows of Chapter 7's figure

TOKENS = ["<eos>", "the", "with", "statement", "is"]
COLOURS = {"token": "#fde0c5", "position": "#d5f5e3", "block": "#c9cbe8",
           "attention": "#e8d5f2", "ffn": "#d4e6f1", "norm": "#f2f2f2", "out": "#f9d3d0"}
FONT = 13
X0, DX, W = 2.3, 1.25, 1.1  # x of the first token column, column step and box width


def col(i):
    return X0 + i * DX


def draw():
    fig, ax = _draw.canvas(10.0, 9.0, per_inch=1)
    left, right = col(0) - W / 2, col(len(TOKENS) - 1) + W / 2
    mid = (left + right) / 2
    # Inputs: token ids x_1..x_n, their embeddings and positions.
    for i, token in enumerate(TOKENS):
        box(ax, col(i) - W / 2, 0.3, W, 0.45, COLOURS["token"], token, family="monospace",
            size=12.5)
        arrow(ax, col(i), 0.75, col(i), 1.05)
    ax.text(left - 0.2, 0.52, "tokens\n(B, T)", ha="right", va="center", fontsize=12.5)
    box(ax, left, 1.05, right - left, 0.6, COLOURS["position"],
        r"$d^{1/2}\,\mathbf{E}[x_t] + \mathbf{P}_t$:  embedding,  LearnedPositionalEmbedding")
    # The blocks.
    box(ax, left - 0.15, 1.95, right - left + 0.3, 3.75, "none", ec="#6b6fa8", ls="--")
    ax.text(left - 0.25, 3.8, "N ×\nGPTBlock", ha="right", va="center", fontsize=FONT,
            weight="bold", color="#3c4080")
    arrow(ax, mid, 1.65, mid, 2.15)
    box(ax, left, 2.15, right - left, 0.5, COLOURS["norm"], "LayerNorm")
    arrow(ax, mid, 2.65, mid, 2.9)
    box(ax, left, 2.9, right - left, 0.85, COLOURS["attention"])
    ax.text(mid, 3.48, "causal multi-head self-attention,  " + r"$n_h$" + " heads",
            ha="center", va="center", fontsize=FONT)
    ax.text(mid, 3.1, "position t sees positions 1..t  (valid lengths t; cache: keys, values)",
            ha="center", va="center", fontsize=12.5, color="#444444")
    arrow(ax, mid, 3.75, mid, 4.0)
    box(ax, left, 4.0, right - left, 0.45, COLOURS["norm"], "+ residual,  LayerNorm")
    arrow(ax, mid, 4.45, mid, 4.7)
    box(ax, left, 4.7, right - left, 0.55, COLOURS["ffn"],
        r"FFN: Dense($d_{ff}$), GELU, Dense($d$);  + residual")
    ax.text(right + 0.25, 3.8, "pre-norm\n(AddNorm)", ha="left", va="center", fontsize=12.5,
            color="#444444")
    # Output.
    arrow(ax, mid, 5.7, mid, 6.0)
    box(ax, left, 6.0, right - left, 0.5, COLOURS["norm"], "LayerNorm")
    arrow(ax, mid, 6.5, mid, 6.75)
    box(ax, left, 6.75, right - left, 0.6, COLOURS["out"],
        r"Dense($V$), weight tied to $\mathbf{E}$:  logits (B, T, V)")
    for i, token in enumerate(TOKENS[1:] + ["?"]):
        arrow(ax, col(i), 7.35, col(i), 7.7)
        ax.text(col(i), 7.95, token, ha="center", va="center", fontsize=12.5,
                family="monospace", color="#6a3d8a")
    ax.text(left - 0.2, 7.95, "predicts\n" + r"$x_{t+1}$", ha="right", va="center",
            fontsize=12.5)
    ax.text(9.8, 8.7, r"d = num_hiddens,  $d_{ff}$ = ffn_num_hiddens,  V = vocab_size",
            ha="right", va="center", fontsize=12.5, color="#444444")
    ax.text(0.2, 8.7, "GPT", ha="left", va="center", fontsize=FONT, weight="bold",
            color="#555555")
    box(ax, 0.05, 0.02, 9.9, 8.96, "none", ec="#999999", ls=":")
    return fig


if __name__ == "__main__":
    _draw.save(draw(), __file__)
