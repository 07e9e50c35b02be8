"""The draws a master's ``# VARIANT`` cell makes its parameters with (exercises/README.md,
*Variants*)::

    # VARIANT
    from d2lattn.grading.variants import choice, randint, uniform
    num_queries = randint(3, 6)
    bandwidth = choice([0.5, 1.0, 2.0])

Run as a plain notebook, each draw gives its default (the low end, the first option): the
master's own variant, which the plain release hands to every student. Release draws them again
from each variant's seed (:class:`Draws`). Standard library only.
"""
import random


class Draws:
    """The draws of one variant, from ``random.Random(seed)``; ``seed`` None: each draw's
    default, the master's own variant."""

    def __init__(self, seed=None):
        if seed is not None and not isinstance(seed, int):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        self._random = None if seed is None else random.Random(seed)

    def choice(self, options):
        """One of ``options`` (a non-empty list or tuple); default: the first."""
        if not isinstance(options, (list, tuple)) or not options:
            raise ValueError(f"options must be a non-empty list or tuple, got {options!r}")
        return options[0] if self._random is None else self._random.choice(options)

    def randint(self, low, high):
        """An int from ``low`` to ``high``, both included; default: ``low``."""
        if not all(isinstance(end, int) and not isinstance(end, bool) for end in (low, high)) \
                or low > high:
            raise ValueError(f"low and high must be ints with low <= high, got {low!r} and "
                             f"{high!r}")
        return low if self._random is None else self._random.randint(low, high)

    def uniform(self, low, high, digits=2):
        """A float from ``low`` to ``high`` rounded to ``digits`` decimals (so that the
        question's text can show it exactly); default: ``low``."""
        if not (isinstance(low, (int, float)) and isinstance(high, (int, float)) and low < high):
            raise ValueError(f"low and high must be numbers with low < high, got {low!r} and "
                             f"{high!r}")
        if not isinstance(digits, int) or not 0 <= digits <= 6:
            raise ValueError(f"digits must be an int from 0 to 6, got {digits!r}")
        value = low if self._random is None else self._random.uniform(low, high)
        return round(float(value), digits)


MASTER = Draws()  # the master's own variant: every draw's default
choice, randint, uniform = MASTER.choice, MASTER.randint, MASTER.uniform
DRAWS = ("choice", "randint", "uniform")  # what a variant cell may import and call
