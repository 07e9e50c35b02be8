"""BERTClassifier and the fine-tuning loop: shapes, values against NumPy on a tiny encoder, the
shared pooler, freezing, learning a separable toy task, several devices, bad input."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import init, np

from d2lattn.bert import BERTClassifier, BERTEncoder, BERTModel, Pooler, mean_pool
from d2lattn.data.nmt import ArrayLoader
from d2lattn.train import classifier_batch_loss, evaluate_accuracy, train_classifier
from reference import value

VOCAB, D, FFN, HEADS, BLKS, MAX_LEN = 20, 8, 12, 2, 2, 16


def batch(ctx=None):
    rng = onp.random.default_rng(0)
    tokens = np.array(rng.integers(1, VOCAB, size=(3, 7)), dtype="int32", ctx=ctx)
    segments = np.array([[0] * 4 + [1] * 3, [0] * 7, [0] * 3 + [1] * 4], dtype="int32", ctx=ctx)
    return tokens, segments, np.array([7, 5, 2], dtype="int32", ctx=ctx)


def make_classifier(pooling, ctx=None, num_classes=3):
    mx.random.seed(0)
    encoder = BERTEncoder(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    net = BERTClassifier(encoder, num_classes, 0.0, pooling=pooling)
    net.initialize(init.Normal(0.3), ctx=ctx)
    net(*batch(ctx))  # infers the deferred shapes
    return net


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_logits_match_a_numpy_head_on_the_encoder_states(pooling, cpu1):
    net = make_classifier(pooling, cpu1)
    tokens, segments, lens = batch(cpu1)
    logits = net(tokens, segments, lens)
    assert logits.shape == (3, 3) and logits.ctx == cpu1
    X = net.encoder(tokens, segments, lens).asnumpy().astype(float)
    if pooling == "cls":
        pooled = onp.tanh(X[:, 0] @ value(net.pooler.weight).T + value(net.pooler.bias))
    else:
        pooled = onp.stack([X[i, :n].mean(axis=0) for i, n in enumerate([7, 5, 2])])
    expected = pooled @ value(net.output.weight).T + value(net.output.bias)
    onp.testing.assert_allclose(logits.asnumpy(), expected, rtol=1e-4, atol=1e-5)


def test_mean_pool_ignores_padding_and_gives_zeros_for_length_zero():
    X = onp.random.default_rng(1).normal(size=(3, 4, 2))
    pooled = mean_pool(np.array(X), np.array([4, 1, 0], dtype="int32")).asnumpy()
    onp.testing.assert_allclose(pooled[0], X[0].mean(axis=0), rtol=1e-5)
    onp.testing.assert_allclose(pooled[1], X[1, 0], rtol=1e-5)
    assert (pooled[2] == 0).all()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_a_batch_whose_lengths_are_all_zero_keeps_its_first_column(pooling):
    """Every padding column used to be dropped, [CLS] too: 'tokens must have no empty axis,
    got shape (3, 0)' for tokens of shape (3, 7)."""
    net, (tokens, segments, _) = make_classifier(pooling), batch()
    lens, labels = np.zeros(3, dtype="int32"), np.array([0, 2, 1], dtype="int32")
    loss, correct = classifier_batch_loss(net, tokens, segments, lens, labels)
    logits = net(tokens[:, :1], segments[:, :1], lens).asnumpy().astype(float)
    log_p = logits - onp.log(onp.exp(logits).sum(1, keepdims=True))
    assert float(loss) == pytest.approx(-log_p[range(3), [0, 2, 1]].sum(), rel=1e-5)
    assert int(correct) == (logits.argmax(1) == [0, 2, 1]).sum()


def test_mean_pool_of_float16_sums_in_float32():
    """100 values of 1000 sum to 1e5, beyond float16's 65504: the mean used to be inf."""
    X = onp.concatenate([onp.full((1, 100, 2), 1000.0), onp.full((1, 3, 2), 7.0)], axis=1)
    pooled = mean_pool(np.array(X, dtype="float16"), np.array([101]))
    assert pooled.dtype == onp.float16
    onp.testing.assert_allclose(pooled.asnumpy(), X[:, :101].mean(axis=1), rtol=1e-3)


def test_a_pretrained_pooler_is_shared_not_copied():
    model = BERTModel(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    net = BERTClassifier(model.encoder, 2, 0.0, pooler=model.hidden)
    assert isinstance(model.hidden, Pooler) and net.pooler is model.hidden
    model.initialize(init.Normal(0.3))
    net.output.initialize()
    tokens, segments, lens = batch()
    encoded, _, _ = model(tokens, segments, lens)
    pooled = onp.tanh(encoded[:, 0].asnumpy() @ value(model.hidden.weight).T
                      + value(model.hidden.bias))
    onp.testing.assert_allclose(net.pooler(encoded).asnumpy(), pooled, rtol=1e-4, atol=1e-5)
    assert net(tokens, segments, lens).shape == (3, 2)


def test_bad_arguments_are_named():
    encoder = BERTEncoder(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    with pytest.raises(TypeError, match="encoder must be a BERTEncoder, got Dense"):
        BERTClassifier(mx.gluon.nn.Dense(2), 2, 0.0)
    with pytest.raises(ValueError, match="pooling must be 'cls' or 'mean', got 'max'"):
        BERTClassifier(encoder, 2, 0.0, pooling="max")
    with pytest.raises(ValueError, match="num_classes must be an int >= 2, got 1"):
        BERTClassifier(encoder, 1, 0.0)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got 1.5"):
        BERTClassifier(encoder, 2, 1.5)
    with pytest.raises(ValueError, match="pooler must be None or, with pooling='cls', a Pooler"):
        BERTClassifier(encoder, 2, 0.0, pooling="mean", pooler=Pooler(D))
    net = make_classifier("cls")
    tokens, segments, _ = batch()
    with pytest.raises(ValueError, match="valid_lens must be given"):
        net(tokens, segments, None)
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(3,\), got \(2,\)"):
        net(tokens, segments, np.array([1, 2], dtype="int32"))


# --- Fine-tuning ---------------------------------------------------------------------------------

def toy_task(n=48, ctx=None):
    """Class = whether token 3 or token 4 follows [CLS] (id 1); the rest is random noise."""
    rng = onp.random.default_rng(0)
    labels = rng.integers(0, 2, n)
    tokens = rng.integers(5, VOCAB, size=(n, 6))
    tokens[:, 0], tokens[:, 1] = 1, 3 + labels
    lens = rng.integers(3, 7, n)
    arrays = (tokens, onp.zeros_like(tokens), lens, labels)
    return tuple(np.array(a, dtype="int32", ctx=ctx) for a in arrays)


def test_training_learns_a_separable_task_on_cpu1(cpu1):
    net = make_classifier("mean", num_classes=2)
    data = toy_task()
    history = train_classifier(net, ArrayLoader(data, 16), ArrayLoader(data, 16, False), 8,
                               0.01, [cpu1])
    assert len(history["loss"]) == 8 * 3 and len(history["val_acc"]) == 8
    assert onp.mean(history["loss"][-3:]) < 0.3 * onp.mean(history["loss"][:3])
    assert history["val_acc"][-1] == 1.0
    assert all(p.list_ctx() == [cpu1] for p in net.collect_params().values())


def test_evaluate_accuracy_counts_correct_predictions():
    net = make_classifier("cls", num_classes=2)
    data = toy_task(10)
    predicted = net(*data[:3]).asnumpy().argmax(axis=1)
    expected = (predicted == data[3].asnumpy()).mean()
    assert evaluate_accuracy(net, ArrayLoader(data, 4, False), [mx.cpu()]) == expected
    assert evaluate_accuracy(net, ArrayLoader(data[:3] + (np.array(predicted, dtype="int32"),),
                                              3, False), [mx.cpu()]) == 1.0


def test_a_frozen_encoder_is_unchanged_and_only_the_head_trains():
    net = make_classifier("cls", num_classes=2)
    data = toy_task(16)
    before = {k: value(p) for k, p in net.collect_params().items()}
    train_classifier(net, ArrayLoader(data, 8), ArrayLoader(data, 8, False), 2, 0.01, [mx.cpu()],
                     freeze_encoder=True)
    encoder = set(net.encoder.collect_params())
    for name, p in net.collect_params().items():
        frozen = name in encoder
        assert (p.grad_req == "null") == frozen, name
        assert onp.array_equal(value(p), before[name]) == frozen, name
    train_classifier(net, ArrayLoader(data, 8), ArrayLoader(data, 8, False), 1, 0.01, [mx.cpu()])
    assert net.encoder.token_embedding.weight.grad_req == "write"
    assert not onp.array_equal(value(net.encoder.token_embedding.weight),
                               before[net.encoder.token_embedding.weight.name])


def test_two_devices_train_like_one(cpu1):
    data = toy_task(16)
    weights = []
    for devices in ([mx.cpu()], [mx.cpu(), cpu1]):
        net = make_classifier("mean", num_classes=2)
        train_classifier(net, ArrayLoader(data, 16, False), ArrayLoader(data, 16, False), 2,
                         0.01, devices)
        assert all(set(p.list_ctx()) == set(devices) for p in net.collect_params().values())
        weights.append(value(net.output.weight))
    onp.testing.assert_allclose(weights[1], weights[0], rtol=1e-4, atol=1e-6)


def test_training_arguments_are_checked():
    net = make_classifier("cls", num_classes=2)
    loader = ArrayLoader(toy_task(4), 4)
    with pytest.raises(ValueError, match=r"devices must be a non-empty list of contexts, got \[\]"):
        train_classifier(net, loader, loader, 1, 0.01, [])
    with pytest.raises(TypeError, match="freeze_encoder must be a bool, got 'yes'"):
        train_classifier(net, loader, loader, 1, 0.01, [mx.cpu()], freeze_encoder="yes")
    with pytest.raises(ValueError, match="num_epochs must be an int >= 1, got 0"):
        train_classifier(net, loader, loader, 0, 0.01, [mx.cpu()])
    with pytest.raises(ValueError, match="lr must be a positive finite number, got -1"):
        train_classifier(net, loader, loader, 1, -1, [mx.cpu()])
