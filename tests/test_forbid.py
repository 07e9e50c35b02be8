"""d2lattn.grading.forbid: the scan for forbidden names, the stubbed copy of the package, and
the layering rule (the grader imports no model module)."""
import ast
from pathlib import Path

import pytest

import d2lattn
from d2lattn.grading.forbid import shadow
from d2lattn.grading.forbid.names import forbidden_uses

# --- forbidden names ------------------------------------------------------------------------

@pytest.mark.parametrize("code, line", [
    ("from d2lattn import masked_softmax as ms\nf = ms", 1),
    ("import d2lattn\ndef f(X):\n    return d2lattn.masked_softmax(X, None)", 3),
    ("import d2lattn as d2l\nf = d2l.attention.masked_softmax", 2),
    ("from d2lattn.attention import masked_softmax", 1),
    ("import d2lattn.attention as att\nf = att.masked_softmax", 2),
    ("from d2lattn import attention\nf = attention.masked_softmax", 2),
    ("from d2lattn import *", 1),
    ("import d2lattn\nf = getattr(d2lattn, 'masked_softmax')", 2),
    ("%pip install foo\nimport d2lattn\nf = d2lattn.masked_softmax", 3),
])
def test_forbidden_uses_finds_the_reference_however_it_is_reached(code, line):
    assert forbidden_uses([(4, code)], ["d2lattn.masked_softmax"]) == \
        [f"d2lattn.masked_softmax (code cell 4, line {line})"]


def test_forbidden_uses_follows_imports_across_cells():
    cells = [(2, "import d2lattn as d"), (5, "def f(X):\n    return d.masked_softmax(X, None)")]
    assert forbidden_uses(cells, ["d2lattn.masked_softmax"]) == \
        ["d2lattn.masked_softmax (code cell 5, line 2)"]


@pytest.mark.parametrize("code", [
    "def masked_softmax(X, valid_lens):\n    return masked_softmax_helper(X)",  # their own
    "import d2lattn\nd2lattn.set_seed(0)",                                     # another name
    "import mylib\nf = mylib.masked_softmax",                                  # another package
    "obj.masked_softmax(X)",                                                   # not from d2lattn
    "def broken(:\n    d2lattn.masked_softmax",                                # cannot run
])
def test_forbidden_uses_leaves_other_code_alone(code):
    assert forbidden_uses([(1, code)], ["d2lattn.masked_softmax"]) == []




def test_shadow_package_holds_stubs_and_not_the_forbidden_code(tmp_path):
    package = shadow.shadow_package(["d2lattn.masked_softmax", "d2lattn.DotProductAttention"],
                                     tmp_path)
    text = (package / "attention.py").read_text()
    real = (Path(d2lattn.__file__).parent / "attention.py").read_text()
    assert "valid_lens" in real.split("def masked_softmax")[1][:2000]
    assert "def masked_softmax(*args, **kwargs):\n    raise PermissionError(" in text
    assert "class DotProductAttention:" in text
    assert "d2lattn.DotProductAttention is forbidden" in text
    assert not list(package.rglob("__pycache__"))
    assert (package / "grading" / "sandbox" / "runner.py").exists()
    assert (package / "pooling.py").read_text() == \
        (Path(d2lattn.__file__).parent / "pooling.py").read_text()
    with pytest.raises(ValueError, match="forbid names 'd2lattn.no_such_thing', which is not"):
        shadow.shadow_package(["d2lattn.no_such_thing"], tmp_path / "x")
    lm = shadow.shadow_package(["d2lattn.data.lm.ngram_probs"], tmp_path / "lm")  # any module
    assert "def ngram_probs(*args, **kwargs):\n    raise PermissionError(" in \
        (lm / "data" / "lm.py").read_text()


MODELS = {"attention", "bert", "decoding", "gpt", "pooling", "positional", "seq2seq",
          "transformer", "train", "data", "text", "metrics", "plotting"}


def test_the_grader_imports_no_model_module_and_no_private_name_of_another_module():
    """Imports run one way: the grader reads the package's source (its call graph) but
    imports none of its model modules, and no module takes another's private name."""
    for path in (Path(d2lattn.__file__).parent / "grading").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                source = ("." * node.level) + (node.module or "")
                assert not (source.startswith("..") and source.strip(".").split(".")[0]
                            in MODELS), (path.name, source)
                assert source != "d2lattn" and not source.startswith("d2lattn.") or \
                    source.startswith("d2lattn.grading"), (path.name, source)
                assert not any(alias.name.startswith("_") for alias in node.names), \
                    (path.name, [alias.name for alias in node.names])
            elif isinstance(node, ast.Import):
                assert not any(alias.name.startswith("d2lattn.") and alias.name.split(".")[1]
                               in MODELS for alias in node.names), path.name


def test_one_use_named_twice_in_the_forbid_list_is_reported_once():
    code = "import d2lattn\nd2lattn.attention.masked_softmax(X, None)"
    assert forbidden_uses([(3, code)], ["d2lattn.masked_softmax",
                                        "d2lattn.attention.masked_softmax"]) == [
        "d2lattn.masked_softmax (code cell 3, line 2)"]
