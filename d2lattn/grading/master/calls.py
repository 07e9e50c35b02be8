"""A test case as data: which of its steps run beside the master only, and what a submission's
sandbox receives of it (the call).

A case's examples are split at release, from their source alone:

- the steps before the first one that names an *answer* (a name a question cell of the master
  defines, see :func:`answer_names`) run only in the master's run at release: setup values,
  helpers such as ``def reference(...)``, imports;
- from that step on, every step is sent to the sandbox as a *call*: its source with every
  sub-expression that names no answer, no name the case bound and no name local to a
  ``lambda`` or comprehension replaced by an *input* (``__in0``, ``__in1``, ...), a value the
  master's run computes at release and the bundle stores (see
  :mod:`d2lattn.grading.sandbox.runner`).
  A value the case made before its first call and that a call passes as it is (``X`` of
  ``softmax(X)``), or that a later call reads (an earlier call may have changed it), reaches
  the sandbox in the case's *scope*: the values taken just before the first call, in one
  piece, so that objects that share parts still share them. Inside a larger input of the
  first call it is only part of that input (``double(logits / 2)`` sends ``logits / 2``).

So the sandbox gets ``softmax(__in0)`` and the array behind ``__in0``, never the
``np.random.normal(...)`` that made it, the expected value or a helper. A step that cannot be
sent this way (a ``def`` that does not use the answer, after the first call) is refused at
release by :class:`CaseError`, naming it. A helper that drives the answer (a loop counting
its outputs) is part of the call and is sent, its own inputs made at release too.
"""
import ast
from dataclasses import dataclass, field

INPUT = "__in{}"  # the name of the k-th input of a case in the sandbox
SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class CaseError(ValueError):
    """A case that cannot be turned into data; the message says which step and why."""


@dataclass
class Step:
    """One example of a case: ``source`` as written, ``want`` its expected expression (None
    for a setup step). A step sent to the sandbox has its ``call`` (the source with inputs)
    and ``inputs``: ``(name, source)`` of each input, evaluated in the master's namespace."""
    source: str
    want: object = None
    call: object = None
    inputs: list = field(default_factory=list)


@dataclass
class Plan:
    """A case split into steps, and ``scope``: the names it bound before its first call that
    a later step uses (their values go to the sandbox with the call)."""
    steps: list
    scope: list


def answer_names(sources):
    """The names the question cells ``sources`` define at their top level: functions,
    classes and assigned names (imports left out: inputs are made with the master's)."""
    names = set()
    for source in sources:
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def plan(examples, answers):
    """The :class:`Plan` of a case's doctest ``examples`` (``(source, want)`` pairs, want
    None for a setup step) given the ``answers`` names; CaseError if a checked example comes
    before the first call (its value would not depend on the answer) or a step from the
    first call on is not an expression or an assignment."""
    steps, scope, bound, before, sent, count = [], [], set(), set(), False, [0]
    for number, (source, want) in enumerate(examples, 1):
        tree = _parse(source, number)
        step = Step(source, want)
        if not sent and not _names(tree) & answers:
            if want is not None:
                raise CaseError(f"example {number} checks a value before any example calls "
                                f"the answer: {source.strip()[:80]!r}")
            bound |= _bound(tree)
            steps.append(step)
            continue
        first = not sent
        if first:
            sent, before, bound = True, bound, set()
        # In the first call, a setup value inside a larger input is only part of that input
        # (``logits`` of ``double(logits / 2)`` never reaches the sandbox); later calls may
        # read what an earlier call changed, so they use the setup values by name.
        local = answers | bound | (set() if first else before)
        step.call, step.inputs = _call(tree, local, count, number, before - bound)
        used = _names(ast.parse(step.call)) & (before - bound)
        scope += sorted(used - set(scope))
        bound |= _bound(tree)
        steps.append(step)
    if not sent:
        raise CaseError("no example calls the answer, so nothing of it would be graded")
    return Plan(steps, scope)


def _parse(source, number):
    try:
        return ast.parse(source.strip())
    except SyntaxError as err:
        raise CaseError(f"example {number} is not Python: {err.msg}") from None


def _names(tree):
    """Every name a tree reads or binds."""
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _bound(tree):
    """The names a step binds in its own scope (assignments, loop targets, definitions,
    imports), not those local to a comprehension, lambda or function inside it."""
    names, todo = set(), list(ast.iter_child_nodes(tree))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif not isinstance(node, SCOPES):
            todo += ast.iter_child_nodes(node)
    return names


def _call(tree, local, count, number, setup):
    """``(call source, [(input name, input source)])`` of a step sent to the sandbox; a setup
    value used alone (``setup`` names) stays a name, sent with the scope. A definition in it
    must use the answer (a helper that drives it, such as a loop that counts
    its outputs); one that does not would hand the sandbox test code, and is refused."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.AsyncFunctionDef, ast.NamedExpr, ast.Await, ast.Yield,
                             ast.YieldFrom, ast.Global, ast.Nonlocal)):
            raise CaseError(f"example {number} cannot be sent to the sandbox: "
                            f"{ast.unparse(node)[:80]!r}")
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not _names(node) & local:
            raise CaseError(f"example {number} defines {node.name}, which does not use the "
                            "answer, after the first example that calls it: define it before, "
                            "so that it runs beside the master only")
    inputs = []
    call = _Inputs(local | _bound(tree), inputs, count, setup).visit(tree)
    return ast.unparse(ast.fix_missing_locations(call)), inputs


def _literal(node):
    """True for what stays as written: a constant (-1 too), an f-string or a part of one."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    return isinstance(node, (ast.Constant, ast.JoinedStr, ast.FormattedValue))


class _Inputs(ast.NodeTransformer):
    """Replace each largest sub-expression that names nothing of ``local`` by an input. In
    code that runs more than once or later (a loop, a function, a lambda, a comprehension),
    only references are inputs (``np.array``, ``d2lattn.gelu``): a call there must be made
    each time, and a setup value is used by name."""

    def __init__(self, local, inputs, count, setup):
        self.local, self.inputs, self.count, self.setup = set(local), inputs, count, setup
        self.repeated = False

    def visit(self, node):
        if isinstance(node, ast.expr) and not _literal(node) \
                and isinstance(getattr(node, "ctx", ast.Load()), ast.Load) \
                and self._free(node):
            if isinstance(node, ast.Name) and node.id in self.setup:
                return node  # the value itself: sent with the scope, which keeps its links
            name = INPUT.format(self.count[0])
            self.count[0] += 1
            self.inputs.append((name, ast.unparse(node)))
            return ast.copy_location(ast.Name(name, ast.Load()), node)
        if isinstance(node, SCOPES + (ast.FunctionDef, ast.ClassDef, ast.For, ast.While)):
            return self._scoped(node)
        if isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call):
            node.context_expr = self.generic_visit(node.context_expr)  # a manager is no value
            if node.optional_vars is not None:
                node.optional_vars = self.visit(node.optional_vars)
            return node
        return self.generic_visit(node)

    def _free(self, node):
        """True if ``node`` can be computed at release: it names nothing local, holds no
        slice and binds nothing; in repeated code, it is a reference to a global."""
        if self.repeated:
            while isinstance(node, ast.Attribute):
                node = node.value
            return isinstance(node, ast.Name) and node.id not in self.local | self.setup
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and inner.id in self.local:
                return False
            if isinstance(inner, (ast.Slice, ast.Starred, ast.Lambda, ast.comprehension,
                                  ast.NamedExpr)):
                return False
        return True

    def _scoped(self, node):
        """Visit a loop, lambda, comprehension, function or class as repeated code, with the
        names it binds counted as local."""
        if isinstance(node, (ast.Lambda, ast.FunctionDef)):
            args = node.args
            added = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            added |= {a.arg for a in (args.vararg, args.kwarg) if a}
            if isinstance(node, ast.FunctionDef):
                added |= _bound(ast.Module(body=node.body, type_ignores=[])) | {node.name}
        elif isinstance(node, ast.ClassDef):
            added = _bound(ast.Module(body=node.body, type_ignores=[])) | {node.name}
        elif isinstance(node, (ast.For, ast.While)):
            added = set()  # what it binds is bound in the step already
        else:
            added = {n.id for gen in node.generators for n in ast.walk(gen.target)
                     if isinstance(n, ast.Name)}
        saved = self.local, self.repeated
        self.local, self.repeated = saved[0] | added, True
        try:
            return self.generic_visit(node)
        finally:
            self.local, self.repeated = saved
