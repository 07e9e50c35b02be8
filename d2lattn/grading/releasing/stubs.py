"""Trivial answers: what release grades a master's questions against, besides the master
itself and its blank student version, so that no scored case gives points away.

For each question, each variant rewrites the question cell's answer: every function (and
every method of a class) returns the same kind of trivial value, and every one-line answer
``name = value  # SOLUTION`` gets a trivial value. The kinds: each input unchanged, zeros
and ones of each input's shape, zeros and ones in the form of the master's own answer (its
types, shapes, dtypes and contexts: what a format check sees), None, a few constants, and the
expected values of the question's public examples, replayed whatever the input. An answer
that is a tuple (a function whose master returns one, a tuple assigned) also gets tuples of
each of these.
"""
import ast
import math

from ..master.notebook import ONE_LINE

CONSTANTS = (0, 1, -1, 0.5, 2, "")
PRELUDE = '''def _stub_copy(a):
    import copy

    try:
        return copy.deepcopy(a)
    except Exception:
        return a


def _stub_like(a, fill):
    if isinstance(a, (tuple, list)):
        return type(a)(_stub_like(item, fill) for item in a)
    try:
        return a * 0 + fill
    except Exception:
        return fill


def _stub_array(data, dtype):
    import sys

    mx = sys.modules.get("mxnet")
    if mx is not None and dtype != "object":
        return mx.np.array(data, dtype=dtype)
    import numpy

    return numpy.array(data, dtype=dtype)
'''


def variants(source, replays):
    """``[(label, cell source)]``: the trivial answers of a master question cell ``source``;
    ``replays`` are the plain expected values of the question's public examples."""
    tree = ast.parse(source)
    lines = source.splitlines()
    functions = [node for node in _answers(tree, lines) if isinstance(node, ast.FunctionDef)]
    width = max((len(_arguments(f)) for f in functions), default=0)
    kinds = [(f"returns its input {i + 1} unchanged", ("arg", i)) for i in range(width)]
    kinds += [(f"returns {name} of the shape of its input {i + 1}", (name, i))
              for i in range(width) for name in ("zeros", "ones")]
    kinds += [(f"returns {name} in the form of the master's answer", ("form", fill))
              for name, fill in (("zeros", 0), ("ones", 1))]
    kinds += [("returns None", ("value", "None"))]
    kinds += [(f"returns the constant {c!r}", ("value", repr(c))) for c in CONSTANTS]
    kinds += [(f"replays the expected value of public example {k + 1}", ("value", text))
              for k, text in enumerate(map(literal, replays)) if text is not None]
    if _tuples(tree, lines):  # the master's own form is a tuple already
        kinds += [(f"{label}, as a tuple", (how, what, True)) for label, (how, what) in kinds
                  if how != "form" and not label.startswith("replays")]
    return [(label, _rewrite(source, kind)) for label, kind in kinds]


def _tuples(tree, lines):
    """True if an answer of the master is a tuple (returned or assigned)."""
    return any(isinstance(node, ast.Tuple) for answer in _answers(tree, lines)
               for node in ([answer.value] if not isinstance(answer, ast.FunctionDef) else
                            [n.value for n in ast.walk(answer) if isinstance(n, ast.Return)]))


def _width(node):
    """The length of the tuple a master's answer returns or assigns (1 if none)."""
    values = [node.value] if not isinstance(node, ast.FunctionDef) else \
        [n.value for n in ast.walk(node) if isinstance(n, ast.Return)]
    return max([len(v.elts) for v in values if isinstance(v, ast.Tuple)], default=1)


def literal(value):
    """Python source for a plain value (see :func:`d2lattn.grading.sandbox.runner.encode`), or None
    for a kind that has no literal (a type, a context, an object)."""
    kind, v = value.get("t"), value.get("v")
    if kind in ("none", "bool", "str"):
        return repr(v)
    if kind == "num":
        return repr(v) if math.isfinite(v) else f"float({str(v)!r})"
    if kind == "array":
        return f"_stub_array({v!r}, {value['dtype']!r})".replace("nan", "float('nan')")
    if kind in ("list", "tuple", "set"):
        parts = [literal(item) for item in v]
        if None in parts:
            return None
        inner = ", ".join(parts)
        return {"list": f"[{inner}]", "tuple": f"({inner}{',' if len(parts) == 1 else ''})",
                "set": f"{{{inner}}}" if parts else "set()"}[kind]
    if kind == "dict":
        parts = [(literal(key), literal(item)) for key, item in v]
        if any(None in part for part in parts):
            return None
        return "{" + ", ".join(f"{key}: {item}" for key, item in parts) + "}"
    if kind == "dtype":
        return f"__import__('numpy').dtype({v!r})"
    return None


def _answers(tree, lines):
    """The answer nodes of a question cell: its top-level functions, the methods of its
    classes, and its one-line ``# SOLUTION`` assignments."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from (item for item in node.body if isinstance(item, ast.FunctionDef))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) \
                and ONE_LINE.match(lines[node.lineno - 1]):
            yield node


def _arguments(function):
    names = [a.arg for a in function.args.posonlyargs + function.args.args
             + function.args.kwonlyargs]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def _rewrite(source, kind):
    """``source`` with every answer replaced by the trivial value of ``kind``."""
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in list(_answers(tree, lines)):
        if kind[0] == "form":
            _in_form(node, kind[1])
            continue
        names = _arguments(node) if isinstance(node, ast.FunctionDef) else []
        value = _value(kind[:2], names)
        if len(kind) > 2:
            value = "(" + ", ".join([value] * _width(node)) + ",)"
        if isinstance(node, ast.FunctionDef):
            node.body = [ast.parse(f"return {value}").body[0]]
        else:
            node.value = ast.parse(value, mode="eval").body
    return PRELUDE + "\n" + ast.unparse(ast.fix_missing_locations(tree))


def _in_form(node, fill):
    """Make an answer return ``fill`` in the form of the master's own answer: the same types,
    shapes, dtypes and contexts (a format check passes), values all ``fill``. The master runs
    on copies of the inputs, so that its work on them (weights an attention layer keeps) is
    not the stub's, and what it raises (a check of its inputs) the stub does not."""
    if not isinstance(node, ast.FunctionDef):
        node.value = ast.Call(ast.Name("_stub_like", ast.Load()),
                              [node.value, ast.Constant(fill)], [])
        return
    args = node.args
    master = ast.FunctionDef("_master", args, node.body, [], None, type_params=[])
    call = [f"_stub_copy({a.arg})" for a in args.posonlyargs + args.args]
    call += [f"*_stub_copy({args.vararg.arg})"] if args.vararg else []
    call += [f"{a.arg}=_stub_copy({a.arg})" for a in args.kwonlyargs]
    call += [f"**_stub_copy({args.kwarg.arg})"] if args.kwarg else []
    node.body = [master] + ast.parse(f"try:\n    form = _master({', '.join(call)})\n"
                                     f"except Exception:\n    return {fill}\n"
                                     f"return _stub_like(form, {fill})").body


def _value(kind, names):
    how, what = kind
    if how == "value":
        return what
    if what >= len(names):
        return "None"
    if how == "arg":
        return names[what]
    return f"_stub_like({names[what]}, {0 if how == 'zeros' else 1})"

