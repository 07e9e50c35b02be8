"""Release, per student: one notebook per roster student, each stating its own variant of
the master's ``# VARIANT`` cell, and the bundle's record of every variant and student.

Everything secret comes from the course's secret (a file only the instructor holds) through
HMAC-SHA256: which variant a student gets (with ``count`` variants; else one each), each
variant's seed, and the digest that a student's notebook records with its variant, so that
an edited record, or one of another student, is found at grading
(:mod:`d2lattn.grading.batch.variants`). The bundle stores each variant's parameters, the
salt of its cases' seeds and its expected values, and each student's variant and digest:
grading needs neither the secret nor a run of the master.
"""
import csv
import hashlib
import hmac
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..master.variant import parameters, student_source
from ..roster import read_roster
from .verify import variant_values

MIN_SECRET = 16  # bytes of a course secret, at the least
FOLDER = re.compile(r"[^A-Za-z0-9._@+-]")  # what a student's folder name cannot hold
INDEX = ("student", "name", "email", "login", "variant", "notebook")


@dataclass(frozen=True)
class Variant:
    """One variant of an assignment: its ``key`` (a student's id, or ``1``..``count``), the
    ``params`` its variant cell states and the ``salt`` of its cases' seeds."""
    key: str
    params: dict
    salt: int


@dataclass(frozen=True)
class ClassRelease:
    """What a per-student release is given: the roster's rows
    (:func:`d2lattn.grading.roster.read_roster`), the course ``secret`` (bytes) and ``count``,
    the number of variants (None: one per student)."""
    roster: list
    secret: bytes
    count: int | None = None

    @classmethod
    def read(cls, roster, secret, count=None):
        """A ClassRelease from a roster CSV and a secret file; ValueError naming what is
        missing or wrong."""
        if roster is None or secret is None:
            raise ValueError(f"a per-student release needs both roster and secret, got "
                             f"roster={roster!r} and secret={secret!r}")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 1):
            raise ValueError(f"variants must be a positive int (or None: one per student), "
                             f"got {count!r}")
        rows = read_roster(roster)
        twice = sorted(s for s, n in Counter(row["student"] for row in rows).items() if n > 1)
        if not rows or twice:
            raise ValueError(f"roster must list each student once, got {str(roster)!r} "
                             f"with {len(rows)} students" + (f", twice: {twice}" if twice else ""))
        clash = sorted(f for f, n in Counter(folder_of(row["student"]) for row in rows).items()
                       if n > 1)
        if clash:
            raise ValueError(f"roster: several students' ids make the same folder name "
                             f"{clash} (ids differ only in characters a file name cannot hold)")
        return cls(rows, read_secret(secret), count)


def read_secret(path):
    """The course secret: the bytes of a file (surrounding whitespace dropped), at least
    :data:`MIN_SECRET` of them."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as err:
        raise ValueError(f"secret must be a readable file, got {str(path)!r} "
                         f"({type(err).__name__})") from None
    if len(secret) < MIN_SECRET:
        raise ValueError(f"secret must hold at least {MIN_SECRET} bytes (e.g. python -c "
                         f"\"import secrets; print(secrets.token_hex(32))\"), got "
                         f"{len(secret)} in {str(path)!r}")
    return secret


def keyed(secret, *parts):
    """HMAC-SHA256 of ``parts`` (JSON) under ``secret``: 32 bytes."""
    return hmac.new(secret, json.dumps(parts, sort_keys=True).encode(), hashlib.sha256).digest()


def variant_key(secret, assignment, student, count):
    """The variant of ``student``: their id where each has their own (``count`` None), else
    one of ``1``..``count``, by the keyed digest of the id (stable when the roster grows)."""
    if count is None:
        return student
    return str(int.from_bytes(keyed(secret, "variant", assignment, student)[:8], "big")
               % count + 1)


def draw(secret, assignment, key, source):
    """The :class:`Variant` ``key`` of the master's variant cell ``source``."""
    seed = int.from_bytes(keyed(secret, "seed", assignment, key)[:8], "big")
    return Variant(key, parameters(source, seed, f"{assignment}, variant {key}"),
                   seed % (1 << 31))


def digest(secret, assignment, release, student, variant):
    """What a student's notebook records beside its variant: 32 hex digits no one without
    the secret can make for another student, variant or parameters."""
    return keyed(secret, "record", assignment, release["bundle"], student, variant.key,
                 variant.params).hex()[:32]


def release_class(master, assignment, tests, source, release, given, unsafe, write):
    """Release one master per student: ``write(student row, variant, digest)`` writes each
    student's notebook and returns its path. ``master`` is the master notebook (a dict),
    ``tests`` its tests as split (hidden cases included, no expected values), ``source`` its
    variant cell's source, ``release`` its stamp, ``given`` a :class:`ClassRelease`. Returns
    the bundle's ``{"variants": {key: {"params", "cell", "salt", "tests"}}, "students": {id:
    {"variant", "digest"}}}`` and the index rows (:data:`INDEX`). Each variant's master
    run computes its expected values and refuses trivial answers
    (:func:`.verify.variant_values`)."""
    keys = {row["student"]: variant_key(given.secret, assignment, row["student"], given.count)
            for row in given.roster}
    variants = {key: draw(given.secret, assignment, key, source)
                for key in dict.fromkeys(keys.values())}
    bundle = {"variants": {key: {"params": v.params, "cell": student_source(v.params),
                                 "salt": v.salt,
                                 "tests": variant_values(master, tests, v.params, v.salt, unsafe)}
                           for key, v in variants.items()}, "students": {}}
    index = []
    for row in given.roster:
        variant = variants[keys[row["student"]]]
        signed = digest(given.secret, assignment, release, row["student"], variant)
        path = write(row, variant, signed)
        bundle["students"][row["student"]] = {"variant": variant.key, "digest": signed}
        index.append((row["student"], row["name"], row["email"], row["login"], variant.key,
                      str(path)))
    return bundle, index


def folder_of(student):
    """A student's folder name: their id, with any character a file name may not hold
    replaced by ``_``."""
    return FOLDER.sub("_", student)[:100] or "_"


def write_index(path, rows):
    """``students/index.csv``: who gets which notebook and variant."""
    with open(path, "w", newline="", encoding="utf-8") as table:
        writer = csv.writer(table)
        writer.writerow(INDEX)
        writer.writerows(rows)
