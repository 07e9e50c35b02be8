"""The doc-topics task: the shipped file's splits and classes, encoding with a word-level Vocab
(by hand) and with a WordPiece tokenizer, minibatches, and the bag-of-words baseline."""
import numpy as onp
import pytest

from d2lattn.data.doc_topics import (CLASSES, bow_logistic_regression, encode_sentences,
                                     load_data_doc_topics, read_doc_topics)
from d2lattn.text import Vocab, WordPieceTokenizer

RESERVED = ['[PAD]', '[MASK]', '[CLS]', '[SEP]']


def test_splits_are_disjoint_balanced_enough_and_hold_both_classes():
    train, test = read_doc_topics("train"), read_doc_topics("test")
    assert not set(train[0]) & set(test[0]) and len(set(train[0])) == len(train[0])
    assert 0.15 < len(test[0]) / (len(train[0]) + len(test[0])) < 0.25
    for labels in (train[1], test[1]):
        counts = onp.bincount(labels, minlength=len(CLASSES))
        assert len(counts) == len(CLASSES) and counts.min() > 0.4 * len(labels)
    assert all(6 <= len(s.split()) <= 40 for s in train[0] + test[0])
    with pytest.raises(ValueError, match="split must be 'train' or 'test', got 'val'"):
        read_doc_topics("val")


def test_word_level_encoding_matches_a_hand_encoding():
    vocab = Vocab([["the", "for", "statement", "."]], reserved_tokens=RESERVED)
    tokens, segments, lens = encode_sentences(vocab, ["The for statement.", "Loops!"], 4)
    cls, sep, pad = vocab["[CLS]"], vocab["[SEP]"], vocab["[PAD]"]
    expected = [[cls, vocab["the"], vocab["for"], sep], [cls, 0, 0, sep]]  # cut; '<unk>' is 0
    assert tokens.tolist() == expected and lens.tolist() == [4, 4] and not segments.any()
    tokens, _, lens = encode_sentences(vocab, ["for", "the for"], 8)
    assert tokens.tolist() == [[cls, vocab["for"], sep, pad], [cls, vocab["the"], vocab["for"],
                                                               sep]]
    assert lens.tolist() == [3, 4]


def test_wordpiece_encoding_is_the_tokenizers_and_bad_tokenizers_are_named():
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "for"])
    got = encode_sentences(tokenizer, ["the for", "for"], 3)
    for a, b in zip(got, tokenizer.encode_batch(["the for", "for"], max_len=3)):
        assert onp.array_equal(a, b)
    with pytest.raises(TypeError, match="tokenizer must be a WordPieceTokenizer or a Vocab, got"
                                        " dict"):
        encode_sentences({}, ["the"], 4)
    with pytest.raises(ValueError, match="max_len must be an int >= 3, got 2"):
        encode_sentences(tokenizer, ["the"], 2)


def test_minibatches_hold_the_test_split_in_order():
    sentences, labels = read_doc_topics("test")
    vocab = Vocab([s.lower().split() for s in sentences], reserved_tokens=RESERVED)
    loader = load_data_doc_topics(vocab, 64, "test", max_len=16)
    batches = list(loader)
    assert len(batches) == -(-len(labels) // 64) and not loader.is_train
    tokens, segments, lens, got = batches[0]
    assert tokens.shape == segments.shape == (64, 16) and lens.shape == got.shape == (64,)
    assert onp.concatenate([b[3].asnumpy() for b in batches]).tolist() == labels
    assert load_data_doc_topics(vocab, 8).is_train


def test_bag_of_words_baseline_learns_word_evidence():
    train = ["a good film", "good acting", "a bad film", "bad acting", "really good", "so bad"]
    labels = [1, 1, 0, 0, 1, 0]
    predicted = bow_logistic_regression(train, labels, ["good", "bad"])
    assert predicted.tolist() == [1, 0]
    train_predictions = bow_logistic_regression(train, labels, train)
    assert train_predictions.tolist() == labels
    with pytest.raises(ValueError, match="num_steps must be an int >= 1, got 0"):
        bow_logistic_regression(train, labels, train, num_steps=0)
