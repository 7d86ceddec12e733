"""Inversion Lab: the Streamlit entrypoint (picture frame around the pages).

The scenario controls live here, in the sidebar, bound to the URL, so they survive page
switches; each page only lays out what it reads from `ui.sidebar.current()`.
"""

import streamlit as st

from ui import sidebar

st.set_page_config(page_title="Inversion Lab", page_icon=":material/swap_vert:", layout="wide")

PAGES = [
    st.Page("pages/playground.py", title="Playground", icon=":material/science:", default=True),
    st.Page("pages/timeline.py", title="Inversion timeline", icon=":material/timeline:", url_path="timeline"),
    st.Page("pages/p99_curves.py", title="P99 curves", icon=":material/show_chart:", url_path="p99"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/workshop.py", title="Workshop", icon=":material/school:", url_path="workshop"),
    st.Page("pages/memory.py", title="GPU & memory", icon=":material/memory:", url_path="memory"),
]

sidebar.run_page(st.navigation(PAGES, position="top"))
