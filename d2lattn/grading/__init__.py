"""Graded exercises: ``check`` for students; ``release`` and ``grade`` for instructors.

The master format, the bundle and the commands are described in exercises/README.md. Grading
imports no model module: it runs each submission's code in a bubblewrap sandbox
(:mod:`.sandbox`, :mod:`.runner`) and compares the plain values it hands back in its own
process (:mod:`.values`).
"""
from .batch import grade
from .releasing import release
from .student import check, register

__all__ = ["check", "grade", "register", "release"]
