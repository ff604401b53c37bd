"""The dashboard's entry point: opens on the demo, navigation, config; page-test helpers."""

from __future__ import annotations

import ast
import base64
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # as streamlit does: pages import `pages._ui` from here

TIMEOUT = 60


# --------------------------------------------------------------------------- helpers


def new_app() -> AppTest:
    """The dashboard after its first run (the default demo loaded)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    """No traceback on the page."""
    assert not at.exception, [e.value for e in at.exception]


def load_simulated_demo(at: AppTest) -> AppTest:
    """Load the small simulated demo set through the Data page."""
    at.switch_page("pages/data.py").run()
    at.radio(key="data_source").set_value("Demo data set")
    at.selectbox(key="data_demo").set_value(ui().SIMULATED_DEMO)
    at.button(key="data_load_demo").click().run()
    assert_clean(at)
    return at


def fit_current(at: AppTest, restarts: int = 2, **widgets: object) -> AppTest:
    """Run a fit from the Fit page with few restarts (plus any widget values by key)."""
    at.switch_page("pages/fit.py").run()
    at.number_input(key="fit_n_restarts").set_value(restarts)
    for key, value in widgets.items():
        at.session_state[key] = value
    at.button(key="fit_run").click().run()
    assert_clean(at)
    return at


def demo_and_fit(restarts: int = 2) -> AppTest:
    """A fresh app with the simulated demo loaded and fitted."""
    return fit_current(load_simulated_demo(new_app()), restarts)


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly charts on the page: key -> figure spec."""
    out = {}
    for el in at.get("plotly_chart"):
        key = el.proto.id.rsplit("-", 1)[-1]
        out[key] = json.loads(el.proto.spec)
    return out


def arr(x) -> np.ndarray:
    """A figure spec's trace array: a plain list, or plotly's typed array (bdata) decoded."""
    if isinstance(x, dict) and "bdata" in x:
        return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
    return np.asarray(x)


def ui():
    """The pages' helper package (``pages/_ui``), as the pages import it."""
    import pages._ui

    return pages._ui


def navigation() -> list[tuple[str, str, str]]:
    """app.py's PAGES, read without running the app."""
    import app

    return app.PAGES


# --------------------------------------------------------------------------- tests


def test_opens_on_the_trec_demo_without_upload():
    at = new_app()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Ratings"] == "91,783"
    assert metrics["Annotators"] == "762"
    assert metrics["Queries"] == "100"
    assert metrics["Gold items"] == "3,275"
    assert any("TREC" in h for h in texts(at.header))


def test_opening_the_app_starts_the_background_compile(monkeypatch):
    """Every run asks for it (``compile_ahead.start_background`` starts it once a process, on
    a first run after install only), so that the first fit finds it done or under way."""
    from ordmix_core.estimators import compile_ahead

    calls = []
    monkeypatch.setattr(compile_ahead, "start_background", lambda: calls.append(1))
    new_app()
    assert calls


def test_every_page_is_reachable_and_says_what_it_needs_before_a_fit():
    at = new_app()
    for page, needs in [
        ("fit", None),
        ("items", "No fit yet"),
        ("annotators", "No fit yet"),
        ("convergence", "No fit yet"),
        ("compare", None),
        ("simulator", "Generate crowd"),
    ]:
        at.switch_page(f"pages/{page}.py").run()
        assert_clean(at)
        assert at.title, page
        if needs:
            assert any(needs in t for t in texts(at.info)), (page, texts(at.info))


def test_pages_folder_holds_only_the_navigation_pages():
    listed = {Path(p).name for p, _, _ in navigation()}
    scripts = {p.name for p in (ROOT / "pages").glob("*.py")}
    assert scripts == listed
    # besides the pages, only the helper package, which streamlit never lists as a page
    others = {p.name for p in (ROOT / "pages").iterdir() if p.suffix != ".py"}
    assert others - {"__pycache__"} == {"_ui"}
    assert (ROOT / "pages" / "_ui" / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def test_no_page_imports_app_and_app_only_navigates():
    helpers = sorted((ROOT / "pages").rglob("*.py"))
    assert helpers
    for path in helpers:
        assert not any(n.split(".")[0] == "app" for n in _imports(path)), path
    # the entry page: set up and navigate; no self-import, no helpers of its own
    assert _imports(APP) == {"__future__", "streamlit", "pages._ui"}
    tree = ast.parse(APP.read_text())
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)] == ["main"]


def test_upload_limit_matches_io():
    from ordmix_core.io import MAX_UPLOAD_MB

    text = (ROOT / ".streamlit" / "config.toml").read_text()
    found = re.findall(r"^\s*maxUploadSize\s*=\s*(\d+)", text, flags=re.M)
    assert found == [str(MAX_UPLOAD_MB)]
    at = new_app()
    at.radio(key="data_source").set_value("Upload a file").run()
    assert any(f"{MAX_UPLOAD_MB} MB" in c for c in texts(at.caption))


def test_every_widget_has_a_key():
    widgets = {
        "button", "download_button", "file_uploader", "selectbox", "number_input", "slider",
        "text_input", "toggle", "radio", "checkbox", "plotly_chart", "dataframe",
    }  # fmt: skip
    missing = []
    for path in [APP, *sorted((ROOT / "pages").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in widgets | {"kept"} and not any(k.arg == "key" for k in node.keywords):
                missing.append(f"{path.name}:{node.lineno} {name}")
    assert not missing


def test_core_never_imports_streamlit():
    for path in (ROOT / "ordmix_core").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "streamlit" for n in names), path


@pytest.mark.parametrize("page", ["items", "annotators", "convergence"])
def test_result_pages_point_to_the_fit_page(page):
    at = new_app()
    at.switch_page(f"pages/{page}.py").run()
    links = [el.proto.page for el in at.get("page_link")]
    assert any(link.endswith("fit.py") or "fit" in link for link in links), links
