"""d2lattn.grading.master.notebook: the markers of the master format, options, notebooks read."""

import pytest
from grading_support import code_cell

from d2lattn.grading.master.notebook import (
    STUB,
    NotebookError,
    parse_options,
    plain_markdown,
    question_of,
    read_notebook,
    split_tests,
    strip_solutions,
)

# --- the master format ----------------------------------------------------------------------

def test_strip_solutions_replaces_regions_and_one_line_solutions():
    text = ("def f(x):\n    '''doc'''\n    # BEGIN SOLUTION\n    y = x + 1\n    return y\n"
            "    # END SOLUTION\nanswer = 42  # SOLUTION\na, b = 1, 2 # SOLUTION\nz = 1")
    assert strip_solutions(text, "cell 1") == (
        f"def f(x):\n    '''doc'''\n    {STUB}\nanswer = ...\na, b = ...\nz = 1")


@pytest.mark.parametrize("text, error", [
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION",
     r"cell 1, line 2: # BEGIN SOLUTION inside a solution region"),
    ("x = 1\n# END SOLUTION", r"cell 1, line 2: # END SOLUTION without # BEGIN SOLUTION"),
    ("# BEGIN SOLUTION\nx = 1", r"cell 1: # BEGIN SOLUTION without # END SOLUTION"),
    ("# BEGIN SOLUTIONS\nx = 1", r"cell 1, line 1: unrecognised solution marker"),
    ("# BEGIN SOLUTON\nx = 1\n# END SOLUTION", r"cell 1, line 1: unrecognised solution marker"),
    ("# begin solution\nx = 1\n# end solution", r"cell 1, line 1: unrecognised solution"),
    ("#BEGIN SOLUTION\nx = 1", r"cell 1, line 1: unrecognised solution marker"),
    ("x = 1  # solution", r"cell 1, line 1: unrecognised solution marker"),
    ("x += 1  # SOLUTION", r"cell 1, line 1: unrecognised solution marker"),
    ("# BEGIN SOLUTION\nx = 1  # Solution\n# END SOLUTION", r"cell 1, line 2: unrecognised"),
])
def test_strip_solutions_rejects_ambiguous_markers_instead_of_leaking(text, error):
    with pytest.raises(ValueError, match=error):
        strip_solutions(text, "cell 1")


def test_split_tests_splits_cases_at_blank_lines_and_hidden_ones_at_the_marker():
    public, hidden = split_tests("# a\n>>> 1\n1\n\n>>> 2\n2\n# HIDDEN\n# c\n>>> 3\n3", "cell 5")
    assert public == ["# a\n>>> 1\n1", ">>> 2\n2"] and hidden == ["# c\n>>> 3\n3"]
    assert split_tests(">>> 1\n1", "cell 5") == ([">>> 1\n1"], [])


@pytest.mark.parametrize("text, error", [
    (">>> 1\n1\n# HIDDEN\n>>> 2\n2\n# HIDDEN\n>>> 3\n3", r"cell 5: more than one # HIDDEN line"),
    ("# just a comment\n\n>>> 1\n1", r"cell 5: a case without a >>> example"),
    (">>> 1\n1\n# Hidden\n>>> 2\n2", r"cell 5, line 4: '# Hidden' looks like the marker"),
    (">>> 1\n1\n#HIDDEN\n>>> 2\n2", r"'#HIDDEN' looks like the marker"),
    (">>> 1\n1\n# HIDDEN:\n>>> 2\n2", r"'# HIDDEN:' looks like the marker"),
    (">>> 1\n1\n# hiden\n>>> 2\n2", r"'# hiden' looks like the marker"),
])
def test_split_tests_rejects_malformed_tests(text, error):
    with pytest.raises(ValueError, match=error):
        split_tests(text, "cell 5")


def test_parse_options_defaults_points_and_forbidden_names():
    assert parse_options("q", "") == {"points": 1.0, "forbid": []}
    assert parse_options("q", " points=2.5 forbid=d2lattn.masked_softmax,d2lattn.bleu") == \
        {"points": 2.5, "forbid": ["d2lattn.masked_softmax", "d2lattn.bleu"]}


@pytest.mark.parametrize("options, error", [
    ("points=0", r"question q: points must be a positive number, got '0'"),
    ("points=two", r"question q: points must be a positive number, got 'two'"),
    ("points=nan", r"points must be a positive number"),
    ("bonus=1", r"question q: unknown option 'bonus=1'"),
])
def test_parse_options_rejects_bad_options(options, error):
    with pytest.raises(ValueError, match=error):
        parse_options("q", options)


@pytest.mark.parametrize("text, reason", [
    ("", "empty file"), ("  \n", "empty file"), ('{"cells": [', "not valid JSON"),
    ("[1, 2]", r"not a Jupyter notebook \(no list of cells\)"),
    ('{"cells": [1]}', "not a Jupyter notebook"), ("[" * 100_000, "not valid JSON"),
])
def test_read_notebook_says_why_a_file_is_not_a_notebook(tmp_path, text, reason):
    path = tmp_path / "x.ipynb"
    path.write_text(text)
    with pytest.raises(NotebookError, match=reason):
        read_notebook(path)
    with pytest.raises(NotebookError, match="a folder, not a notebook file"):
        read_notebook(tmp_path)
    path.write_bytes(b'{"cells": ["caf\xe9"]}')
    with pytest.raises(NotebookError, match="not UTF-8 text"):
        read_notebook(path)


def test_question_of_reads_metadata_first_then_the_header_line():
    header = code_cell("# QUESTION q7 points=2\nx = 1")
    assert question_of(header) == "q7"
    assert question_of(dict(code_cell("x = 1"), metadata={"d2lattn": {"question": "q8"}})) == "q8"
    assert question_of(code_cell("x = 1")) is None
    assert question_of(dict(header, cell_type="markdown")) is None


def test_plain_markdown_turns_myst_roles_into_text():
    text = ("See {cite}`vaswani2017`, {ref}`the figure <fig-mha>`, {ref}`sec-intro`, "
            "{doc}`Chapter 2 <02_scoring>`, {math}`x^2` and {numref}`fig-x`.")
    assert plain_markdown(text) == ("See vaswani2017, the figure, sec-intro, Chapter 2, $x^2$ "
                                    "and fig-x.")
