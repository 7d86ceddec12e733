"""Inversion Lab: the Streamlit entrypoint (picture frame around the pages).

The scenario controls live in the sidebar, bound to the URL, so they survive page switches; each
page lays out what it reads from `ui.frame.state.current()`. The frame itself is in `ui/frame/state.py`.
"""

from ui.frame.state import frame

frame()
