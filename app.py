"""ordmix dashboard: ``streamlit run app.py``. The entry page: setup, then the navigation.

Streamlit runs this script, which runs the chosen page (each page also calls
``page_setup()``, for the runs where Streamlit starts a page file directly). The pages' shared
helpers are in ``pages/_ui``; the Streamlit-free parts in ``ordmix_core`` (``report``: the data
set and its validation report; ``fitjob``: the background fit and its summary).
"""

from __future__ import annotations

import streamlit as st

from pages._ui import setup

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


def main() -> None:
    """Set up (config, sidebar, default demo), then run the page chosen in the navigation."""
    setup()
    pages = [
        st.Page(path, title=title, icon=icon, default=i == 0)
        for i, (path, title, icon) in enumerate(PAGES)
    ]
    st.navigation(pages).run()


if __name__ == "__main__":
    main()
