"""The doc-topics task: the shipped file's splits and classes, encoding with a word-level Vocab
(by hand) and with a WordPiece tokenizer, minibatches, and the bag-of-words baseline."""
import numpy as onp
import pytest

from d2lattn.data.doc_topics import (CLASSES, bow_features, bow_logistic_regression,
                                     bow_vocab, encode_sentences, encode_word_order,
                                     load_data_doc_topics, logistic_regression,
                                     read_doc_topics, read_word_order)
from d2lattn.text import Vocab, WordPieceTokenizer

RESERVED = ['[PAD]', '[MASK]', '[CLS]', '[SEP]']


def test_splits_are_disjoint_balanced_enough_and_hold_both_classes():
    train, val, test = (read_doc_topics(split) for split in ("train", "val", "test"))
    total = len(train[0]) + len(val[0]) + len(test[0])
    assert len(set(train[0]) | set(val[0]) | set(test[0])) == total
    for split in (val, test):
        assert 0.15 < len(split[0]) / total < 0.25
    for labels in (train[1], val[1], test[1]):
        counts = onp.bincount(labels, minlength=len(CLASSES))
        assert len(counts) == len(CLASSES) and counts.min() > 0.4 * len(labels)
    assert all(6 <= len(s.split()) <= 40 for s in train[0] + val[0] + test[0])
    with pytest.raises(ValueError, match="split must be 'train', 'val' or 'test', got 'dev'"):
        read_doc_topics("dev")


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


def test_logistic_regression_takes_the_gradient_steps_of_its_formula():
    X, y = onp.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), onp.array([0, 1, 1])
    W, b = logistic_regression(X, y, lr=0.1, num_steps=1, weight_decay=0.5)
    # from zeros every probability is 1/2: dZ = (1/2 - onehot(y)) / 3; W's decay term is 0
    G = (onp.full((3, 2), 0.5) - onp.eye(2)[y]) / 3
    assert onp.allclose(W, -0.1 * X.T @ G) and onp.allclose(b, -0.1 * G.sum(axis=0))
    W, b = logistic_regression(X, y, lr=1.0, num_steps=300, weight_decay=1e-3)
    assert ((X @ W + b).argmax(axis=1) == y).all()
    with pytest.raises(ValueError, match=r"X must be \(n, d\) and y \(n,\) with n > 0, got X "
                                         r"\(3, 2\), y \(2,\)"):
        logistic_regression(X, y[:2])


def test_bow_features_mark_the_words_a_sentence_holds():
    vocab = bow_vocab(["the for statement", "a class"])
    X = bow_features(vocab, ["The class, the class", "while"])
    assert X.shape == (2, len(vocab)) and X.sum() == 4  # the, class, "," (<unk>); <unk>
    assert X[0, vocab["the"]] == X[0, vocab["class"]] == 1 and X[1, vocab["<unk>"]] == 1


@pytest.mark.parametrize("split, size", [("train", 480), ("val", 160), ("test", 200)])
def test_word_order_twins_hold_the_same_words_with_opposite_labels(split, size):
    firsts, seconds, labels = read_word_order(split)
    real = read_doc_topics(split)[0]
    assert len(firsts) == len(seconds) == size and labels == [0, 1] * (size // 2)
    for i in range(0, size, 2):
        assert firsts[i] == seconds[i + 1] == " ".join(real[i // 2].split()[:12])
        assert seconds[i] == firsts[i + 1] != firsts[i]
        assert sorted(firsts[i].split()) == sorted(seconds[i].split())
    assert read_word_order(split) == (firsts, seconds, labels)


def test_a_bag_of_words_is_exactly_at_chance_on_word_order():
    def tagged(firsts, seconds):  # the words of a and of b as separate features
        return [f"{a} " + " ".join("b_" + w for w in b.split()) for a, b in zip(firsts, seconds)]
    firsts, seconds, labels = read_word_order("train")
    test = read_word_order("test")
    predicted = bow_logistic_regression(tagged(firsts, seconds), labels, tagged(*test[:2]))
    assert onp.mean(predicted == onp.array(test[2])) == 0.5


def test_word_order_pairs_are_encoded_with_two_segments():
    firsts, seconds, labels = read_word_order("test")
    words = sorted({w for s in firsts for w in s.lower().split()})
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)
    tokens, segments, valid_lens, got = encode_word_order(tokenizer, "test")
    assert got.tolist() == labels and got.dtype == onp.int32
    for i in range(3):
        ids, segs = tokenizer.encode(firsts[i], seconds[i])
        assert tokens[i, :valid_lens[i]].tolist() == ids
        assert segments[i, :valid_lens[i]].tolist() == segs and segs[-1] == 1
    with pytest.raises(ValueError, match="max_len must be an int >= 3, got 2"):
        encode_word_order(tokenizer, "test", max_len=2)
