"""What every page shares: setup, the sidebar, guards, demo and upload readers, downloads."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from ordmix_core import io as oio
from ordmix_core.dashboard.fit_job import FitResult
from ordmix_core.dashboard.report import Dataset, make_dataset
from ordmix_core.data.scale import fmt_scale
from ordmix_core.errors import InputError
from ordmix_core.estimators import compile_ahead
from ordmix_core.results import decision_columns, decisions, outputs
from ordmix_core.results.agreement import CrowdAgreement, crowd_agreement

from .state import session

ROOT = Path(__file__).resolve().parents[2]
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
#: restarts are numbered from 0 on every page, as in the files of ``ordmix fit``
RESTART_HELP = "Restarts are numbered from 0, as in restarts.csv, trace.csv and summary.json."


# --------------------------------------------------------------------------- readers


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
def read_upload_gold(content: bytes, name: str, scale: str | None = None) -> pd.Series:
    """An uploaded gold file as a Series truth by instance (``io.read_gold``; with a scale of
    named levels, each truth one of the names)."""
    return oio.read_gold(content, name, scale)


@st.cache_data(show_spinner="Weighing the evidence of each annotator's ratings ...", max_entries=8)
def fit_decisions(
    _res: FitResult,
    fit_id: str,
    threshold: float = decisions.THRESHOLD,
    confidence: float = decisions.CONFIDENCE,
) -> decision_columns.Decisions:
    """``decision_columns.decide`` for a fit: the annotators' flags and the items' decision columns,
    cached per fit (``fit_id``) and settings (the flags take about a second on TREC)."""
    return decision_columns.decide(_res.model, threshold=threshold, confidence=confidence)


@st.cache_data(show_spinner=False, max_entries=8)
def dataset_agreement(_ds: Dataset, name: str, data_id: int | None = None) -> CrowdAgreement:
    """The crowd's agreement (Krippendorff's ordinal alpha and its interval) of a data set,
    computed once per data set (``name`` and the prepared data's identity are the key)."""
    return crowd_agreement(_ds.data)


# --------------------------------------------------------------------------- page parts


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
        f"{len(m.restarts_)} restart(s), chosen restart {m.best_restart_} (numbered from 0), "
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


def next_download(
    res: FitResult, dec: decision_columns.Decisions, n: int, by: str, key: str
) -> pd.DataFrame:
    """The batch to rate next (``decision_columns.next_table``) and its download, next.csv:
    the bytes ``ordmix next --out`` writes for the same fit and settings. Returns the batch."""
    batch = decision_columns.next_table(res.model, n, by, dec)
    csv_download(batch, list(decision_columns.NEXT_IDS), "next.csv", key)
    return batch


def review_download(res: FitResult, dec: decision_columns.Decisions, key: str) -> pd.DataFrame:
    """The annotators to review (``decision_columns.review_table``: full numbers) and their
    download, review.csv: the bytes ``ordmix next --review`` writes for the same fit and
    settings, whichever page it is downloaded from. Returns the table."""
    review = decision_columns.review_table(res.model, dec)
    csv_download(review, list(decision_columns.REVIEW_IDS), "review.csv", key)
    return review


def fit_table_download(
    res: FitResult, name: str, dec: decision_columns.Decisions, key: str
) -> None:
    """A download of ``{name}.csv`` with exactly the columns ``ordmix fit`` writes (the same
    ``outputs`` table functions, with the page's decision settings)."""
    frame = outputs.table(res.model, name, dec)
    ids = [c for c in outputs.TABLES[name].id_columns if c in frame.columns]
    csv_download(frame, ids, f"{name}.csv", key)


def sidebar_status() -> None:
    s = session()
    ds, res, job = s.dataset, s.fit, s.job
    with st.sidebar:
        st.markdown("**ordmix** - ground truth and annotator quality from ordinal ratings")
        if ds is not None:
            st.caption(
                f"Data: {ds.name} - {ds.n_ratings:,} ratings, scale {fmt_scale(ds.scale)}"
                + (", with gold" if ds.gold is not None else "")
            )
        if job is not None and job.running:
            st.caption(f"Fit running: {job.status()}")
        elif res is not None:
            st.caption(
                f"Fit: restart {res.model.best_restart_} chosen, {res.model.seconds_:.1f} s"
                + (" (stopped early)" if res.stopped else "")
            )
        else:
            st.caption("No fit yet.")


def _setup() -> None:
    """What every run needs first: page config, a finished fit collected, the default demo;
    on a first run after install, numba's compile started in the background (once a server
    process), so that the first fit finds it done or under way."""
    st.set_page_config(page_title="ordmix", page_icon=":material/rate_review:", layout="wide")
    compile_ahead.start_background()
    s = session()
    s.collect()
    if s.dataset is None and not s.get("demo_tried"):
        s.set("demo_tried", True)
        try:
            s.dataset = load_demo(DEFAULT_DEMO)
        except InputError as err:
            show_error(err, "The demo data could not be loaded; upload a file on the Data page.")
    sidebar_status()


def setup() -> None:
    """The entry page's first call (app.py), before it runs the chosen page."""
    _setup()
    session().set("main_ran", True)


def page_setup() -> None:
    """Every page's first call: :func:`_setup`, unless app.py already did it in this run.

    Streamlit runs a page file without app.py while it is in its ``pages/``-folder mode: on
    the first run of a server process opened at a page URL (until app.py's ``st.navigation``
    has run once), and on every AppTest run, which resets that mode.
    """
    s = session()
    if not s.get("main_ran"):
        _setup()
    s.set("main_ran", False)
