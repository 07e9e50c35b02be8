import mxnet as mx
import numpy as onp
import pytest
from mxnet import np

from d2lattn.text import Vocab, truncate_pad

SENTENCES = [['the', 'cat', 'sat'], ['the', 'dog', 'sat'], ['a', 'cat', 'the']]
# counts: the 3, cat 2, sat 2, a 1, dog 1 -> by count, then alphabetically


# --- Vocab ------------------------------------------------------------------------------------

def test_vocab_orders_unk_reserved_then_frequency_then_alphabet():
    vocab = Vocab(SENTENCES, reserved_tokens=['<pad>', '<eos>'])
    assert vocab.idx_to_token == ['<unk>', '<pad>', '<eos>', 'the', 'cat', 'sat', 'a', 'dog']
    assert len(vocab) == 8 and vocab.unk == 0
    assert vocab.token_to_idx == {t: i for i, t in enumerate(vocab.idx_to_token)}


def test_vocab_token_freqs_are_sorted_counts():
    vocab = Vocab(SENTENCES, min_freq=3)
    assert vocab.token_freqs == [('the', 3), ('cat', 2), ('sat', 2), ('a', 1), ('dog', 1)]


def test_vocab_flat_token_list_equals_the_nested_one():
    flat = [t for s in SENTENCES for t in s]
    assert Vocab(flat).idx_to_token == Vocab(SENTENCES).idx_to_token


def test_vocab_ordering_does_not_depend_on_the_corpus_order():
    shuffled = [list(reversed(s)) for s in reversed(SENTENCES)]
    assert Vocab(shuffled).idx_to_token == Vocab(SENTENCES).idx_to_token


@pytest.mark.parametrize("min_freq, kept", [(0, ['the', 'cat', 'sat', 'a', 'dog']),
                                            (2, ['the', 'cat', 'sat']), (3, ['the']), (4, [])])
def test_vocab_min_freq(min_freq, kept):
    vocab = Vocab(SENTENCES, min_freq=min_freq, reserved_tokens=['<pad>'])
    assert vocab.idx_to_token == ['<unk>', '<pad>'] + kept
    assert vocab['dog'] == (2 + kept.index('dog') if 'dog' in kept else vocab.unk)


def test_vocab_reserved_token_in_the_corpus_keeps_its_reserved_index():
    vocab = Vocab([['<eos>', 'x', '<eos>', '<unk>']], reserved_tokens=['<pad>', '<eos>'])
    assert vocab.idx_to_token == ['<unk>', '<pad>', '<eos>', 'x']


def test_vocab_empty():
    vocab = Vocab()
    assert len(vocab) == 1 and vocab['anything'] == 0 and vocab.token_freqs == []


def test_vocab_lookup_unknown_and_nested():
    vocab = Vocab(SENTENCES)
    assert vocab['the'] == 1 and vocab['zebra'] == 0
    assert vocab[['the', 'zebra', 'dog']] == [1, 0, 5]
    assert vocab[[['cat'], ('a', 'sat')]] == [[2], [4, 3]]
    assert vocab[[]] == []


def test_vocab_to_tokens_round_trip():
    vocab = Vocab(SENTENCES)
    for sentence in SENTENCES:
        assert vocab.to_tokens(vocab[sentence]) == sentence
    assert vocab.to_tokens(0) == '<unk>'
    assert vocab.to_tokens([[1, 2], (5,)]) == [['the', 'cat'], ['dog']]
    assert vocab.to_tokens(onp.int64(3)) == 'sat'


def test_vocab_to_tokens_takes_arrays(cpu1):
    vocab = Vocab(SENTENCES)
    assert vocab.to_tokens(onp.array([1, 2])) == ['the', 'cat']
    assert vocab.to_tokens(np.array([[3, 4]], dtype='int32', ctx=cpu1)) == [['sat', 'a']]


@pytest.mark.parametrize("index", [6, -1, 100])
def test_vocab_to_tokens_out_of_range(index):
    vocab = Vocab(SENTENCES)  # size 6
    with pytest.raises(ValueError, match=rf"index {index} is out of range for a vocabulary "
                                         r"of size 6"):
        vocab.to_tokens(index)
    with pytest.raises(ValueError, match=rf"index {index} "):
        vocab.to_tokens([0, index])


@pytest.mark.parametrize("index", [1.0, '1', True, None])
def test_vocab_to_tokens_rejects_non_ints(index):
    with pytest.raises(TypeError, match="indices must be an int"):
        Vocab(SENTENCES).to_tokens(index)


@pytest.mark.parametrize("token", [1, None, b'the'])
def test_vocab_getitem_rejects_non_str(token):
    with pytest.raises(TypeError, match="tokens must be a str"):
        Vocab(SENTENCES)[token]


@pytest.mark.parametrize("min_freq", [-1, 1.5, True, None])
def test_vocab_bad_min_freq(min_freq):
    with pytest.raises(ValueError, match="min_freq must be an int >= 0"):
        Vocab(SENTENCES, min_freq=min_freq)


@pytest.mark.parametrize("reserved", [['<pad>', '<pad>'], ['<unk>'], [1], '<pad>',
                                      [['<pad>']]])
def test_vocab_bad_reserved_tokens(reserved):
    with pytest.raises(ValueError, match="reserved_tokens must be a list of unique str tokens"):
        Vocab(SENTENCES, reserved_tokens=reserved)


@pytest.mark.parametrize("tokens, match", [('the cat', r"tokens must be a list .* got str"),
                                           ([['a', 1]], r"tokens\[0\] must hold str tokens, "
                                                        r"got 1"),
                                           ([[['a']]], r"tokens\[0\] must hold str tokens")])
def test_vocab_bad_tokens(tokens, match):
    with pytest.raises(TypeError, match=match):
        Vocab(tokens)


# --- truncate_pad -----------------------------------------------------------------------------

@pytest.mark.parametrize("line, num_steps, pad, expected", [
    ([1, 2, 3], 5, 0, [1, 2, 3, 0, 0]),
    ([1, 2, 3], 3, 0, [1, 2, 3]),
    ([1, 2, 3], 2, 0, [1, 2]),
    ((), 2, 0, [0, 0]),
    (('a', 'b'), 1, '<pad>', ['a']),
    (['a'], 3, '<pad>', ['a', '<pad>', '<pad>']),
])
def test_truncate_pad(line, num_steps, pad, expected):
    assert truncate_pad(line, num_steps, pad) == expected


def test_truncate_pad_does_not_modify_its_input():
    line = [1, 2]
    assert truncate_pad(line, 4, 9) == [1, 2, 9, 9] and line == [1, 2]


def test_truncate_pad_bad_arguments():
    with pytest.raises(ValueError, match="num_steps must be an int >= 1, got 0"):
        truncate_pad([1], 0, 0)
    with pytest.raises(TypeError, match="line must be a list or tuple, got str"):
        truncate_pad('abc', 2, ' ')
    with pytest.raises(TypeError, match="got ndarray"):
        truncate_pad(mx.np.array([1, 2]), 2, 0)
