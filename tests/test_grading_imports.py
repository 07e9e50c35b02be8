"""What the grader imports (issue 42): ``python -m d2lattn.grading`` neither MXNet nor a model,
through a package root that imports its models on first use; the grading modules import one
way (d2lattn/grading/README.md), release no part of a class's grading."""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import d2lattn

ROOT = Path(__file__).resolve().parents[1]
GRADING = ROOT / "d2lattn" / "grading"


def fresh(code):
    """What ``code``, run by a fresh interpreter in the repository, prints as JSON."""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_grader_command_imports_no_mxnet_and_no_model():
    modules = fresh(
        "import json, runpy, sys\n"
        "sys.argv = ['python -m d2lattn.grading', 'grade', '--help']\n"
        "try:\n"
        "    runpy.run_module('d2lattn.grading', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))")
    assert "d2lattn.grading.batch.grade_folder" in modules  # the command line ran
    models = set(d2lattn.API) - {"device"}  # device.py: the standard library only
    loaded = [m for m in modules if m.split(".")[0] in ("mxnet", "matplotlib")
              or m.removeprefix("d2lattn.") in models]
    assert loaded == [], loaded


def test_the_package_root_imports_its_models_on_first_use_and_sets_mxnet_up():
    found = fresh(
        "import json, sys\n"
        "import d2lattn\n"
        "light = 'mxnet' in sys.modules or 'd2lattn.attention' in sys.modules\n"
        "from mxnet import np, npx\n"  # what a chapter does next
        "is_np = npx.is_np_array()\n"
        "from d2lattn import masked_softmax\n"
        "import d2lattn.attention as attention\n"
        "star = {}\n"
        "exec('from d2lattn import *', star)\n"
        "print(json.dumps({'light': light, 'np': is_np,\n"
        "    'same': masked_softmax is attention.masked_softmax\n"
        "            and d2lattn.DotProductAttention is attention.DotProductAttention,\n"
        "    'star': sorted(k for k in star if k != '__builtins__'),\n"
        "    'safe': __import__('os').environ['MXNET_SAFE_ACCUMULATION']}))")
    assert found == {"light": False, "np": True, "same": True, "star": sorted(d2lattn.__all__),
                     "safe": "1"}
    assert {"masked_softmax", "DotProductAttention", "set_seed", "try_gpu"} <= set(
        d2lattn.__all__)


def test_the_package_root_names_each_public_object_once_and_refuses_others():
    assert len(d2lattn.__all__) == len(set(d2lattn.__all__)) == 85
    for name in d2lattn.__all__:
        assert getattr(d2lattn, name).__module__.startswith("d2lattn."), name
    assert d2lattn.text.__name__ == "d2lattn.text"  # a module, imported when read
    assert {"masked_softmax", "attention"} <= set(dir(d2lattn))
    with pytest.raises(AttributeError, match="module 'd2lattn' has no attribute 'softmax'"):
        d2lattn.softmax  # noqa: B018


def test_the_version_is_the_projects():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert d2lattn.__version__ == re.search(r'^version = "(.+)"$', pyproject, re.M)[1]
    from d2lattn.version import __version__
    assert d2lattn.__version__ is __version__


def imported(folder):
    """``{module file: the d2lattn.grading modules it imports}`` of the files in ``folder``."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.name != "__init__.py":
            package = package.rpartition(".")[0]
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                names.add(f"{base}.{node.module}" if node.module else base)
            elif isinstance(node, ast.ImportFrom):
                names.add(node.module or "")
            elif isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
        found[path.relative_to(GRADING).as_posix()] = {
            name.removeprefix("d2lattn.grading.") for name in names
            if name.startswith("d2lattn.grading.")}
    return found


@pytest.mark.parametrize("folder, never", [
    ("releasing", ("batch", "__main__")),
    ("one_notebook.py", ("batch", "releasing", "__main__")),
    ("scores.py", ("batch", "releasing", "one_notebook", "__main__")),
    ("batch", ("releasing", "__main__")),
    ("student.py", ("batch", "releasing", "one_notebook", "sandbox", "__main__"))])
def test_grading_modules_import_one_way(folder, never):
    path = GRADING / folder
    found = imported(path) if path.is_dir() else {
        folder: imported(GRADING)[folder]}
    wrong = {file: sorted(name for name in names if name.split(".")[0] in never)
             for file, names in found.items()}
    assert {file: names for file, names in wrong.items() if names} == {}
    assert any(found.values()), found  # the scan reads the imports it checks
