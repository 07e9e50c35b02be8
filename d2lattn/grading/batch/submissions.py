"""A class's submissions: found in a folder of notebooks or of per-student folders (GitHub
Classroom), read without following a link, their saved outputs dropped, and named by the
student they belong to: a roster's student (matched by the e-mail the student wrote in the
notebook, or by the file's or folder's name), else the file's name made safe."""
import ast
import hashlib
import os
import re
import stat
from collections import namedtuple
from pathlib import Path

from ..limits import MAX_BYTES, MAX_CODE
from ..master.notebook import STUDENT, NotebookError, cell_source, parse_notebook


Submission = namedtuple("Submission", "student file notebook error name email")


def find_submissions(folder, max_bytes=MAX_BYTES, max_code=MAX_CODE):
    """``(submissions, skipped)`` of a folder: one :class:`Submission` per ``.ipynb`` file and
    per folder holding notebooks (``student`` still None), and ``[(entry, why)]`` for every
    other visible entry. A submission that cannot be read has ``error`` (why) and no
    ``notebook``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"submissions must be a folder, got {str(folder)!r}")
    found, skipped = [], []
    with os.scandir(folder) as listing:
        entries = sorted((e for e in listing if not e.name.startswith(".")),
                         key=lambda e: os.fsencode(e.name))
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            inside = sorted(p for p in Path(entry.path).rglob("*.ipynb")
                            if not any(part.startswith(".") for part in p.parts)
                            and not p.is_symlink() and p.is_file())
            if not inside:
                skipped.append((entry.name + "/", "a folder without a notebook"))
            elif len(inside) > 1:
                names = ", ".join(str(p.relative_to(entry.path)) for p in inside[:5])
                found.append(_unread(entry.name, f"a folder with several notebooks ({names}): "
                                                 "hand in one"))
            else:
                found.append(_read(entry.name, str(inside[0]), max_bytes, max_code))
        elif entry.name.endswith(".ipynb"):
            found.append(_read(entry.name, entry.path, max_bytes, max_code))
        else:
            skipped.append((entry.name, "not a notebook (.ipynb)"))
    return found, skipped


def _unread(name, error):
    return Submission(None, name, None, error, "", "")


def _read(name, path, max_bytes, max_code):
    try:
        nb = parse_notebook(_read_file(path, max_bytes))
        code = sum(len(cell_source(c)) for c in nb["cells"] if c.get("cell_type") == "code")
        if code > max_code:
            raise NotebookError(f"its code cells hold {code} characters (at most {max_code})")
    except NotebookError as err:
        return _unread(name, str(err))
    for cell in nb["cells"]:
        cell.pop("outputs", None)  # saved plots and prints: never read, never graded
        cell.pop("attachments", None)
    return Submission(None, name, nb, None, *student_identity(nb))


def _read_file(path, max_bytes):
    """The bytes of a regular file, read without following a link or blocking."""
    if os.path.islink(path):
        raise NotebookError("a symbolic link, not graded")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise NotebookError(f"unreadable file ({type(err).__name__})") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotebookError("not a regular file")
        if info.st_size > max_bytes:
            raise NotebookError(f"larger than {max_bytes} bytes")
        return file.read(max_bytes + 1)[:max_bytes]


def student_identity(nb):
    """``(name, email)`` written in the notebook's ``# STUDENT`` cell (``name = "..."``,
    ``email = "..."``, string literals only), ``""`` where missing."""
    for cell in nb["cells"]:
        text = cell_source(cell)
        if cell.get("cell_type") == "code" and STUDENT.match(text):
            found = dict.fromkeys(("name", "email"), "")
            try:
                tree = ast.parse(text)
            except SyntaxError:
                return "", ""
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name) \
                        and node.targets[0].id in found and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str):
                    found[node.targets[0].id] = " ".join(node.value.value.split())[:200]
            return found["name"], found["email"]
    return "", ""


def name_students(submissions, roster=()):
    """``submissions`` with their ``student`` set, unique, and ``[(file, note)]`` for those
    the roster (rows with ``student``, ``email``, ``login``) does not know. A submission is
    the roster's student whose e-mail it gives or whose login is its file's or folder's stem;
    otherwise its id is that stem made safe (a hash added if it had to change or is taken)."""
    by_email = {row["email"].lower(): row["student"] for row in roster if row["email"]}
    by_login = {row["login"].lower(): row["student"] for row in roster if row["login"]}
    named, taken, unknown = [], set(), []
    for sub in submissions:
        stem = sub.file[:-len(".ipynb")] if sub.file.endswith(".ipynb") else sub.file
        match = by_email.get(sub.email.lower()) or by_login.get(stem.lower())
        if match and match.lower() not in taken:
            student = match
        else:
            student = safe_id(sub.file, taken)
            if roster:
                unknown.append((sub.file, "already claimed by another submission" if match
                                else "not on the roster"))
        taken.add(student.lower())
        named.append(sub._replace(student=student))
    return named, unknown


def safe_id(name, taken):
    """A file name as a safe, unique student id: ``alice`` for ``alice.ipynb``."""
    raw = os.fsencode(name)
    stem = name[:-len(".ipynb")] if name.endswith(".ipynb") else name
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", stem)[:64]
    if not safe[:1].isalnum():
        safe = "s" + safe
    if safe != stem or safe.lower() in taken:
        safe = f"{safe}_{hashlib.sha256(raw).hexdigest()[:8]}"
    return safe


def in_shard(student, shard):
    """True if ``student`` belongs to ``shard`` ``(i, n)`` (the i-th of n, from 1): decided
    by a hash of the id alone, so a shard keeps its students whatever else is handed in."""
    index, count = shard
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % count == index - 1
