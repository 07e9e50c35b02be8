"""Grading by variant: each submission is graded on the variant of the student the hand-in
names, whatever its notebook says, with that variant's cases and expected values from the
bundle (:mod:`d2lattn.grading.releasing.per_student`). Its variant cell is replaced by the
variant's own; a notebook whose record or cell is not that student's variant is flagged."""
import json

from ..master.notebook import notebook_meta
from ..master.variant import cell_params, stated, student_source, with_params
from .submissions import flagged

NO_VARIANT, OTHER, EDITED = "no variant", "other variant", "edited variant"


def by_variant(sub, bundle):
    """``(sub, tests)``: the :class:`.submissions.Submission` to grade, its notebook's variant
    cell stating the right variant and ``sub.variant`` naming it, and the tests to grade it
    on. A bundle without variants grades everyone on its tests (a variant cell, if the
    master has one, states the master's own variant); a student without a variant in the
    bundle is not graded."""
    if sub.notebook is None or bundle.params is None:
        return sub, bundle.tests
    if not bundle.variants:
        cell = student_source(bundle.params)
        return _checked_cell(sub, cell, "the release's"), bundle.tests
    own = bundle.students.get(sub.student)
    if own is None:
        why = (f"the release has no variant for {sub.student} (not on its roster): not "
               f"graded; release again with them on the roster and the same secret")
        return flagged(sub, NO_VARIANT, why)._replace(notebook=None, error=why), bundle.tests
    variant = bundle.variants[own["variant"]]
    sub = _checked_record(sub, own, variant)
    sub = _checked_cell(sub, variant["cell"], f"variant {own['variant']}'s")
    return sub._replace(variant=own["variant"]), variant["tests"]


def _checked_record(sub, own, variant):
    """``sub`` flagged where its notebook's variant record is not ``own`` (the bundle's
    ``{"variant", "digest"}`` of its student)."""
    record = notebook_meta(sub.notebook).get("variant")
    if not isinstance(record, dict):
        return flagged(sub, EDITED, "its notebook records no variant (not the notebook "
                       f"released to {sub.student}): graded on {sub.student}'s own variant")
    if record.get("student") != sub.student:
        return flagged(sub, OTHER, f"its notebook is the variant released to "
                       f"{str(record.get('student'))[:64]!r}, not to {sub.student}: graded on "
                       f"{sub.student}'s own variant")
    if record.get("digest") != own["digest"] or record.get("variant") != own["variant"] \
            or _plain(record.get("params")) != _plain(variant["params"]):
        return flagged(sub, EDITED, "its variant record was edited (it does not match the "
                       f"release's digest): graded on {sub.student}'s own variant")
    return sub


def _checked_cell(sub, cell, whose):
    """``sub`` whose notebook's variant cell is ``cell``; flagged if it stated otherwise."""
    if cell_params(sub.notebook) != stated(cell) and EDITED not in sub.flags:
        sub = flagged(sub, EDITED, f"its # VARIANT cell was edited or deleted: graded with "
                      f"{whose} numbers")
    return sub._replace(notebook=with_params(sub.notebook, stated(cell)))


def _plain(value):
    """``value`` as JSON reads it back (tuples become lists), for comparing."""
    return json.loads(json.dumps(value))
