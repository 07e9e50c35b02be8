"""d2lattn.tiled: tiled_attention's values and gradients against DotProductAttention for
every mask, what its forward pass saves for the backward pass (no (queries, keys) array),
that neither pass forms the (queries, keys) scores, and its peak memory under autograd in a
fresh process (below half of one score matrix at 2,048 tokens)."""
import subprocess
import sys

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, npx

from d2lattn.attention import DotProductAttention
from d2lattn.tiled import TiledAttention, key_bounds, tiled_attention
from reference import B, K, LENS, LENS_IDS, Q, as_np, normal


def full_lens(lens, causal_, batch, nq, nk):
    """The (batch, nq) valid lengths DotProductAttention needs for ``lens`` and a causal mask."""
    hi = onp.full((batch, nq), nk) if lens is None else \
        onp.broadcast_to(onp.reshape(lens, (batch, -1)), (batch, nq))
    if causal_:
        hi = onp.minimum(hi, onp.clip(onp.arange(nk - nq + 1, nk + 1), 0, None))
    return hi


def reference(q, k, v, lens, causal_):
    hi = full_lens(lens, causal_, *q.shape[:2], k.shape[1])
    return DotProductAttention(0.0)(q, k, v, as_np(hi, "int32"))


@pytest.mark.parametrize("block_size", [1, 3, 4, 64])
@pytest.mark.parametrize("causal_", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
@pytest.mark.parametrize("nq", [Q, K, 1])
def test_tiled_attention_equals_dot_product_attention(block_size, causal_, lens, nq):
    if lens is not None and onp.ndim(lens) == 2 and nq != Q:
        lens = onp.resize(lens, (B, nq))
    q, k, v = (as_np(x) for x in (normal((B, nq, 3), 18), normal((B, K, 3), 19),
                                  normal((B, K, 2), 20)))
    got = tiled_attention(q, k, v, None if lens is None else as_np(lens, "int32"), causal_,
                          block_size)
    expected = reference(q, k, v, lens, causal_).asnumpy()
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    hi = full_lens(lens, causal_, B, nq, K)
    assert (got.asnumpy()[hi == 0] == 0).all()  # no key: zeros, as masked_softmax gives


def test_tiled_attention_with_more_queries_than_keys_and_causal_gives_zero_rows():
    q, k, v = (as_np(x) for x in (normal((B, 5, 3), 21), normal((B, 2, 3), 22),
                                  normal((B, 2, 2), 23)))
    got = tiled_attention(q, k, v, None, True, 1).asnumpy()
    assert (got[:, :3] == 0).all()
    onp.testing.assert_allclose(got, reference(q, k, v, None, True).asnumpy(), rtol=1e-5,
                                atol=1e-6)


def test_tiled_attention_never_forms_the_queries_by_keys_scores(monkeypatch):
    shapes, batch_dot = [], npx.batch_dot

    def recording(a, b, **kwargs):
        out = batch_dot(a, b, **kwargs)
        shapes.append(out.shape)
        return out

    monkeypatch.setattr(npx, "batch_dot", recording)
    q, k, v = (as_np(x) for x in (normal((1, 40, 8), 24), normal((1, 100, 8), 25),
                                  normal((1, 100, 5), 26)))
    for x in (q, k, v):
        x.attach_grad()
    with autograd.record():
        got = tiled_attention(q, k, v, None, True, 16)
    forward = len(shapes)
    got.backward()
    npx.waitall()  # the backward pass runs asynchronously
    monkeypatch.undo()
    # forward: scores and values of each of the ceil(100 / 16) blocks; backward: the
    # scores again, dV, dP, dQ and dK of each block, none of them (queries, keys)
    assert (forward, len(shapes)) == (2 * 7, 7 * 7)
    assert max(onp.prod(shape) for shape in shapes) == 40 * 16  # (queries, block) at most
    onp.testing.assert_allclose(got.asnumpy(), reference(q, k, v, None, True).asnumpy(),
                                rtol=1e-5, atol=1e-6)


def test_tiled_attention_is_finite_for_scores_far_beyond_exps_range():
    # Scores ~ +-1e4: exp overflows without the running maximum.
    q, k, v = (as_np(x) for x in (normal((B, Q, 4), 27, 100), normal((B, K, 4), 28, 100),
                                  normal((B, K, 3), 29)))
    got = tiled_attention(q, k, v, as_np([[2, 6, 1, 0], [6, 6, 3, 4]], "int32"), False, 2)
    assert onp.isfinite(got.asnumpy()).all()
    expected = reference(q, k, v, [[2, 6, 1, 0], [6, 6, 3, 4]], False).asnumpy()
    onp.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-4, atol=1e-4)


def test_nan_and_inf_in_padding_reach_no_output_and_no_gradient():
    k, v = normal((B, K, 3), 30), normal((B, K, 2), 31)
    k[0, 3:], v[0, 3:], k[1, 5:], v[1, 5:] = onp.nan, onp.inf, onp.inf, onp.nan
    q, k, v = as_np(normal((B, Q, 3), 32)), as_np(k), as_np(v)
    lens = as_np([3, 5], "int32")
    for x in (q, k, v):
        x.attach_grad()
    with autograd.record():
        out = tiled_attention(q, k, v, lens, True, 2)
        out.sum().backward()
    assert onp.isfinite(out.asnumpy()).all()
    for x in (q, k, v):
        assert onp.isfinite(x.grad.asnumpy()).all()
    with autograd.record():
        expected = reference(q, k, v, [3, 5], True)
    onp.testing.assert_allclose(out.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)


def gradients(fn, shapes, dtype, seeds=(34, 35, 36)):
    """The output of fn(q, k, v) and the gradients of sum(output * G) for q, k, v."""
    G = as_np(normal(shapes[0][:2] + shapes[2][2:], 33), dtype)
    q, k, v = (as_np(normal(shape, seed), dtype) for shape, seed in zip(shapes, seeds))
    for x in (q, k, v):
        x.attach_grad()
    with autograd.record():
        out = fn(q, k, v)
        (out * G).sum().backward()
    return [x.asnumpy() for x in (out, q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("block_size", [1, 4, 64])
@pytest.mark.parametrize("causal_", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lens", LENS, ids=LENS_IDS)
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 2e-5)])
def test_tiled_attention_gradients_equal_dot_product_attentions(block_size, causal_, lens,
                                                                dtype, tol):
    # every mask, a length 0 among them; float64: the same function exactly, float32: to
    # rounding
    shapes = [(B, Q, 3), (B, K, 3), (B, K, 2)]
    mine = gradients(lambda q, k, v: tiled_attention(
        q, k, v, None if lens is None else as_np(lens, "int32"), causal_, block_size),
        shapes, dtype)
    theirs = gradients(lambda q, k, v: reference(q, k, v, lens, causal_), shapes, dtype)
    for a, b in zip(mine, theirs):
        onp.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("needs_grad", ["q", "k", "v", "kv"])
def test_tiled_attention_gives_gradients_when_only_some_inputs_need_them(needs_grad):
    # MXNet 1.9.1's Function stops writing gradients after an input that needs none
    xs = [normal((B, Q, 3), 40), normal((B, K, 3), 41), normal((B, K, 2), 42)]
    grads = []
    for fn in (lambda q, k, v: tiled_attention(q, k, v, as_np([4, 6], "int32"), True, 2),
               lambda q, k, v: reference(q, k, v, [4, 6], True)):
        arrays = dict(zip("qkv", (as_np(x, "float64") for x in xs)))
        for name in needs_grad:
            arrays[name].attach_grad()
        with autograd.record():
            fn(*arrays.values()).sum().backward()
        grads.append([arrays[name].grad.asnumpy() for name in needs_grad])
    for mine, theirs in zip(*grads):
        assert onp.abs(theirs).max() > 0.1
        onp.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


def test_the_forward_pass_saves_the_inputs_the_output_and_each_querys_log_sum_exp():
    n_q, n_k, d, w = 5, 9, 3, 2
    q, k, v = (as_np(normal(s, seed), "float64")
               for s, seed in (((B, n_q, d), 43), ((B, n_k, d), 44), ((B, n_k, w), 45)))
    lens = as_np([[3, 0, 9, 1, 5], [9, 9, 2, 7, 4]], "float32")
    fn = TiledAttention(key_bounds(lens, True, (B, n_q, n_k)), 4)
    with autograd.record():
        out = fn(q, k, v)
    saved = fn.saved_tensors
    assert [x.shape for x in saved] == [(B, n_q, d), (B, n_k, d), (B, n_k, w), (B, n_q, w),
                                        (B, n_q, 1)]
    assert saved[3] is out
    # the log-sum-exp of each query's visible scores, -inf for a query that sees none
    scores = onp.einsum("bqd,bkd->bqk", q.asnumpy(), k.asnumpy()) / onp.sqrt(d)
    hi = onp.minimum(lens.asnumpy(), onp.arange(n_k - n_q + 1, n_k + 1))
    visible = onp.arange(n_k) < hi[..., None]
    with onp.errstate(divide="ignore"):
        expected = onp.log(onp.where(visible, onp.exp(scores), 0).sum(-1))
    onp.testing.assert_allclose(saved[4].asnumpy()[..., 0], expected, rtol=1e-12)
    assert onp.isneginf(saved[4].asnumpy()[0, 1, 0])


def test_tiled_attention_on_cpu1(cpu1):
    q, k, v = (as_np(x, ctx=cpu1) for x in (normal((B, Q, 3), 37), normal((B, K, 3), 38),
                                            normal((B, K, 2), 39)))
    for lens_ctx in (cpu1, mx.cpu()):
        got = tiled_attention(q, k, v, as_np([2, 6], "int32", lens_ctx), True, 4)
        assert got.ctx == cpu1
        onp.testing.assert_allclose(got.asnumpy(), reference(q, k, v, [2, 6], True).asnumpy(),
                                    rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((), {"block_size": 0}, ValueError, "block_size must be an int >= 1, got 0"),
    ((), {"block_size": 2.0}, ValueError, "block_size must be an int"),
    ((), {"causal": 1}, TypeError, "causal must be a bool, got 1"),
    ((), {"valid_lens": as_np([1, 2, 3], "int32")}, ValueError, "valid_lens must have shape"),
    ((), {"valid_lens": as_np([1, 7], "int32")}, ValueError, r"valid_lens must hold integers in \[0, 6\]"),
    ((), {"valid_lens": [1, 2]}, TypeError, "valid_lens must be None or an mxnet.np.ndarray"),
    (("q-width",), {}, ValueError, "queries and keys must have the same width"),
    (("numpy",), {}, TypeError, "queries must be an mxnet.np.ndarray"),
    (("float16",), {}, TypeError, "float16"),
    (("2-D",), {}, ValueError, "queries must be 3-D"),
])
def test_tiled_attention_rejects_bad_input(args, kwargs, error, match):
    q, k, v = as_np(normal((B, Q, 3))), as_np(normal((B, K, 3))), as_np(normal((B, K, 2)))
    if args == ("q-width",):
        q = as_np(normal((B, Q, 4)))
    elif args == ("numpy",):
        q = normal((B, Q, 3))
    elif args == ("float16",):
        q, k, v = (x.astype("float16") for x in (q, k, v))
    elif args == ("2-D",):
        q = q[0]
    with pytest.raises(error, match=match):
        tiled_attention(q, k, v, **kwargs)


PEAK = """
import sys
import d2lattn
from mxnet import autograd, np, npx
from d2lattn.tiled import tiled_attention


def kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


for length in (64, int(sys.argv[1])):  # a warm-up call, then the measured one
    q, k, v = (np.random.normal(size=(4, length, 32)) for _ in range(3))
    for x in (q, k, v):
        x.attach_grad()
    npx.waitall()
    with open("/proc/self/clear_refs", "w") as refs:  # VmHWM := VmRSS
        refs.write("5")
    before = kib("VmRSS")
    with autograd.record():
        out = tiled_attention(q, k, v, None, True, 64)
    out.backward()
    npx.waitall()
print((kib("VmHWM") - before) / 1024)
"""


def peak_mib(length):
    """The peak memory (MiB) of tiled attention's forward (recorded) and backward pass at
    ``length``, 4 rows of width 32, blocks of 64, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", PEAK, str(length)], capture_output=True,
                         text=True, check=True)
    return float(out.stdout.split()[-1])


def test_tiled_attention_trains_in_memory_linear_in_the_length():
    # One (queries, keys) score matrix is 16 MiB at 1,024 tokens and 64 MiB at 2,048: the
    # peak at 2,048 stays below half of one, and doubling the length adds less than the
    # 48 MiB that the scores alone would add (keeping every block's intermediates for
    # autograd took 84 and 284 MiB).
    short, long = peak_mib(1024), peak_mib(2048)
    assert 0 < long < 32, f"peak {long:.1f} MiB at 2,048 tokens"
    assert long - short < 16, f"peaks {short:.1f} and {long:.1f} MiB at 1,024 and 2,048"
