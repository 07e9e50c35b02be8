"""Graded exercises: ``check`` for students; ``release`` and ``grade`` for instructors.

The master format, the bundle and the commands are described in exercises/README.md; which
rule lives in which file, in this folder's README.md. Sub-packages by job: :mod:`.master`
(the master format and case records), :mod:`.forbid` (forbidden names), :mod:`.sandbox`
(bubblewrap, seccomp, the runner), :mod:`.releasing` and :mod:`.batch` (grading a class);
every limit in :mod:`.limits`. Grading imports no model module.
"""
from .batch.grade_folder import grade
from .releasing import release
from .student import check, register

__all__ = ["check", "grade", "register", "release"]
