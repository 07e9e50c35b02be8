"""Draw bert.svg: BERT's input embeddings, encoder blocks and pretraining heads (Chapter 7).

Run with the course's Python: ``python book/figures/bert.py`` writes ``bert.svg`` beside it.
The tokens are the real WordPiece tokens all-MiniLM-L6-v2's tokenizer gives for the pair
("the dog sleeps", "it snores loudly"); the names and shapes are d2lattn.bert's.
"""
import _draw

TOKENS = ["[CLS]", "the", "dog", "sleeps", "[SEP]", "it", "s", "##nor", "##es", "loudly",
          "[SEP]"]
SEGMENTS = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
MASKED = {2: "dog", 9: "loudly"}  # pred_positions [2, 9], the labels MaskLM must predict
COLOURS = {"token": "#fde0c5", "segment": "#d4e6f1", "position": "#d5f5e3",
           "encoder": "#e8e8f4", "block": "#c9cbe8", "mlm": "#e8d5f2", "nsp": "#f9d3d0",
           "hidden": "#f2f2f2"}
FONT = 13
X0, DX, W = 2.0, 0.74, 0.64  # x of the first token column, column step and box width


def col(i):
    return X0 + i * DX


def box(ax, x, y, w, h, colour, text="", size=FONT, ec="#555555", ls="-", **kw):
    """A rounded box with lower-left corner (x, y); ``kw`` styles its text."""
    _draw.box(ax, x, y, w, h, text, colour, ec, lw=1.1, rounding=0.06, ls=ls, fontsize=size,
              **kw)


def arrow(ax, x0, y0, x1, y1, colour="#444444"):
    """An arrow from (x0, y0) to (x1, y1)."""
    _draw.arrow(ax, [(x0, y0), (x1, y1)], colour, 1.2)


def draw():
    fig, ax = _draw.canvas(10.0, 9.0, per_inch=1)  # in inches
    right = col(len(TOKENS) - 1) + W / 2

    # Inputs: tokens (with the masked ones), segments, positions.
    for i, token in enumerate(TOKENS):
        shown = "[MASK]" if i in MASKED else token
        colour = "#b48ad0" if i in MASKED else COLOURS["token"]
        box(ax, col(i) - W / 2, 0.35, W, 0.42, colour, shown, size=12 if len(shown) > 5
            else FONT, family="monospace", color="white" if i in MASKED else "black")
        box(ax, col(i) - W / 2, 0.9, W, 0.34, COLOURS["segment"], "AB"[SEGMENTS[i]])
        box(ax, col(i) - W / 2, 1.37, W, 0.34, COLOURS["position"], str(i))
        arrow(ax, col(i), 1.71, col(i), 2.05)
    labels = [(0.56, "tokens"), (1.07, "segments"), (1.54, "positions")]
    for y, text in labels:
        ax.text(X0 - 0.5, y, text, ha="right", va="center", fontsize=FONT)
    ax.text((X0 + right) / 2, 0.14, "tokens, segments: (batch, steps);   "
            "pred_positions (batch, num_preds) = [[2, 9]]", ha="center", va="center", fontsize=12,
            color="#444444")

    # BERTEncoder: the embedding sum, then num_blks blocks.
    enc_left = X0 - W / 2 - 0.1
    box(ax, enc_left - 0.15, 1.95, right - enc_left + 0.3, 3.2, "none", ec="#6b6fa8", ls="--")
    ax.text(enc_left - 0.2, 3.62, "BERTEncoder", ha="right", va="center",
            fontsize=12, color="#3c4080", weight="bold")
    box(ax, enc_left, 2.05, right - enc_left, 0.62, COLOURS["token"],
        "token_embedding + segment_embedding + pos_embedding,  LayerNorm,  dropout")
    for i in range(len(TOKENS)):
        arrow(ax, col(i), 2.67, col(i), 2.95)
    box(ax, enc_left, 2.95, right - enc_left, 1.35, COLOURS["block"])
    ax.text((enc_left + right) / 2, 3.9, "N = num_blks  ×  TransformerEncoderBlock (post-norm)",
            ha="center", va="center", fontsize=FONT, weight="bold")
    ax.text((enc_left + right) / 2, 3.38,
            "multi-head self-attention (valid_lens) → AddNorm → FFN (GELU) → AddNorm",
            ha="center", va="center", fontsize=FONT)
    for i in range(len(TOKENS)):
        arrow(ax, col(i), 4.3, col(i), 4.55)
        box(ax, col(i) - W / 2, 4.55, W, 0.42, COLOURS["hidden"], "")
    ax.text(X0 - 0.5, 4.76, "encoded_X", ha="right", va="center", fontsize=FONT)
    ax.text(X0 - 0.5, 4.45, "(batch,\nsteps, d)", ha="right", va="top",
            fontsize=12, color="#444444")

    # NSP: the pooled [CLS] vector, then NextSentencePred.
    x = col(0)
    arrow(ax, x, 4.97, x, 5.55)
    box(ax, x - 1.05, 5.55, 2.1, 0.75, COLOURS["nsp"], "hidden (pooler)\nDense(d), tanh")
    arrow(ax, x, 6.3, x, 6.65)
    box(ax, x - 1.05, 6.65, 2.1, 0.75, COLOURS["nsp"], "NextSentencePred\nDense(2)",
        weight="bold")
    arrow(ax, x, 7.4, x, 7.75)
    ax.text(x, 7.95, "nsp_Y_hat (batch, 2)", ha="center", va="center", fontsize=FONT)
    ax.text(x, 8.3, "is B the next sentence?", ha="center", va="center", fontsize=FONT,
            style="italic")

    # MLM: the encoder outputs at pred_positions, then MaskLM.
    mlm_left, mlm_right = col(2) - 0.2, right
    for i in MASKED:
        arrow(ax, col(i), 4.97, col(i), 5.55, colour="#6a3d8a")
    box(ax, mlm_left, 5.55, mlm_right - mlm_left, 1.85, COLOURS["mlm"])
    ax.text((mlm_left + mlm_right) / 2, 7.05, "MaskLM", ha="center", va="center",
            fontsize=FONT, weight="bold")
    ax.text((mlm_left + mlm_right) / 2, 6.6,
            "gather encoded_X at pred_positions: (batch, num_preds, d)", ha="center",
            va="center", fontsize=FONT)
    ax.text((mlm_left + mlm_right) / 2, 6.05,
            "Dense(d), GELU, LayerNorm, Dense(V)", ha="center",
            va="center", fontsize=FONT)
    for i, word in MASKED.items():
        arrow(ax, col(i), 7.4, col(i), 7.75, colour="#6a3d8a")
    ax.text((col(2) + col(9)) / 2, 7.95, "mlm_Y_hat (batch, num_preds, V)", ha="center",
            va="center", fontsize=FONT)
    for i, word in MASKED.items():
        ax.text(col(i), 8.3, f"“{word}”", ha="center", va="center", fontsize=FONT,
                style="italic", color="#6a3d8a")

    # BERTModel: everything.
    box(ax, 0.05, 0.02, 9.9, 8.96, "none", ec="#999999", ls=":")
    ax.text(9.8, 8.75, "d = num_hiddens,  V = vocab_size", ha="right", va="center",
            fontsize=12, color="#444444")
    ax.text(0.2, 8.75, "BERTModel", ha="left", va="center", fontsize=FONT, weight="bold",
            color="#555555")
    return fig


if __name__ == "__main__":
    _draw.save(draw(), __file__)
