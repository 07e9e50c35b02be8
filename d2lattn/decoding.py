"""Decoding: turning a trained encoder-decoder into translations, greedily or by beam search.

Both searches work on any :class:`d2lattn.seq2seq.EncoderDecoder` whose decoder follows the
interface ``init_state`` / ``decoder(X, state)`` / ``reorder_state``: they feed the decoder one
token at a time and keep its state between steps. For attention decoders they also return
the attention weights of every emitted token, (target tokens, source steps).
"""
import numpy as onp
from mxnet import np, npx

from ._checks import check_context, check_int, check_special_tokens, is_real
from .data.nmt import build_array_nmt


def _encode(net, src_lines, src_vocab, num_steps, device, tgt_vocab):
    """Checks the vocabularies and the device, then encodes: (decoder state, valid lengths)."""
    check_special_tokens("tgt_vocab", tgt_vocab, ["<bos>", "<eos>"])
    check_context("device", device)
    if isinstance(src_lines, (list, tuple)) and not src_lines:
        raise ValueError("src_lines must hold at least one token list, got an empty list")
    X, valid_lens = build_array_nmt(src_lines, src_vocab, num_steps)
    X, valid_lens = X.as_in_ctx(device), valid_lens.as_in_ctx(device)
    state = net.decoder.init_state(net.encoder(X, valid_lens), valid_lens)
    return state, valid_lens


def _step(net, tokens, state, vocab_size):
    """Feed one token per row: (batch,) ids -> (log-probabilities (batch, vocab), state,
    weights (batch, source steps) or None). ``vocab_size``: that of tgt_vocab, which must
    be the decoder's."""
    logits, state = net.decoder(tokens.reshape(-1, 1), state)
    if logits.shape[-1] != vocab_size:
        raise ValueError(f"tgt_vocab must have the {logits.shape[-1]} tokens the decoder "
                         f"predicts, got {vocab_size}")
    weights = getattr(net.decoder, "attention_weights", None)
    weights = None if weights is None else weights[:, 0]
    return npx.log_softmax(logits[:, 0], axis=-1), state, weights


def greedy_search(net, src_lines, src_vocab, tgt_vocab, num_steps, device):
    """Translate a batch of token lists greedily, all sentences at once.

    Returns (translations: token lists without <eos>, weights: a list with one
    (target tokens, source steps) array per sentence, or None for decoders without
    attention).
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    state, src_valid_lens = _encode(net, src_lines, src_vocab, num_steps, device, tgt_vocab)
    batch, eos = len(src_lines), tgt_vocab["<eos>"]
    tokens = np.full((batch,), tgt_vocab["<bos>"], dtype="int32", ctx=device)
    outputs, weights = [], []
    for _ in range(num_steps):
        log_probs, state, step_weights = _step(net, tokens, state, len(tgt_vocab))
        tokens = log_probs.argmax(axis=-1).astype("int32")
        outputs.append(tokens.asnumpy())
        weights.append(None if step_weights is None else step_weights.asnumpy())
        if all(eos in column for column in zip(*outputs)):
            break
    return _finish(outputs, weights, src_valid_lens.asnumpy(), tgt_vocab)


def _finish(outputs, weights, src_valid_lens, tgt_vocab):
    eos = tgt_vocab["<eos>"]
    translations, alignments = [], []
    for row in range(len(src_valid_lens)):
        ids = [int(step[row]) for step in outputs]
        length = ids.index(eos) if eos in ids else len(ids)
        translations.append(tgt_vocab.to_tokens(ids[:length]))
        if weights[0] is not None:
            # Rows for the tokens and the final <eos>, columns for the real source steps.
            rows = [w[row] for w in weights[:length + 1]]
            alignments.append(onp.stack(rows)[:, :int(src_valid_lens[row])])
    return translations, (alignments if weights[0] is not None else None)


def beam_step(beams, log_probs, weights, beam_size, eos, alpha):
    """One step of beam search: extend the live beams, keep the ``beam_size`` best.

    beams: [(log P, token ids from <bos>, attention rows)]; log_probs: (beams, vocab)
    NumPy log-probabilities of each beam's next token; weights: (beams, source steps) or
    None. Returns (live beams, the index of each one's parent, finished hypotheses
    (log P / L^alpha, ids without <bos>, rows) for the extensions that ended with <eos>).
    """
    candidates = sorted(((score + float(log_probs[i, token]), i, int(token))
                         for i, (score, _, _) in enumerate(beams)
                         for token in onp.argsort(-log_probs[i])[:beam_size]),
                        key=lambda c: -c[0])
    live, parents, finished = [], [], []
    for score, i, token in candidates:
        _, ids, rows = beams[i]
        rows = rows if weights is None else rows + [weights[i]]
        if token == eos:  # L = len(ids): the tokens after <bos>, plus <eos>
            finished.append((score / len(ids) ** alpha, ids[1:], rows))
        else:
            live.append((score, ids + [token], rows))
            parents.append(i)
        if len(live) == beam_size:
            break
    return live, parents, finished


def beam_search(net, src_tokens, src_vocab, tgt_vocab, num_steps, device, beam_size=4,
                alpha=0.75):
    """Translate one token list by beam search with a length penalty.

    Keeps the ``beam_size`` most probable prefixes; a prefix that emits <eos> becomes a
    finished hypothesis scored log P(y) / L^alpha (L: its length with <eos>). Stops when
    ``beam_size`` hypotheses have finished or after ``num_steps`` tokens, and returns the
    best (tokens without <eos>, weights (one row per step, source steps) or None).
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    beam_size = check_int("beam_size", beam_size, minimum=1)
    alpha = _check_real("alpha", alpha, minimum=0)
    state, src_valid_lens = _encode(net, [src_tokens], src_vocab, num_steps, device,
                                   tgt_vocab)
    src_len = int(src_valid_lens[0])
    # Each live beam: (log-probability, token ids, weight rows). Start with one, <bos>.
    beams, finished = [(0.0, [tgt_vocab["<bos>"]], [])], []
    for _ in range(num_steps):
        tokens = np.array([ids[-1] for _, ids, _ in beams], dtype="int32", ctx=device)
        log_probs, state, weights = _step(net, tokens, state, len(tgt_vocab))
        weights = None if weights is None else weights.asnumpy()[:, :src_len]
        beams, parents, ended = beam_step(beams, log_probs.asnumpy(), weights, beam_size,
                                          tgt_vocab["<eos>"], alpha)
        finished += ended
        if len(finished) >= beam_size or not beams:
            break
        parents = np.array(parents, dtype="int32", ctx=device)
        state = net.decoder.reorder_state(state, parents)
    if not finished:  # no hypothesis ended within num_steps: take the best live one
        finished = [(score / len(ids) ** alpha, ids[1:], rows)
                    for score, ids, rows in beams]
    _, ids, rows = max(finished, key=lambda f: f[0])
    return tgt_vocab.to_tokens(ids), (onp.stack(rows) if rows else None)


def predict_seq2seq(net, src_sentence, src_vocab, tgt_vocab, num_steps, device, beam_size=1,
                    alpha=0.75):
    """Translate one sentence (a string or a token list); d2l's name.

    beam_size 1 is greedy search. Returns (translation as a string, attention weights or
    None): one row per decoding step (each token, and <eos> if it was emitted within
    ``num_steps``), one column per source token and the source's <eos>.
    """
    if not isinstance(src_sentence, (str, list, tuple)):
        raise TypeError(f"src_sentence must be a str or a list of str tokens, got "
                        f"{type(src_sentence).__name__}")
    tokens = src_sentence.split() if isinstance(src_sentence, str) else list(src_sentence)
    if check_int("beam_size", beam_size, minimum=1) == 1:
        (translation,), weights = greedy_search(net, [tokens], src_vocab, tgt_vocab,
                                                num_steps, device)
        weights = None if weights is None else weights[0]
    else:
        translation, weights = beam_search(net, tokens, src_vocab, tgt_vocab, num_steps,
                                           device, beam_size, alpha)
    return " ".join(translation), weights


# Argument checks that only this module uses (those of several modules are in _checks.py)
def _check_real(name, value, minimum=None):
    """``value`` as a finite float (>= ``minimum`` if given); bools and NaN are rejected."""
    if not is_real(value) or not onp.isfinite(float(value)) \
            or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return float(value)
