"""The pages' shared helpers (a package, so Streamlit does not list it as a page).

Pages run with the app's folder on ``sys.path`` and import ``from pages._ui import ...``;
the Streamlit-free parts (data set, report, fit job) live in ``ordmix_core``.
"""

from .layout import (
    DEFAULT_DEMO,
    DEMOS,
    RESTART_HELP,
    SIMULATED_DEMO,
    csv_download,
    dataset_agreement,
    fit_caption,
    fit_decisions,
    fit_table_download,
    load_demo,
    next_download,
    page_setup,
    read_upload,
    read_upload_gold,
    require_dataset,
    require_fit,
    review_download,
    setup,
    show_error,
    sidebar_status,
)
from .state import KEY, Session, kept, kept_file, session

__all__ = [
    "DEFAULT_DEMO",
    "DEMOS",
    "KEY",
    "RESTART_HELP",
    "SIMULATED_DEMO",
    "Session",
    "csv_download",
    "dataset_agreement",
    "fit_caption",
    "fit_decisions",
    "fit_table_download",
    "kept",
    "kept_file",
    "load_demo",
    "next_download",
    "page_setup",
    "read_upload",
    "read_upload_gold",
    "require_dataset",
    "require_fit",
    "review_download",
    "session",
    "setup",
    "show_error",
    "sidebar_status",
]
