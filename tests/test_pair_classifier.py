"""PairClassifier for ordered pairs: mean(a) - mean(b) against NumPy, padding and empty segments,
swapping the texts changes its answer, it learns an order-only toy task, bad input."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import init, np

from d2lattn.bert import BERTEncoder, PairClassifier, segment_mean_difference
from d2lattn.data.nmt import ArrayLoader
from d2lattn.train import evaluate_accuracy, train_classifier
from reference import value


def test_segment_mean_difference_matches_numpy_and_ignores_padding(cpu1):
    rng = onp.random.default_rng(0)
    X = rng.normal(size=(3, 5, 4))
    segments = onp.array([[0, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]])
    lens = onp.array([4, 3, 5])
    got = segment_mean_difference(np.array(X, ctx=cpu1), np.array(segments, ctx=cpu1),
                                  np.array(lens, ctx=cpu1))
    assert got.ctx == cpu1 and got.shape == (3, 4)
    expected = [X[0, :2].mean(0) - X[0, 2:4].mean(0),  # position 4 is padding
                X[1, :3].mean(0),  # no second text: its mean is zero
                X[2, :1].mean(0) - X[2, 1:].mean(0)]
    assert onp.allclose(got.asnumpy(), expected, atol=1e-6)


def make_pair_classifier(ctx=None):
    mx.random.seed(0)
    net = PairClassifier(BERTEncoder(12, 8, 12, 2, 1, 0.0, 16), 2, 0.0)
    net.initialize(init.Normal(0.3), ctx=ctx)
    return net


def test_logits_are_the_head_on_the_segment_difference_and_swapping_changes_them(cpu1):
    net = make_pair_classifier(cpu1)
    tokens = np.array([[1, 4, 5, 2, 6, 7, 2], [1, 6, 7, 2, 4, 5, 2]], dtype="int32", ctx=cpu1)
    segments = np.array([[0, 0, 0, 0, 1, 1, 1]] * 2, dtype="int32", ctx=cpu1)
    lens = np.array([7, 7], dtype="int32", ctx=cpu1)
    logits = net(tokens, segments, lens)
    pooled = segment_mean_difference(net.encoder(tokens, segments, lens), segments, lens)
    expected = pooled.asnumpy() @ value(net.output.weight).T + value(net.output.bias)
    assert logits.ctx == cpu1 and onp.allclose(logits.asnumpy(), expected, atol=1e-5)
    assert not onp.allclose(logits[0].asnumpy(), logits[1].asnumpy(), atol=1e-3)
    assert net.pooling == "pair"
    with pytest.raises(ValueError, match="valid_lens must be given"):
        net(tokens, segments, None)
    with pytest.raises(TypeError, match="encoder must be a BERTEncoder, got str"):
        PairClassifier("encoder", 2, 0.1)


def test_it_learns_which_text_comes_first():
    """Label 1 when the pair is (b, a) rather than (a, b): the same tokens, only the order."""
    rng = onp.random.default_rng(0)
    rows, labels = [], []
    for _ in range(64):
        a, b = rng.integers(4, 8, size=2), rng.integers(8, 12, size=2)
        swap = int(rng.integers(2))
        first, second = (b, a) if swap else (a, b)
        rows.append([1, *first, 2, *second, 2])
        labels.append(swap)
    tokens = np.array(rows, dtype="int32")
    data = (tokens, np.array([[0] * 4 + [1] * 3] * 64, dtype="int32"),
            np.full((64,), 7, dtype="int32"), np.array(labels, dtype="int32"))
    net = make_pair_classifier()
    history = train_classifier(net, ArrayLoader(data, 16), ArrayLoader(data, 16, False), 10,
                               0.01, [mx.cpu()])
    assert history["val_acc"][-1] == 1.0
    assert evaluate_accuracy(net, ArrayLoader(data, 64, False), [mx.cpu()]) == 1.0
