"""A master's ``# VARIANT`` cell: its parameters drawn for one variant, the cell a student's
notebook gets instead, and the ``{{name}}`` fields of the markdown filled in (see
exercises/README.md, *Variants*).

The cell holds an import of the draws (:mod:`d2lattn.grading.variants`) and one assignment per
parameter, ``name = expression``; an expression may call the draws and use the parameters
above it. Its values are literals (numbers, strings, booleans, tuples and lists of them), so
that a student's cell states them as they are.
"""
import ast
import builtins
import re

from ..variants import DRAWS, Draws
from .notebook import cell_source, first_line

MARKER = "# VARIANT"
MODULE = "d2lattn.grading.variants"
HEADER = "# VARIANT: your own numbers (the grader runs exactly these: do not edit this cell)"
FIELD = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "float", "int", "len", "list", "max", "min", "range", "round", "sorted", "str", "sum",
    "tuple")}  # all a parameter's expression may call besides the draws
LITERALS = (int, float, str, bool)


def variant_index(nb, where="the notebook"):
    """The index of ``nb``'s variant cell (a code cell whose first line starts with
    ``# VARIANT``), or None; ValueError if it has several."""
    found = [index for index, cell in enumerate(nb["cells"])
             if cell.get("cell_type") == "code" and first_line(cell).startswith(MARKER)]
    if len(found) > 1:
        raise ValueError(f"{where}: {len(found)} variant cells (cells "
                         f"{[i + 1 for i in found]}); a master has at most one")
    return found[0] if found else None


def parameters(source, seed=None, where="the variant cell"):
    """``{name: value}`` of a master's variant cell ``source``, each draw made from
    :class:`~d2lattn.grading.variants.Draws` ``(seed)`` (None: the master's own variant).
    ValueError naming the line for a statement other than the draws' import and
    ``name = expression``, a name drawn twice, or a value that is not a literal."""
    draws = Draws(seed)
    env = {"__builtins__": BUILTINS, **{name: getattr(draws, name) for name in DRAWS}}
    params = {}
    for node in ast.parse(source).body:
        place = f"{where}, line {node.lineno}"
        if isinstance(node, ast.ImportFrom) and node.module == MODULE \
                and all(alias.name in DRAWS and alias.asname is None for alias in node.names):
            continue
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{place}: a variant cell holds `from {MODULE} import ...` "
                             f"(of {', '.join(DRAWS)}) and assignments `name = expression` "
                             f"only, got {ast.unparse(node)[:60]!r}")
        name = node.targets[0].id
        if name in params or name in DRAWS:
            raise ValueError(f"{place}: the parameter {name!r} is assigned twice or hides a "
                             "draw")
        try:
            value = eval(compile(ast.Expression(node.value), where, "eval"), env)
        except Exception as err:
            raise ValueError(f"{place}: {name} = {ast.unparse(node.value)[:60]} failed "
                             f"({type(err).__name__}: {err})") from None
        if not is_literal(value):
            raise ValueError(f"{place}: {name} must be a number, string, bool or a tuple or "
                             f"list of them, got {type(value).__name__}")
        params[name] = env[name] = value
    if not params:
        raise ValueError(f"{where}: a variant cell without a parameter")
    return params


def is_literal(value, depth=0):
    """True for what a student's variant cell can state as it is."""
    if isinstance(value, (list, tuple)) and depth < 4:
        return all(is_literal(item, depth + 1) for item in value)
    return type(value) in LITERALS and value == value and value not in (float("inf"),
                                                                         float("-inf"))


def student_source(params):
    """The variant cell of a student's notebook: one literal assignment per parameter."""
    return "\n".join([HEADER] + [f"{name} = {value!r}" for name, value in params.items()])


def stated(source):
    """``{name: value}`` of a student's variant cell as written (its literal assignments);
    None where it is not only literal assignments (an edited cell)."""
    try:
        tree = ast.parse(source)
        return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
                if _one_name(node)} if all(_one_name(node) for node in tree.body) else None
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _one_name(node):
    return isinstance(node, ast.Assign) and len(node.targets) == 1 \
        and isinstance(node.targets[0], ast.Name)


def fill(text, params, where):
    """Markdown ``text`` with each ``{{name}}`` replaced by the parameter's value; ValueError
    naming ``where`` for a field that names no parameter."""
    def value(match):
        if match[1] not in params:
            raise ValueError(f"{where}: {{{{{match[1]}}}}} names no parameter of the variant "
                             f"cell ({sorted(params)})")
        return shown(params[match[1]])

    return FIELD.sub(value, text)


def shown(value):
    """How a parameter reads in a question's text: ``0.5``, ``8``, ``(2, 3)``, ``relu``."""
    return value if isinstance(value, str) else repr(value)


def with_params(nb, params):
    """A copy of notebook ``nb`` whose variant cell states ``params`` (the cell is added at
    the top if it has none)."""
    index = variant_index(nb)
    cell = {"cell_type": "code", "id": "variant", "metadata": {}, "outputs": [],
            "execution_count": None, "source": student_source(params)}
    cells = list(nb["cells"])
    if index is None:
        cells.insert(0, cell)
    else:
        cells[index] = dict(cells[index], source=cell["source"])
    return dict(nb, cells=cells)


def cell_params(nb):
    """``{name: value}`` that a student's notebook's variant cell states, or None if it has no
    such cell or the cell is not only literal assignments."""
    try:
        index = variant_index(nb)
    except ValueError:
        return None
    return None if index is None else stated(cell_source(nb["cells"][index]))
