"""Greedy and beam search: against brute force on a decoder whose probabilities are a fixed
table, greedy == beam of width 1, batched == one sentence at a time, attention weights."""
import itertools

import mxnet as mx
import numpy as onp
import pytest
from mxnet import init, np

from d2lattn.decoding import beam_search, beam_step, greedy_search, predict_seq2seq
from d2lattn.seq2seq import (Decoder, Encoder, EncoderDecoder, Seq2SeqAttentionDecoder,
                             Seq2SeqDecoder, Seq2SeqEncoder)
from d2lattn.text import Vocab

VOCAB = Vocab(["a", "b", "c"], reserved_tokens=["<pad>", "<bos>", "<eos>"])
A, B, C, BOS, EOS = (VOCAB[t] for t in ["a", "b", "c", "<bos>", "<eos>"])
WORDS = [A, B, C]


class Identity(Encoder):
    def forward(self, X, valid_len=None):
        return X


class TableDecoder(Decoder):
    """log P(next token | previous token) = table[previous]: no attention, no real state."""

    def __init__(self, probs):
        super().__init__()
        table = onp.full((len(VOCAB), len(VOCAB)), 1e-30)
        for prev, row in probs.items():
            for token, p in row.items():
                table[prev, token] = p
        self.table = onp.log(table / table.sum(axis=1, keepdims=True))

    def init_state(self, enc_outputs, *args):
        return np.zeros((enc_outputs.shape[0],), ctx=enc_outputs.ctx)

    def forward(self, X, state):
        return np.array(self.table[X.asnumpy()], ctx=X.ctx), state

    def reorder_state(self, state, indices):
        return state[indices]


# Greedy takes "a" (0.5) but every continuation of "a" is unlikely; "b <eos>" has 0.38.
TRAP = {BOS: {A: 0.5, B: 0.4, EOS: 0.1}, A: {A: 0.34, B: 0.33, C: 0.33},
        B: {EOS: 0.95, C: 0.05}, C: {EOS: 0.6, A: 0.4}}


def table_net(probs=TRAP):
    return EncoderDecoder(Identity(), TableDecoder(probs))


def brute_force(probs, num_steps, alpha):
    """The best finished sequence by log P / L^alpha over every sequence (L counts <eos>)."""
    table = TableDecoder(probs).table
    best = (-onp.inf, None)
    for n in range(num_steps):
        for seq in itertools.product(WORDS, repeat=n):
            path = [BOS, *seq, EOS]
            logp = sum(table[p, q] for p, q in zip(path, path[1:]))
            best = max(best, (logp / (n + 1) ** alpha, seq))
    return [VOCAB.to_tokens(t) for t in best[1]]


def test_greedy_falls_into_the_trap_and_beam_search_does_not():
    greedy, weights = greedy_search(table_net(), [["a"]], VOCAB, VOCAB, 6, mx.cpu())
    assert greedy[0][0] == "a" and weights is None
    beam, weights = beam_search(table_net(), ["a"], VOCAB, VOCAB, 6, mx.cpu(), beam_size=2)
    assert beam == ["b"] and weights is None


@pytest.mark.parametrize("alpha", [0.0, 0.75, 1.5])
def test_wide_beam_finds_the_brute_force_optimum(alpha):
    rng = onp.random.default_rng(int(alpha * 4))
    probs = {prev: dict(zip(WORDS + [EOS], rng.dirichlet(onp.ones(4))))
             for prev in [BOS] + WORDS}
    # Beam 64 >= every live prefix up to 4 tokens (3^3 = 27), so the search is exhaustive.
    best, _ = beam_search(table_net(probs), ["a"], VOCAB, VOCAB, 5, mx.cpu(), beam_size=64,
                          alpha=alpha)
    assert best == brute_force(probs, 5, alpha)


def test_length_penalty_prefers_longer_translations():
    probs = {BOS: {A: 0.6, EOS: 0.4}, A: {A: 0.45, EOS: 0.55}}
    short, _ = beam_search(table_net(probs), ["a"], VOCAB, VOCAB, 8, mx.cpu(), 4, alpha=0)
    longer, _ = beam_search(table_net(probs), ["a"], VOCAB, VOCAB, 8, mx.cpu(), 4, alpha=2)
    assert short == [] and len(longer) > 0


def test_beam_search_without_eos_returns_the_best_live_prefix():
    probs = {BOS: {A: 0.9, B: 0.1}, A: {A: 0.8, C: 0.2}, B: {B: 1.0}, C: {C: 1.0}}
    best, _ = beam_search(table_net(probs), ["a"], VOCAB, VOCAB, 3, mx.cpu(), beam_size=2)
    assert best == ["a", "a", "a"]


def test_beam_step_keeps_the_best_extensions_and_scores_finished_ones_by_length():
    # Two live beams with log P -1 and -2: <bos> a and <bos> b.
    beams = [(-1.0, [BOS, A], [onp.array([1.0])]), (-2.0, [BOS, B], [onp.array([2.0])])]
    probs = onp.full((2, len(VOCAB)), 1e-30)
    probs[0, [EOS, B, C]] = 0.5, 0.3, 0.2  # after a
    probs[1, [A, EOS]] = 0.9, 0.1           # after b
    log_probs = onp.log(probs)
    weights = onp.array([[0.7], [0.4]])
    live, parents, finished = beam_step(beams, log_probs, weights, 2, EOS, alpha=1.0)
    # Candidates by log P: a+<eos> -1.69, b+a -2.11, a+b -2.20: two live beams fill the beam.
    assert [ids for _, ids, _ in live] == [[BOS, B, A], [BOS, A, B]] and parents == [1, 0]
    onp.testing.assert_allclose([score for score, _, _ in live],
                                [-2 + onp.log(0.9), -1 + onp.log(0.3)])
    (score, ids, rows), = finished
    assert ids == [A] and [r.tolist() for r in rows] == [[1.0], [0.7]]
    onp.testing.assert_allclose(score, (-1 + onp.log(0.5)) / 2)  # L = 2: "a" and <eos>


def seq2seq_net(decoder_cls=Seq2SeqAttentionDecoder, ctx=None):
    mx.random.seed(3)
    net = EncoderDecoder(Seq2SeqEncoder(len(VOCAB), 4, 8, 2),
                         decoder_cls(len(VOCAB), 4, 8, 2))
    net.initialize(init.Xavier(), ctx=ctx)
    return net


SOURCES = [["a", "b"], ["c", "a", "a", "b"], ["b"]]


@pytest.mark.parametrize("decoder_cls", [Seq2SeqDecoder, Seq2SeqAttentionDecoder])
def test_batched_greedy_equals_one_sentence_at_a_time(decoder_cls):
    net = seq2seq_net(decoder_cls)
    together, weights = greedy_search(net, SOURCES, VOCAB, VOCAB, 6, mx.cpu())
    for i, src in enumerate(SOURCES):
        alone, alone_weights = greedy_search(net, [src], VOCAB, VOCAB, 6, mx.cpu())
        assert together[i] == alone[0]
        if weights is not None:
            onp.testing.assert_allclose(weights[i], alone_weights[0], rtol=1e-5, atol=1e-7)


def test_beam_of_width_one_is_greedy():
    net = seq2seq_net()
    for src in SOURCES:
        (greedy,), (greedy_weights,) = greedy_search(net, [src], VOCAB, VOCAB, 6, mx.cpu())
        beam, beam_weights = beam_search(net, src, VOCAB, VOCAB, 6, mx.cpu(), beam_size=1)
        assert beam == greedy
        onp.testing.assert_allclose(beam_weights, greedy_weights, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_predict_seq2seq_weights_have_a_row_per_step_and_a_column_per_source_token(beam_size):
    net = seq2seq_net()
    translation, weights = predict_seq2seq(net, "c a a b", VOCAB, VOCAB, 6, mx.cpu(),
                                           beam_size=beam_size)
    n_out = len(translation.split())
    ended = n_out < 6  # stopped by <eos> before num_steps: one more row, for <eos>
    assert weights.shape == (n_out + ended, 4 + 1)  # source: 4 tokens + <eos>
    onp.testing.assert_allclose(weights.sum(axis=1), 1, rtol=1e-5)


def test_decoding_runs_on_cpu1(cpu1):
    net = seq2seq_net(ctx=cpu1)
    greedy, _ = greedy_search(net, SOURCES, VOCAB, VOCAB, 4, cpu1)
    beam, _ = beam_search(net, SOURCES[1], VOCAB, VOCAB, 4, cpu1, beam_size=2)
    assert len(greedy) == 3 and isinstance(beam, list)


@pytest.mark.parametrize("kwargs, message", [({"num_steps": 0}, "num_steps must be an int >= 1"),
                                             ({"beam_size": 0}, "beam_size must be an int >= 1")])
def test_bad_search_arguments(kwargs, message):
    args = {"num_steps": 4, "beam_size": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        beam_search(table_net(), ["a"], VOCAB, VOCAB, args["num_steps"], mx.cpu(),
                    args["beam_size"])


@pytest.mark.parametrize("beam_size", [1, 2])
def test_a_target_vocabulary_of_another_size_than_the_decoders_is_refused(beam_size):
    net = seq2seq_net()  # predicts len(VOCAB) = 7 tokens
    bigger = Vocab(["a", "b", "c", "d"], reserved_tokens=["<pad>", "<bos>", "<eos>"])
    with pytest.raises(ValueError, match=r"tgt_vocab must have the 7 tokens the decoder "
                                         r"predicts, got 8"):
        predict_seq2seq(net, "a b", VOCAB, bigger, 4, mx.cpu(), beam_size=beam_size)


def test_a_source_sentence_that_is_no_text_is_refused():
    with pytest.raises(TypeError, match=r"src_sentence must be a str or a list of str tokens, "
                                        r"got int"):
        predict_seq2seq(seq2seq_net(), 3, VOCAB, VOCAB, 4, mx.cpu())
    translation, _ = predict_seq2seq(seq2seq_net(), ("a", "b"), VOCAB, VOCAB, 4, mx.cpu())
    assert translation == predict_seq2seq(seq2seq_net(), "a b", VOCAB, VOCAB, 4, mx.cpu())[0]
