"""This browser session's state, through one small helper, and widgets that remember."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from ordmix_core.dashboard.fit_job import FitJob, FitParams, FitResult
from ordmix_core.dashboard.report import Dataset
from ordmix_core.errors import InputError

KEY = "ordmix"  # every value this app keeps lives under st.session_state[KEY]


class Session:
    """Typed access to this app's part of ``st.session_state`` (one dict under one key)."""

    def __init__(self, state: Any) -> None:
        if KEY not in state:
            state[KEY] = {}
        self._d: dict[str, Any] = state[KEY]

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
        return job

    def request_stop(self) -> None:
        """The Stop button: the flag the fit's callback checks."""
        if self.job is not None:
            self.job.stop.set()

    def collect(self) -> str | None:
        """Take a finished job's result into :attr:`fit`; returns a message for the user.

        A stopped fit keeps its best restart so far; one that failed leaves the previous
        result in place (:meth:`FitJob.outcome`).
        """
        job = self.job
        if job is None or job.running or job.collected:
            return None
        job.collected = True
        result, msg = job.outcome(has_previous=self.fit is not None)
        if result is not None:
            self.fit = result
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


def kept_file(uploaded: Any, name: str) -> tuple[str, bytes, str] | None:
    """An upload that survives page changes: ``(file name, content, upload id)`` of the file
    in the uploader, else of the last one it held in this session (streamlit's uploader
    forgets its file once the page is left); None when there has been none or it was
    forgotten (``session().set(name, None)``)."""
    s = session()
    if uploaded is not None:
        s.set(name, (uploaded.name, uploaded.getvalue(), uploaded.file_id))
    return s.get(name)


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
