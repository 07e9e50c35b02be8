"""Static detection of forbidden names: a student who must write a function themselves must not
import the package's reference implementation instead."""
import ast
import re
import textwrap

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
    uses = []
    for dotted in forbid:
        root, name = dotted.split(".")[0], dotted.split(".")[-1]
        aliases = {root}.union(*(_aliases(tree, root) for _, tree in trees))
        uses += [f"{dotted} (code cell {number}, line {line})" for number, tree in trees
                 if only is None or number in only
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
    graph = _graph()
    forbidden = {graph.named(name) for name in forbid}
    dead = {node for node in graph.nodes if graph.reaches(node, forbidden)}
    mine = set().union(*(graph.helpers(node) for node in forbidden))
    alive = {node: graph.helpers(node) for node in graph.public - dead}
    allowed = set().union(*(graph.helpers(graph.named(name)) | {graph.named(name)}
                            for name in allow))
    work = {h for node in forbidden for h in graph.helpers(node)
            if graph.size(h) >= graph.size(node)} - allowed
    shared = set().union(*alive.values())
    users = {}
    for node, reached in alive.items():
        for helper in reached & work:
            users.setdefault(graph.dotted(helper), []).append(graph.dotted(node))
    helpers = (mine - shared) | work
    return sorted(graph.dotted(h) for h in helpers), \
        {helper: sorted(names) for helper, names in sorted(users.items())}


class _Graph:
    """The top-level functions and classes of d2lattn's model modules and the d2lattn objects
    each one names in its code (its edges)."""

    def __init__(self):
        import inspect
        import sys

        import d2lattn
        import d2lattn.data.pretrain  # noqa: F401 - modules the package does not import itself
        import d2lattn.gpt  # noqa: F401

        self.nodes = {}
        for name, module in list(sys.modules.items()):
            if not name.startswith("d2lattn.") or name.startswith("d2lattn.grading"):
                continue
            for attr, obj in vars(module).items():
                if (inspect.isfunction(obj) or inspect.isclass(obj)) \
                        and obj.__module__ == name and obj.__name__ == attr:
                    self.nodes[(name, attr)] = obj
        self.edges = {node: self._names(node) for node in self.nodes}
        self.public = {node for node in self.nodes
                       if not node[1].startswith("_") and not _private_module(node[0])}
        self.top = d2lattn

    def _names(self, node):
        import inspect
        import sys

        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(self.nodes[node])))
        except (OSError, TypeError, SyntaxError):
            return set()
        module = sys.modules[node[0]]
        found = set()
        for name in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}:
            obj = getattr(module, name, None)
            target = (getattr(obj, "__module__", None), getattr(obj, "__name__", None))
            if target in self.nodes and target != node:
                found.add(target)
        return found

    def size(self, node):
        """Lines of code of an object, its docstrings and blank lines left out."""
        import inspect

        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(self.nodes[node])))
        except (OSError, TypeError, SyntaxError):
            return 0
        docs = {n.body[0].value.lineno for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        lines = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.stmt) and not (isinstance(n, ast.Expr) and n.lineno in docs):
                lines.add(n.lineno)
        return len(lines)

    def named(self, dotted):
        from .shadow import _resolve

        obj = _resolve(dotted)
        return obj.__module__, obj.__name__

    def dotted(self, node):
        return f"{node[0]}.{node[1]}"

    def reaches(self, start, targets):
        """True if ``start`` is one of ``targets`` or names one, directly or not."""
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node in targets:
                return True
            if node not in seen:
                seen.add(node)
                todo += self.edges.get(node, ())
        return False

    def helpers(self, start):
        """The private helpers ``start`` reaches through private helpers, validators left out."""
        seen, todo = set(), list(self.edges.get(start, ()))
        while todo:
            node = todo.pop()
            if node in seen or not node[1].startswith("_") or node[1].startswith("_check"):
                continue
            seen.add(node)
            todo += self.edges.get(node, ())
        return seen


def _private_module(name):
    return any(part.startswith("_") for part in name.split(".")[1:])


_GRAPH = []


def _graph():
    if not _GRAPH:
        _GRAPH.append(_Graph())
    return _GRAPH[0]
