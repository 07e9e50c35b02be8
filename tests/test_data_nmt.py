import mxnet as mx
import numpy as onp
import pytest
from mxnet import np

from d2lattn.data.nmt import (ArrayLoader, build_array_nmt, load_array, load_data_nmt,
                              preprocess_nmt, tokenize_nmt)
from d2lattn.text import Vocab
from d2lattn.train import set_seed

RESERVED = ['<pad>', '<bos>', '<eos>']
PAIRS = [(['go', '.'], ['va', '!']),
         (['i', 'lost', '.'], ["j'ai", 'perdu', '.']),
         (['he', 'is', 'calm', '.'], ['il', 'est', 'calme', '.']),
         (['go', 'home', '.'], ['rentre', '.']),
         (['hi', '.'], ['salut', '.'])]


def small_vocab():
    """['<unk>', '<pad>', '<bos>', '<eos>', 'a', 'b']: a = 4, b = 5."""
    return Vocab([['a', 'b', 'a']], reserved_tokens=RESERVED)


def numbered_arrays(n, ctx=None):
    """Row i of the first array is [i, i], of the second 10 * i: shows which rows a batch holds."""
    rows = onp.arange(n)
    return (np.array(onp.stack([rows, rows], axis=1), dtype='int32', ctx=ctx or mx.cpu()),
            np.array(10 * rows, dtype='float32', ctx=ctx or mx.cpu()))


def epoch_rows(loader):
    """Rows of one epoch in the order the batches give them, checking that arrays stay aligned."""
    rows = []
    for X, y in loader:
        onp.testing.assert_array_equal(X.asnumpy()[:, 0] * 10, y.asnumpy())
        rows += X.asnumpy()[:, 0].tolist()
    return rows


# --- build_array_nmt --------------------------------------------------------------------------

def test_build_array_nmt_values_by_hand():
    lines = [['a', 'b'], ['b'], [], ['a', 'c', 'b'], ['a', 'c', 'b', 'a']]  # c is unknown
    array, valid_len = build_array_nmt(lines, small_vocab(), num_steps=4)
    expected = [[4, 5, 3, 1],   # a b <eos> <pad>
                [5, 3, 1, 1],
                [3, 1, 1, 1],   # the empty line is just <eos>
                [4, 0, 5, 3],   # 3 tokens + <eos> fill num_steps exactly
                [4, 0, 5, 4]]   # 4 tokens: truncation cuts <eos> off (d2l's behaviour)
    assert array.dtype == onp.int32 and valid_len.dtype == onp.int32
    assert array.shape == (5, 4) and valid_len.shape == (5,)
    onp.testing.assert_array_equal(array.asnumpy(), expected)
    onp.testing.assert_array_equal(valid_len.asnumpy(), [3, 2, 1, 4, 4])


def test_build_array_nmt_no_lines():
    array, valid_len = build_array_nmt([], small_vocab(), 3)
    assert array.shape == (0, 3) and valid_len.shape == (0,)


def test_build_array_nmt_bad_arguments():
    vocab = small_vocab()
    with pytest.raises(TypeError, match=r"lines\[1\] must be a list of str tokens, got 'b a'"):
        build_array_nmt([['a'], 'b a'], vocab, 3)
    with pytest.raises(TypeError, match="lines must be a list of token lists, got str"):
        build_array_nmt('a b', vocab, 3)
    with pytest.raises(TypeError, match="vocab must be a Vocab, got dict"):
        build_array_nmt([['a']], {'a': 1}, 3)
    with pytest.raises(ValueError, match=r"vocab must hold the tokens \['<eos>'\]"):
        build_array_nmt([['a']], Vocab([['a']], reserved_tokens=['<pad>']), 3)
    with pytest.raises(ValueError, match="num_steps must be an int >= 1, got 0"):
        build_array_nmt([['a']], vocab, 0)


# --- load_array -------------------------------------------------------------------------------

def test_load_array_in_order_keeps_the_last_partial_batch():
    X, y = numbered_arrays(7)
    loader = load_array((X, y), batch_size=3, is_train=False)
    assert isinstance(loader, ArrayLoader) and len(loader) == 3
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(3, 2), (3, 2), (1, 2)]
    assert [b[1].dtype for b in batches] == [onp.float32] * 3
    assert epoch_rows(loader) == list(range(7))


@pytest.mark.parametrize("n, batch_size, batches", [(6, 3, 2), (6, 4, 2), (6, 6, 1),
                                                    (6, 10, 1), (1, 1, 1), (0, 2, 0)])
def test_load_array_len(n, batch_size, batches):
    loader = load_array(numbered_arrays(n), batch_size, is_train=False)
    assert len(loader) == batches == len(list(loader))


def test_load_array_shuffles_each_epoch_covering_every_row_once():
    loader = load_array(numbered_arrays(30), batch_size=4)
    first, second = epoch_rows(loader), epoch_rows(loader)  # re-iterable
    assert sorted(first) == sorted(second) == list(range(30))
    assert first != list(range(30)) and first != second  # each 1 in 30! to fail by chance


def test_load_array_shuffle_is_reproducible_with_set_seed():
    loader = load_array(numbered_arrays(30), batch_size=4)
    set_seed(7)
    expected = onp.random.permutation(30).tolist()  # numpy's global generator, as documented
    set_seed(7)
    epochs = [epoch_rows(loader), epoch_rows(loader)]
    set_seed(7)
    assert [epoch_rows(loader), epoch_rows(loader)] == epochs
    assert epochs[0] == expected


@pytest.mark.parametrize("is_train", [False, True])
def test_load_array_batches_follow_the_arrays_context(cpu1, is_train):
    for batch in load_array(numbered_arrays(5, cpu1), 2, is_train):
        assert all(a.ctx == cpu1 for a in batch)


def test_load_array_arrays_on_different_contexts(cpu1):
    X, _ = numbered_arrays(5)
    _, y = numbered_arrays(5, cpu1)
    loader = load_array((X, y), 2)
    for X_batch, y_batch in loader:
        assert X_batch.ctx == mx.cpu() and y_batch.ctx == cpu1
    assert sorted(epoch_rows(loader)) == list(range(5))


def test_load_array_bad_arguments():
    X, y = numbered_arrays(4)
    with pytest.raises(TypeError, match="arrays must be a non-empty tuple of mxnet.np arrays"):
        load_array((X, onp.arange(4)), 2)
    with pytest.raises(TypeError, match="arrays must be a non-empty tuple"):
        load_array((), 2)
    with pytest.raises(TypeError, match="arrays must be a non-empty tuple"):
        load_array(X, 2)
    with pytest.raises(ValueError, match=r"same first dimension, got shapes \[\(4, 2\), \(3,\)\]"):
        load_array((X, y[:3]), 2)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        load_array((X, y), 0)
    with pytest.raises(TypeError, match="is_train must be a bool, got 1"):
        load_array((X, y), 2, is_train=1)


# --- load_data_nmt ----------------------------------------------------------------------------

def test_load_data_nmt_vocabularies():
    _, src_vocab, tgt_vocab = load_data_nmt(PAIRS, batch_size=2)
    # '.' 5 times, 'go' twice, the rest once, alphabetically
    assert src_vocab.idx_to_token == ['<unk>'] + RESERVED + [
        '.', 'go', 'calm', 'he', 'hi', 'home', 'i', 'is', 'lost']
    assert tgt_vocab.idx_to_token[:5] == ['<unk>'] + RESERVED + ['.']
    assert len(tgt_vocab) == 4 + 1 + 9


def test_load_data_nmt_first_batch_in_order_equals_the_arrays():
    data_iter, src_vocab, tgt_vocab = load_data_nmt(PAIRS, batch_size=2, is_train=False)
    X, X_valid_len, Y, Y_valid_len = next(iter(data_iter))
    num_steps = 5  # the longest sentence has 4 tokens, + <eos>
    assert X.shape == Y.shape == (2, num_steps) and X_valid_len.shape == Y_valid_len.shape == (2,)
    assert {a.dtype for a in (X, X_valid_len, Y, Y_valid_len)} == {onp.dtype('int32')}
    src, tgt = src_vocab, tgt_vocab
    onp.testing.assert_array_equal(X.asnumpy(), [
        [src['go'], src['.'], src['<eos>'], src['<pad>'], src['<pad>']],
        [src['i'], src['lost'], src['.'], src['<eos>'], src['<pad>']]])
    onp.testing.assert_array_equal(Y.asnumpy()[1], [tgt["j'ai"], tgt['perdu'], tgt['.'],
                                                    tgt['<eos>'], tgt['<pad>']])
    onp.testing.assert_array_equal(X_valid_len.asnumpy(), [3, 4])
    onp.testing.assert_array_equal(Y_valid_len.asnumpy(), [3, 4])
    assert len(data_iter) == 3


def test_load_data_nmt_round_trip_and_no_eos_is_cut():
    data_iter, src_vocab, tgt_vocab = load_data_nmt(PAIRS, batch_size=5, is_train=False)
    X, X_valid_len, Y, Y_valid_len = next(iter(data_iter))
    for i, (src, tgt) in enumerate(PAIRS):
        assert src_vocab.to_tokens(X[i, :int(X_valid_len[i])].tolist()) == src + ['<eos>']
        assert tgt_vocab.to_tokens(Y[i, :int(Y_valid_len[i])].tolist()) == tgt + ['<eos>']


def test_load_data_nmt_shuffled_batches_hold_every_pair_once():
    data_iter, src_vocab, _ = load_data_nmt(PAIRS, batch_size=2, num_steps=6)
    seen = [tuple(row) for X, *_ in data_iter for row in src_vocab.to_tokens(X.tolist())]
    expected = [tuple(src + ['<eos>'] + ['<pad>'] * (5 - len(src))) for src, _ in PAIRS]
    assert sorted(seen) == sorted(expected)


def test_load_data_nmt_reused_vocabularies_map_unknown_tokens_to_unk():
    _, src_vocab, tgt_vocab = load_data_nmt(PAIRS, batch_size=2)
    test_pairs = [(['go', 'away', '.'], ['va', "t'en", '!'])]
    data_iter, src_again, tgt_again = load_data_nmt(test_pairs, 1, src_vocab=src_vocab,
                                                    tgt_vocab=tgt_vocab)
    assert src_again is src_vocab and tgt_again is tgt_vocab
    X, _, Y, _ = next(iter(data_iter))
    assert src_vocab.to_tokens(X[0].tolist()) == ['go', '<unk>', '.', '<eos>']
    assert tgt_vocab.to_tokens(Y[0].tolist()) == ['va', '<unk>', '!', '<eos>']


def test_load_data_nmt_min_freq_and_explicit_num_steps():
    data_iter, src_vocab, _ = load_data_nmt(PAIRS, batch_size=5, num_steps=3, min_freq=2,
                                            is_train=False)
    assert src_vocab.idx_to_token == ['<unk>'] + RESERVED + ['.', 'go']
    X, X_valid_len, _, _ = next(iter(data_iter))
    onp.testing.assert_array_equal(X.asnumpy(), [[5, 4, 3], [0, 0, 4], [0, 0, 0], [5, 0, 4],
                                                 [0, 4, 3]])
    onp.testing.assert_array_equal(X_valid_len.asnumpy(), [3, 3, 3, 3, 3])


@pytest.mark.parametrize("pairs", [[], [(['a'],)], [['a']], 'a\tb', [(['a'], ['b'], ['c'])]])
def test_load_data_nmt_bad_pairs(pairs):
    with pytest.raises(TypeError, match=r"pairs must be a non-empty list of \(src_tokens, "
                                        r"tgt_tokens\) pairs"):
        load_data_nmt(pairs, 2)


def test_load_data_nmt_bad_sentence():
    with pytest.raises(TypeError, match=r"target\[1\] must be a list of str tokens, got 'b'"):
        load_data_nmt([(['a'], ['b']), (['a'], 'b')], 2)


# --- fra-eng text processing ------------------------------------------------------------------

FRA_TEXT = ("Go.\tVa !\n"
            "Hi.\tSalut\u202f!\n"
            "Who?\tQui ?\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
            "Wait,\xa0WAIT!\tAttends,\xa0ATTENDS !\n"
            "no tab here\n"
            "")


def test_preprocess_nmt_follows_d2l_rules():
    assert preprocess_nmt(FRA_TEXT) == (
        "go .\tva !\n"
        "hi .\tsalut !\n"  # narrow no-break space -> space, no second space before '!'
        "who ?\tqui ?\tcc-by 2 .0 (france) attribution: tatoeba .org\n"
        "wait , wait !\tattends , attends !\n"
        "no tab here\n")
    assert preprocess_nmt("...") == ". . ." and preprocess_nmt("") == ""


def test_tokenize_nmt():
    source, target = tokenize_nmt(preprocess_nmt(FRA_TEXT))
    assert source == [['go', '.'], ['hi', '.'], ['who', '?'], ['wait', ',', 'wait', '!']]
    assert target == [['va', '!'], ['salut', '!'], ['qui', '?'], ['attends', ',', 'attends', '!']]


@pytest.mark.parametrize("num_examples", [1, 3, 4, 10])
def test_tokenize_nmt_num_examples_keeps_exactly_that_many_pairs(num_examples):
    source, target = tokenize_nmt(preprocess_nmt(FRA_TEXT), num_examples)
    assert len(source) == len(target) == min(num_examples, 4)
    assert source[0] == ['go', '.']


def test_tokenize_nmt_squeezes_repeated_spaces():
    assert tokenize_nmt("a  b\t c \n") == ([['a', 'b']], [['c']])


def test_text_functions_bad_arguments():
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        preprocess_nmt(b"go.")
    with pytest.raises(TypeError, match="text must be a str, got list"):
        tokenize_nmt(["go .\tva !"])
    with pytest.raises(ValueError, match="num_examples must be an int >= 1, got 0"):
        tokenize_nmt("go .\tva !", 0)
