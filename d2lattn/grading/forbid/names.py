"""Forbidden names: where a student's code names one (a static scan of the cells), what a
forbidden object's stub says, and which private helpers do a forbidden object's work (read
from the package's call graph, :mod:`d2lattn.grading.forbid.callgraph`), so that they are stubbed
with it."""
import ast
import re

from .callgraph import call_graph

MAGIC = re.compile(r"^(\s*)[%!].*$", re.M)  # IPython magics and shell lines are not Python


def forbidden_uses(cells, forbid, only=None):
    """Where the code ``cells`` (``(cell number, source)`` pairs) use a name of ``forbid``;
    with ``only`` (a set of cell numbers), the uses in those cells only, aliases being
    followed from every cell (``import d2lattn as d2l`` in one, ``d2l.masked_softmax`` in
    another).

    A forbidden name ``pkg.name`` (e.g. ``d2lattn.masked_softmax``) is used by
    ``from pkg[.module] import name``, by an attribute ``.name`` of ``pkg`` or of anything
    imported from it (``d2lattn.masked_softmax``, ``d2l.attention.masked_softmax`` after
    ``import d2lattn as d2l``) and by ``getattr(..., "name")``. Cells that are not Python are
    skipped (they cannot run either). Returns messages like
    ``"d2lattn.masked_softmax (code cell 4, line 2)"``.
    """
    trees = [(number, tree) for number, tree in ((n, _parse(text)) for n, text in cells) if tree]
    uses = {}  # (cell, line): the first forbidden name found there (one use, not two)
    for dotted in forbid:
        root, name = dotted.split(".")[0], dotted.split(".")[-1]
        aliases = {root}.union(*(_aliases(tree, root) for _, tree in trees))
        for number, tree in trees:
            for line in _lines_using(tree, aliases, root, name):
                if only is None or number in only:
                    uses.setdefault((number, line), dotted)
    return [f"{dotted} (code cell {number}, line {line})"
            for (number, line), dotted in sorted(uses.items())]


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


def forbidden_message(dotted):
    """What a forbidden object's stub raises (a PermissionError) when it is called."""
    return f"{dotted} is forbidden in this question: it asks you to write it yourself"


def body(forbid, allow=()):
    """``(helpers, users)`` for the d2lattn objects named in ``forbid`` (dotted names).

    A forbidden object's implementation is its own code plus the private module-level
    helpers (``_name``) it calls, directly or through other helpers: ``masked_softmax``
    delegates its work to ``_masked_softmax``. ``helpers``: the dotted names of the helpers
    to stub with the forbidden objects, so that no route reaches that code: those that only
    forbidden objects use, and those that do a forbidden object's work (as long as its own
    code or longer) even if other public objects use them too, unless an object of ``allow``
    does. ``users``: ``{helper: [public objects]}``, the other public objects that stop
    working with those helpers (``ScoredAttention`` when ``masked_softmax`` is forbidden).
    Validators (``_check...``) check arguments and compute nothing: never stubbed.
    """
    graph = call_graph()
    forbidden = {graph.resolve(name) for name in forbid}
    dead = {node for node in graph.nodes if graph.reaches(node, forbidden)}
    mine = set().union(*(graph.helpers(node) for node in forbidden))
    alive = {node: graph.helpers(node) for node in graph.public - dead}
    allowed = set().union(*(graph.helpers(graph.resolve(name)) | {graph.resolve(name)}
                            for name in allow))
    work = {h for node in forbidden for h in graph.helpers(node)
            if graph.size(h) >= graph.size(node)} - allowed
    shared = set().union(*alive.values())
    users = {}
    for node, reached in alive.items():
        for helper in reached & work:
            users.setdefault(_dotted(helper), []).append(_dotted(node))
    helpers = (mine - shared) | work
    return sorted(_dotted(h) for h in helpers), \
        {helper: sorted(names) for helper, names in sorted(users.items())}


def _dotted(node):
    return f"{node[0]}.{node[1]}"
