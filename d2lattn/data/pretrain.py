"""Offline data for pretraining BERT: next-sentence prediction (NSP) and masked language modeling.

d2l pretrains BERT on WikiText-2, whose download is dead. This corpus is always available offline:
the prose paragraphs of the English help texts of the Python language reference, which CPython
ships in ``pydoc_data.topics.topics``. Those texts change a little from one Python version to
the next, so the paragraphs extracted from Python 3.11's are shipped with the package
(``pydoc_paragraphs.txt.gz``): every Python reads the same corpus. Code examples, grammar
productions, tables and headings are dropped.

All randomness comes from ``random.Random(seed)``: the same seed gives the same data.
"""
import gzip
import pathlib
import random
import re
import textwrap

import numpy as onp
import pydoc_data.topics
from mxnet import np

from .._checks import check_int
from ..text import Vocab, get_tokens_and_segments
from .nmt import ArrayLoader

RESERVED_TOKENS = ['[PAD]', '[MASK]', '[CLS]', '[SEP]']  # index 0 is '<unk>', BERT's [UNK]
MLM_RATE = 0.15  # the fraction of tokens selected for prediction
TEST_EVERY = 10  # every 10th paragraph (index 9, 19, ...) is held out as the test split

# The corpus file: the output of read_pydoc_paragraphs() on CPython 3.11.7, one sentence a line
# and a blank line after each paragraph, gzip-compressed; written by write_corpus_file().
# Source: the English documentation of CPython ("Python Language Reference" help topics,
# Lib/pydoc_data/topics.py), Copyright Python Software Foundation, licensed under the PSF
# License Agreement (https://docs.python.org/3/license.html), lowercased and split as below.
CORPUS_FILE = pathlib.Path(__file__).with_name("pydoc_paragraphs.txt.gz")

# A block of text is not prose if a line is indented (code, lists, notes) or is a table row or a
# heading underline, or if it holds a ">>>" prompt or a grammar production "::=". A block
# indented as a whole (the description of a method, a note) is judged without its indentation.
_NOT_PROSE = re.compile(r"^(\s|[+|]|[*=\-~^]{3,})|>>>|::=", re.MULTILINE)
# A sentence ends at . ! or ? followed by a capital letter or a quote, but not after e.g. or i.e.
_SENTENCE_BREAK = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+(?=[A-Z\"“])")
_FOOTNOTE = re.compile(r"\s*\[\d+\]")
_TOKEN = re.compile(r"\w+|[^\w\s]")  # words, and each punctuation mark on its own


def read_pydoc_paragraphs():
    """The prose paragraphs of this Python's ``pydoc_data.topics``: a list of paragraphs, each a
    list of >= 2 lowercased sentences (str). :func:`load_paragraphs` reads the shipped copy.

    Topics come in alphabetical order and paragraphs in text order. A paragraph is a block
    between blank lines; footnote marks such as ``[3]`` are removed.
    """
    topics = pydoc_data.topics.topics
    paragraphs = []
    for name in sorted(topics):
        for block in re.split(r"\n\s*\n", topics[name].strip("\n")):
            block = textwrap.dedent(block)
            if _NOT_PROSE.search(block):
                continue
            text = _FOOTNOTE.sub("", " ".join(block.split()))
            sentences = [s.lower() for s in _SENTENCE_BREAK.split(text)]
            if len(sentences) >= 2:
                paragraphs.append(sentences)
    return paragraphs


def write_corpus_file(path=CORPUS_FILE):
    """Write :func:`read_pydoc_paragraphs` to ``path`` in the format of ``CORPUS_FILE``
    (run on Python 3.11 to regenerate the shipped file)."""
    text = "".join("".join(s + "\n" for s in p) + "\n" for p in read_pydoc_paragraphs())
    pathlib.Path(path).write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))


def load_paragraphs():
    """The shipped corpus: the paragraphs (lists of sentences) :func:`read_pydoc_paragraphs`
    gives on Python 3.11, the same on every Python version."""
    text = gzip.decompress(CORPUS_FILE.read_bytes()).decode("utf-8")
    return [p.split("\n") for p in text.split("\n\n") if p]


def split_paragraphs(paragraphs):
    """``(train, test)``: every ``TEST_EVERY``-th paragraph of a list (index 9, 19, ...) is held
    out in ``test``, the others are in ``train``, both in their order."""
    test = paragraphs[TEST_EVERY - 1::TEST_EVERY]
    train = [p for i, p in enumerate(paragraphs) if i % TEST_EVERY != TEST_EVERY - 1]
    return train, test


def tokenize(sentence):
    """Word-level tokens of a str: runs of letters, digits and ``_``, and single punctuation marks.

    ``'[cls]'`` gives ``['[', 'cls', ']']``, so corpus tokens never collide with the reserved ones.
    """
    return _TOKEN.findall(sentence)


# --- next-sentence prediction ----------------------------------------------------------------

def _get_next_sentence(sentence, next_sentence, paragraphs, rng):
    """``(sentence, next_sentence, True)`` with probability 1/2, otherwise ``(sentence, s, False)``
    with ``s`` a random sentence of a random paragraph. ``rng``: a ``random.Random``."""
    if rng.random() < 0.5:
        return sentence, next_sentence, True
    return sentence, rng.choice(rng.choice(paragraphs)), False


def _get_nsp_data_from_paragraph(paragraph, paragraphs, max_len, rng):
    """NSP examples ``(tokens, segments, is_next)`` from each pair of consecutive sentences.

    ``paragraph``: a list of token lists; ``paragraphs``: all of them, to draw random sentences
    from. A pair longer than ``max_len`` with its [CLS] and two [SEP] is skipped.
    """
    nsp_data = []
    for sentence, next_sentence in zip(paragraph, paragraph[1:]):
        tokens_a, tokens_b, is_next = _get_next_sentence(sentence, next_sentence, paragraphs, rng)
        if len(tokens_a) + len(tokens_b) + 3 > max_len:
            continue
        tokens, segments = get_tokens_and_segments(tokens_a, tokens_b)
        nsp_data.append((tokens, segments, is_next))
    return nsp_data


# --- masked language modeling ----------------------------------------------------------------

def _check_vocab(vocab):
    """Raise unless ``vocab`` holds ``'<unk>'``, the reserved tokens, then >= 1 normal token."""
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a Vocab, got {type(vocab).__name__}")
    head = ['<unk>', *RESERVED_TOKENS]
    if vocab.idx_to_token[:len(head)] != head or len(vocab) <= len(head):
        raise ValueError(f"vocab must start with {head} (reserved_tokens={RESERVED_TOKENS}) and "
                         f"hold at least one other token, got {vocab.idx_to_token[:6]}")


def _replace_mlm_tokens(tokens, candidate_pred_positions, num_mlm_preds, vocab, rng):
    """Select ``num_mlm_preds`` of the candidate positions at random and corrupt them as
    BERT does.

    Each selected token becomes [MASK] with probability 0.8, a random normal token of
    ``vocab`` (never ``'<unk>'`` nor a reserved token) with probability 0.1, and stays with
    probability 0.1. Returns ``(mlm_input_tokens, pred_positions_and_labels)``: a corrupted
    copy of ``tokens`` and ``(position, original token)`` pairs in position order.
    """
    _check_vocab(vocab)
    first_normal = 1 + len(RESERVED_TOKENS)
    mlm_input_tokens = list(tokens)
    pred_positions_and_labels = []
    for position in sorted(rng.sample(candidate_pred_positions, num_mlm_preds)):
        draw = rng.random()
        if draw < 0.8:
            mlm_input_tokens[position] = '[MASK]'
        elif draw < 0.9:
            random_id = rng.randrange(first_normal, len(vocab))
            mlm_input_tokens[position] = vocab.idx_to_token[random_id]
        pred_positions_and_labels.append((position, tokens[position]))
    return mlm_input_tokens, pred_positions_and_labels


def _get_mlm_data_from_tokens(tokens, vocab, rng):
    """MLM data of one BERT input: ``(token_ids, pred_positions, mlm_label_ids)``, lists of
    ints.

    round(15%) of the tokens other than the reserved ones ([CLS], [SEP]), at least one, are
    selected for prediction; ``token_ids`` is the corrupted input, ``mlm_label_ids`` the
    original tokens at ``pred_positions``.
    """
    candidates = [i for i, token in enumerate(tokens) if token not in RESERVED_TOKENS]
    num_mlm_preds = max(1, round(len(candidates) * MLM_RATE))
    mlm_input_tokens, pred_positions_and_labels = _replace_mlm_tokens(
        tokens, candidates, num_mlm_preds, vocab, rng)
    pred_positions = [position for position, _ in pred_positions_and_labels]
    mlm_labels = [label for _, label in pred_positions_and_labels]
    return vocab[mlm_input_tokens], pred_positions, vocab[mlm_labels]


def _pad_bert_inputs(examples, max_len, vocab):
    """Pad ``(token_ids, pred_positions, mlm_label_ids, segments, is_next)`` examples into arrays.

    Returns mxnet.np arrays for n examples and P = round(0.15 max_len) prediction slots:
    tokens (n, max_len) int32 padded with [PAD], segments (n, max_len) int32 padded with 0,
    valid_lens (n,) int32, pred_positions (n, P) int32, mlm_weights (n, P) float32 (1 for a real
    prediction, 0 for a padding slot), mlm_labels (n, P) int32, nsp_labels (n,) int32 (1 = is next).
    """
    _check_vocab(vocab)
    num_slots = round(max_len * MLM_RATE)
    n = len(examples)
    tokens = onp.full((n, max_len), vocab['[PAD]'], dtype=onp.int32)
    segments = onp.zeros((n, max_len), dtype=onp.int32)
    valid_lens = onp.zeros(n, dtype=onp.int32)
    pred_positions = onp.zeros((n, num_slots), dtype=onp.int32)
    mlm_weights = onp.zeros((n, num_slots), dtype=onp.float32)
    mlm_labels = onp.zeros((n, num_slots), dtype=onp.int32)
    nsp_labels = onp.zeros(n, dtype=onp.int32)
    for i, (token_ids, positions, label_ids, segment_ids, is_next) in enumerate(examples):
        length, num_preds = len(token_ids), len(positions)
        if length > max_len or num_preds > num_slots:
            raise ValueError(f"examples[{i}] has {length} tokens and {num_preds} predictions; at "
                             f"most max_len={max_len} and round(0.15 max_len)={num_slots} fit")
        tokens[i, :length] = token_ids
        segments[i, :length] = segment_ids
        valid_lens[i] = length
        pred_positions[i, :num_preds] = positions
        mlm_weights[i, :num_preds] = 1
        mlm_labels[i, :num_preds] = label_ids
        nsp_labels[i] = is_next
    return tuple(np.array(a, dtype=a.dtype) for a in (
        tokens, segments, valid_lens, pred_positions, mlm_weights, mlm_labels, nsp_labels))


def unigram_distribution(vocab):
    """The unigram distribution of the text ``vocab`` was built from: (len(vocab),) float64
    probabilities, token count / number of tokens, where the tokens not in ``vocab`` count for
    ``'<unk>'`` and the reserved tokens get 0. Predicting it at every masked position is the
    baseline of the MLM: its cross-entropy on the training text is the unigram entropy.
    """
    _check_vocab(vocab)
    counts = onp.zeros(len(vocab))
    for token, freq in vocab.token_freqs:
        counts[vocab[token]] += freq
    return counts / counts.sum()


def _check_split(split):
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")


def _tokenized_splits():
    """``{"train": paragraphs, "test": paragraphs}`` of the shipped corpus, each paragraph a
    list of token lists."""
    paragraphs = [[tokenize(sentence) for sentence in paragraph]
                  for paragraph in load_paragraphs()]
    return dict(zip(("train", "test"), split_paragraphs(paragraphs)))


def sentence_stream(vocab, split="train"):
    """The sentences of a split of :func:`load_data_bert`'s corpus as one list of token ids,
    ``'[SEP]'`` before every sentence and after the last one, for counting token pairs: a pair
    ``('[SEP]', w)`` is a sentence that starts with ``w``, ``(w, '[SEP]')`` one that ends with
    ``w``. Words not in ``vocab`` become ``'<unk>'``."""
    _check_vocab(vocab)
    _check_split(split)
    sep = vocab['[SEP]']
    return [sep] + [i for paragraph in _tokenized_splits()[split] for sentence in paragraph
                    for i in vocab[sentence] + [sep]]


def neighbour_probs(bigram, before, after=None, unknown=(), exclude=()):
    """Probabilities (n, V) of the hidden tokens at n positions from their neighbours
    alone, by a bigram table ``bigram`` (V, V), row v the distribution P(w | v) of the
    token after v.

    ``before`` (n,): the token ids left of the positions; P(w | v) = ``bigram[v, w]``.
    ``after`` (n,), optional: the ids on the right, which a Markov chain of order 1 makes
    P(w | v, x) = P(w | v) P(x | w) / sum over w' of P(w' | v) P(x | w'). A right neighbour
    in ``unknown`` (such as '[MASK]') tells nothing and is left out. The ids in ``exclude``
    (tokens that are never the answer, such as the reserved ones) get probability 0 and
    each row is renormalised.
    """
    bigram = onp.asarray(bigram, dtype=float)
    if bigram.ndim != 2 or bigram.shape[0] != bigram.shape[1]:
        raise ValueError(f"bigram must be a square (V, V) table, got shape {bigram.shape}")
    if not (bigram >= 0).all():
        raise ValueError(f"bigram must hold probabilities >= 0, got {bigram.min()}")
    before, unknown, exclude = (
        _check_ids(name, ids, len(bigram)) for name, ids in
        (("before", before), ("unknown", unknown), ("exclude", exclude)))
    probs = bigram[before]
    if after is not None:
        after = _check_ids("after", after, len(bigram))
        if after.shape != before.shape:
            raise ValueError(f"after must have the shape of before {before.shape}, got "
                             f"{after.shape}")
        likelihood = bigram[:, after].T  # row i: P(after[i] | w) for every w
        probs = probs * onp.where(onp.isin(after, unknown)[:, None], 1.0, likelihood)
    probs[:, exclude] = 0
    total = probs.sum(axis=1, keepdims=True)
    if (total == 0).any():
        raise ValueError(f"no token is possible at positions "
                         f"{onp.flatnonzero(total == 0)[:5].tolist()}: every token left "
                         "has probability 0 between these neighbours")
    return probs / total


def token_kinds(vocab, ids, num_frequent=50):
    """The kind of each token id in ``ids`` (n,) (a list, NumPy or MXNet array):
    ``{kind: (n,) bool}`` for the kinds "punctuation" (no letter, digit or ``_``), the
    ``num_frequent`` "most frequent words" of ``vocab``'s training text (the first
    ``num_frequent`` words by count, punctuation not counted) and "other words" ('<unk>', a
    word too rare for the vocabulary, included). Reserved tokens belong to no kind."""
    _check_vocab(vocab)
    ids = _check_ids("ids", ids, len(vocab))
    num_frequent = check_int("num_frequent", num_frequent, minimum=0)
    normal = onp.arange(len(vocab)) > len(RESERVED_TOKENS)  # ids after the reserved ones
    is_word = normal & onp.array([any(c.isalnum() or c == "_" for c in token)
                                  for token in vocab.idx_to_token], dtype=bool)
    word_rank = onp.cumsum(is_word) - 1  # ids after the reserved ones go by count
    frequent = is_word & (word_rank < num_frequent)
    return {"punctuation": (normal & ~is_word)[ids],
            f"{num_frequent} most frequent words": frequent[ids],
            "other words": (is_word & ~frequent)[ids] | (ids == vocab.unk)}


def _check_ids(name, ids, size):
    """``ids`` (a list, NumPy or MXNet array) as a 1-D int64 NumPy array of ids in [0, size)."""
    ids = ids.asnumpy() if isinstance(ids, np.ndarray) else onp.asarray(ids)
    if ids.size == 0:
        return onp.zeros(0, dtype=onp.int64)
    if ids.ndim != 1 or not onp.issubdtype(ids.dtype, onp.integer) or ids.min() < 0 \
            or ids.max() >= size:
        raise ValueError(f"{name} must be a 1-D array of token ids in [0, {size}), got "
                         f"{ids.ravel()[:5].tolist()} of shape {ids.shape}")
    return ids.astype(onp.int64)


def load_data_bert(batch_size, max_len=64, min_freq=3, seed=0, split="train", dupe_factor=1):
    """BERT pretraining minibatches from the Python reference's prose: ``(data_iter, vocab)``.

    ``split``: ``"train"``, or ``"test"`` for the held-out paragraphs of
    :func:`split_paragraphs` (:func:`load_paragraphs`). ``data_iter`` is an
    :class:`~d2lattn.data.nmt.ArrayLoader` (shuffled each epoch) whose batches are d2l's seven
    arrays (b = batch, P = round(0.15 max_len)): tokens (b, max_len), segments (b, max_len),
    valid_lens (b,), pred_positions (b, P), mlm_weights (b, P) float32, mlm_labels (b, P),
    nsp_labels (b,); all int32 but mlm_weights. ``vocab`` holds the words of the training
    paragraphs seen at least ``min_freq`` times, after '<unk>' and ``RESERVED_TOKENS`` (the
    same for both splits). Sentence pairs (random second sentences from the same split) and
    masks are drawn from ``random.Random(seed)``, ``dupe_factor`` times over (BERT's
    ``dupe_factor``: the data holds each consecutive pair about ``dupe_factor / 2`` times,
    each time with other masks).
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    max_len = check_int("max_len", max_len, minimum=5)  # [CLS] a [SEP] b [SEP]
    min_freq = check_int("min_freq", min_freq)
    rng = random.Random(check_int("seed", seed))
    dupe_factor = check_int("dupe_factor", dupe_factor, minimum=1)
    _check_split(split)
    splits = _tokenized_splits()
    vocab = Vocab([sentence for paragraph in splits["train"] for sentence in paragraph],
                  min_freq, RESERVED_TOKENS)
    if len(vocab) == 1 + len(RESERVED_TOKENS):
        raise ValueError(f"min_freq={min_freq} leaves no word of the corpus in the vocabulary")
    paragraphs = splits[split]
    nsp_data = [example for _ in range(dupe_factor) for paragraph in paragraphs
                for example in _get_nsp_data_from_paragraph(paragraph, paragraphs, max_len, rng)]
    if not nsp_data:
        raise ValueError(f"max_len={max_len} is too small: no sentence pair of the corpus fits "
                         "in it with [CLS] and two [SEP]")
    examples = [_get_mlm_data_from_tokens(tokens, vocab, rng) + (segments, is_next)
                for tokens, segments, is_next in nsp_data]
    return ArrayLoader(_pad_bert_inputs(examples, max_len, vocab), batch_size), vocab
