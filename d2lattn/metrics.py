"""BLEU: d2l's per-sentence score and Papineni et al.'s corpus score; bootstrap intervals."""
import collections
import math

import numpy as onp

from ._checks import check_int


def _tokens(seq, name):
    """``seq`` as a list of tokens: a str is split on whitespace, a list or tuple is copied."""
    if isinstance(seq, str):
        return seq.split()
    if isinstance(seq, (list, tuple)) and all(isinstance(token, str) for token in seq):
        return list(seq)
    raise TypeError(f"{name} must be a str or a list of str tokens, got {seq!r}")


def _references(label, name):
    """``label`` as a list of references (token lists): one reference (a str or a list of str
    tokens) or several (a list of them, e.g. token lists)."""
    if isinstance(label, (list, tuple)) and label \
            and all(isinstance(ref, (list, tuple)) for ref in label):
        return [_tokens(ref, f"{name}[{j}]") for j, ref in enumerate(label)]
    tokens = _tokens(label, name)
    spaced = [token for token in tokens if any(char.isspace() for char in token)]
    if spaced and not isinstance(label, str):
        raise ValueError(f"{name} holds tokens with whitespace {spaced[:3]}: give one reference "
                         "as a str or a token list, several as a list of token lists")
    return [tokens]


def _counts(tokens, n):
    return collections.Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _ngram_matches(pred_tokens, label_tokens, n, more_labels=()):
    """Clipped n-gram matches: each n-gram of the prediction counts at most as often as it
    occurs in the label (in the label where it occurs most, with ``more_labels``)."""
    label_counts = _counts(label_tokens, n)
    for tokens in more_labels:
        label_counts |= _counts(tokens, n)  # the maximum count of each n-gram
    return sum(min(count, label_counts[gram]) for gram, count in _counts(pred_tokens, n).items())


def bleu(pred_seq, label_seq, k):
    """d2l's sentence BLEU: exp(min(0, 1 - len_label / len_pred)) * prod_n p_n ** (1 / 2 ** n).

    ``p_n`` is the clipped n-gram precision for n = 1 .. min(k, len_pred): a prediction shorter
    than ``k`` is scored on the orders it has (d2l's fix of a division by zero). Sequences are
    space-separated strings or token lists; an empty prediction scores 0.
    """
    pred_tokens, label_tokens = _tokens(pred_seq, "pred_seq"), _tokens(label_seq, "label_seq")
    k = check_int("k", k, minimum=1)
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    if len_pred == 0:
        return 0.0
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        precision = _ngram_matches(pred_tokens, label_tokens, n) / (len_pred - n + 1)
        score *= precision ** (0.5 ** n)
    return score


def corpus_bleu(preds, labels, max_n=4):
    """Corpus BLEU (Papineni et al., 2002) of predictions against their labels, in [0, 1].

    Clipped n-gram matches and n-gram counts are summed over the corpus for n = 1 ..
    ``max_n``; the score is the geometric mean of the ``max_n`` precisions times the brevity
    penalty exp(1 - r / c) when the total prediction length c is below the total label length
    r. Without smoothing it is 0 when some order has no match. ``preds`` and ``labels`` are
    equally long lists of token lists or space-separated strings; a label may also be several
    references, a list of token lists: an n-gram then matches as often as it occurs in the
    reference where it occurs most, and r counts the reference closest in length to the
    prediction (the shorter on a tie), as sacrebleu does.
    """
    for name, seqs in (("preds", preds), ("labels", labels)):
        if not isinstance(seqs, (list, tuple)) or not seqs:
            raise ValueError(f"{name} must be a non-empty list of sequences, got {seqs!r:.200}")
    if len(preds) != len(labels):
        raise ValueError(f"preds and labels must be equally long, got {len(preds)} and "
                         f"{len(labels)}")
    max_n = check_int("max_n", max_n, minimum=1)
    matches, totals = [0] * max_n, [0] * max_n
    pred_len = label_len = 0
    for i, (pred, label) in enumerate(zip(preds, labels)):
        pred_tokens, refs = _tokens(pred, f"preds[{i}]"), _references(label, f"labels[{i}]")
        closest = min(refs, key=lambda ref: (abs(len(ref) - len(pred_tokens)), len(ref)))
        pred_len, label_len = pred_len + len(pred_tokens), label_len + len(closest)
        for n in range(1, max_n + 1):
            matches[n - 1] += _ngram_matches(pred_tokens, refs[0], n, refs[1:])
            totals[n - 1] += max(0, len(pred_tokens) - n + 1)
    if 0 in matches:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    brevity = min(0.0, 1 - label_len / pred_len)
    return math.exp(brevity + log_precision)


def bootstrap_interval(values, groups=None, num_draws=2000, seed=0, level=0.95):
    """The mean of ``values`` (n,) and its bootstrap interval: ``(mean, low, high)``.

    ``groups`` (n,) ints in [0, G), optional: values of one group (e.g. the masked words of
    one sentence pair) are not independent, so whole groups are drawn with replacement, G of
    them per draw, and each draw's mean is its values' sum over its count; by default every
    value is its own group. ``low`` and ``high`` are the (1 - level) / 2 and (1 + level) / 2
    percentiles of the ``num_draws`` means, drawn from ``RandomState(seed)``.
    """
    values = onp.asarray(values, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {values.shape}")
    groups = onp.arange(len(values)) if groups is None else onp.asarray(groups)
    if groups.shape != values.shape or not onp.issubdtype(groups.dtype, onp.integer) \
            or groups.min() < 0:
        raise ValueError(f"groups must be ints >= 0 shaped like values {values.shape}, got "
                         f"{groups.dtype} of shape {groups.shape}")
    num_draws = check_int("num_draws", num_draws, minimum=1)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    sums, counts = onp.bincount(groups, weights=values), onp.bincount(groups)
    sums, counts = sums[counts > 0], counts[counts > 0]
    draws = onp.random.RandomState(seed).randint(0, len(sums), (num_draws, len(sums)))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    low, high = onp.percentile(means, [50 * (1 - level), 50 * (1 + level)])
    return values.mean(), low, high
