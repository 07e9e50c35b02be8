"""Static detection of forbidden names: a student who must write a function themselves must not
import the package's reference implementation instead."""
import ast
import re

MAGIC = re.compile(r"^(\s*)[%!].*$", re.M)  # IPython magics and shell lines are not Python


def forbidden_uses(cells, forbid):
    """Where the code ``cells`` (``(cell number, source)`` pairs) use a name of ``forbid``.

    A forbidden name ``pkg.name`` (e.g. ``d2lattn.masked_softmax``) is used by
    ``from pkg[.module] import name``, by an attribute ``.name`` of ``pkg`` or of anything
    imported from it (``d2lattn.masked_softmax``, ``d2l.attention.masked_softmax`` after
    ``import d2lattn as d2l``) and by ``getattr(..., "name")``. Cells that are not Python are
    skipped (they cannot run either). Returns messages like
    ``"d2lattn.masked_softmax (cell 4, line 2)"``.
    """
    trees = [(number, tree) for number, tree in ((n, _parse(text)) for n, text in cells) if tree]
    uses = []
    for dotted in forbid:
        root, name = dotted.split(".")[0], dotted.split(".")[-1]
        aliases = {root}.union(*(_aliases(tree, root) for _, tree in trees))
        uses += [f"{dotted} (cell {number}, line {line})" for number, tree in trees
                 for line in _lines_using(tree, aliases, root, name)]
    return uses


def _parse(text):
    try:
        return ast.parse(MAGIC.sub(r"\1pass", text))
    except (SyntaxError, ValueError):
        return None


def _aliases(tree, root):
    """Names a cell binds to ``root`` or to something imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or root for alias in node.names
                      if alias.name.split(".")[0] == root}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == root:
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def _lines_using(tree, aliases, root, name):
    """Line numbers of the uses of ``root``'s ``name`` in one cell's tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == root \
                and any(alias.name in (name, "*") for alias in node.names):
            yield node.lineno
        elif isinstance(node, ast.Attribute) and node.attr == name and _root(node) in aliases:
            yield node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "getattr" and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value == name:
            yield node.lineno


def _root(node):
    """The name at the start of an attribute chain ``a.b.c`` (None if it is not a name)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
