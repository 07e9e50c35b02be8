"""Text utilities: a token vocabulary, fixed-length padding and BERT's WordPiece tokenizer.

A leaf module: pure Python and NumPy, no mxnet.
"""
import collections
import numbers
import os
import pathlib
import re
import string
import unicodedata

import numpy as onp

from ._checks import check_int, read_json_object


def _flatten(tokens, name):
    """The str tokens of a list of tokens or of a list of token lists, in order."""
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"{name} must be a list of str tokens or of token lists, "
                        f"got {type(tokens).__name__}")
    flat = []
    for i, item in enumerate(tokens):
        for token in item if isinstance(item, (list, tuple)) else [item]:
            if not isinstance(token, str):
                raise TypeError(f"{name}[{i}] must hold str tokens, got {token!r}")
            flat.append(token)
    return flat


def _to_ids(token_to_idx, tokens, unk):
    """The index of a str token (``unk`` if unknown), or a (nested) list of indices for a list."""
    if isinstance(tokens, (list, tuple)):
        return [_to_ids(token_to_idx, token, unk) for token in tokens]
    if not isinstance(tokens, str):
        raise TypeError(f"tokens must be a str or a list/tuple of them, got {tokens!r}")
    return token_to_idx.get(tokens, unk)


def _to_tokens(idx_to_token, indices):
    """The token of an index, or a (nested) list of tokens for a list, tuple or int array."""
    if hasattr(indices, "tolist") and not isinstance(indices, numbers.Integral):
        indices = indices.tolist()  # numpy or mxnet arrays
    if isinstance(indices, (list, tuple)):
        return [_to_tokens(idx_to_token, index) for index in indices]
    if isinstance(indices, bool) or not isinstance(indices, numbers.Integral):
        raise TypeError(f"indices must be an int or a list/tuple of ints, got {indices!r}")
    if not 0 <= indices < len(idx_to_token):
        raise ValueError(f"index {indices} is out of range for a vocabulary of size "
                         f"{len(idx_to_token)}")
    return idx_to_token[indices]


class Vocab:
    """Map tokens to indices and back.

    Index 0 is ``'<unk>'``, then come ``reserved_tokens`` in the given order, then the tokens of
    ``tokens`` seen at least ``min_freq`` times, most frequent first (ties in alphabetical order).
    ``tokens`` is a list of str tokens or a list of token lists (e.g. tokenized sentences).
    """

    def __init__(self, tokens=None, min_freq=0, reserved_tokens=None):
        min_freq = check_int("min_freq", min_freq)
        reserved = [] if reserved_tokens is None else reserved_tokens
        if not isinstance(reserved, (list, tuple)) \
                or not all(isinstance(token, str) for token in reserved) \
                or len(set(reserved)) != len(reserved) or '<unk>' in reserved:
            raise ValueError("reserved_tokens must be a list of unique str tokens without "
                             f"'<unk>' (it is index 0), got {reserved_tokens!r}")
        counter = collections.Counter(_flatten([] if tokens is None else tokens, "tokens"))
        self._token_freqs = sorted(counter.items(), key=lambda tf: (-tf[1], tf[0]))
        special = {'<unk>', *reserved}
        self.idx_to_token = ['<unk>', *reserved] + [
            token for token, freq in self._token_freqs if freq >= min_freq and token not in special]
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        """The index of a token (``unk`` if unknown), or a (nested) list of indices for a list."""
        return _to_ids(self.token_to_idx, tokens, self.unk)

    def to_tokens(self, indices):
        """The token of an index, or a (nested) list of tokens for a list, tuple or int array."""
        return _to_tokens(self.idx_to_token, indices)

    @property
    def unk(self):
        """The index of the unknown token: 0."""
        return 0

    @property
    def token_freqs(self):
        """``(token, count)`` pairs of the counted tokens, most frequent first, ties by token."""
        return self._token_freqs


def truncate_pad(line, num_steps, padding_token):
    """``line`` cut to ``num_steps`` items or padded with ``padding_token`` up to it, as a list."""
    if not isinstance(line, (list, tuple)):
        raise TypeError(f"line must be a list or tuple, got {type(line).__name__}")
    num_steps = check_int("num_steps", num_steps, minimum=1)
    return list(line[:num_steps]) + [padding_token] * (num_steps - len(line))


def _check_token_list(name, tokens):
    """``tokens`` as a list after checking it is a list/tuple of str tokens or of int ids."""
    if not isinstance(tokens, (list, tuple)) or not all(
            isinstance(t, str) or (isinstance(t, numbers.Integral) and not isinstance(t, bool))
            for t in tokens):
        raise TypeError(f"{name} must be a list or tuple of str tokens or int ids, "
                        f"got {tokens!r}")
    return list(tokens)


def get_tokens_and_segments(tokens_a, tokens_b=None, cls="[CLS]", sep="[SEP]"):
    """BERT's input for one sequence or a pair: ``(tokens, segments)``, two lists of equal length.

    ``tokens`` is ``[cls] + tokens_a + [sep]`` (``+ tokens_b + [sep]`` for a pair); ``segments`` is
    0 for the first part (its ``cls`` and ``sep`` included) and 1 for ``tokens_b`` and its ``sep``.
    Tokens may be str or int ids (then pass the ids of ``cls`` and ``sep``).
    """
    _check_token_list("cls and sep", [cls, sep])
    tokens = [cls] + _check_token_list("tokens_a", tokens_a) + [sep]
    segments = [0] * len(tokens)
    if tokens_b is not None:
        tokens_b = _check_token_list("tokens_b", tokens_b) + [sep]
        tokens += tokens_b
        segments += [1] * len(tokens_b)
    return tokens, segments


# --- BERT's WordPiece tokenizer -----------------------------------------------------------------
# The pipeline of Hugging Face's BertTokenizer (its `tokenizers` implementation): normalize the
# text (clean, space out CJK characters, strip accents, lower-case), split it into words at spaces
# and punctuation, then cut each word into the longest vocabulary pieces, '##' marking pieces
# that continue a word.

# The CJK Unified Ideographs blocks as Hugging Face tokenizers has them: its Extension E starts at
# 0x2B920, not at 0x2B820 as in Google's BERT; we follow the tokenizer checkpoints are used with.
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(char):
    """Whether ``char`` is a CJK ideograph, which BERT makes a word of its own."""
    return any(low <= ord(char) <= high for low, high in _CJK_RANGES)


# Hugging Face tokenizers reads the categories the tokenizer tests (Cc, Cf, Co: removed; P*:
# punctuation; Mn: an accent) from tables of Unicode 8.0 (its Rust crate unicode_categories),
# whatever the Unicode version of the rest. Python's unicodedata is newer (Unicode 14.0 in
# Python 3.11, 15.1 in 3.13). These code points, up to Unicode 15.1, were given one of those
# categories after Unicode 8.0: Hugging Face treats them as letters, for it they are unassigned.
_AFTER_UNICODE_8 = """
061D 07FD 0890-0891 0898-089F 08CA-08E2 09FD-09FE 0A76 0AFA-0AFF 0B55 0C04 0C3C 0C77 0C84 0D00
0D3B-0D3C 0D81 0EBA 0ECE 180F 1885-1886 1ABF-1ACE 1B7D-1B7E 1DF6-1DFB 2E43-2E4F 2E52-2E5D A82C
A8C5 A8FF A9BD 10D24-10D27 10EAB-10EAD 10EFD-10EFF 10F46-10F50 10F55-10F59 10F82-10F89 11070
11073-11074 110C2 110CD 111CF 1123E 11241 1133B 11438-1143F 11442-11444 11446 1144B-1144F
1145A-1145B 1145D-1145E 11660-1166C 116B9 1182F-11837 11839-1183B 1193B-1193C 1193E 11943-11946
119D4-119D7 119DA-119DB 119E0 119E2 11A01-11A0A 11A33-11A38 11A3B-11A47 11A51-11A56 11A59-11A5B
11A8A-11A96 11A98-11A9C 11A9E-11AA2 11B00-11B09 11C30-11C36 11C38-11C3D 11C3F 11C41-11C45
11C70-11C71 11C92-11CA7 11CAA-11CB0 11CB2-11CB3 11CB5-11CB6 11D31-11D36 11D3A 11D3C-11D3D
11D3F-11D45 11D47 11D90-11D91 11D95 11D97 11EF3-11EF4 11EF7-11EF8 11F00-11F01 11F36-11F3A 11F40
11F42-11F4F 11FFF 12FF1-12FF2 13430-13440 13447-13455 16E97-16E9A 16F4F 16FE2 16FE4 1CF00-1CF2D
1CF30-1CF46 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024 1E026-1E02A 1E08F 1E130-1E136 1E2AE
1E2EC-1E2EF 1E4EC-1E4EF 1E944-1E94A 1E95E-1E95F
"""


def _code_points(ranges):
    """The characters of hexadecimal code points and ranges: ``"0041 0061-0062"`` -> a, A, b."""
    for item in ranges.split():
        low, _, high = item.partition("-")
        yield from map(chr, range(int(low, 16), int(high or low, 16) + 1))


# Categories in Unicode 8.0 where they differ from Unicode 14.0 and 15.1, as far as the
# tokenizer can tell: the code points above, and three characters recategorised since.
_UNICODE_8_CATEGORY = {**dict.fromkeys(_code_points(_AFTER_UNICODE_8), "Cn"),
                       "\u166d": "Po", "\U000111c9": "Po", "\u1734": "Mn"}


def _category(char):
    """The Unicode category of ``char`` as Hugging Face tokenizers sees it (see above)."""
    return _UNICODE_8_CATEGORY.get(char) or unicodedata.category(char)


def _is_punctuation(char):
    """BERT's punctuation: every ASCII symbol (``$``, ``^``, ``+`` too) and Unicode's P* marks."""
    return char in string.punctuation or _category(char).startswith("P")


def _clean_char(char):
    """``' '`` for a space, tab or line break; ``''`` for a control, format or private-use
    character or the replacement character U+FFFD; else ``char`` itself. (Unassigned code points
    stay, as in Hugging Face tokenizers, and end up in [UNK].)"""
    category = _category(char)
    if char in "\t\n\r" or category.startswith("Z"):
        return " "
    if char == "\ufffd" or category in ("Cc", "Cf", "Co"):
        return ""
    return char


def _strip_accents(text):
    """``text`` without accents: decomposed (NFD), then without its non-spacing marks (Mn)."""
    return "".join(char for char in unicodedata.normalize("NFD", text)
                   if _category(char) != "Mn")


def _split_on_punctuation(word):
    """``word`` cut around each punctuation mark: ``'a,b!'`` -> ``['a', ',', 'b', '!']``.

    Linear in the length of ``word`` (growing one str char by char would copy it each time)."""
    pieces, start = [], 0
    for end, char in enumerate(word):
        if _is_punctuation(char):
            pieces += [word[start:end], char]
            start = end + 1
    pieces.append(word[start:])
    return [piece for piece in pieces if piece]


def _truncate_pair(ids_a, ids_b, budget):
    """Two id lists cut to at most ``budget`` ids in all, longest first as Hugging Face does: the
    shorter list keeps at most half the budget (rounded down), the longer one gets the rest (on a
    tie ``ids_b`` counts as the longer one)."""
    if len(ids_a) + len(ids_b) <= budget:
        return ids_a, ids_b
    if len(ids_a) <= len(ids_b):
        keep_a = min(len(ids_a), budget // 2)
        return ids_a[:keep_a], ids_b[:budget - keep_a]
    keep_b = min(len(ids_b), budget // 2)
    return ids_a[:budget - keep_b], ids_b[:keep_b]


def _check_flag(name, value, allow_none=False):
    """``value`` if it is a bool (or None when ``allow_none``), else a TypeError naming ``name``."""
    if not (isinstance(value, bool) or (allow_none and value is None)):
        expected = "a bool or None" if allow_none else "a bool"
        raise TypeError(f"{name} must be {expected}, got {value!r}")
    return value


def _check_texts(name, texts):
    """``texts`` as a list after checking it is a non-empty list or tuple of str."""
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"{name} must be a list or tuple of str, got {texts!r}")
    if not texts:
        raise ValueError(f"{name} must hold at least one text, got an empty {type(texts).__name__}")
    return list(texts)


def _read_vocab_file(path):
    """The tokens of a ``vocab.txt`` file, one per line, in index order."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


class WordPieceTokenizer:
    """BERT's tokenizer: basic tokenization, then greedy longest-match-first WordPiece.

    ``vocab_file_or_tokens``: the path of a ``vocab.txt`` (one token per line) or a list of
    tokens in index order; it must hold [CLS], [SEP], [PAD], [MASK] and ``unk_token`` (when a
    token appears twice, its last index wins, as in Hugging Face). ``do_lower_case``: lower-case
    the text (uncased models). ``strip_accents``: remove accents; None follows ``do_lower_case``.
    ``tokenize_chinese_chars``: make each CJK ideograph a word. A word longer than
    ``max_input_chars_per_word`` characters, or one the vocabulary cannot spell, becomes
    ``unk_token``. Special tokens written in the text (``'the [MASK] sat'``) are kept whole.
    ``model_max_length``: the longest input the model was trained for (None: unknown), which
    :func:`d2lattn.bert.sentence_embeddings` cuts sentences to.
    Gives the tokens and ids of Hugging Face's ``BertTokenizer``.

    Every code point is classified with the rules of Hugging Face's ``tokenizers``: U+0000,
    U+FFFD and the categories Cc, Cf and Co are removed; tab, line feed, carriage return and
    Z* are spaces; unassigned code points stay (and become ``unk_token``); ASCII symbols and
    P* are punctuation; with ``strip_accents`` the text is NFD-decomposed and Mn marks are
    dropped; lower-casing is ``str.lower`` one character at a time. Like ``tokenizers``, it
    takes the categories Cc, Cf, Co, P* and Mn from Unicode 8.0: the 565 code points given
    one of them since (up to Unicode 15.1) count as letters, and three recategorised
    characters keep their old category; the other properties come from the running Python's
    ``unicodedata``. The ids equal Hugging Face's on every code point with Python 3.11 and
    3.13 (``tests/test_wordpiece.py``); characters added after Unicode 15.1 may differ.
    """
    cls_token, sep_token, pad_token, mask_token = "[CLS]", "[SEP]", "[PAD]", "[MASK]"

    def __init__(self, vocab_file_or_tokens, do_lower_case=True, strip_accents=None,
                 tokenize_chinese_chars=True, unk_token="[UNK]", max_input_chars_per_word=100,
                 model_max_length=None):
        self.do_lower_case = _check_flag("do_lower_case", do_lower_case)
        strip_accents = _check_flag("strip_accents", strip_accents, allow_none=True)
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents
        self.tokenize_chinese_chars = _check_flag("tokenize_chinese_chars", tokenize_chinese_chars)
        if not isinstance(unk_token, str) or not unk_token:
            raise TypeError(f"unk_token must be a non-empty str, got {unk_token!r}")
        self.unk_token = unk_token
        self.max_input_chars_per_word = check_int(
            "max_input_chars_per_word", max_input_chars_per_word, minimum=1)
        self.model_max_length = None if model_max_length is None else check_int(
            "model_max_length", model_max_length, minimum=2)
        self.idx_to_token = self._load_tokens(vocab_file_or_tokens)
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}
        self._longest_token = max(map(len, self.token_to_idx), default=0)
        missing = [token for token in self.special_tokens if token not in self.token_to_idx]
        if missing:
            raise ValueError(f"the vocabulary lacks the special tokens {missing}; BERT needs "
                             f"{self.special_tokens}")
        (self.cls_token_id, self.sep_token_id, self.pad_token_id, self.mask_token_id,
         self.unk_token_id) = (self.token_to_idx[token] for token in self.special_tokens)
        # re.split with a capturing group keeps the matched special tokens at the odd positions
        self._special_split = re.compile(
            "(" + "|".join(re.escape(token) for token in self.special_tokens) + ")")

    @staticmethod
    def _load_tokens(vocab_file_or_tokens):
        """The vocabulary's tokens in index order, from a file path or a list of str."""
        if isinstance(vocab_file_or_tokens, (str, os.PathLike)):
            return _read_vocab_file(vocab_file_or_tokens)
        if isinstance(vocab_file_or_tokens, (list, tuple)) \
                and all(isinstance(token, str) for token in vocab_file_or_tokens):
            return list(vocab_file_or_tokens)
        raise TypeError("vocab_file_or_tokens must be the path of a vocab.txt or a list of str "
                        f"tokens, got {type(vocab_file_or_tokens).__name__}")

    @classmethod
    def from_pretrained_dir(cls, path):
        """The tokenizer of a Hugging Face checkpoint directory: its ``vocab.txt``, with the options
        of its ``tokenizer_config.json`` when there is one (``do_lower_case``, ``strip_accents``,
        ``tokenize_chinese_chars``, ``unk_token``, ``model_max_length``); a sentence-transformers
        checkpoint's ``sentence_bert_config.json`` sets ``model_max_length`` to its
        ``max_seq_length`` (what sentence-transformers truncates at)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
        path = pathlib.Path(path)
        if not (path / "vocab.txt").is_file():
            raise FileNotFoundError(f"no vocab.txt in the directory {str(path)!r}")
        config, sentence_config = ({} if not (path / name).is_file()
                                   else read_json_object(path / name)
                                   for name in ("tokenizer_config.json",
                                                "sentence_bert_config.json"))
        options = {key: config[key] for key in ("do_lower_case", "strip_accents",
                                                "tokenize_chinese_chars", "unk_token",
                                                "model_max_length")
                   if key in config}
        if "max_seq_length" in sentence_config:
            options["model_max_length"] = sentence_config["max_seq_length"]
        if isinstance(options.get("unk_token"), dict):  # saved as an AddedToken
            if "content" not in options["unk_token"]:
                raise ValueError(f"{path / 'tokenizer_config.json'}: unk_token must be a str "
                                 f"or a dict with 'content', got {options['unk_token']!r}")
            options["unk_token"] = options["unk_token"]["content"]
        return cls(path / "vocab.txt", **options)

    @property
    def special_tokens(self):
        """``[cls_token, sep_token, pad_token, mask_token, unk_token]``."""
        return [self.cls_token, self.sep_token, self.pad_token, self.mask_token, self.unk_token]

    def __len__(self):
        return len(self.idx_to_token)

    # --- text -> tokens --------------------------------------------------------------------------

    def _normalize(self, text):
        """``text`` cleaned, with spaces around CJK ideographs, maybe without accents and
        lower-cased (character by character as Hugging Face does: a final Σ becomes σ, not ς)."""
        text = "".join(_clean_char(char) for char in text)
        if self.tokenize_chinese_chars:
            text = "".join(f" {char} " if _is_cjk(char) else char for char in text)
        if self.strip_accents:
            text = _strip_accents(text)
        if self.do_lower_case:
            text = "".join(char.lower() for char in text)
        return text

    def _basic_tokenize(self, text):
        """The words of ``text``: normalized, split at spaces, each punctuation mark a word."""
        return [word for chunk in self._normalize(text).split()
                for word in _split_on_punctuation(chunk)]

    def _longest_piece(self, word, start):
        """``(piece, end)`` for the longest vocabulary piece ``word[start:end]`` (as ``'##'`` +
        piece when it continues the word, i.e. ``start > 0``), or None if there is none."""
        prefix = "##" if start > 0 else ""
        longest = self._longest_token - len(prefix)  # no longer piece can be in the vocabulary
        for end in range(min(len(word), start + longest), start, -1):
            piece = prefix + word[start:end]
            if piece in self.token_to_idx:
                return piece, end
        return None

    def _wordpiece(self, word):
        """``word`` cut greedily into its longest vocabulary pieces from the left:
        ``'unaffable'`` -> ``['un', '##aff', '##able']``; ``[unk_token]`` if it cannot be cut or
        is longer than ``max_input_chars_per_word``."""
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        pieces, start = [], 0
        while start < len(word):
            match = self._longest_piece(word, start)
            if match is None:
                return [self.unk_token]
            piece, start = match
            pieces.append(piece)
        return pieces

    def tokenize(self, text):
        """The WordPiece tokens of a str, special tokens written in it kept whole."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        tokens = []
        for i, chunk in enumerate(self._special_split.split(text)):
            if i % 2:
                tokens.append(chunk)
            else:
                tokens += [piece for word in self._basic_tokenize(chunk)
                           for piece in self._wordpiece(word)]
        return tokens

    # --- tokens <-> ids ------------------------------------------------------------------------

    def convert_tokens_to_ids(self, tokens):
        """The id of a str token (``unk_token_id`` if unknown), or a list of ids for a list."""
        return _to_ids(self.token_to_idx, tokens, self.unk_token_id)

    def convert_ids_to_tokens(self, ids):
        """The token of an int id, or a list of tokens for a list, tuple or int array."""
        return _to_tokens(self.idx_to_token, ids)

    # --- model inputs ----------------------------------------------------------------------------

    def _encode(self, text, text_pair, max_len):
        """``(token_ids, segment_ids)`` of a text or a pair; with ``max_len`` not None, the text
        (keeping its [CLS] and [SEP]) or the pair (longest first) is cut to ``max_len`` ids."""
        ids_a = self.convert_tokens_to_ids(self.tokenize(text))
        ids_b = None if text_pair is None else self.convert_tokens_to_ids(self.tokenize(text_pair))
        if max_len is not None:
            if ids_b is None:
                ids_a = ids_a[:max_len - 2]
            else:
                ids_a, ids_b = _truncate_pair(ids_a, ids_b, max_len - 3)
        return get_tokens_and_segments(ids_a, ids_b, self.cls_token_id, self.sep_token_id)

    def encode(self, text, text_pair=None):
        """BERT's input for a text or a pair of texts: ``(token_ids, segment_ids)``, two lists of
        ints, [CLS] text [SEP] (text_pair [SEP]) with segments 0 (then 1), not truncated."""
        return self._encode(text, text_pair, max_len=None)

    def encode_batch(self, texts, text_pairs=None, max_len=512):
        """A padded batch of BERT inputs: ``(tokens, segments, valid_lens)``, NumPy int32 arrays of
        shapes (batch, L), (batch, L) and (batch,).

        ``texts`` (and ``text_pairs``, of the same length): lists of str. ``L`` is the length of the
        longest encoding, at most ``max_len``: a longer text is cut keeping its final [SEP], a
        longer pair is cut longest first as Hugging Face does. Padding is the [PAD] id in
        ``tokens`` and 0 in ``segments``; ``valid_lens`` counts the ids before the padding.
        """
        texts = _check_texts("texts", texts)
        if text_pairs is None:
            pairs = [None] * len(texts)
        else:
            pairs = _check_texts("text_pairs", text_pairs)
            if len(pairs) != len(texts):
                raise ValueError(f"text_pairs must hold one text per text: got {len(pairs)} "
                                 f"text_pairs for {len(texts)} texts")
        max_len = check_int("max_len", max_len, minimum=2 if text_pairs is None else 3)
        encodings = [self._encode(text, pair, max_len) for text, pair in zip(texts, pairs)]
        length = max(len(token_ids) for token_ids, _ in encodings)
        tokens = [truncate_pad(token_ids, length, self.pad_token_id) for token_ids, _ in encodings]
        segments = [truncate_pad(segment_ids, length, 0) for _, segment_ids in encodings]
        valid_lens = [len(token_ids) for token_ids, _ in encodings]
        return tuple(onp.array(a, dtype=onp.int32) for a in (tokens, segments, valid_lens))
