"""Text utilities: a token vocabulary and fixed-length padding."""
import collections
import numbers

from ._checks import check_int


def _flatten(tokens, name):
    """The str tokens of a list of tokens or of a list of token lists, in order."""
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"{name} must be a list of str tokens or of token lists, "
                        f"got {type(tokens).__name__}")
    flat = []
    for i, item in enumerate(tokens):
        for token in item if isinstance(item, (list, tuple)) else [item]:
            if not isinstance(token, str):
                raise TypeError(f"{name}[{i}] must hold str tokens, got {token!r}")
            flat.append(token)
    return flat


class Vocab:
    """Map tokens to indices and back.

    Index 0 is ``'<unk>'``, then come ``reserved_tokens`` in the given order, then the tokens of
    ``tokens`` seen at least ``min_freq`` times, most frequent first (ties in alphabetical order).
    ``tokens`` is a list of str tokens or a list of token lists (e.g. tokenized sentences).
    """

    def __init__(self, tokens=None, min_freq=0, reserved_tokens=None):
        min_freq = check_int("min_freq", min_freq)
        reserved = [] if reserved_tokens is None else reserved_tokens
        if not isinstance(reserved, (list, tuple)) \
                or not all(isinstance(token, str) for token in reserved) \
                or len(set(reserved)) != len(reserved) or '<unk>' in reserved:
            raise ValueError("reserved_tokens must be a list of unique str tokens without "
                             f"'<unk>' (it is index 0), got {reserved_tokens!r}")
        counter = collections.Counter(_flatten([] if tokens is None else tokens, "tokens"))
        self._token_freqs = sorted(counter.items(), key=lambda tf: (-tf[1], tf[0]))
        special = {'<unk>', *reserved}
        self.idx_to_token = ['<unk>', *reserved] + [
            token for token, freq in self._token_freqs if freq >= min_freq and token not in special]
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        """The index of a token (``unk`` if unknown), or a (nested) list of indices for a list."""
        if isinstance(tokens, (list, tuple)):
            return [self[token] for token in tokens]
        if not isinstance(tokens, str):
            raise TypeError(f"tokens must be a str or a list/tuple of them, got {tokens!r}")
        return self.token_to_idx.get(tokens, self.unk)

    def to_tokens(self, indices):
        """The token of an index, or a (nested) list of tokens for a list, tuple or int array."""
        if hasattr(indices, "tolist") and not isinstance(indices, numbers.Integral):
            indices = indices.tolist()  # numpy or mxnet arrays
        if isinstance(indices, (list, tuple)):
            return [self.to_tokens(index) for index in indices]
        if isinstance(indices, bool) or not isinstance(indices, numbers.Integral):
            raise TypeError(f"indices must be an int or a list/tuple of ints, got {indices!r}")
        if not 0 <= indices < len(self):
            raise ValueError(f"index {indices} is out of range for a vocabulary of size "
                             f"{len(self)}")
        return self.idx_to_token[indices]

    @property
    def unk(self):
        """The index of the unknown token: 0."""
        return 0

    @property
    def token_freqs(self):
        """``(token, count)`` pairs of the counted tokens, most frequent first, ties by token."""
        return self._token_freqs


def truncate_pad(line, num_steps, padding_token):
    """``line`` cut to ``num_steps`` items or padded with ``padding_token`` up to it, as a list."""
    if not isinstance(line, (list, tuple)):
        raise TypeError(f"line must be a list or tuple, got {type(line).__name__}")
    num_steps = check_int("num_steps", num_steps, minimum=1)
    return list(line[:num_steps]) + [padding_token] * (num_steps - len(line))
