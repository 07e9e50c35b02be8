"""GPT: values against a NumPy GPT, causality, cached decoding == recomputation, sampling
filters against a NumPy reference, the loss with padding, devices, bad input, and a tiny
model that learns a periodic sequence."""
import math
import random

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, init, np, npx

from d2lattn.gpt import GPT, _draw, generate, lm_loss, next_token_probs, perplexity, train_lm
from reference import np_gelu, value
from test_transformer import np_add_norm, np_dense, np_layer_norm, np_mha, randomize

VOCAB, D, FFN, HEADS, BLOCKS, MAX_LEN = 11, 8, 12, 2, 2, 16


def tokens(shape, seed=1, ctx=None):
    ids = onp.random.default_rng(seed).integers(0, VOCAB, size=shape)
    return np.array(ids, dtype="int32", ctx=ctx)


def make_gpt(ffn=FFN, pre_norm=True, tie_weights=True, ctx=None, seed=0):
    mx.random.seed(seed)
    net = GPT(VOCAB, D, ffn, HEADS, BLOCKS, 0.0, MAX_LEN, pre_norm=pre_norm, tie_weights=tie_weights)
    net.initialize(init.Xavier(), ctx=ctx)
    net(tokens((1, 2), ctx=ctx))  # finish the deferred initialisation
    randomize(net, seed)
    return net


def np_gpt(net, X):
    """Logits (batch, steps, vocab) from the GPT's equations, float64."""
    X = X.asnumpy()
    batch, steps = X.shape
    H = value(net.embedding.weight)[X] * math.sqrt(D) \
        + value(net.pos_encoding.embedding.weight)[:steps]
    causal = onp.broadcast_to(onp.arange(1, steps + 1), (batch, steps))
    for blk in net.blks:
        H = np_add_norm(blk.addnorm1, H, lambda Z: np_mha(blk.attention, Z, Z, Z, causal)[0])
        if blk.ffn is not None:
            H = np_add_norm(blk.addnorm2, H, lambda Z: np_dense(
                np_gelu(np_dense(Z, blk.ffn.dense1)), blk.ffn.dense2))
    H = H if net.norm is None else np_layer_norm(H, net.norm)
    return np_dense(H, net.dense)


MODELS = pytest.mark.parametrize("ffn, pre_norm, tie_weights", [
    (FFN, True, True), (FFN, False, False), (0, True, False)],
    ids=["gpt", "post-norm-untied", "attention-only"])


@MODELS
def test_logits_match_numpy(ffn, pre_norm, tie_weights):
    net, X = make_gpt(ffn, pre_norm, tie_weights), tokens((3, 7))
    logits = net(X)
    assert logits.shape == (3, 7, VOCAB)
    onp.testing.assert_allclose(logits.asnumpy(), np_gpt(net, X), rtol=1e-4, atol=1e-4)
    assert [w.shape for w in net.attention_weights] == [(3, HEADS, 7, 7)] * BLOCKS


def test_tied_weights_and_attention_only_blocks():
    tied, untied = make_gpt(tie_weights=True), make_gpt(tie_weights=False)
    assert tied.dense.weight is tied.embedding.weight
    count = [sum(p.data().size for p in net.collect_params().values())
             for net in (tied, untied)]
    assert count[1] - count[0] == VOCAB * D
    assert all(blk.ffn is None and blk.addnorm2 is None for blk in make_gpt(ffn=0).blks)


@pytest.mark.parametrize("t", [0, 3, 6])
def test_changing_token_t_moves_no_logit_before_t(t):
    net, X = make_gpt(), tokens((2, 7))
    changed = X.asnumpy().copy()
    changed[:, t] = (changed[:, t] + 1) % VOCAB
    before, after = net(X).asnumpy(), net(np.array(changed, dtype="int32")).asnumpy()
    onp.testing.assert_array_equal(before[:, :t], after[:, :t])
    assert onp.abs(before[:, t:] - after[:, t:]).max(axis=-1).min() > 1e-4


def test_causality_holds_in_training_mode():
    net, X = make_gpt(), tokens((1, 6))
    changed = X.asnumpy().copy()
    changed[0, 4] = (changed[0, 4] + 1) % VOCAB
    with autograd.record():
        before, after = net(X).asnumpy(), net(np.array(changed, dtype="int32")).asnumpy()
    onp.testing.assert_array_equal(before[:, :4], after[:, :4])


@pytest.mark.parametrize("pieces", [[1] * 7, [3, 1, 3], [5, 2]])
def test_cached_pieces_give_the_logits_of_one_call(pieces):
    net, X = make_gpt(), tokens((2, 7))
    caches, outputs, start = net.init_caches(), [], 0
    for n in pieces:
        outputs.append(net(X[:, start:start + n], caches).asnumpy())
        start += n
    onp.testing.assert_allclose(onp.concatenate(outputs, axis=1), net(X).asnumpy(),
                                rtol=1e-5, atol=1e-5)
    assert caches[0].keys.shape == (2 * HEADS, 7, D // HEADS)


def test_generate_with_the_cache_equals_recomputation():
    net = make_gpt()
    for kwargs in ({"temperature": 0}, {"temperature": 1.3, "seed": 3},
                   {"top_k": 3, "seed": 4}, {"top_p": 0.7, "seed": 5}):
        cached = generate(net, [1, 2, 3], 9, **kwargs)
        assert cached == generate(net, [1, 2, 3], 9, use_cache=False, **kwargs), kwargs
        assert len(cached) == 9 and all(0 <= i < VOCAB for i in cached)


def test_greedy_generation_takes_the_argmax_of_recomputed_logits():
    net, ids = make_gpt(), [4, 0]
    new = generate(net, ids, 6, temperature=0)
    for token in new:
        logits = net(np.array([ids], dtype="int32"))[0, -1].asnumpy()
        assert token == int(logits.argmax())
        ids.append(token)


def test_sampling_follows_the_distribution_and_the_seed():
    net = make_gpt()
    assert generate(net, [1], 12, seed=7) == generate(net, [1], 12, seed=7)
    random.seed(0)
    first = generate(net, [1], 12)
    random.seed(0)
    assert generate(net, [1], 12) == first


def test_draws_follow_the_probabilities():
    probs, rng = onp.array([0.1, 0.0, 0.6, 0.25, 0.05, 0.0]), random.Random(0)
    draws = onp.bincount([_draw(probs, rng) for _ in range(20000)], minlength=6) / 20000
    assert onp.abs(draws - probs).max() < 0.014  # 4 standard errors at most
    assert draws[1] == draws[5] == 0


def np_filtered(logits, temperature, top_k, top_p):
    """Reference: softmax(logits / T); zero all but the top_k largest; then zero all after
    the first tokens (most probable first) whose renormalised mass reaches top_p."""
    p = onp.exp(logits / temperature - (logits / temperature).max())
    p /= p.sum()
    ranked = sorted(range(len(p)), key=lambda i: (-p[i], i))
    if top_k is not None:
        for i in ranked[top_k:]:
            p[i] = 0
        p /= p.sum()
    if top_p is not None:
        mass = 0.0
        for n, i in enumerate(ranked):
            if mass >= top_p:
                p[i] = 0
            mass += p[i]
        p /= p.sum()
    return p


@pytest.mark.parametrize("temperature, top_k, top_p", [
    (1.0, None, None), (0.5, None, None), (2.0, 3, None), (1.0, None, 0.6),
    (0.7, 5, 0.9), (1.0, 1, None), (1.0, None, 1e-6), (1.0, 20, 1.0)])
def test_next_token_probs_match_numpy(temperature, top_k, top_p):
    logits = onp.random.default_rng(3).normal(size=12) * 2
    got = next_token_probs(logits, temperature, top_k, top_p)
    onp.testing.assert_allclose(got, np_filtered(logits, temperature, top_k, top_p),
                                rtol=1e-12, atol=1e-15)
    assert got.sum() == pytest.approx(1)


def test_next_token_probs_at_temperature_zero_and_with_ties():
    logits = onp.array([1.0, 3.0, 3.0, -2.0])
    onp.testing.assert_array_equal(next_token_probs(logits, 0), [0, 1, 0, 0])
    onp.testing.assert_allclose(next_token_probs(logits, 1.0, top_k=1), [0, 1, 0, 0])
    onp.testing.assert_allclose(next_token_probs(logits, 1.0, top_k=2), [0, 0.5, 0.5, 0])
    onp.testing.assert_allclose(next_token_probs(np.array(logits), 1.0, top_p=0.4),
                                [0, 1, 0, 0])


@pytest.mark.parametrize("kwargs, match", [
    ({"temperature": -1}, "temperature"), ({"temperature": float("nan")}, "temperature"),
    ({"temperature": True}, "temperature"), ({"top_k": 0}, "top_k"),
    ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p")])
def test_next_token_probs_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        next_token_probs(onp.zeros(4), **kwargs)


@pytest.mark.parametrize("logits", [onp.zeros((2, 3)), onp.zeros(0), onp.array([0, onp.inf])])
def test_next_token_probs_rejects_bad_logits(logits):
    with pytest.raises(ValueError, match="logits"):
        next_token_probs(logits)


def test_lm_loss_ignores_padding_and_matches_numpy():
    logits = np.array(onp.random.default_rng(0).normal(size=(2, 4, VOCAB)), dtype="float32")
    targets, lens = tokens((2, 4)), np.array([3, 1], dtype="int32")
    logits[1, 2] = onp.nan  # padding: counts for nothing
    loss, count = lm_loss(logits, targets, lens)
    p, y = logits.asnumpy().astype(float), targets.asnumpy()
    log_p = p - p.max(-1, keepdims=True)
    log_p -= onp.log(onp.exp(log_p).sum(-1, keepdims=True))
    real = [(0, 0), (0, 1), (0, 2), (1, 0)]
    expected = -sum(log_p[i, t, y[i, t]] for i, t in real) / 4
    assert float(loss) == pytest.approx(expected, rel=1e-5) and float(count) == 4
    full, _ = lm_loss(logits[:1, :3], targets[:1, :3])
    assert float(full) == pytest.approx(-sum(log_p[0, t, y[0, t]] for t in range(3)) / 3,
                                        rel=1e-5)
    assert float(lm_loss(logits, targets, np.zeros(2, dtype="int32"))[0]) == 0


@pytest.mark.parametrize("steps", [2049, 65536])
def test_lm_loss_counts_and_sums_float16_in_float32(steps):
    """float16 counted 2049 targets as 2048 and summed 65,536 losses to inf (loss NaN)."""
    logits = onp.zeros((1, steps, 3))
    logits[0, ::2, 1] = 2.0  # every other target is the likelier class
    loss, count = lm_loss(np.array(logits, dtype="float16"), np.ones((1, steps)))
    log_p = logits[0] - onp.log(onp.exp(logits[0]).sum(-1, keepdims=True))
    assert float(count) == steps and count.dtype == onp.float32
    assert float(loss) == pytest.approx(-log_p[:, 1].mean(), rel=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_lm_loss_gradient_in_every_float_dtype(dtype):
    """(softmax - one_hot) / count: the division of a loss by a count of another dtype
    has no backward in MXNet (an error that surfaced only at exit)."""
    rng = onp.random.default_rng(4)
    logits, y = rng.normal(size=(2, 3, 4)), rng.integers(0, 4, size=(2, 3))
    X = np.array(logits, dtype=dtype)
    X.attach_grad()
    with autograd.record():
        loss, count = lm_loss(X, np.array(y), np.array([3, 1]))
    loss.backward()
    npx.waitall()  # raises an error of the backward pass here, not at exit
    p = onp.exp(logits) / onp.exp(logits).sum(-1, keepdims=True)
    expected = (p - onp.eye(4)[y]) / 4
    expected[1, 1:] = 0  # padding
    assert X.grad.dtype == dtype and float(count) == 4
    onp.testing.assert_allclose(X.grad.asnumpy(), expected, atol=2e-3 if dtype == "float16"
                                else 1e-6)


def test_lm_loss_names_numpy_targets():
    with pytest.raises(TypeError, match="targets must be an mxnet.np.ndarray, got ndarray from "
                                        "NumPy"):
        lm_loss(np.zeros((1, 2, 3)), onp.zeros((1, 2)))


def test_perplexity_beyond_exps_range_is_inf():
    """A mean loss above 709.78 raised OverflowError from math.exp."""
    net, X = make_gpt(), tokens((2, 6))
    net.embedding.weight.set_data(net.embedding.weight.data() * 1e4)  # huge tied logits
    log_p = np_gpt(net, X[:, :-1])
    log_p -= log_p.max(-1, keepdims=True)
    log_p -= onp.log(onp.exp(log_p).sum(-1, keepdims=True))
    y = X.asnumpy()
    mean_nll = -onp.mean([log_p[i, t, y[i, t + 1]] for i in range(2) for t in range(5)])
    assert mean_nll > 710 and perplexity(net, X) == math.inf


def test_perplexity_reads_the_tokens_on_the_nets_device(cpu1):
    """Tokens on the default CPU used to fail against a net on mx.cpu(1)."""
    X, lens = tokens((3, 6)), np.array([6, 4, 3])
    assert perplexity(make_gpt(ctx=cpu1), X, lens) == pytest.approx(
        perplexity(make_gpt(), X, lens), rel=1e-6)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"device": "cpu"}, TypeError, "device must be an mxnet Context .* got 'cpu'"),
    ({"clip": float("nan")}, ValueError, "clip must be a positive finite number, got nan"),
    ({"batches": [(tokens((2, 4)), tokens((2, 4)))]}, TypeError,
     "each batch must be an mxnet.np.ndarray, got tuple"),
    ({"batches": [onp.zeros((2, 5), dtype="int32")]}, TypeError,
     "each batch must be an mxnet.np.ndarray, got ndarray from NumPy")])
def test_train_lm_names_bad_arguments_before_any_step(kwargs, error, match):
    """A str device or d2l-style (X, Y) or NumPy batches raised AttributeError; clip=nan was
    reported as theta, after the first step."""
    args = {"net": GPT(VOCAB, 8, 8, 2, 1, 0.0, 8), "batches": [tokens((2, 5))] * 3,
            "num_steps": 3, "lr": 0.01, "device": mx.cpu(), **kwargs}
    args["batches"] = iter(args["batches"])
    with pytest.raises(error, match=match):
        train_lm(**args)
    if "batch" not in match:
        assert len(list(args["batches"])) == 3  # refused before reading a batch


def test_perplexity_with_padding_equals_the_exp_of_the_mean_loss():
    net, X = make_gpt(), tokens((3, 6))
    lens = np.array([6, 3, 2], dtype="int32")
    log_p = np_gpt(net, X[:, :-1])
    log_p -= log_p.max(-1, keepdims=True)
    log_p -= onp.log(onp.exp(log_p).sum(-1, keepdims=True))
    y = X.asnumpy()
    nll = [-log_p[i, t, y[i, t + 1]] for i, n in enumerate([6, 3, 2]) for t in range(n - 1)]
    expected = math.exp(sum(nll) / len(nll))
    assert perplexity(net, X, lens, batch_size=2) == pytest.approx(expected, rel=1e-4)
    with pytest.raises(ValueError, match="no token to predict"):
        perplexity(net, X, np.ones(3, dtype="int32"))


def test_runs_on_the_device_of_its_parameters(cpu1):
    net, X = make_gpt(ctx=cpu1), tokens((2, 5), ctx=cpu1)
    logits = net(X)
    assert logits.ctx == cpu1
    caches = net.init_caches()
    net(X[:, :2], caches)
    assert caches[1].keys.ctx == cpu1
    onp.testing.assert_allclose(logits.asnumpy(), make_gpt()(tokens((2, 5))).asnumpy(),
                                rtol=1e-5, atol=1e-6)
    assert generate(net, [1, 2], 4, temperature=0) == generate(make_gpt(), [1, 2], 4,
                                                                temperature=0)


@pytest.mark.parametrize("X, match", [
    (np.array([[1, VOCAB]], dtype="int32"), "below the vocabulary size"),
    (np.array([[-1, 2]], dtype="int32"), "tokens must hold integers"),
    (np.array([[1.5, 2]]), "tokens must hold integers"),
    (np.zeros((1, MAX_LEN + 1), dtype="int32"), "max_len = 16"),
    (np.zeros((4,), dtype="int32"), r"\(batch, steps\)"),
    (np.zeros((1, 0), dtype="int32"), r"no empty axis, got shape \(1, 0\)")])
def test_bad_tokens_give_clear_errors(X, match):
    with pytest.raises(ValueError, match=match):
        make_gpt()(X)


def test_the_cache_counts_towards_max_len_and_must_fit_the_model():
    net, caches = make_gpt(), None
    caches = net.init_caches()
    net(tokens((1, 10)), caches)
    with pytest.raises(ValueError, match="after 10 cached ones"):
        net(tokens((1, 7)), caches)
    with pytest.raises(ValueError, match="caches"):
        net(tokens((1, 2)), [{}])
    with pytest.raises(ValueError, match="max_len"):
        generate(net, [1] * 10, 8)
    assert len(generate(net, [1] * 10, 7)) == 7  # the last token needs no position
    for prompt in ([], "abc", None):
        with pytest.raises(ValueError, match="prompt_ids"):
            generate(net, prompt, 2)


def test_caches_must_be_one_kv_cache_per_block_with_one_length():
    """[None, None] used to cache nothing (the next step 2.2 off) and blocks of different
    lengths gave logits 1.9 off; both are refused before any block runs."""
    net, X = make_gpt(), tokens((1, 3))
    short, long = net.init_caches(), net.init_caches()
    net(X[:, :2], short)
    net(X, long)
    with pytest.raises(ValueError, match=r"caches must hold as many steps in every block, "
                                         r"got \[2, 3\]"):
        net(X[:, :1], [short[0], long[1]])
    assert [c.keys.shape[1] for c in short + long] == [2, 2, 3, 3]  # nothing extended
    with pytest.raises(ValueError, match=r"list of 2 KVCaches .* got \[None, None\]"):
        net(X[:, :1], [None, None])


@pytest.mark.parametrize("prompt, error, match", [
    ([1, 2 ** 32 + 1], ValueError, r"prompt_ids must hold token ids in \[0, 10\], got "
                                   r"\[4294967297\]"),
    ([2 ** 40], ValueError, r"got \[1099511627776\]"),
    ([2 ** 70], ValueError, r"prompt_ids must hold token ids in \[0, 10\]"),
    ([1, VOCAB], ValueError, r"got \[11\]"), ([-1], ValueError, r"got \[-1\]"),
    ([1.0, 2.0], TypeError, "prompt_ids must hold ints, got dtype float64"),
    ([True], TypeError, "got dtype bool"), ([1j], TypeError, "got dtype complex128")])
def test_generate_refuses_prompts_that_are_not_token_ids(prompt, error, match):
    """2**32 + 1 and 2**40 used to wrap to the valid ids 1 and 0 in int32."""
    with pytest.raises(error, match=match):
        generate(make_gpt(), prompt, 2)


def test_generate_refuses_a_use_cache_that_is_not_a_bool():
    with pytest.raises(TypeError, match="use_cache must be a bool, got 'no'"):
        generate(make_gpt(), [1], 2, use_cache="no")


@pytest.mark.parametrize("logits, dtype", [([True, False], "bool"), ([1 + 2j, 0], "complex128")])
def test_next_token_probs_refuses_logits_that_are_not_real(logits, dtype):
    with pytest.raises(TypeError, match=f"logits must hold real numbers, got dtype {dtype}"):
        next_token_probs(onp.array(logits))


def test_next_token_probs_of_int_logits_are_those_of_floats():
    onp.testing.assert_array_equal(next_token_probs(onp.array([2, 0, 1])),
                                   next_token_probs(onp.array([2.0, 0.0, 1.0])))


@pytest.mark.parametrize("kwargs, error", [
    ({"vocab_size": 0}, ValueError), ({"num_blks": 0}, ValueError),
    ({"max_len": 0}, ValueError), ({"num_heads": 3}, ValueError),
    ({"ffn_num_hiddens": -1}, ValueError), ({"dropout": 1.0}, ValueError),
    ({"pre_norm": 1}, TypeError), ({"tie_weights": "yes"}, TypeError)])
def test_bad_settings_give_clear_errors(kwargs, error):
    settings = dict(vocab_size=VOCAB, num_hiddens=D, ffn_num_hiddens=FFN, num_heads=HEADS,
                    num_blks=BLOCKS, dropout=0.0, max_len=MAX_LEN)
    name = next(iter(kwargs))
    with pytest.raises(error, match=name if name != "num_heads" else "divisible"):
        GPT(*{**settings, **kwargs}.values()) if name not in ("pre_norm", "tie_weights") \
            else GPT(*settings.values(), **kwargs)


def test_a_tiny_model_learns_a_periodic_sequence():
    period = [3, 1, 4, 1, 5, 9, 2, 6]  # 1 is followed by 4 or 5: the model needs context

    def batches(rng=random.Random(0)):
        while True:
            starts = [rng.randrange(len(period)) for _ in range(16)]
            yield np.array([[period[(s + t) % 8] for t in range(13)] for s in starts],
                           dtype="int32")

    mx.random.seed(0)
    net = GPT(10, 16, 32, 2, 2, 0.0, 16)
    losses = train_lm(net, batches(), 150, 0.01, mx.cpu())
    assert losses[0] > 1.5 and losses[-1] < 0.05
    prompt = [1, 4, 1, 5]
    assert generate(net, prompt, 8, temperature=0) == [9, 2, 6, 3, 1, 4, 1, 5]
    assert perplexity(net, next(batches())) < 1.05


def test_train_lm_needs_enough_batches():
    with pytest.raises(ValueError, match="ran out after 1"):
        train_lm(GPT(VOCAB, 8, 8, 2, 1, 0.0, 8), iter([tokens((2, 5))]), 2, 0.01, mx.cpu())


def test_training_hybridized_gives_the_losses_of_training_imperatively():
    # Chapter 9 trains a hybridized GPT and says the losses are those of the imperative
    # model: the cached graphs run the same operators in the same order, dropout included.
    def losses(hybridize):
        mx.random.seed(3)
        ids = onp.random.RandomState(1).randint(0, 40, size=(6, 2, 17))
        net = GPT(40, 16, 32, 4, 2, 0.3, 32)
        if hybridize:
            net.hybridize()
        out = train_lm(net, (np.array(rows, dtype="int32") for rows in ids), 6, 1e-2, mx.cpu())
        assert all(blk._cached_op is not None for blk in net.blks) == hybridize
        return out
    imperative = losses(False)
    assert len(set(imperative)) == 6  # the steps did change the model
    assert losses(True) == imperative
