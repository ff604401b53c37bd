"""Which way imports go inside ``ordmix_core`` (docs/architecture.md), read from the source.

Every ``import`` statement of every module counts, those inside functions too (a lazy import
is still a dependency: the circle this test first caught, the Dask engine importing the CLI's
writer that imports the Dask engine, was a lazy one).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "ordmix_core"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of the package that ``name`` imports (statements anywhere in the file).

    ``from X import y`` is an import of the module ``X.y`` when that is a module of the
    package, else of ``X`` (``y`` is a name defined there).
    """
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
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
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "streamlit" or n.startswith("streamlit.") for n in names):
                offenders.append(name)
    assert offenders == []
