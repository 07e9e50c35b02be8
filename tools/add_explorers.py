"""Insert the attention explorer (d2lattn.explorer) into Chapters 6, 9 and 10.

Each chapter gets, inside the markdown cell that holds an anchor text, split before a heading:
a paragraph on what to try, the cell that shows the explorer, a sentence on the static picture
and the cell that draws it (captioned, for the PDF and viewers without JavaScript); and the
import of ``attention_explorer`` in its import cell. Cells are found by their content, not by
their index. The index's chapter map (book/index.md) then names ``explorer`` in Chapter 6's row
instead of Chapter 7's. Run once from the repository root, then re-execute the three chapters and check
them with nbval:

    python tools/add_explorers.py
    for n in 06_transformer 09_gpt 10_attention_at_scale; do
        .venv/bin/jupyter-execute --inplace book/$n.ipynb
        python -m pytest --nbval book/$n.ipynb --nbval-sanitize-with tests/nbval_sanitize.cfg -n 0
    done

A chapter that already imports ``d2lattn.explorer`` is left as it is; an anchor that is not
found is an error naming it (the chapter changed: update the anchor below).
"""
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT = "from d2lattn.explorer import attention_explorer"
EXPLORER_ROW = "; `explorer`: the interactive attention explorer"  # in the chapter map


@dataclass(frozen=True)
class Insertion:
    """The cells to add to ``chapter``: in the markdown cell holding ``anchor``, before
    ``split`` (the text from ``split`` on becomes a markdown cell after the new ones)."""
    chapter: str
    anchor: str
    split: str
    try_it: str  # markdown: what to try
    show: str  # code: the explorer
    picture_intro: str  # markdown: the static picture
    picture: str  # code: draws it
    caption: str


CHAPTER_6 = Insertion(
    chapter="06_transformer.ipynb",
    anchor="alignment",
    split="## Greedy and beam search",
    try_it="""\
The six figures above show all 24 heads of the model on one sentence, four at a time. The
explorer below holds the same weights, the encoder's self-attention, the decoder's causal
self-attention and the encoder-decoder (cross-) attention of both blocks, and draws one head at
a time as lines from each query to the keys, the line's opacity its weight, beside the weight
matrix, so that one word can be followed through every head. It runs in the page, with no
network. Choose an attention, a block and a head (the thumbnails show every head of the block);
hover over a token, or reach it with the Tab key and move with the arrow keys: a query (left)
shows where it reads, a key (right) which positions read it, and the readout gives the weights.
The decoder's positions are labelled by their inputs, as in the maps above: the position
`<bos>` writes the first French word. Things to try: in the cross-attention of block 2, follow
the rows that write *l'* and *ne*; in the encoder, look for a head that reads the next word; in the
decoder's self-attention, check that no line goes down (to a later position).
""",
    show="""\
inputs = (X.as_in_ctx(device), Y.as_in_ctx(device), X_len.as_in_ctx(device))
explorer = attention_explorer(transformer, inputs, src_tokens, dec_tokens, kind="cross",
                              block=1, title="The trained Transformer on one translation")
explorer
""",
    picture_intro="""\
Without JavaScript (in the PDF, or a notebook viewer) the explorer does not show;
`explorer.draw(kind, block, head)` draws one of its views, here head 1 of block 2's
cross-attention:
""",
    picture="""\
explorer.draw("cross", block=1, head=0)
plt.show()
""",
    caption="Head 1 of the encoder-decoder attention of block 2 on one translation: lines from "
            "each decoder position to the English words, their opacity the weight, beside the "
            "weight matrix.",
)

CHAPTER_9 = Insertion(
    chapter="09_gpt.ipynb",
    anchor="induction head",
    split="## Summary",
    try_it="""\
Find the heads yourself. The explorer below holds every head of the two-block model on one test
sequence whose last 20 tokens are a segment of 10 tokens twice; it runs in the page, with no
network. Choose a block and a head (the thumbnails show all the heads of the block at a glance);
hover over a token, or reach it with the Tab key and move with the arrow keys: a query (left)
shows where it attends, a key (right) what attends to it, and the readout gives the weights.
Focus the tokens of the second copy one by one. In which block and heads does each of them send
its weight to the key after its own token's first occurrence, 9 positions back? In which head of
the other block does a token of the first copy attend to the token just before it? Then replace
`toy[2]` by `toy[1]` in the cell and look for either kind of head in the one-block model.
""",
    show="""\
seq = next(i for i, repeats in enumerate(test_repeats) if repeats.sum() + 1 == 10)
explorer = attention_explorer(toy[2], (test_rows[seq:seq + 1],),
                              [letters[i] for i in tokens[seq]],
                              title="Two attention-only blocks on a repeated segment")
explorer
""",
    picture_intro="""\
Without JavaScript (in the PDF, or a notebook viewer) the explorer does not show;
`explorer.draw(block=..., all_heads=True)` draws every head of a block, here block 2:
""",
    picture="""\
explorer.draw(block=1, all_heads=True)
plt.show()
""",
    caption="The four heads of block 2 of the two-block attention-only model on a sequence "
            "that ends with a segment of 10 tokens twice.",
)

CHAPTER_10 = Insertion(
    chapter="10_attention_at_scale.ipynb",
    anchor="window",
    split="(sec-tiled-attention)=",
    try_it="""\
The explorer below shows both settings at once in a small GPT: two blocks with rotary
positions, a window of 4 tokens and grouped-query attention with 2 key/value heads for its 4
query heads (heads 1 and 2 read the first key/value head, heads 3 and 4 the second), trained
like the models above for 100 steps, reading the first 16 tokens of the held-out text. It runs
in the page, with no network. Choose a block and a head, hover over a token or reach it with
the Tab key and the arrow keys: a query (left) shows where it attends, a key (right) what
attends to it, and the readout gives the weights. Things to try: check that no query reaches
more than 4 keys, itself included, and that no key is read by more than 4 queries; compare the
thumbnails of heads 1 and 2, which share their keys, with those of heads 3 and 4. Do the heads
of a group attend alike? (They share keys and values, not queries.)
""",
    show="""\
set_seed(0)
small = GPT(len(vocab), num_hiddens=64, ffn_num_hiddens=128, num_heads=4, num_blks=2,
            dropout=0.0, max_len=64, positions="rope", num_kv_heads=2, window=4)
train_lm(small, random_windows(train_ids, batch_size=16, num_steps=32, seed=0),
         num_steps=100, lr=1e-2, device=cpu())
first = test_ids[:16]
explorer = attention_explorer(small, (np.array([first], dtype="int32"),),
                              vocab.to_tokens(first), block=1,
                              title="A window of 4 and 2 key/value heads for 4 query heads")
explorer
""",
    picture_intro="""\
Without JavaScript (in the PDF, or a notebook viewer) the explorer does not show;
`explorer.draw(block=..., all_heads=True)` draws every head of a block, here block 2:
""",
    picture="""\
explorer.draw(block=1, all_heads=True)
plt.show()
""",
    caption="The four query heads of block 2 of a small GPT with a window of 4 tokens and 2 "
            "key/value heads, on 16 tokens of held-out text.",
)

INSERTIONS = (CHAPTER_6, CHAPTER_9, CHAPTER_10)


def lines(text):
    return text.splitlines(keepends=True)


def markdown(text, cell_id):
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": lines(text)}


def code(text, cell_id, caption=None):
    metadata = {} if caption is None else {"mystnb": {"figure": {"caption": caption},
                                                      "image": {"alt": caption}}}
    return {"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": metadata,
            "outputs": [], "source": lines(text)}


def with_import(source):
    """The import cell's source with IMPORT among its ``from d2lattn...`` statements, in
    alphabetical order of the module."""
    out, placed = [], False
    for line in lines(source):
        statement = line.startswith(("from ", "import "))
        module = line.split()[1] if statement else ""
        if not placed and statement and module.startswith("d2lattn.") \
                and module > "d2lattn.explorer":
            out.append(IMPORT + "\n")
            placed = True
        out.append(line)
    if not placed:  # after the last from-d2lattn statement and its continuation lines
        last = max(i for i, line in enumerate(out) if line.startswith("from d2lattn"))
        while last + 1 < len(out) and out[last + 1].startswith(" "):
            last += 1
        out.insert(last + 1, IMPORT + "\n")
    return "".join(out)


def insert(notebook, insertion):
    """Add ``insertion``'s cells and import to ``notebook`` (a dict), in place."""
    cells = notebook["cells"]
    source = ["".join(cell["source"]) for cell in cells]
    found = [i for i, (cell, text) in enumerate(zip(cells, source))
             if cell["cell_type"] == "markdown" and insertion.anchor in text
             and insertion.split in text]
    if len(found) != 1:
        raise SystemExit(f"{insertion.chapter}: {len(found)} markdown cells hold both "
                         f"{insertion.anchor!r} and {insertion.split!r}; expected one")
    i = found[0]
    before, after = source[i].split(insertion.split, 1)
    if insertion.anchor not in before:
        raise SystemExit(f"{insertion.chapter}: {insertion.anchor!r} is not before "
                         f"{insertion.split!r} in cell {i}")
    imports = next(j for j, text in enumerate(source)
                   if cells[j]["cell_type"] == "code" and "import d2lattn" in text)
    cells[imports]["source"] = lines(with_import(source[imports]))
    cells[i]["source"] = lines(before.rstrip("\n"))
    cells[i + 1:i + 1] = [
        markdown(insertion.try_it, "explorer-try"),
        code(insertion.show, "explorer-show"),
        markdown(insertion.picture_intro, "explorer-picture-intro"),
        code(insertion.picture, "explorer-picture", insertion.caption),
        markdown(insertion.split + after, "explorer-after"),
    ]


def move_explorer_row(index):
    """The index's chapter map (book/index.md) with ``EXPLORER_ROW``, the module's entry,
    moved from Chapter 7's row to Chapter 6's, the first chapter that now uses it."""
    if f"{EXPLORER_ROW} |" in re.search(r"^\| 6 .*$", index, re.M)[0]:
        return index
    seven = re.search(r"^\| 7 .*$", index, re.M)
    if seven is None or f"{EXPLORER_ROW} |" not in seven[0]:
        raise SystemExit(f"book/index.md: Chapter 7's row does not end with {EXPLORER_ROW!r}")
    index = index.replace(seven[0], seven[0].replace(EXPLORER_ROW, ""))
    six = re.search(r"^\| 6 .*$", index, re.M)[0]
    return index.replace(six, six[:-2] + EXPLORER_ROW + " |")


def main():
    index = ROOT / "book" / "index.md"
    index.write_text(move_explorer_row(index.read_text(encoding="utf-8")), encoding="utf-8")
    for insertion in INSERTIONS:
        path = ROOT / "book" / insertion.chapter
        notebook = json.loads(path.read_text(encoding="utf-8"))
        if any("d2lattn.explorer" in "".join(cell["source"]) for cell in notebook["cells"]):
            print(f"{insertion.chapter}: already holds the explorer, left as it is")
            continue
        insert(notebook, insertion)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(notebook, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"{insertion.chapter}: explorer added; re-execute it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
