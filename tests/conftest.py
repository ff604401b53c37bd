"""Shared fixtures. st.cache_data outlives an AppTest, so every test starts with it empty."""

import pytest
import streamlit as st


@pytest.fixture(autouse=True)
def _clear_streamlit_cache():
    st.cache_data.clear()
    yield
    st.cache_data.clear()
