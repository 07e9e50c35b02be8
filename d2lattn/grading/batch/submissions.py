"""A class's submissions: found in a folder of notebooks or of per-student folders (GitHub
Classroom), read without following a link, their saved outputs dropped, each read in its own
``try`` (one file can only spoil its own row), and named by the student they belong to: the
roster's student the hand-in system names (:mod:`.identity`), else the one whose e-mail the
notebook's ``# STUDENT`` cell gives, else the file's name made safe."""
import ast
import hashlib
import os
import re
import stat
from collections import namedtuple
from pathlib import Path

from ..limits import MAX_BYTES, MAX_CODE, MAX_STUDENT_CELL
from ..master.notebook import STUB, STUDENT, NotebookError, cell_source, notebook_meta, \
    parse_notebook
from .identity import hand_in, login_of, plain_name

SAFE_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,72}"  # what safe_id makes of a file's name
Submission = namedtuple("Submission", "student file notebook error name email assignment "
                                      "has_cell handin time flags note release variant",
                        defaults=(None, True, None, 0.0, (), "", None, ""))
Submission.__doc__ = """One entry of a class folder: its ``student`` id (None until named), its
``file`` (the entry's name), the ``notebook`` (a dict, None if unread) or the ``error`` saying
why not, the ``name`` and ``email`` of its ``# STUDENT`` cell, the ``assignment`` its metadata
names, ``has_cell`` (it has a ``# STUDENT`` cell), its :class:`.identity.HandIn`, ``time`` (the
file's modification time), the ``flags`` that need the instructor's attention, a ``note``
saying why, the ``release`` its metadata records (``{"version", "bundle"}`` or None) and the
``variant`` it is graded on ('' without variants)."""


def find_submissions(folder, max_bytes=MAX_BYTES, max_code=MAX_CODE):
    """``(submissions, skipped)`` of a folder: one :class:`Submission` per ``.ipynb`` file and
    per folder holding notebooks (``student`` still None), and ``[(entry, why)]`` for every
    other visible entry. A submission that cannot be read has ``error`` (why) and no
    ``notebook``. Of a folder's several notebooks the one :func:`promise` ranks first is
    the submission, the others are skipped."""
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
                continue
            read = [_read(entry.name, str(path), max_bytes, max_code, True) for path in inside]
            best = max(range(len(read)), key=lambda i: (promise(read[i]), -i))
            found.append(read[best])
            chosen = inside[best].relative_to(entry.path)
            skipped += [(f"{entry.name}/{path.relative_to(entry.path)}",
                         f"another notebook of the folder; {chosen} was graded")
                        for path in inside if path != inside[best]]
        elif entry.name.endswith(".ipynb"):
            found.append(_read(entry.name, entry.path, max_bytes, max_code))
        else:
            skipped.append((entry.name, "not a notebook (.ipynb)"))
    return found, skipped


def promise(sub):
    """How likely a notebook is the one a student meant to hand in (higher is likelier): read,
    its ``# STUDENT`` cell filled in, its metadata naming an assignment, fewer answers left as
    release's stub."""
    if sub.notebook is None:
        return (False, False, False, 0)
    stubs = sum(STUB in cell_source(cell) for cell in sub.notebook["cells"])
    return (True, bool(sub.name or sub.email), sub.assignment is not None, -stubs)


def _unread(name, error, handin):
    return Submission(None, name, None, error, "", "", handin=handin, flags=("unreadable",),
                      note=error)


def _read(name, path, max_bytes, max_code, folder=False):
    """The :class:`Submission` of one file; never raises (whatever the file holds)."""
    handin = hand_in(name, folder)
    try:
        data, when = _read_file(path, max_bytes)
        nb = parse_notebook(data)
        code = sum(len(cell_source(c)) for c in nb["cells"] if c.get("cell_type") == "code")
        if code > max_code:
            raise NotebookError(f"its code cells hold {code} characters (at most {max_code})")
        for cell in nb["cells"]:
            cell.pop("outputs", None)  # saved plots and prints: never read, never graded
            cell.pop("attachments", None)
        assignment, release = (notebook_meta(nb).get(key) for key in ("assignment", "release"))
        has_cell = any(cell.get("cell_type") == "code" and STUDENT.match(cell_source(cell))
                       for cell in nb["cells"])
        return Submission(None, name, nb, None, *student_identity(nb),
                          assignment=assignment if isinstance(assignment, str) else None,
                          has_cell=has_cell, handin=handin, time=when,
                          flags=() if has_cell else ("no # STUDENT cell",),
                          release=release if isinstance(release, dict) else None)
    except NotebookError as err:
        return _unread(name, str(err), handin)
    except Exception as err:  # noqa: BLE001 (RecursionError, MemoryError, ...): its row says so
        return _unread(name, f"unreadable notebook ({type(err).__name__})", handin)


def _read_file(path, max_bytes):
    """``(bytes, modification time)`` of a regular file, read without following a link or
    blocking."""
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
        return file.read(max_bytes + 1)[:max_bytes], info.st_mtime


def student_identity(nb):
    """``(name, email)`` written in the notebook's ``# STUDENT`` cell (``name = "..."``,
    ``email = "..."``, string literals only), ``""`` where missing or unreadable (a cell too
    long, or too deeply nested, for ``ast``)."""
    for cell in nb["cells"]:
        text = cell_source(cell)
        if cell.get("cell_type") == "code" and STUDENT.match(text):
            found = dict.fromkeys(("name", "email"), "")
            if len(text) > MAX_STUDENT_CELL:
                return "", ""
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return "", ""
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name) \
                        and node.targets[0].id in found and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str):
                    found[node.targets[0].id] = " ".join(node.value.value.split())[:200]
            return found["name"], found["email"]
    return "", ""


def name_students(submissions, roster=(), earlier=None, assigned=None):
    """``(named, dropped)``: the submissions to grade, each with its ``student`` set (unique)
    and its ``flags``, and ``[(file, why)]`` for the duplicates not graded.

    A submission is first the roster student its hand-in name identifies (:func:`roster_match`);
    where it identifies nobody, the one whose e-mail its ``# STUDENT`` cell gives, unless a
    file's name already identifies that student, or ``earlier`` (``{student: file}`` of the
    grades already kept) holds another file of theirs: then it is graded under its own id,
    flagged ``claimed identity``; so is each of several hand-ins of different people (Canvas
    user ids, Moodle names, Classroom folders, files) that type one e-mail, which none of them
    takes. A hand-in whose name identifies one roster student and whose cell types another's
    e-mail is flagged ``e-mail of another student``. Of several submissions of one student
    the latest hand-in counts (:func:`handed_in`), flagged ``duplicate``; the others are
    dropped. Everyone else's id is the hand-in name made safe. ``roster`` rows are dicts with
    ``student``, ``email``, ``login`` and, optionally, ``canvas``, ``name``. ``assigned``
    (``{file: student}``) is the instructor's word, above all of this (flagged ``identity set
    by the instructor``): ValueError if it names a file that is not there or a student id
    that is not safe."""
    by_name = _by_name(roster)
    by_email = {key.lower(): row["student"] for row in roster
                for key in (row.get("email"), row.get("login")) if key and "@" in key}
    logins = {row["login"].lower(): row["student"] for row in roster if row.get("login")}
    by_canvas = {row["canvas"]: row["student"] for row in roster if row.get("canvas")}
    assigned = _checked_assignments(assigned or {}, submissions, roster)
    owners = [assigned.get(sub.file) or roster_match(sub.handin, by_canvas, by_name, logins)
              for sub in submissions]
    own_file = dict(earlier or {})
    own_file.update((owner, sub.file) for owner, sub in zip(owners, submissions) if owner)
    subs = [flagged(sub, "identity set by the instructor", f"given as --identity {sub.file}="
                    f"{assigned[sub.file]}") if sub.file in assigned else sub
            for sub in submissions]
    subs = [other_student(sub, owner, by_email) for sub, owner in zip(subs, owners)]
    claims = {}
    for i, sub in enumerate(subs):
        claim = by_email.get(sub.email.lower()) if sub.email and not owners[i] else None
        if claim in own_file and own_file[claim] != sub.file:
            subs[i] = flagged(sub, "claimed identity",
                            f"its # STUDENT cell says {sub.email}, whose own file "
                            f"{own_file[claim]} is graded under {claim}")
        elif claim:
            claims.setdefault(claim, []).append(i)
    for claim, members in claims.items():  # hand-ins of several people type one e-mail
        people = {_person(subs[i]) for i in members}
        for i in members:
            if len(people) == 1:
                owners[i] = claim
            else:
                subs[i] = flagged(subs[i], "claimed identity", (
                    f"its # STUDENT cell says {subs[i].email}, as those of {len(people) - 1} "
                    f"other hand-in(s) do: graded under its own id (--identity decides)"))
    groups = {}
    for i, sub in enumerate(subs):
        groups.setdefault(owners[i] or ("", *_person(sub)), []).append(i)
    taken = {row["student"].lower() for row in roster}
    named, dropped = {}, []
    for owner, members in groups.items():
        best = max(members, key=lambda i: handed_in(subs[i]))
        keep, others = subs[best], [subs[i] for i in members if i != best]
        if others:
            keep = flagged(keep, "duplicate", "the latest of " + ", ".join(
                sorted(s.file for s in [keep, *others])))
        student = owner if isinstance(owner, str) else safe_id(keep.handin.name, taken)
        taken.add(student.lower())
        named[best] = keep._replace(student=student)
        dropped += [(s.file, f"duplicate: an earlier hand-in of {student}, whose {keep.file} "
                             "was graded") for s in others]
    return [named[i] for i in sorted(named)], dropped


def other_student(sub, owner, by_email):
    """``sub``, flagged ``e-mail of another student`` if the hand-in system names it
    ``owner`` but its ``# STUDENT`` cell types the e-mail of another roster student
    (``by_email``: ``{e-mail: student}``): graded as ``owner``'s all the same."""
    typed = by_email.get(sub.email.lower()) if sub.email and owner else None
    if typed is None or typed == owner:
        return sub
    return flagged(sub, "e-mail of another student", f"its # STUDENT cell says {sub.email}, "
                   f"the e-mail of roster student {typed}; graded as {owner}'s, whose hand-in "
                   f"it is")


def _person(sub):
    """Who handed ``sub`` in, as far as its hand-in name tells: ``(system, key)``."""
    return (sub.handin.system, sub.handin.key) if sub.handin else ("file", sub.file)


def _checked_assignments(assigned, submissions, roster):
    """``assigned`` if each file is a submission and each student a roster id or a safe id."""
    files, listed = {sub.file for sub in submissions}, {row["student"] for row in roster}
    for file, student in assigned.items():
        if file not in files:
            raise ValueError(f"identity names {file!r}, which is not a submission in the "
                             f"folder")
        if student not in listed and not re.fullmatch(SAFE_ID, student):
            raise ValueError(f"identity must give a roster student or an id of letters, "
                             f"digits and ._- (at most 73), got {student!r} for {file!r}")
    return assigned


def roster_match(handin, by_canvas, by_name, logins):
    """The roster student a :class:`.identity.HandIn` names, or None: Canvas's user id
    against the roster's Canvas ``ID``, Moodle's full name against its names (when only one
    student has it), a file's or Classroom folder's name against its logins."""
    if handin is None:
        return None
    if handin.system == "canvas":
        return by_canvas.get(handin.key)
    if handin.system == "moodle":
        return by_name.get(handin.key)
    login = login_of(handin.key, logins, handin.system == "classroom")
    return logins[login] if login else None


def handed_in(sub):
    """When ``sub`` was handed in, as a sort key (of one student's submissions the highest
    counts): the time the hand-in name records (Canvas: ``_LATE``, then the higher submission
    id), then the file's modification time, then the file name."""
    return sub.handin.order if sub.handin else (), sub.time, sub.file


def _by_name(roster):
    """``{plain name: student}`` of the names only one roster student has."""
    seen = {}
    for row in roster:
        if row.get("name"):
            seen.setdefault(plain_name(row["name"]), set()).add(row["student"])
    return {name: next(iter(ids)) for name, ids in seen.items() if len(ids) == 1}


def flagged(sub, flag, note):
    """``sub`` flagged ``flag``, with ``note`` added to its note."""
    return sub._replace(flags=(*sub.flags, flag), note="; ".join(filter(None, (sub.note, note))))


def safe_id(name, taken):
    """A file name as a safe, unique student id (:data:`SAFE_ID`): ``alice`` for
    ``alice.ipynb``."""
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
