"""Extract d2lattn/data/doc_topics.tsv from the ``pydoc_data.topics`` of the running CPython.

Run once (the file is shipped, so every Python version gets the same data):
``python tools/make_doc_topics.py``. See :mod:`d2lattn.data.doc_topics` for the task.
"""
import pathlib
import random
import re

import pydoc_data.topics

from d2lattn.data.pretrain import _FOOTNOTE, _NOT_PROSE, _SENTENCE_BREAK

OUT = pathlib.Path(__file__).resolve().parents[1] / "d2lattn" / "data" / "doc_topics.tsv"
# Language Reference ch. 3 (data model) and the Library's built-in types -> 0 "objects";
# ch. 4 (execution model), 6 and 7 (simple and compound statements) -> 1 "statements".
OBJECTS = """types specialnames objects customization attribute-access sequence-types numeric-types
context-managers callable-types string-methods typesseq typesseq-mutable typesmapping dict
typesmethods typesmodules typesfunctions bltin-code-objects bltin-ellipsis-object
bltin-null-object bltin-type-objects specialattrs truth formatstrings""".split()
STATEMENTS = """compound assignment augassign import execmodel naming dynamic-features exceptions
try with function class raise global nonlocal del return assert async for while if else break
continue pass yield""".split()
MIN_WORDS, MAX_WORDS, TEST_FRACTION, VAL_FRACTION = 6, 40, 0.2, 0.2
SPLITS = ("train", "val", "test")


def paragraphs(topics):
    """(label, [sentences]) of the prose paragraphs of the given topic names."""
    for label, names in enumerate((OBJECTS, STATEMENTS)):
        for name in names:
            for block in re.split(r"\n\s*\n", pydoc_data.topics.topics[name].strip("\n")):
                if not _NOT_PROSE.search(block):
                    text = _FOOTNOTE.sub("", " ".join(block.split()))
                    yield label, _SENTENCE_BREAK.split(text)


def main():
    seen, groups = {}, []
    for label, sentences in paragraphs(pydoc_data.topics.topics):
        kept = []
        for s in sentences:
            if MIN_WORDS <= len(s.split()) <= MAX_WORDS and "\t" not in s:
                if s not in seen:
                    seen[s] = label
                    kept.append(s)
                elif seen[s] != label:
                    seen[s] = None  # in both classes: dropped below
        groups.append((label, kept))
    rng = random.Random(0)
    rng.shuffle(groups)  # whole paragraphs go to one split: no near-copies across splits
    rows, counts = [], [[0, 0, 0], [0, 0, 0]]  # train, val, test per label
    sizes = [sum(seen[s] == label for s in seen) for label in (0, 1)]
    for label, kept in groups:  # the first paragraphs of each class, ~20% of it, for testing,
        done = counts[label]  # the next ~20% for validation, the rest for training
        split = 2 if done[2] < TEST_FRACTION * sizes[label] else \
            1 if done[1] < VAL_FRACTION * sizes[label] else 0
        for s in kept:
            if seen[s] is not None:
                done[split] += 1
                rows.append(f"{SPLITS[split]}\t{label}\t{s}")
    rows.sort(key=lambda r: SPLITS.index(r.split("\t")[0]))
    OUT.write_text("split\tlabel\tsentence\n" + "\n".join(rows) + "\n", encoding="utf-8")
    print(OUT, len(rows), "sentences; [train, val, test] per label:", counts)


if __name__ == "__main__":
    main()
