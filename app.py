"""ordmix dashboard: ``streamlit run app.py``, plus the UI helpers every page imports.

Streamlit executes this file as ``__main__``; only then does it set up the navigation and run
the chosen page. Pages do ``from app import ...``, which imports this file as the module
``app`` and so only defines the helpers below. All session state goes through
:func:`session`; a fit runs in a worker thread (:class:`FitJob`) so the app stays responsive
and a Stop can keep the best restart found so far.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from ordmix_core import io as oio
from ordmix_core.data import COLUMN_ALIASES, Scale, fmt_scale, normalize_columns, prepare
from ordmix_core.errors import InputError
from ordmix_core.model import OrdinalMixture

ROOT = Path(__file__).resolve().parent
DEMO_DIR = ROOT / "demo_data"
#: demo sets shipped in demo_data/: label -> (ratings file, gold file)
DEMOS: dict[str, tuple[str, str]] = {
    "TREC 2010 Relevance Feedback (real: 91,783 ratings, NIST gold)": (
        "trec-rf10-ratings.csv",
        "trec-rf10-gold.csv",
    ),
    "Simulated crowd (small: 1,500 ratings, known truth)": (
        "simulated-ratings.csv",
        "simulated-gold.csv",
    ),
}
DEFAULT_DEMO = next(iter(DEMOS))
SIMULATED_DEMO = list(DEMOS)[1]
#: (script, title, icon) in navigation order
PAGES = [
    ("pages/data.py", "Data", ":material/upload_file:"),
    ("pages/fit.py", "Fit", ":material/play_circle:"),
    ("pages/items.py", "Items", ":material/format_list_numbered:"),
    ("pages/annotators.py", "Annotators", ":material/groups:"),
    ("pages/convergence.py", "Convergence", ":material/show_chart:"),
    ("pages/compare.py", "Compare", ":material/compare_arrows:"),
    ("pages/simulator.py", "Simulator", ":material/science:"),
]
_KEY = "ordmix"  # every value this app keeps lives under st.session_state[_KEY]


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Dataset:
    """Ratings ready for the engine: ``annotator, instance, rating[, query]``, plus gold."""

    name: str
    ratings: pd.DataFrame
    scale: Scale
    gold: pd.Series | None = None

    @property
    def has_query(self) -> bool:
        return "query" in self.ratings.columns


def make_dataset(
    name: str,
    ratings: pd.DataFrame,
    gold: pd.Series | None = None,
    scale: Scale | str | None = None,
) -> Dataset:
    """Normalise the columns and check every rating is on ``scale`` (default: values seen).

    Raises InputError with a message for the user.
    """
    df = normalize_columns(ratings, source=name)
    sc = scale if isinstance(scale, Scale) else None
    if isinstance(scale, str):
        sc = Scale.parse(scale)
    data = prepare(df, sc, granularity="instance", source=name)  # the engine's own checks
    if gold is not None:
        known = gold.index.isin(data.instances)
        if not known.any():
            raise InputError(
                "none of the gold file's instances occurs in the ratings; check that both "
                "files use the same instance IDs",
                source="gold",
            )
    return Dataset(name=name, ratings=df, scale=data.scale, gold=gold)


@st.cache_data(show_spinner="Reading the demo data ...", max_entries=4)
def load_demo(label: str) -> Dataset:
    """One of :data:`DEMOS`, read through the same strict readers as an upload."""
    ratings_file, gold_file = DEMOS[label]
    ratings = oio.read_ratings(DEMO_DIR / ratings_file)
    gold = oio.read_gold(DEMO_DIR / gold_file)
    return make_dataset(label, ratings, gold)


@st.cache_data(show_spinner="Reading the file ...", max_entries=4)
def read_upload(content: bytes, name: str) -> pd.DataFrame:
    """An uploaded table, every column as text (``io.read_table``); raises InputError."""
    return oio.read_table(content, name)


@st.cache_data(show_spinner="Reading the gold file ...", max_entries=4)
def read_upload_gold(content: bytes, name: str) -> pd.Series:
    """An uploaded gold file as a Series truth by instance (``io.read_gold``)."""
    return oio.read_gold(content, name)


def guess_column(columns: list[str], canonical: str) -> str | None:
    """The column whose name is an alias of ``canonical`` (annotator, instance, ...)."""
    for c in columns:
        if COLUMN_ALIASES.get(str(c).strip().lower()) == canonical:
            return c
    return None


def validation_report(ds: Dataset) -> dict[str, Any]:
    """Counts, ratings per item / annotator, duplicates, scale use and gold coverage."""
    r = ds.ratings
    per_item = r.groupby("instance", sort=False).size()
    per_ann = r.groupby("annotator", sort=False).size()
    pairs = r.duplicated(["annotator", "instance"], keep="first")
    exact = r.duplicated(keep="first")
    levels = ds.scale.values
    counts = r["rating"].value_counts().reindex(levels, fill_value=0)
    out: dict[str, Any] = {
        "ratings": len(r),
        "annotators": int(per_ann.size),
        "instances": int(per_item.size),
        "queries": int(r["query"].nunique()) if ds.has_query else None,
        "per_item": per_item.describe()[["min", "50%", "mean", "max"]].to_dict(),
        "per_annotator": per_ann.describe()[["min", "50%", "mean", "max"]].to_dict(),
        "single_rating_items": int((per_item == 1).sum()),
        "duplicate_pairs": int(pairs.sum()),
        "exact_duplicate_rows": int(exact.sum()),
        "scale": fmt_scale(levels),
        "level_counts": pd.DataFrame(
            {"level": levels, "ratings": counts.to_numpy(dtype=int)}
        ).set_index("level"),
        "unused_levels": [
            float(v) for v, n in zip(levels, counts.to_numpy(), strict=True) if n == 0
        ],
        "gold": None,
    }
    if ds.gold is not None:
        g = ds.gold
        inside = g.index.isin(per_item.index)
        off = ~np.isin(g.to_numpy(dtype=float), levels)
        out["gold"] = {
            "gold_items": len(g),
            "rated_gold_items": int(inside.sum()),
            "gold_not_rated": int((~inside).sum()),
            "gold_off_scale": int(off.sum()),
        }
    return out


# --------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class FitParams:
    """The Fit page's settings; defaults are the paper's (and the engine's)."""

    granularity: str = "query"
    ordinal: bool = True
    spam: bool = True
    updates: str = "exact"
    n_restarts: int = 10
    max_iter: int = 1000
    tol: float = 0.1
    phi: float = 10.0
    eta: float = 5.0
    lam: float = 0.1
    mu: float | None = None
    seed: int = 0

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`OrdinalMixture`."""
        kw = asdict(self)
        kw["random_state"] = kw.pop("seed")
        return kw


@dataclass
class FitResult:
    """A finished fit and what it was fitted on."""

    model: OrdinalMixture
    params: FitParams
    dataset: str
    stopped: bool = False  # the user pressed Stop: the best restart so far was kept


@dataclass
class FitJob:
    """A fit running in a worker thread; the callback reports progress and obeys Stop.

    The worker never touches streamlit; the page polls :meth:`fraction` / :meth:`status`.
    """

    dataset: Dataset
    params: FitParams
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    restart: int = 0  # the restart that reported last
    iteration: int = 0
    bound: float = float("nan")
    iters: dict[int, int] = field(default_factory=dict)  # latest iteration of each restart
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    model: OrdinalMixture | None = None
    error: str | None = None
    collected: bool = False
    peak: float = 0.0  # the bar never goes back

    #: sweeps a restart typically needs (warm-up and mixture), for the progress estimate
    TYPICAL_ITERATIONS = 40

    def callback(self, restart: int, iteration: int, bound: float) -> bool:
        """The engine's progress callback: record, and return False once Stop was pressed.

        Restarts may run side by side and in rounds, so progress is kept per restart.
        """
        self.restart, self.iteration, self.bound = restart, iteration, bound
        self.iters[restart] = iteration
        return not self.stop.is_set()

    def run(self) -> None:
        """Fit (in the worker thread); errors become :attr:`error`, never an exception."""
        try:
            model = OrdinalMixture(scale=self.dataset.scale, **self.params.engine_kwargs())
            self.model = model.fit(self.dataset.ratings, callback=self.callback)
        except InputError as err:
            self.error = str(err)
        except Exception as err:  # noqa: BLE001 - shown to the user instead of a traceback
            self.error = f"the fit failed unexpectedly ({type(err).__name__}: {err})"
        finally:
            self.finished = time.perf_counter()
            self.done.set()

    def start(self) -> FitJob:
        threading.Thread(target=self.run, name="ordmix-fit", daemon=True).start()
        return self

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    @property
    def seconds(self) -> float:
        return (self.finished or time.perf_counter()) - self.started

    def fraction(self) -> float:
        """Progress in [0, 1]: each restart's iterations against a typical restart's."""
        if self.done.is_set():
            return 1.0
        t = self.TYPICAL_ITERATIONS
        part = sum(i / (i + t) for i in self.iters.values()) / self.params.n_restarts
        self.peak = max(self.peak, min(part, 0.999))
        return float(self.peak)

    def status(self) -> str:
        """One line: restart, iteration, current bound, elapsed time."""
        if self.done.is_set():
            return f"finished in {self.seconds:.1f} s"
        bound = "..." if np.isnan(self.bound) else f"{self.bound:,.2f}"
        stopping = " - stopping ..." if self.stop.is_set() else ""
        n = self.params.n_restarts
        started = f" ({len(self.iters)} of {n} started)" if 1 < len(self.iters) < n else ""
        return (
            f"restart {self.restart + 1}/{n}{started} - iteration {self.iteration} "
            f"- lower bound {bound} - {self.seconds:.0f} s{stopping}"
        )


# --------------------------------------------------------------------------- session


class Session:
    """Typed access to this app's part of ``st.session_state`` (one dict under one key)."""

    def __init__(self, state: Any) -> None:
        if _KEY not in state:
            state[_KEY] = {}
        self._d: dict[str, Any] = state[_KEY]

    # the data set
    @property
    def dataset(self) -> Dataset | None:
        return self._d.get("dataset")

    @dataset.setter
    def dataset(self, ds: Dataset) -> None:
        """A new data set drops the fit (it belongs to the old data) and stops a running one."""
        if self.dataset is not None and self.dataset is ds:
            return
        job = self.job
        if job is not None and job.running:
            job.stop.set()
        self._d["dataset"] = ds
        self._d.pop("fit", None)
        self._d.pop("job", None)
        self._d.pop("last_message", None)

    # the fit
    @property
    def fit(self) -> FitResult | None:
        return self._d.get("fit")

    @fit.setter
    def fit(self, result: FitResult | None) -> None:
        self._d["fit"] = result

    @property
    def job(self) -> FitJob | None:
        return self._d.get("job")

    def start_fit(self, params: FitParams) -> FitJob:
        """Start a fit of the current data set in a worker thread."""
        if self.dataset is None:
            raise InputError("load a data set on the Data page first")
        job = FitJob(dataset=self.dataset, params=params).start()
        self._d["job"] = job
        self._d["stop_requested"] = False
        return job

    def request_stop(self) -> None:
        """The Stop button: the flag the fit's callback checks."""
        self._d["stop_requested"] = True
        if self.job is not None:
            self.job.stop.set()

    def collect(self) -> str | None:
        """Take a finished job's result into :attr:`fit`; returns a message for the user.

        A fit stopped after at least one iteration keeps its best restart so far; one that
        failed or was stopped before any iteration leaves the previous result in place.
        """
        job = self.job
        if job is None or job.running or job.collected:
            return None
        job.collected = True
        if job.model is not None:
            stopped = bool(job.model.interrupted_)
            self.fit = FitResult(job.model, job.params, job.dataset.name, stopped=stopped)
            if stopped:
                msg = (
                    f"Stopped after {job.seconds:.1f} s: kept the best restart found so far "
                    f"(restart {job.model.best_restart_} of the {len(job.model.restarts_)} "
                    "started)."
                )
            else:
                msg = f"Fit finished in {job.seconds:.1f} s."
        else:
            keep = (
                "the previous result is kept"
                if self.fit is not None
                else "there is no previous result"
            )
            what = (
                "Stopped before any restart finished an iteration"
                if job.stop.is_set()
                else (f"The fit failed: {job.error}")
            )
            msg = f"{what}; {keep}."
        self._d["last_message"] = msg
        return msg

    @property
    def last_message(self) -> str | None:
        return self._d.get("last_message")

    # free-form page state (the simulator's crowd and fit, widget memory)
    def get(self, name: str, default: Any = None) -> Any:
        return self._d.get(name, default)

    def set(self, name: str, value: Any) -> None:
        self._d[name] = value

    @property
    def widgets(self) -> dict[str, Any]:
        return self._d.setdefault("widgets", {})


def session() -> Session:
    """This browser session's state."""
    return Session(st.session_state)


def kept(widget: Callable[..., Any], label: str, *, key: str, default: Any, **kw: Any) -> Any:
    """A widget whose value survives page changes (streamlit forgets unrendered widgets)."""
    memory = session().widgets
    options = kw.get("options")

    def offered(value: Any) -> bool:
        if options is None:
            return True
        values = value if isinstance(value, list) else [value]
        return all(v in options for v in values)

    if not offered(memory.get(key, default)):
        memory.pop(key, None)  # an option no longer offered (e.g. query without a query column)
    if not offered(st.session_state.get(key, default)):
        st.session_state.pop(key, None)
    if key not in st.session_state:
        st.session_state[key] = memory.get(key, default)
    value = widget(label, key=key, **kw)
    memory[key] = value
    return value


# --------------------------------------------------------------------------- page helpers


def show_error(err: Exception, keep: str | None = None) -> None:
    """An InputError's message in an error box (never a traceback), plus what was kept."""
    st.error(str(err) + (f"\n\n{keep}" if keep else ""), icon=":material/error:")


def require_dataset() -> Dataset:
    """The loaded data set, or a pointer to the Data page and stop."""
    ds = session().dataset
    if ds is None:
        st.info("No data loaded yet: pick a demo set or upload ratings on the Data page.")
        st.page_link("pages/data.py", label="Go to Data", icon=":material/upload_file:")
        st.stop()
    return ds


def require_fit() -> FitResult:
    """The current fit, or a pointer to the Fit page and stop."""
    s = session()
    job = s.job
    if job is not None and job.running:
        st.info(f"A fit is running ({job.status()}); follow it on the Fit page.")
    res = s.fit
    if res is None:
        st.info("No fit yet: run one on the Fit page.")
        st.page_link("pages/fit.py", label="Go to Fit", icon=":material/play_circle:")
        st.stop()
    if res.stopped:
        st.caption("This fit was stopped early: it is the best restart found before the stop.")
    return res


def fit_caption(res: FitResult) -> None:
    m = res.model
    st.caption(
        f"Fit of **{res.dataset}** at {res.params.granularity} granularity: "
        f"{len(m.restarts_)} restart(s), chosen restart {m.best_restart_}, "
        f"{m.seconds_:.1f} s."
    )


def csv_download(df: pd.DataFrame, id_columns: list[str], file_name: str, key: str) -> None:
    """A download button writing ``df`` through io's formula-injection-safe CSV writer."""
    st.download_button(
        f"Download {file_name}",
        data=oio.to_csv_bytes(df, id_columns=id_columns),
        file_name=file_name,
        mime="text/csv",
        key=key,
        icon=":material/download:",
    )


def sidebar_status() -> None:
    s = session()
    ds, res, job = s.dataset, s.fit, s.job
    with st.sidebar:
        st.markdown("**ordmix** - ground truth and annotator quality from ordinal ratings")
        if ds is not None:
            st.caption(
                f"Data: {ds.name} - {len(ds.ratings):,} ratings, scale {fmt_scale(ds.scale.values)}"
                + (", with gold" if ds.gold is not None else "")
            )
        if job is not None and job.running:
            st.caption(f"Fit running: {job.status()}")
        elif res is not None:
            st.caption(
                f"Fit: restart {res.model.best_restart_} chosen, {res.model.seconds_:.1f} s"
                + (" (stopped early)" if res.stopped else "")
            )


def _setup() -> None:
    """What every page needs first: page config, a finished fit collected, the default demo."""
    st.set_page_config(page_title="ordmix", page_icon=":material/rate_review:", layout="wide")
    s = session()
    s.collect()
    if s.dataset is None and not s.get("demo_tried"):
        s.set("demo_tried", True)
        try:
            s.dataset = load_demo(DEFAULT_DEMO)
        except InputError as err:
            show_error(err, "The demo data could not be loaded; upload a file on the Data page.")
    sidebar_status()


def page_setup() -> None:
    """Call first in every page: runs :func:`_setup` unless :func:`main` already did this run.

    Streamlit runs a page file without ``app.py`` when it falls back to its ``pages/``-folder
    mode (the first run of a server process opened at a page URL; every AppTest rerun).
    """
    s = session()
    if not s.get("main_ran"):
        _setup()
    s.set("main_ran", False)


def main() -> None:
    """Set up, then run the page chosen in the navigation."""
    _setup()
    pg = st.navigation(
        [
            st.Page(path, title=title, icon=icon, default=i == 0)
            for i, (path, title, icon) in enumerate(PAGES)
        ]
    )
    session().set("main_ran", True)
    pg.run()


if __name__ == "__main__":
    import app  # the module the pages import: one copy of the classes and caches

    app.main()
