"""Graded exercises: ``check`` for students; ``release`` and ``grade`` for instructors.

The master format, the bundle and the commands are described in exercises/README.md; which
rule lives in which file, in this folder's README.md. Sub-packages by job: :mod:`.releasing`
(masters in, student notebooks and the bundle out), :mod:`.batch` (grading a class),
:mod:`.one_notebook` and :mod:`.scores` (one notebook graded, which both run), :mod:`.master`
(the master format and case records), :mod:`.forbid` (forbidden names), :mod:`.sandbox`
(bubblewrap, seccomp, the runner); every limit in :mod:`.limits`. The grader's process
imports neither MXNet nor a model module (the package root imports them on first use).
"""
from .batch.grade_folder import grade
from .releasing import release
from .student import check, register

__all__ = ["check", "grade", "register", "release"]
