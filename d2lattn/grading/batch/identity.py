"""Who handed a file in, as the hand-in system named it: Canvas's and Moodle's download names
and GitHub Classroom's folders (see exercises/README.md, Rosters). What a student types in the
``# STUDENT`` cell only fills the gaps (:func:`d2lattn.grading.batch.submissions.name_students`)."""
import re
from collections import namedtuple

HandIn = namedtuple("HandIn", "system key name order original")
HandIn.__doc__ = """A submission's identity from its file or folder name: ``system`` (canvas,
moodle, classroom or file), ``key`` (what the roster is matched by: Canvas's user id, Moodle's
full name, the folder's or file's name, without ``.ipynb``), ``name`` (the student id
without a roster), ``order`` (the hand-in time where the name records it: a later one
sorts higher) and ``original`` (the
file name the student uploaded)."""

# lastfirst[_LATE]_<user id>_<submission id>_<the uploaded file's name>
CANVAS = re.compile(r"(?P<name>[A-Za-z-]+)(?P<late>_LATE)?_(?P<user>\d+)_(?P<sub>\d+)_"
                    r"(?P<original>.+)")
# Full Name_<participant number>_assignsubmission_file_[<the uploaded file's name>]
MOODLE = re.compile(r"(?P<name>.+?)_(?P<number>\d+)_assignsubmission_[a-z]+_(?P<original>.*)")


def hand_in(entry, folder=False):
    """The :class:`HandIn` of a class folder's entry ``entry`` (a ``.ipynb`` file, or a
    folder if ``folder``)."""
    moodle = MOODLE.fullmatch(entry)
    if moodle:
        full = " ".join(moodle["name"].split())
        return HandIn("moodle", plain_name(full), full, (), moodle["original"])
    canvas = None if folder else CANVAS.fullmatch(entry)
    if canvas:
        return HandIn("canvas", canvas["user"], f"{canvas['name']}_{canvas['user']}",
                      (bool(canvas["late"]), int(canvas["sub"])), canvas["original"])
    stem = entry[:-len(".ipynb")] if entry.endswith(".ipynb") else entry
    return HandIn("classroom" if folder else "file", stem, stem, (), entry)


def plain_name(name):
    """A person's name as compared: ``Ada  LOVELACE`` and ``Lovelace, Ada`` are
    ``ada lovelace``."""
    last, comma, first = name.partition(",")
    if comma:
        name = f"{first} {last}"
    return " ".join(name.casefold().split())


def login_of(key, logins, folder):
    """The roster login a file's or folder's ``key`` names: the login itself, or, for a
    folder, ``<assignment>-<login>`` (GitHub Classroom; the longest login that fits)."""
    key = key.lower()
    if key in logins:
        return key
    if folder:
        fits = [login for login in logins if key.endswith("-" + login)]
        return max(fits, key=len) if fits else None
    return None
