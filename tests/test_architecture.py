"""Which way imports go inside ``ordmix_core`` (docs/architecture.md), read from the source.

Every ``import`` statement of every module counts, those inside functions too (a lazy import
is still a dependency: the circle this test first caught, the Dask engine importing the CLI's
writer that imports the Dask engine, was a lazy one).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

PACKAGE = "ordmix_core"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@functools.cache
def _parsed(path: Path, stamp: tuple[int, int]) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def tree_of(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once per version of the file in a test run (the tests
    below read every module, and only read the trees)."""
    st = path.stat()
    return _parsed(path, (st.st_mtime_ns, st.st_size))


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of the package that ``name`` imports (statements anywhere in the file).

    ``from X import y`` is an import of the module ``X.y`` when that is a module of the
    package, else of ``X`` (``y`` is a name defined there). Imports under ``if TYPE_CHECKING:``
    (for annotations only) do not count.
    """
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    tree = tree_of(path)
    typing_only = {  # ``if TYPE_CHECKING:`` imports: annotations, not a dependency at run time
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known and "." in t:  # ``import a.b.c``: the deepest known one
                t = t.rsplit(".", 1)[0]
            if t in known and t != name:
                out.add(t)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_graph_reads_the_package() -> None:
    """The reader itself: it sees the edges everyone knows are there."""
    g = import_graph()
    assert (
        "ordmix_core.estimators.ordinal_mixture" in g and "ordmix_core.dask_engine.estimator" in g
    )
    assert "ordmix_core.vb.sweep" in g["ordmix_core.estimators.ordinal_mixture"]
    assert "ordmix_core.estimators.ordinal_mixture" in g["ordmix_core.dask_engine.estimator"]
    assert "ordmix_core.dask_engine" in g["ordmix_core.cli.main"]  # a lazy import, inside cmd_fit
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    assert _cycles(import_graph()) == []


def test_engine_never_imports_the_command_line() -> None:
    graph = import_graph()
    cli = {m for m in graph if m == f"{PACKAGE}.cli" or m.startswith(f"{PACKAGE}.cli.")}
    offenders = {m: sorted(deps & cli) for m, deps in graph.items() if m not in cli}
    assert {m: d for m, d in offenders.items() if d} == {}


def test_engine_never_imports_streamlit() -> None:
    offenders = []
    for name, path in _modules().items():
        for node in ast.walk(tree_of(path)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "streamlit" or n.startswith("streamlit.") for n in names):
                offenders.append(name)
    assert offenders == []


# --------------------------------------------------------------------------- folders by layer
#: the folders of ordmix_core, lowest first: a module may import its own folder and those
#: before it in this list, never one after it (``errors`` and ``_version`` sit below all)
LAYERS = (
    "errors", "_version", "numerics", "data", "io", "vb", "fit", "labels", "results", "estimators",
    "dask_engine", "evaluation", "dashboard", "cli",
)  # fmt: skip
_RANK = {name: i for i, name in enumerate(LAYERS)}
_RANK["_version"] = _RANK["errors"]
DOC = ROOT.parent / "docs" / "architecture.md"


def _layer(module: str) -> str | None:
    """A module's folder (or top-level module) under ordmix_core; None for the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where a lower layer imports a higher one."""
    out = []
    for mod, deps in sorted(graph.items()):
        low = _layer(mod)
        if low is None:  # the package's __init__: the public API, above everything
            continue
        for dep in sorted(deps):
            high = _layer(dep)
            if high is None or _RANK[high] > _RANK[low]:
                out.append((mod, dep))
    return out


def test_every_folder_is_a_layer_and_the_top_level_is_short() -> None:
    entries = sorted(p.name for p in ROOT.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 15, entries
    assert {e.removesuffix(".py") for e in entries} - {"__init__"} == set(LAYERS)


def test_no_lower_layer_imports_a_higher_one() -> None:
    assert upward_imports(import_graph()) == []


def test_an_upward_import_planted_in_a_copy_is_caught(tmp_path, monkeypatch) -> None:
    """The check itself: a copy of the package with ``vb`` importing ``results`` fails it."""
    import shutil

    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "vb" / "bound.py"
    target.write_text(target.read_text() + "\nfrom ..results import decisions  # planted\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", copy)
    assert upward_imports(import_graph()) == [
        (f"{PACKAGE}.vb.bound", f"{PACKAGE}.results.decisions")
    ]


def test_the_architecture_page_names_every_module_and_only_modules_that_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z_]+(?:/[a-z_]+)*\.py)`", text))
    modules = {
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*.py")
        if p.name != "__init__.py" and p.parent != ROOT and "__pycache__" not in p.parts
    }
    missing = [n for n in named if not (ROOT / n).exists() and not (ROOT.parent / n).exists()]
    assert sorted(missing) == [], "named in docs/architecture.md but missing"
    assert sorted(modules - named) == [], "modules docs/architecture.md does not name"


#: the compiled kernels, the partitioned hash (numba) and the stored erfcx table are exempt
EXEMPT = ("vb/kernels.py", "numerics/erfcx_table.py", "data/id_hash.py")


def test_modules_and_functions_stay_short() -> None:
    """No module over 500 lines, no function over 80: a newcomer reads one in one go."""
    big, long = {}, {}
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel in EXEMPT or "__pycache__" in p.parts:
            continue
        text = p.read_text()
        n = text.count("\n")
        if n > 500:
            big[rel] = n
        for node in ast.walk(tree_of(p)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    long[f"{rel}:{node.name}"] = length
    assert big == {}, "modules over 500 lines (split them)"
    assert long == {}, "functions over 80 lines (split them)"


# --------------------------------------------------------------------------- the fit's control
#: the modules of ``fit/`` at most: a reader walks ``OrdinalMixture.fit`` -> ``race`` -> ``step``
#: -> ``sweep`` in six modules (docs/architecture.md, "The walk")
FIT_MODULES = 6


def _literal_number(node: ast.AST) -> bool:
    """A number written out, or arithmetic of numbers only (no name, no call)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _literal_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _literal_number(node.left) and _literal_number(node.right)
    return False


def fit_constants_outside_the_policy(root: Path) -> list[str]:
    """``module:NAME`` of every module-level number of ``fit/`` outside ``fit/policy.py``."""
    out = []
    for p in sorted((root / "fit").glob("*.py")):
        if p.name == "policy.py":
            continue
        for node in tree_of(p).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign) and node.value is not None:
                targets = [node.target]
            if targets and _literal_number(node.value):
                out += [f"{p.name}:{t.id}" for t in targets if isinstance(t, ast.Name)]
    return out


def test_the_fit_control_is_six_modules_with_one_policy(tmp_path) -> None:
    """``fit/`` has at most ``FIT_MODULES`` modules, and no number of its modules lives
    outside the policy (``fit/policy.py``: each with its reason); a constant planted in a
    copy is caught."""
    modules = [p.name for p in (ROOT / "fit").glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= FIT_MODULES, sorted(modules)
    assert fit_constants_outside_the_policy(ROOT) == []
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "race.py").write_text("import math\nKEEP = 2\nLOG2 = math.log(2)\n")
    assert fit_constants_outside_the_policy(tmp_path) == ["race.py:KEEP"]
