import gzip
import hashlib
import json
import random
import sys

import numpy as onp
import pydoc_data.topics
import pytest
from mxnet import np

from d2lattn.data import pretrain
from d2lattn.data.pretrain import (RESERVED_TOKENS, _get_mlm_data_from_tokens,
                                   _get_next_sentence, _get_nsp_data_from_paragraph,
                                   _pad_bert_inputs, _replace_mlm_tokens, tokenize,
                                   load_data_bert, load_paragraphs, neighbour_probs,
                                   read_pydoc_paragraphs, sentence_stream, split_paragraphs,
                                   token_kinds, unigram_distribution, write_corpus_file)
from d2lattn.text import Vocab

UNK, PAD, MASK, CLS, SEP = range(5)  # indices of '<unk>' and RESERVED_TOKENS
DIGEST = "3f3f1fec449cb14f"  # sha256 of the shipped paragraphs as JSON, first 16 hex digits


def abc_vocab():
    """['<unk>', '[PAD]', '[MASK]', '[CLS]', '[SEP]', 'a', 'b', 'c']: a = 5, b = 6, c = 7."""
    return Vocab([['a', 'a', 'a', 'b', 'b', 'c']], reserved_tokens=RESERVED_TOKENS)


class AlwaysNext:
    """A stand-in for random.Random whose random() is 0: _get_next_sentence keeps every pair."""

    def random(self):
        return 0.0


@pytest.fixture(scope="module")
def corpus():
    """The tokenized paragraphs load_data_bert works on."""
    return [[tokenize(s) for s in p] for p in load_paragraphs()]


@pytest.fixture(scope="module")
def bert_data():
    """(numpy arrays of the training split, vocab) for batch_size 32, max_len 64, seed 0."""
    data_iter, vocab = load_data_bert(32)
    return [a.asnumpy() for a in data_iter.arrays], vocab


def binomial_tol(p, n):
    """4 standard deviations of a proportion of n draws with probability p: a correct
    implementation fails with probability ~6e-5, an 80/10/10 swapped for 80/20/0 always does."""
    return 4 * (p * (1 - p) / n) ** 0.5


def unmasked_rows(arrays):
    """The token rows of load_data_bert's arrays (numpy) with the labels put back at the masks."""
    tokens, _, _, positions, weights, labels, _ = arrays
    tokens = tokens.copy()
    tokens[onp.nonzero(weights)[0], positions[weights == 1]] = labels[weights == 1]
    return tokens


# --- read_pydoc_paragraphs --------------------------------------------------------------------

FAKE_TOPICS = {
    "b-topic": ("Heading\n*******\n\n"
                "First sentence here. Second one, e.g. \"this\" stays. Third?\n"
                "Yes \"quoted\" starts [2] a sentence!\n\n"
                "A single sentence is no paragraph.\n\n"
                "Code follows. It is dropped:\n\n"
                "   if x:\n       pass\n\n"
                "Prompt block. It has >>> in it.\n\n"
                "Grammar block. stmt ::= expr\n\n"
                "+----+\n| table. Row |\n+----+\n\n"
                "Sub heading. Really\n===================\n\n"
                "   Indented prose. It is kept,\n   without its indent.\n\n"
                "   Indented code. It is dropped:\n      x = 1\n"),
    "a-topic": "Alpha comes first. Because topics are sorted.\n\n\n"
               "List item. Indented\n   continuation is dropped.\n",
}


def test_read_pydoc_paragraphs_by_hand(monkeypatch):
    monkeypatch.setattr(pydoc_data.topics, "topics", FAKE_TOPICS)
    assert read_pydoc_paragraphs() == [
        ["alpha comes first.", "because topics are sorted."],
        ["first sentence here.", "second one, e.g. \"this\" stays.", "third?",
         "yes \"quoted\" starts a sentence!"],
        ["code follows.", "it is dropped:"],
        ["indented prose.", "it is kept, without its indent."],
    ]


def test_read_pydoc_paragraphs_on_the_real_corpus():
    paragraphs = read_pydoc_paragraphs()
    assert len(paragraphs) > 600 and paragraphs == read_pydoc_paragraphs()  # deterministic
    assert all(len(p) >= 2 and all(isinstance(s, str) and s == s.lower() and s.strip() == s
                                   and s and "\n" not in s for s in p) for p in paragraphs)
    sentences = [s for p in paragraphs for s in p]
    assert not any(">>>" in s or "::=" in s or "+---" in s or "***" in s for s in sentences)
    # The assert topic's last paragraph, and not its code "if __debug__: ...".
    assert ['assignments to "__debug__" are illegal.',
            "the value for the built-in variable is determined when the interpreter starts."] \
        in paragraphs
    assert not any(s.startswith("if __debug__") for s in sentences)


# --- the shipped corpus -----------------------------------------------------------------------

@pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                    reason="the shipped corpus is extracted from Python 3.11's pydoc_data")
def test_shipped_corpus_is_what_read_pydoc_paragraphs_gives_on_python_3_11(tmp_path):
    assert load_paragraphs() == read_pydoc_paragraphs()
    write_corpus_file(tmp_path / "again.txt.gz")
    assert gzip.decompress((tmp_path / "again.txt.gz").read_bytes()) \
        == gzip.decompress(pretrain.CORPUS_FILE.read_bytes())


def test_shipped_corpus_loads_the_same_on_every_python():
    paragraphs = load_paragraphs()
    digest = hashlib.sha256(json.dumps(paragraphs).encode()).hexdigest()
    # Pinned when the file was made (Python 3.11.7): a different Python must read the same.
    assert (len(paragraphs), sum(map(len, paragraphs)), digest[:16]) == (759, 2125, DIGEST)


def test_write_corpus_file_round_trips_through_load_paragraphs(tmp_path, monkeypatch):
    monkeypatch.setattr(pydoc_data.topics, "topics", FAKE_TOPICS)
    monkeypatch.setattr(pretrain, "CORPUS_FILE", tmp_path / "fake.txt.gz")
    write_corpus_file(pretrain.CORPUS_FILE)
    assert gzip.decompress(pretrain.CORPUS_FILE.read_bytes()).decode().startswith(
        "alpha comes first.\nbecause topics are sorted.\n\nfirst sentence here.\n")
    assert load_paragraphs() == read_pydoc_paragraphs()


def test_tokenize_splits_words_and_single_punctuation():
    assert tokenize('the "in" operator, e.g. x[i]...') == [
        'the', '"', 'in', '"', 'operator', ',', 'e', '.', 'g', '.', 'x', '[', 'i', ']',
        '.', '.', '.']
    assert tokenize("[cls] __init__ 3.5") == ['[', 'cls', ']', '__init__', '3', '.', '5']


# --- next-sentence prediction -----------------------------------------------------------------

def test_get_next_sentence_is_half_true_and_draws_random_paragraphs():
    rng, n = random.Random(0), 20000
    paragraphs = [[["p"]], [["q1"], ["q2"]]]
    draws = [_get_next_sentence(["s"], ["next"], paragraphs, rng) for _ in range(n)]
    assert all(a == ["s"] and (b == ["next"]) == is_next for a, b, is_next in draws)
    true_rate = sum(is_next for *_, is_next in draws) / n
    assert abs(true_rate - 0.5) < binomial_tol(0.5, n)
    # A random paragraph, then a random sentence of it: p 1/2, q1 1/4, q2 1/4.
    others = [b[0] for _, b, is_next in draws if not is_next]
    for sentence, p in [("p", 0.5), ("q1", 0.25), ("q2", 0.25)]:
        assert abs(others.count(sentence) / len(others) - p) < binomial_tol(p, len(others))


def test_get_nsp_data_from_paragraph_by_hand():
    paragraph = [["a"] * 2, ["b"] * 3, ["c"] * 4]
    # [CLS] a a [SEP] b b b [SEP] is 8 tokens and fits; b + c with 3 specials is 10 and not.
    assert _get_nsp_data_from_paragraph(paragraph, [paragraph], 8, AlwaysNext()) == [
        (["[CLS]", "a", "a", "[SEP]", "b", "b", "b", "[SEP]"], [0] * 4 + [1] * 4, True)]
    assert len(_get_nsp_data_from_paragraph(paragraph, [paragraph], 10, AlwaysNext())) == 2


def test_nsp_pairs_of_the_corpus_are_consecutive_when_labelled_next(corpus):
    rng, max_len = random.Random(0), 64
    sentences = {tuple(s) for p in corpus for s in p}
    num_next = num_pairs = 0
    for paragraph in corpus:
        data = _get_nsp_data_from_paragraph(paragraph, corpus, max_len, rng)
        firsts = [tokens[1:tokens.index("[SEP]")] for tokens, _, _ in data]
        assert all(f in paragraph[:-1] for f in firsts)
        for tokens, segments, is_next in data:
            sep = tokens.index("[SEP]")
            first, second = tokens[1:sep], tokens[sep + 1:-1]
            assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and len(tokens) <= max_len
            assert segments == [0] * (sep + 1) + [1] * (len(tokens) - sep - 1)
            if is_next:
                assert paragraph[paragraph.index(first) + 1] == second
            assert tuple(second) in sentences
            num_next += is_next
        num_pairs += len(data)
    assert num_pairs > 600
    assert abs(num_next / num_pairs - 0.5) < binomial_tol(0.5, num_pairs)


# --- masked language modeling -----------------------------------------------------------------

def test_replace_mlm_tokens_is_80_10_10_with_normal_random_tokens():
    # 'x' is not in the vocabulary, so each selected token is either kept ('x'), masked, or
    # replaced by a random token that must be a normal one: a, b or c.
    n, k = 30000, 20000
    tokens, candidates = ["x"] * n, list(range(n))
    mlm_input, positions_labels = _replace_mlm_tokens(tokens, candidates, k, abc_vocab(),
                                                      random.Random(0))
    assert candidates == list(range(n))  # not shuffled in place (d2l's did)
    positions = [p for p, _ in positions_labels]
    assert len(set(positions)) == k and positions == sorted(positions)
    assert all(label == "x" for _, label in positions_labels)
    chosen = [mlm_input[p] for p in positions]
    assert set(chosen) == {"[MASK]", "x", "a", "b", "c"}
    for token_set, p in [({"[MASK]"}, 0.8), ({"x"}, 0.1), ({"a", "b", "c"}, 0.1), ({"a"}, 0.1 / 3),
                         ({"b"}, 0.1 / 3), ({"c"}, 0.1 / 3)]:
        rate = sum(t in token_set for t in chosen) / k
        assert abs(rate - p) < binomial_tol(p, k), (token_set, rate)
    assert sum(t != "x" for t in mlm_input) == sum(t != "x" for t in chosen)  # others untouched


@pytest.mark.parametrize("num_words, num_preds", [(1, 1), (3, 1), (4, 1), (10, 2), (20, 3),
                                                  (40, 6), (59, 9)])
def test_get_mlm_data_selects_rounded_15_percent_of_the_words(num_words, num_preds):
    words = ["a", "b", "c"] * 20
    tokens = ["[CLS]"] + words[:num_words] + ["[SEP]"]
    token_ids, positions, labels = _get_mlm_data_from_tokens(tokens, abc_vocab(), random.Random(1))
    assert len(positions) == len(labels) == num_preds
    assert all(1 <= p <= num_words for p in positions)
    assert labels == abc_vocab()[[tokens[p] for p in positions]]
    assert token_ids[0] == CLS and token_ids[-1] == SEP


def test_get_mlm_data_selects_each_word_with_probability_15_percent():
    # [CLS] 20 words [SEP] 20 words [SEP]: 40 candidates, 6 selected each time.
    tokens = ["[CLS]"] + ["a"] * 20 + ["[SEP]"] + ["b"] * 20 + ["[SEP]"]
    vocab, rng, n = abc_vocab(), random.Random(2), 3000
    counts = onp.zeros(len(tokens))
    for _ in range(n):
        token_ids, positions, labels = _get_mlm_data_from_tokens(tokens, vocab, rng)
        assert len(positions) == 6 and labels == vocab[[tokens[p] for p in positions]]
        unselected = [i for i in range(len(tokens)) if i not in positions]
        assert [token_ids[i] for i in unselected] == vocab[[tokens[i] for i in unselected]]
        counts[positions] += 1
    assert counts[[0, 21, 42]].sum() == 0  # [CLS] and [SEP] are never selected
    rates = onp.delete(counts, [0, 21, 42]) / n
    assert onp.abs(rates - 0.15).max() < binomial_tol(0.15, n)


def test_get_mlm_data_labels_are_the_original_tokens_of_a_long_sequence():
    words = [f"w{i}" for i in range(300)]
    vocab = Vocab([words], reserved_tokens=RESERVED_TOKENS)
    sample = onp.random.default_rng(0).choice(words, 10000).tolist()
    tokens = ["[CLS]"] + sample[:5000] + ["[SEP]"] + sample[5000:] + ["[SEP]"]
    token_ids, positions, labels = _get_mlm_data_from_tokens(tokens, vocab, random.Random(3))
    assert len(positions) == 1500  # round(0.15 * 10000)
    assert labels == vocab[[tokens[p] for p in positions]]
    chosen = onp.array(token_ids)[positions]
    assert chosen.min() >= MASK and not onp.isin(chosen, [PAD, CLS, SEP]).any()
    mask_rate = (chosen == MASK).mean()
    assert abs(mask_rate - 0.8) < binomial_tol(0.8, 1500)
    # A random token equals the original with probability 1/300: 'kept' is 10% + 0.03%.
    assert abs((chosen == onp.array(labels)).mean() - 0.1) < binomial_tol(0.1, 1500)


def test_replace_mlm_tokens_rejects_a_vocab_without_the_reserved_tokens():
    with pytest.raises(ValueError, match=r"vocab must start with \['<unk>', '\[PAD\]'"):
        _replace_mlm_tokens(["a"], [0], 1, Vocab([["a"]]), random.Random(0))
    with pytest.raises(ValueError, match="hold at least one other token"):
        _replace_mlm_tokens(["a"], [0], 1, Vocab(reserved_tokens=RESERVED_TOKENS),
                            random.Random(0))
    with pytest.raises(TypeError, match="vocab must be a Vocab, got dict"):
        _replace_mlm_tokens(["a"], [0], 1, {"a": 5}, random.Random(0))


# --- _pad_bert_inputs -------------------------------------------------------------------------

PAD_EXAMPLES = [  # (token_ids, pred_positions, mlm_label_ids, segments, is_next)
    ([CLS, 5, MASK, SEP, 6, SEP], [2], [7], [0, 0, 0, 0, 1, 1], True),
    ([CLS, 7, 6, 5, SEP, MASK, 5, MASK, 6, SEP], [2, 5, 7], [5, 5, 7], [0] * 5 + [1] * 5, False),
]


def test_pad_bert_inputs_by_hand():
    arrays = _pad_bert_inputs(PAD_EXAMPLES, 20, abc_vocab())  # 3 prediction slots
    tokens, segments, valid_lens, positions, weights, labels, nsp = (a.asnumpy() for a in arrays)
    onp.testing.assert_array_equal(tokens, [
        [CLS, 5, MASK, SEP, 6, SEP] + [PAD] * 14,
        [CLS, 7, 6, 5, SEP, MASK, 5, MASK, 6, SEP] + [PAD] * 10])
    onp.testing.assert_array_equal(segments, [[0, 0, 0, 0, 1, 1] + [0] * 14,
                                              [0] * 5 + [1] * 5 + [0] * 10])
    onp.testing.assert_array_equal(valid_lens, [6, 10])
    onp.testing.assert_array_equal(positions, [[2, 0, 0], [2, 5, 7]])
    onp.testing.assert_array_equal(weights, [[1, 0, 0], [1, 1, 1]])
    onp.testing.assert_array_equal(labels, [[7, 0, 0], [5, 5, 7]])
    onp.testing.assert_array_equal(nsp, [1, 0])
    assert [a.dtype for a in arrays] == [onp.int32] * 4 + [onp.float32] + [onp.int32] * 2


def test_pad_bert_inputs_follows_the_default_context(cpu1):
    with cpu1:
        arrays = _pad_bert_inputs(PAD_EXAMPLES, 24, abc_vocab())
    assert all(a.ctx == cpu1 for a in arrays)
    assert arrays[0].shape == (2, 24) and arrays[3].shape == (2, 4)  # round(3.6) = 4 slots


@pytest.mark.parametrize("examples, max_len, bad", [
    (PAD_EXAMPLES, 9, 1),  # 10 tokens > 9
    ([([CLS, 5, 6, 7, 5, SEP], [1, 2, 3, 4], [5, 6, 7, 5], [0] * 6, True)], 10, 0),  # 4 > 2 slots
])
def test_pad_bert_inputs_rejects_examples_that_do_not_fit(examples, max_len, bad):
    with pytest.raises(ValueError, match=rf"examples\[{bad}\] has \d+ tokens and \d predictions; "):
        _pad_bert_inputs(examples, max_len, abc_vocab())


# --- load_data_bert ---------------------------------------------------------------------------

def test_load_data_bert_batch_shapes_and_dtypes():
    data_iter, vocab = load_data_bert(32, max_len=40)
    batch = next(iter(data_iter))
    assert [a.shape for a in batch] == [(32, 40), (32, 40), (32,), (32, 6), (32, 6), (32, 6),
                                        (32,)]
    assert [a.dtype for a in batch] == [onp.int32] * 4 + [onp.float32] + [onp.int32] * 2
    assert vocab.idx_to_token[:5] == ["<unk>", *RESERVED_TOKENS]


def test_load_data_bert_rows_are_well_formed(bert_data):
    (tokens, segments, valid_lens, positions, weights, labels, nsp), vocab = bert_data
    n, max_len = tokens.shape
    assert n > 600 and positions.shape == (n, 10)  # round(0.15 * 64)
    for i in range(n):
        length, row = valid_lens[i], tokens[i]
        assert length == (row != PAD).sum() and (row[length:] == PAD).all()
        seps = onp.flatnonzero(row == SEP)
        assert row[0] == CLS and len(seps) == 2 and seps[1] == length - 1
        steps = onp.arange(max_len)
        onp.testing.assert_array_equal(segments[i], (steps > seps[0]) & (steps < length))
        num_preds = max(1, round(0.15 * (length - 3)))
        onp.testing.assert_array_equal(weights[i], onp.arange(10) < num_preds)
        assert (positions[i, num_preds:] == 0).all() and (labels[i, num_preds:] == 0).all()
        real = positions[i, :num_preds]
        assert (onp.diff(real) > 0).all() and not onp.isin(real, [0, *seps]).any()
        assert not onp.isin(labels[i, :num_preds], [PAD, MASK, CLS, SEP]).any()
        assert not onp.isin(row[real], [PAD, CLS, SEP]).any()
    assert set(nsp.tolist()) == {0, 1}
    assert abs(nsp.mean() - 0.5) < binomial_tol(0.5, n)
    chosen = tokens[onp.arange(n)[:, None], positions][weights == 1]
    assert abs((chosen == MASK).mean() - 0.8) < binomial_tol(0.8, chosen.size)


def test_load_data_bert_next_pairs_are_consecutive_sentences(bert_data, corpus):
    (tokens, _, valid_lens, positions, weights, labels, nsp), vocab = bert_data
    consecutive = {(tuple(vocab[a]), tuple(vocab[b])) for p in corpus for a, b in zip(p, p[1:])}
    sentences = {tuple(vocab[s]) for p in corpus for s in p}
    original = tokens.copy()  # undo the masking: put the labels back
    rows = onp.repeat(onp.arange(len(tokens)), weights.shape[1]).reshape(weights.shape)
    original[rows[weights == 1], positions[weights == 1]] = labels[weights == 1]
    for row, length, is_next in zip(original, valid_lens, nsp):
        sep = int(onp.flatnonzero(row == SEP)[0])
        pair = (tuple(row[1:sep].tolist()), tuple(row[sep + 1:length - 1].tolist()))
        assert (pair in consecutive) if is_next else (pair[1] in sentences)


def test_load_data_bert_is_deterministic_given_the_seed(bert_data):
    arrays, vocab = bert_data
    again, vocab_again = load_data_bert(32)
    for a, b in zip(arrays, again.arrays):
        onp.testing.assert_array_equal(a, b.asnumpy())
    assert vocab_again.idx_to_token == vocab.idx_to_token
    other, vocab_other = load_data_bert(32, seed=1)
    assert vocab_other.idx_to_token == vocab.idx_to_token  # the vocabulary is not random
    assert not onp.array_equal(arrays[6], other.arrays[6].asnumpy())  # NSP draws
    assert not onp.array_equal(arrays[3], other.arrays[3].asnumpy())  # MLM draws


def test_load_data_bert_min_freq_filters_the_vocabulary():
    _, vocab_1 = load_data_bert(8, min_freq=1)
    _, vocab_5 = load_data_bert(8, min_freq=5)
    assert all(freq >= 5 for token, freq in vocab_5.token_freqs if token in vocab_5.token_to_idx)
    assert len(vocab_1) == 5 + len(vocab_1.token_freqs) > len(vocab_5)


def test_load_data_bert_follows_the_default_context(cpu1):
    with cpu1:
        data_iter, _ = load_data_bert(16, max_len=32)
    assert all(a.ctx == cpu1 for a in next(iter(data_iter)))


def test_load_data_bert_splits_the_paragraphs_and_builds_the_vocab_on_train_only(corpus):
    train, held_out = split_paragraphs(corpus)
    assert len(held_out) > 50
    for split, paragraphs in (("train", train), ("test", held_out)):
        data_iter, vocab = load_data_bert(32, split=split)
        assert vocab.token_freqs == Vocab([s for p in train for s in p]).token_freqs
        sentences = {tuple(vocab[s]) for p in paragraphs for s in p}
        arrays = [a.asnumpy() for a in data_iter.arrays]
        # both sentences come from the split
        for row, length in zip(unmasked_rows(arrays), arrays[2]):
            sep = int(onp.flatnonzero(row == SEP)[0])
            assert tuple(row[1:sep].tolist()) in sentences
            assert tuple(row[sep + 1:length - 1].tolist()) in sentences


def test_load_data_bert_dupe_factor_draws_the_pairs_again_with_new_masks(bert_data):
    arrays, _ = bert_data
    once = unmasked_rows(arrays)
    data_iter, _ = load_data_bert(32, dupe_factor=3)
    thrice = unmasked_rows([a.asnumpy() for a in data_iter.arrays])
    n = len(once)
    assert 2.9 * n < len(thrice) < 3.1 * n  # pairs that do not fit max_len vary with the draw
    onp.testing.assert_array_equal(thrice[:n], once)  # the first copy: the same NSP draws
    positions = data_iter.arrays[3].asnumpy()
    assert not onp.array_equal(positions[:n], arrays[3])  # other masks
    nsp = data_iter.arrays[6].asnumpy()
    assert abs(nsp.mean() - 0.5) < binomial_tol(0.5, len(nsp))
    with pytest.raises(ValueError, match="dupe_factor must be an int >= 1, got 0"):
        load_data_bert(32, dupe_factor=0)


def test_split_paragraphs_holds_out_every_tenth_in_order():
    paragraphs = [[str(i)] for i in range(25)]
    train, test = split_paragraphs(paragraphs)
    assert test == [["9"], ["19"]]
    assert train == [[str(i)] for i in range(25) if i not in (9, 19)]
    assert split_paragraphs([]) == ([], [])


def test_unigram_distribution_by_hand():
    # abc_vocab counts a 3, b 2, c 1 out of 6; min_freq 2 sends c's count to '<unk>'.
    onp.testing.assert_allclose(unigram_distribution(abc_vocab()),
                                [0, 0, 0, 0, 0, 3 / 6, 2 / 6, 1 / 6])
    vocab = Vocab([["a", "a", "a", "b", "b", "c", "d"]], 2, RESERVED_TOKENS)
    onp.testing.assert_allclose(unigram_distribution(vocab), [2 / 7, 0, 0, 0, 0, 3 / 7, 2 / 7])
    with pytest.raises(TypeError, match="vocab must be a Vocab, got list"):
        unigram_distribution(["a"])


def test_token_kinds_by_hand():
    # By count (ties in token order): the 3, , 2, a 2, . 1, b_2 1, c 1 (min_freq 1); ids 5 to 10
    # after '<unk>' and the reserved tokens. The words by count, punctuation left out: the, a,
    # b_2, c.
    vocab = Vocab([["the", ",", "the", "a", "the", ",", "a", "b_2", ".", "c"]], 1,
                  RESERVED_TOKENS)
    assert vocab.to_tokens([5, 6, 7, 8, 9, 10]) == ["the", ",", "a", ".", "b_2", "c"]
    kinds = token_kinds(vocab, [5, 6, 7, 8, 9, 10, UNK, SEP], num_frequent=2)
    assert list(kinds) == ["punctuation", "2 most frequent words", "other words"]
    assert kinds["punctuation"].tolist() == [False, True, False, True, False, False, False, False]
    # ',' is the second most frequent token but no word: 'the' and 'a' are the first 2 words
    assert kinds["2 most frequent words"].tolist() == [True, False, True, False, False, False,
                                                       False, False]
    assert kinds["other words"].tolist() == [False, False, False, False, True, True, True, False]
    three = token_kinds(vocab, [9, 10], num_frequent=3)["3 most frequent words"]
    assert three.tolist() == [True, False]  # b_2 is the third word, c the fourth
    assert token_kinds(vocab, [])["other words"].shape == (0,)
    with pytest.raises(ValueError, match=r"ids must be a 1-D array of token ids in \[0, 11\)"):
        token_kinds(vocab, [11])
    with pytest.raises(ValueError, match="num_frequent must be an int >= 0, got -1"):
        token_kinds(vocab, [5], num_frequent=-1)


def test_token_kinds_accepts_mxnet_ids():
    vocab = Vocab([["the", ",", "the", "a"]], 1, RESERVED_TOKENS)
    kinds = token_kinds(vocab, np.array([5, 6, 7], dtype="int32"), num_frequent=1)
    assert kinds["punctuation"].tolist() == [False, True, False]
    assert kinds["1 most frequent words"].tolist() == [True, False, False]
    assert kinds["other words"].tolist() == [False, False, True]


def test_unigram_distribution_of_the_corpus_matches_its_token_counts(bert_data, corpus):
    _, vocab = bert_data
    p = unigram_distribution(vocab)
    train = [t for par in split_paragraphs(corpus)[0] for s in par for t in s]
    counts = onp.bincount(vocab[train], minlength=len(vocab))
    onp.testing.assert_allclose(p, counts / len(train))
    assert p[1:5].sum() == 0 and abs(p.sum() - 1) < 1e-12


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 4, "split": "valid"}, "split must be 'train' or 'test', got 'valid'"),
    ({"batch_size": 0}, "batch_size must be an int >= 1, got 0"),
    ({"batch_size": 2.0}, "batch_size must be an int >= 1, got 2.0"),
    ({"batch_size": 4, "max_len": 4}, "max_len must be an int >= 5, got 4"),
    ({"batch_size": 4, "max_len": 6}, r"max_len=6 is too small: no sentence pair"),
    ({"batch_size": 4, "min_freq": -1}, "min_freq must be an int >= 0, got -1"),
    ({"batch_size": 4, "min_freq": 10 ** 6}, "min_freq=1000000 leaves no word"),
    ({"batch_size": 4, "seed": "0"}, "seed must be an int >= 0, got '0'"),
])
def test_load_data_bert_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_data_bert(**kwargs)



def test_sentence_stream_puts_sep_around_every_sentence(bert_data, corpus):
    _, vocab = bert_data
    train, test = split_paragraphs(corpus)
    for split, paragraphs in (("train", train), ("test", test)):
        sentences = [s for p in paragraphs for s in p]
        stream = sentence_stream(vocab, split)
        assert stream.count(SEP) == len(sentences) + 1 and stream[0] == stream[-1] == SEP
        assert len(stream) == sum(len(s) for s in sentences) + len(sentences) + 1
        second = stream.index(SEP, 1)
        assert stream[1:second] == vocab[sentences[0]]
    assert UNK in sentence_stream(vocab, "test")  # held-out words outside the vocabulary
    with pytest.raises(ValueError, match="split must be 'train' or 'test', got 'dev'"):
        sentence_stream(vocab, "dev")
    with pytest.raises(TypeError, match="vocab must be a Vocab"):
        sentence_stream({"[SEP]": 4})


# A bigram table over 4 tokens, each row the distribution of the next token.
TABLE = onp.array([[0.1, 0.2, 0.3, 0.4],
                   [0.5, 0.5, 0.0, 0.0],
                   [0.25, 0.25, 0.25, 0.25],
                   [0.0, 0.0, 0.0, 1.0]])


def test_neighbour_probs_by_hand():
    # left neighbour only: the rows of the table
    onp.testing.assert_allclose(neighbour_probs(TABLE, [0, 3]), TABLE[[0, 3]])
    # between 0 and 1: P(w | 0) P(1 | w) = 0.1 * 0.2, 0.2 * 0.5, 0.3 * 0.25, 0.4 * 0 = 0.02,
    # 0.1, 0.075, 0; they sum to 0.195
    onp.testing.assert_allclose(neighbour_probs(TABLE, [0], [1]),
                                [[0.02 / 0.195, 0.1 / 0.195, 0.075 / 0.195, 0]])
    # a right neighbour in unknown is left out; an excluded token gets 0, the rest renormalised
    onp.testing.assert_allclose(neighbour_probs(TABLE, [0, 0], [1, 2], unknown=[2]),
                                [[0.02 / 0.195, 0.1 / 0.195, 0.075 / 0.195, 0], TABLE[0]])
    onp.testing.assert_allclose(neighbour_probs(TABLE, [0], exclude=[3]),
                                [[1 / 6, 2 / 6, 3 / 6, 0]])


def test_neighbour_probs_with_the_corpus_bigram_beats_the_unigram_on_held_out_text(bert_data):
    """Between its two neighbours, a held-out word is likelier than the unigram says."""
    from d2lattn.data.lm import ngram_probs
    _, vocab = bert_data
    bigram = ngram_probs(sentence_stream(vocab), len(vocab), 2)
    test = onp.array(sentence_stream(vocab, "test"))
    middle = onp.arange(1, len(test) - 1)[test[1:-1] != SEP]
    reserved = list(range(1, 5))
    both = neighbour_probs(bigram, test[middle - 1], test[middle + 1], exclude=reserved)
    left = neighbour_probs(bigram, test[middle - 1], exclude=reserved)
    unigram = unigram_distribution(vocab)[test[middle]]
    rows = onp.arange(len(middle))
    losses = [-onp.log(p).mean() for p in (unigram, left[rows, test[middle]],
                                           both[rows, test[middle]])]
    assert losses[0] > losses[1] > losses[2]
    onp.testing.assert_allclose(both.sum(axis=1), 1)


@pytest.mark.parametrize("args, kwargs, message", [
    ((TABLE[:3], [0]), {}, r"bigram must be a square \(V, V\) table, got shape \(3, 4\)"),
    ((-TABLE, [0]), {}, r"bigram must hold probabilities >= 0, got -1.0"),
    ((TABLE, [4]), {}, r"before must be a 1-D array of token ids in \[0, 4\), got \[4\]"),
    ((TABLE, [[0]]), {}, r"before must be a 1-D array .* of shape \(1, 1\)"),
    ((TABLE, [0.5]), {}, r"before must be a 1-D array of token ids"),
    ((TABLE, [0], [1, 2]), {}, r"after must have the shape of before \(1,\), got \(2,\)"),
    ((TABLE, [0], [-1]), {}, r"after must be a 1-D array of token ids"),
    ((TABLE, [0]), {"exclude": [9]}, r"exclude must be a 1-D array of token ids"),
    ((TABLE, [0]), {"unknown": [9]}, r"unknown must be a 1-D array of token ids"),
    ((TABLE, [3]), {"exclude": [3]}, r"no token is possible at positions \[0\]"),
])
def test_neighbour_probs_rejects_bad_arguments(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        neighbour_probs(*args, **kwargs)
