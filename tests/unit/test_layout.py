"""Unit tier: the rules of the house (docs/internals.md), checked on the source itself."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import raytrace_kit

PACKAGE = Path(raytrace_kit.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))
MODULE_IDS = [str(path.relative_to(PACKAGE)) for path in MODULES]

# Private members of Ray's objects that the kit reads (see _ray_compat.py): outside
# _ray_compat, reading one is a use of Ray's private API whatever object it is read from,
# as an attribute or by name (getattr). Names the kit also gives its own members
# (``_signature``: the proxies' method) count as attributes only when read from a value of
# Ray's, and by name always (the kit reads its own members as attributes).
RAY_PRIVATE_MEMBERS = frozenset(
    {
        "_private",
        "_raylet",
        "global_worker",
        "_default_options",
        "_function",
        "_actor_id",
        "_remote",
        "__ray_metadata__",
        "__ray_actor_class__",
        # Ray 2.40's ActorMethod, which has no _signature: its handle's signatures.
        "_actor_hard_ref",
        "_actor_ref",
        "_method_name",
        "_ray_method_signatures",
    }
)
RAY_PRIVATE_BY_NAME = RAY_PRIVATE_MEMBERS | {"_signature"}
_BY_NAME = frozenset({"getattr", "setattr", "hasattr", "delattr"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
RAY, COMPAT = "ray", "compat"  # a name bound to Ray (or a value of Ray's); to _ray_compat
# Names __init__.py serves lazily to a tool rather than to users: not API, so not in __all__.
NOT_API = frozenset({"load_ipython_extension"})  # IPython's entry point for %load_ext


def _is_private(name: str) -> bool:
    """``_x`` (one leading underscore), not a dunder such as ``__class__``."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_ray_module(dotted: str) -> bool:
    """``ray._private.worker``, ``ray._raylet``: a module of Ray's that is not public."""
    root, *parts = dotted.split(".")
    return root == "ray" and any(_is_private(p) or p in RAY_PRIVATE_MEMBERS for p in parts)


def _root(node: ast.expr) -> tuple[ast.expr, int]:
    """The name an expression is reached from (``ray`` in ``ray.a().b[0]``), and how far."""
    depth = 0
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript | ast.Await | ast.Starred):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return node, depth
        depth += 1


def _from_ray(node: ast.expr, bound: dict[str, str]) -> bool:
    """Whether ``node`` is Ray (a module of it) or a value reached from Ray.

    Anything reached through ``_ray_compat`` counts (its functions hand out Ray's objects),
    but not ``_ray_compat`` itself: its own private helpers are not Ray's.
    """
    root, depth = _root(node)
    kind = bound.get(root.id) if isinstance(root, ast.Name) else None
    return kind == RAY or (kind == COMPAT and depth > 0)


def _bind_import(node: ast.Import | ast.ImportFrom, bound: dict[str, str]) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            top = alias.name.split(".")[0]
            if top == "ray":
                bound[alias.asname or top] = RAY
            elif alias.name.endswith("._ray_compat") and alias.asname:
                bound[alias.asname] = COMPAT
        return
    module = node.module or ""
    for alias in node.names:
        name = alias.asname or alias.name
        if module == "ray" or module.startswith("ray."):
            bound[name] = RAY
        elif alias.name == "_ray_compat":
            bound[name] = COMPAT
        elif module.endswith("_ray_compat"):
            bound[name] = RAY  # ActorClass, RemoteFunction... re-exported from Ray


def _scope_nodes(body: list[ast.AST]) -> tuple[list[ast.AST], list[ast.AST]]:
    """The nodes of one scope, and the scopes nested in it (functions, lambdas, classes)."""
    own: list[ast.AST] = []
    nested: list[ast.AST] = []
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            nested.append(node)
            continue
        own.append(node)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return own, nested


def _header(scope: ast.AST) -> list[ast.AST]:
    """What a nested scope's definition evaluates in the enclosing one."""
    if isinstance(scope, ast.ClassDef):
        return [*scope.decorator_list, *scope.bases, *scope.keywords]
    args = scope.args  # type: ignore[attr-defined]
    defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    return [*getattr(scope, "decorator_list", []), *defaults]


def _bindings(own: list[ast.AST], inherited: dict[str, str]) -> dict[str, str]:
    """Names bound to Ray or to _ray_compat in this scope: imports, and assignments of them."""
    bound = dict(inherited)
    changed = True
    while changed:
        before = dict(bound)
        for node in own:
            if isinstance(node, ast.Import | ast.ImportFrom):
                _bind_import(node, bound)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and _from_ray(node.value, bound):
                        bound[target.id] = RAY
        changed = bound != before
    return bound


def _import_module_target(node: ast.Call) -> str | None:
    """What ``importlib.import_module("...")`` or ``__import__("...")`` loads, if a literal."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    package = node.args[1] if len(node.args) > 1 and name == "import_module" else None
    package = next((k.value for k in node.keywords if k.arg == "package"), package)
    if first.value.startswith(".") and isinstance(package, ast.Constant):
        return f"{package.value}{first.value}"
    return first.value


def _uses(node: ast.AST, bound: dict[str, str]) -> Iterator[str]:
    """Why ``node`` uses Ray's private API, if it does."""
    if isinstance(node, ast.Import):
        yield from (f"import {a.name}" for a in node.names if _private_ray_module(a.name))
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
        if node.module == "ray" or node.module.startswith("ray."):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if _private_ray_module(name):
                    yield f"from {node.module} import {alias.name}"
    elif isinstance(node, ast.Call):
        target = _import_module_target(node)
        if target and _private_ray_module(target):
            yield f"import_module({target!r})"
        func, args = node.func, node.args
        if isinstance(func, ast.Name) and func.id in _BY_NAME and len(args) > 1:
            member = args[1].value if isinstance(args[1], ast.Constant) else None
            if isinstance(member, str) and (
                member in RAY_PRIVATE_BY_NAME or (_is_private(member) and _from_ray(args[0], bound))
            ):
                yield f"{func.id}(..., {member!r})"
    elif isinstance(node, ast.Attribute) and (
        node.attr in RAY_PRIVATE_MEMBERS
        or (_is_private(node.attr) and _from_ray(node.value, bound))
    ):
        yield f".{node.attr} in {ast.unparse(node)}"


def private_ray_uses(source: str) -> list[str]:
    """Every use of Ray's private API in ``source``, as ``"line N: what"``, in order.

    Caught: imports of Ray's private modules however spelt (``import ray._private.x``,
    ``from ray._private import x``, ``from ray import _raylet``, ``importlib.import_module``
    or ``__import__`` of one), an ``_``-prefixed attribute of anything reached from Ray (a
    ``ray`` module, a name imported from one, a value computed from those, anything handed
    out by ``_ray_compat``), and Ray's known private members (:data:`RAY_PRIVATE_MEMBERS`)
    read from any object, as attributes or by name (``getattr(x, "_default_options")``,
    also :data:`RAY_PRIVATE_BY_NAME`).
    Names are followed through assignments within a function, not across functions.
    """
    found: list[tuple[int, str]] = []

    def visit(body: list[ast.AST], inherited: dict[str, str]) -> None:
        own, nested = _scope_nodes(body)
        bound = _bindings(own, inherited)
        for node in own:
            found.extend((getattr(node, "lineno", 0), why) for why in _uses(node, bound))
        for scope in nested:
            visit(_header(scope), bound)  # decorators, defaults, bases: the outer scope's
            inner = scope.body if isinstance(scope.body, list) else [scope.body]
            if isinstance(scope, ast.ClassDef):
                visit(inner, bound)
            else:  # a parameter hides the outer name it shares
                params = {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
                visit(inner, {k: v for k, v in bound.items() if k not in params})

    visit(ast.parse(source).body, {})
    return [f"line {line}: {why}" for line, why in sorted(set(found))]


class TestRaysPrivateApi:
    """Ray's private API is used in _ray_compat.py only: a Ray upgrade is one file to check."""

    @pytest.mark.parametrize("path", MODULES, ids=MODULE_IDS)
    def test_only_ray_compat_uses_it(self, path: Path) -> None:
        """No module but _ray_compat.py reads a private member or module of Ray's."""
        if "_ray_compat" in path.relative_to(PACKAGE).parts:
            return
        uses = private_ray_uses(path.read_text(encoding="utf-8"))
        assert not uses, (
            f"{path.relative_to(PACKAGE)} uses Ray's private API; move each use into a function"
            " of _ray_compat.py that says why no public API does the job:\n  " + "\n  ".join(uses)
        )

    @pytest.mark.parametrize(
        "source",
        [
            "import ray._private.worker",
            "import ray._raylet as raylet",
            "from ray._private import state",
            "from ray._private.utils import check_oversized_function",
            "from ray import _private",
            "from ray import _raylet as r",
            "from ray.worker import global_worker",
            "import importlib\nimportlib.import_module('ray._private.worker')",
            "from importlib import import_module\nimport_module('._raylet', package='ray')",
            "__import__('ray._private.state')",
            "import ray\nray._private.worker.global_worker",
            "import ray\nray.worker.global_worker.mode",
            "import ray\nw = ray.get_runtime_context()._worker",
            "from ray.actor import ActorMethod\nActorMethod._remote = None",
            "import ray.actor\nm = ray.actor.ActorMethod\ndef f():\n    return m._signature",
            "def f(x):\n    return x._default_options",
            "def f(remote):\n    return remote._function",
            "def f(h):\n    return h._actor_id.hex()",
            "def f(c):\n    return c.__ray_metadata__.modified_class",
            "def f(x):\n    return getattr(x, '_default_options', {})",
            "def f(x):\n    setattr(x, '_remote', None)",
            "def f(method):\n    return getattr(method, '_signature', None) or ()",
            "import ray\ndef f():\n    return getattr(ray.actor.ActorMethod, '_signature')",
            "from raytrace_kit import _ray_compat\ncls = _ray_compat.actor_method_class()\n"
            "cls._anything",
            "from raytrace_kit._ray_compat import RemoteFunction\nRemoteFunction._x",
            "def f():\n    import ray\n    return ray._private",
            "import ray\nasync def f(ref):\n    return (await ray.get(ref))._x",
        ],
    )
    def test_the_checker_catches_every_spelling(self, source: str) -> None:
        """Each spelling of a private use is caught, with the line it is on."""
        uses = private_ray_uses(source)
        assert uses, source
        assert all(use.startswith("line ") for use in uses)

    @pytest.mark.parametrize(
        "source",
        [
            "import ray\nray.get(ray.put(1))\nray.actor.exit_actor()",
            "import ray\nray.__version__\nray.remote.__doc__",
            "import ray\nmessage = 'ray._private is private'",
            "class Proxy:\n    def _signature(self):\n        return self._signature()",
            "def f(shell):\n    return getattr(shell.compile, '_filename_map', {})",
            "def f(x):\n    return x._cache, x.__class__, getattr(x, '__wrapped__')",
            "from raytrace_kit import _ray_compat\n_ray_compat._helper()\n"
            "_ray_compat.python_function_of(f).__name__",
            "import ray\ndef f():\n    r = ray.get\ndef g(r):\n    return r._mine",
            "from raytrace_kit import _process\n_process.state._lock",
        ],
    )
    def test_the_checker_passes_clean_code(self, source: str) -> None:
        """Public Ray, dunders, strings and the kit's own private members are not flagged."""
        assert private_ray_uses(source) == []


@pytest.mark.parametrize("path", MODULES, ids=MODULE_IDS)
def test_no_global_statements_and_short_modules(path: Path) -> None:
    """Each room owns its state (no `global`); each module stays under about 400 lines."""
    tree = ast.parse(path.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Global)]
    assert len(path.read_text().splitlines()) <= 400


class TestPublicNames:
    """__init__.py names each public name three times: the three lists agree."""

    @staticmethod
    def _lists() -> tuple[dict[str, str], dict[str, str], list[str], set[str]]:
        """The TYPE_CHECKING imports, _LAZY, __all__, and names __init__ defines itself."""
        tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
        typed: dict[str, str] = {}
        lazy: dict[str, str] = {}
        public: list[str] = []
        own: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for imp in node.body:
                    assert isinstance(imp, ast.ImportFrom), ast.unparse(imp)
                    typed.update({a.asname or a.name: str(imp.module) for a in imp.names})
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                name = getattr(target, "id", "")
                if name == "_LAZY":
                    lazy = ast.literal_eval(node.value)  # type: ignore[arg-type]
                elif name == "__all__":
                    public = ast.literal_eval(node.value)  # type: ignore[arg-type]
                elif node.value is None:  # declared, served by __getattr__ (__version__)
                    own.add(name)
        return typed, lazy, public, own

    def test_each_public_name_is_in_all_three_lists(self) -> None:
        """A name in __all__ loads lazily and type-checks; no list names one the others lack."""
        typed, lazy, public, own = self._lists()
        lists = {
            "__all__": set(public) - own,
            "_LAZY": set(lazy) - NOT_API,
            "TYPE_CHECKING": set(typed) - NOT_API,
        }
        every = set().union(*lists.values())
        missing = {
            name: sorted(n for n, names in lists.items() if name not in names) for name in every
        }
        missing = {name: where for name, where in missing.items() if where}
        assert not missing, "public names missing from lists of __init__.py: " + "; ".join(
            f"{name} not in {', '.join(where)}" for name, where in sorted(missing.items())
        )

    def test_lazy_loads_each_name_from_the_module_typing_names(self) -> None:
        """_LAZY and the TYPE_CHECKING import agree on where each name comes from."""
        typed, lazy, _, _ = self._lists()
        wrong = {n: (m, typed[n]) for n, m in lazy.items() if n in typed and typed[n] != m}
        assert not wrong, "; ".join(
            f"{name}: _LAZY says {lazy_module}, TYPE_CHECKING imports from {typed_module}"
            for name, (lazy_module, typed_module) in sorted(wrong.items())
        )

    def test_all_is_sorted_without_repeats(self) -> None:
        """__all__ reads as an index: sorted, each name once."""
        _, _, public, _ = self._lists()
        assert public == sorted(set(public))


def test_import_adds_no_profiler_or_structlog() -> None:
    """Import raytrace_kit stays light: memray and structlog load on first use only."""
    code = (
        "import sys, raytrace_kit; "
        "print(sorted(m for m in ('memray', 'structlog', 'rich') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
