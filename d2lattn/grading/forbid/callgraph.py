"""The package's call graph, read from its source files with ``ast`` (nothing is imported, no
list of modules to keep): every function and class defined at the top of a d2lattn module
(the grader's own modules left out) and the package objects each one names in its code."""
import ast
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..limits import PACKAGE



@dataclass
class CallGraph:
    """``nodes``: ``{(module, name): ast node}``; ``edges``: ``{(module, name): {(module,
    name)}}``, the objects each one names; ``exports``: ``{module: {name: (module, name)}}``,
    what each module's imports bring in."""
    nodes: dict = field(default_factory=dict)
    edges: dict = field(default_factory=dict)
    exports: dict = field(default_factory=dict)

    @property
    def public(self):
        """The objects a student may call: no ``_`` in their name or their module's."""
        return {node for node in self.nodes if not node[1].startswith("_")
                and not any(part.startswith("_") for part in node[0].split(".")[1:])}

    def resolve(self, dotted):
        """``(module, name)`` of ``d2lattn.name`` or ``d2lattn.module.name``; ValueError if it
        is not a function or class defined at the top of a d2lattn module."""
        module, _, name = dotted.rpartition(".")
        found = self.nodes.get((module, name)) and (module, name)
        found = found or self.exports.get(module, {}).get(name)
        if not found and module == "d2lattn":  # a name only one module defines
            defined = [node for node in self.nodes if node[1] == name]
            found = defined[0] if len(defined) == 1 else None
        if found not in self.nodes:
            raise ValueError(f"forbid names {dotted!r}, which is not a function or class "
                             "defined at the top of a d2lattn module")
        return found

    def size(self, node):
        """Lines of code of an object, its docstrings and blank lines left out."""
        docs = {n.body[0].value.lineno for n in ast.walk(self.nodes[node])
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        return len({n.lineno for n in ast.walk(self.nodes[node]) if isinstance(n, ast.stmt)
                    and not (isinstance(n, ast.Expr) and n.lineno in docs)})

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
        """The private helpers ``start`` reaches through private helpers, validators
        (``_check...``, which compute nothing) left out."""
        seen, todo = set(), list(self.edges.get(start, ()))
        while todo:
            node = todo.pop()
            if node in seen or not node[1].startswith("_") or node[1].startswith("_check"):
                continue
            seen.add(node)
            todo += self.edges.get(node, ())
        return seen


@lru_cache(maxsize=1)
def call_graph(package=PACKAGE):
    """The :class:`CallGraph` of the package in the folder ``package``."""
    graph, trees = CallGraph(), {}
    for path in sorted(Path(package).rglob("*.py")):
        parts = path.relative_to(Path(package).parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module.startswith("d2lattn.grading"):
            continue
        trees[module] = (ast.parse(path.read_text(encoding="utf-8")), parts[-1] == "__init__")
    for module, (tree, is_package) in trees.items():
        graph.exports[module] = _imports(tree, module, is_package)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                graph.nodes[(module, node.name)] = node
    for (module, name), node in graph.nodes.items():
        local = {**graph.exports[module],
                 **{n: (module, n) for m, n in graph.nodes if m == module}}
        named = {local.get(n.id) for n in ast.walk(node) if isinstance(n, ast.Name)}
        named |= {(local[n.value.id][0], n.attr) for n in ast.walk(node)  # module.name
                  if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                  and local.get(n.value.id, ("", "-"))[1] == ""}
        graph.edges[(module, name)] = {target for target in named
                                       if target in graph.nodes and target != (module, name)}
    for exported in graph.exports.values():  # re-exports: follow to the definition
        for name, target in exported.items():
            while target not in graph.nodes and target[1] in graph.exports.get(target[0], {}):
                target = graph.exports[target[0]][target[1]]
            exported[name] = target
    return graph


def _imports(tree, module, is_package):
    """``{local name: (module, name)}`` of a module's top-level imports from d2lattn;
    ``(module, "")`` for a module imported as a whole."""
    here = module if is_package else module.rpartition(".")[0]
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = (f"{base}.{node.module}" if node.module else base) if node.level \
                else node.module or ""
            if source.split(".")[0] != "d2lattn":
                continue
            for alias in node.names:
                found[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "d2lattn" and alias.asname:
                    found[alias.asname] = (alias.name, "")
    for name, (source, attr) in list(found.items()):  # "from . import attention": a module
        path = PACKAGE.parent.joinpath(*source.split("."), attr)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            found[name] = (f"{source}.{attr}", "")
    return found
