"""The Streamlit-free parts of the dashboard: the data set's report, the
background fit job and the figures."""
