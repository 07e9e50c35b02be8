"""A sentence classification task on real English text, offline: which part of Python's
documentation does a sentence come from?

Class 0, ``"objects"``: the Language Reference's data model (chapter 3) and the Library's
built-in types; class 1, ``"statements"``: the execution model and the simple and compound
statements (chapters 4, 6, 7). A label says where the sentence was written, not which words it
holds: "Exceptions are identified by class instances." is a statement sentence, "In Python,
all classes are themselves instances of other classes." an object one.

Source: the help texts ``pydoc_data.topics`` of CPython 3.11 (the Python documentation, PSF
License 2.0, compatible with this package's Apache 2.0), extracted once by
``tools/make_doc_topics.py`` into ``doc_topics.tsv`` (119 KB, shipped, so every Python version
gets the same data): the prose paragraphs of 24 + 27 topics (the sentence rules of
:mod:`d2lattn.data.pretrain`), sentences of 6-40 words, each kept once (a sentence found in
both classes is dropped). Whole paragraphs go to the test split, about 20% of each class, and
to the validation split, another 20%. Size: 590 train sentences (315 objects, 275 statements),
200 validation (107, 93), 200 test (106, 94).
"""
import csv
import pathlib
import random
import re

import numpy as onp
from mxnet import np

from .._checks import check_int, check_positive, check_special_tokens
from ..text import Vocab, WordPieceTokenizer, get_tokens_and_segments, truncate_pad
from .nmt import ArrayLoader

CLASSES = ("objects", "statements")
_FILE = pathlib.Path(__file__).with_name("doc_topics.tsv")
_WORD = re.compile(r"\w+|[^\w\s]")  # the word-level tokens of d2lattn.data.pretrain


def read_doc_topics(split="train"):
    """``(sentences, labels)``: the split's sentences (str) and their class (0 or 1);
    ``split`` is ``"train"``, ``"val"`` (validation) or ``"test"``."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    with open(_FILE, encoding="utf-8", newline="") as f:
        rows = [row for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
                if row["split"] == split]
    return [row["sentence"] for row in rows], [int(row["label"]) for row in rows]


def encode_sentences(tokenizer, sentences, max_len):
    """``(tokens, segments, valid_lens)`` int32 NumPy arrays of "[CLS] sentence [SEP]", cut to
    ``max_len``. ``tokenizer``: a :class:`~d2lattn.text.WordPieceTokenizer` (e.g. MiniLM's),
    or the word-level :class:`~d2lattn.text.Vocab` of :func:`d2lattn.data.load_data_bert`."""
    max_len = check_int("max_len", max_len, minimum=3)
    if isinstance(tokenizer, WordPieceTokenizer):
        return tokenizer.encode_batch(list(sentences), max_len=max_len)
    if not isinstance(tokenizer, Vocab):
        raise TypeError(f"tokenizer must be a WordPieceTokenizer or a Vocab, got "
                        f"{type(tokenizer).__name__}")
    check_special_tokens("tokenizer", tokenizer, ["[CLS]", "[SEP]", "[PAD]"])
    if isinstance(sentences, str) or not sentences:
        raise ValueError(f"sentences must be a non-empty list of str, got {sentences!r:.80}")
    tokens = [get_tokens_and_segments(_WORD.findall(s.lower())[:max_len - 2])[0]
              for s in sentences]
    width = max(map(len, tokens))
    ids = [truncate_pad(tokenizer[t], width, tokenizer["[PAD]"]) for t in tokens]
    return (onp.array(ids, dtype=onp.int32), onp.zeros((len(ids), width), dtype=onp.int32),
            onp.array([len(t) for t in tokens], dtype=onp.int32))


def load_data_doc_topics(tokenizer, batch_size, split="train", max_len=64):
    """Minibatches (tokens, segments, valid_lens, labels) of a split, as mxnet.np int32 arrays
    of shapes (b, L), (b, L), (b,), (b,): an ArrayLoader, for ``"train"`` shuffled with
    sentences of similar length batched together (less padding), in file order otherwise."""
    sentences, labels = read_doc_topics(split)
    arrays = encode_sentences(tokenizer, sentences, max_len) + (onp.array(labels, "int32"),)
    train = split == "train"
    return ArrayLoader(tuple(np.array(a, dtype="int32") for a in arrays),
                       check_int("batch_size", batch_size, minimum=1), train,
                       arrays[2] if train else None)


def bow_vocab(sentences):
    """The baseline's vocabulary: the lowercased words of ``sentences``, and '<unk>'."""
    return Vocab([_WORD.findall(s.lower()) for s in sentences])


def bow_features(vocab, sentences):
    """(len(sentences), len(vocab)) 0/1 NumPy array: 1 where the sentence holds the word."""
    X = onp.zeros((len(sentences), len(vocab)))
    for i, s in enumerate(sentences):
        X[i, vocab[_WORD.findall(s.lower())]] = 1
    return X


def logistic_regression(X, y, lr=0.5, num_steps=500, weight_decay=1e-3):
    """Multinomial logistic regression, softmax(x W + b), on features X (n, d) and labels y
    (n,) in [0, k): ``num_steps`` steps of gradient descent on the mean cross-entropy plus
    ``weight_decay`` ||W||^2 / 2, from zeros. Returns ``(W (d, k), b (k,))``."""
    X, y = onp.asarray(X, dtype=float), onp.asarray(y)
    if X.ndim != 2 or y.shape != (X.shape[0],) or not len(y):
        raise ValueError(f"X must be (n, d) and y (n,) with n > 0, got X {X.shape}, "
                         f"y {y.shape}")
    Y = onp.eye(y.max() + 1)[y]
    W, b = onp.zeros((X.shape[1], Y.shape[1])), onp.zeros(Y.shape[1])
    lr, weight_decay = check_positive("lr", lr), check_positive("weight_decay", weight_decay)
    for _ in range(check_int("num_steps", num_steps, minimum=1)):
        Z = X @ W + b
        P = onp.exp(Z - Z.max(axis=1, keepdims=True))
        G = (P / P.sum(axis=1, keepdims=True) - Y) / len(y)  # d(mean cross-entropy)/dZ
        W -= lr * (X.T @ G + weight_decay * W)
        b -= lr * G.sum(axis=0)
    return W, b


def bow_logistic_regression(train_sentences, train_labels, test_sentences, lr=0.5,
                            num_steps=500, weight_decay=1e-3):
    """A bag-of-words baseline: predicted labels of ``test_sentences``.

    Features: 1 if a lowercased word of the training vocabulary occurs in the sentence
    (:func:`bow_features`), classified by :func:`logistic_regression`.
    """
    vocab = bow_vocab(train_sentences)
    W, b = logistic_regression(bow_features(vocab, train_sentences), train_labels, lr,
                               num_steps, weight_decay)
    return (bow_features(vocab, test_sentences) @ W + b).argmax(axis=1)


# --- Which is the real sentence? A pair task that only word order decides ---------------------

_ORDER_SIZES = {"train": 240, "val": 80, "test": 100}  # sentences used per split


def read_word_order(split="train", max_words=12):
    """``(firsts, seconds, labels)``: sentence pairs of a task that only word order decides.

    For each of the first 240 / 80 / 100 sentences of the train / val / test split of
    :func:`read_doc_topics`, its first ``max_words`` words (split at spaces) make the real
    sentence and the same words in a random order (never the real one) a fake; two twins
    follow: (real, fake) with label 0 and (fake, real) with label 1, "which one is real?".
    The two sentences of a pair, and the twins, hold the same words: a bag of words, even one
    per sentence, gives both twins the same answer, right on exactly half of them. Python's
    ``random.Random`` with a fixed seed per split shuffles: the same data on every Python.
    """
    sentences = read_doc_topics(split)[0][:_ORDER_SIZES[split]]
    max_words = check_int("max_words", max_words, minimum=2)
    rng = random.Random(("train", "val", "test").index(split))
    firsts, seconds, labels = [], [], []
    for sentence in sentences:
        words = sentence.split()[:max_words]
        shuffled = list(words)
        while shuffled == words:
            rng.shuffle(shuffled)
        real, fake = " ".join(words), " ".join(shuffled)
        firsts += [real, fake]
        seconds += [fake, real]
        labels += [0, 1]
    return firsts, seconds, labels


def encode_word_order(tokenizer, split="train", max_len=40):
    """``(tokens, segments, valid_lens, labels)`` int32 NumPy arrays of
    :func:`read_word_order`'s pairs, as BERT's pair input [CLS] a [SEP] b [SEP] (segments
    0 and 1), for a :class:`~d2lattn.text.WordPieceTokenizer`."""
    firsts, seconds, labels = read_word_order(split)
    encoded = tokenizer.encode_batch(firsts, seconds, max_len=check_int("max_len", max_len,
                                                                        minimum=3))
    return encoded + (onp.array(labels, dtype=onp.int32),)
