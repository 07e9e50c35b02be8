"""The d2lattn copy a group of questions runs with: each forbidden object replaced by a stub
that raises, so that its code is nowhere in the sandbox (see :mod:`d2lattn.grading.sandbox`)."""
import ast
import base64
import shutil
import threading
from pathlib import Path

from ..limits import PACKAGE
from .callgraph import call_graph
from .names import body, forbidden_message


STORED_RUNS = ("*.json", "*.safetensors")  # in d2lattn/data: what tools/ stored, for the book


def shadow_package(forbid, folder):
    """Copy ``d2lattn`` into ``folder`` with each object of ``forbid`` (dotted names), and the
    private helpers that only it uses (:func:`d2lattn.grading.forbid.names.body`), replaced
    by a stub that raises PermissionError; return the copy's path. The stored runs of
    ``d2lattn/data`` (:data:`STORED_RUNS`, 3 MB that no exercise reads) are left out; its
    corpora stay. Raises ValueError for a name that is not a function or class defined at
    the top of a d2lattn module."""
    target = Path(folder) / "d2lattn"
    shutil.copytree(PACKAGE, target, ignore=_left_out)
    stubs = {}
    for dotted in list(forbid) + (body(forbid)[0] if forbid else []):
        module, name = call_graph().resolve(dotted)
        stubs.setdefault(module, {})[name] = dotted
    for module, names in stubs.items():
        path = target.joinpath(*module.split(".")[1:])
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        path.write_text(_stubbed(path.read_text(encoding="utf-8"), names), encoding="utf-8")
    return target


def _left_out(folder, names):
    left = shutil.ignore_patterns("__pycache__", "*.pyc")(folder, names)
    if Path(folder) == PACKAGE / "data":
        left |= shutil.ignore_patterns(*STORED_RUNS)(folder, names)
    return left


class Shadows:
    """``shadows(forbid)``: a d2lattn copy with ``forbid`` stubbed, as ``{relative path:
    base64 of the file}`` (what the runner writes in the sandbox; data files included), made
    once per set of names, in subfolders of ``folder``; safe to call from several threads."""

    def __init__(self, folder):
        self.folder, self.made, self.lock = Path(folder), {}, threading.Lock()

    def __call__(self, forbid):
        key = tuple(sorted(forbid))
        with self.lock:
            if key not in self.made:
                package = shadow_package(key, self.folder / f"shadow{len(self.made)}")
                self.made[key] = {
                    str(path.relative_to(package.parent)): base64.b64encode(
                        path.read_bytes()).decode() for path in package.rglob("*")
                    if path.is_file()}
            return self.made[key]


def _stubbed(text, names):
    """Module source with the top-level definitions of ``names`` replaced by raising stubs."""
    lines = text.splitlines()
    for node in sorted(ast.parse(text).body, key=lambda n: n.lineno, reverse=True):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            message = forbidden_message(names[node.name])
            body = (f"def {node.name}(*args, **kwargs):\n    raise PermissionError({message!r})"
                    if isinstance(node, ast.FunctionDef) else
                    f"class {node.name}:\n"  # instances may exist; using one raises
                    f"    def __init__(self, *args, **kwargs):\n        pass\n\n"
                    f"    def __getattr__(self, name):\n"
                    f"        raise PermissionError({message!r})\n\n"
                    f"    def __call__(self, *args, **kwargs):\n"
                    f"        raise PermissionError({message!r})")
            lines[start:node.end_lineno] = body.splitlines()
    return "\n".join(lines) + "\n"
