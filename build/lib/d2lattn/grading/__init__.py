"""Graded exercises: ``check`` for students; ``release`` and ``grade`` for instructors.

The master format, the bundle and the commands are described in exercises/README.md. Grading
imports no model module and not mxnet: it runs the submissions' code in their own kernels.
"""
from .batch import grade
from .releasing import release
from .student import check, register

__all__ = ["check", "grade", "register", "release"]
