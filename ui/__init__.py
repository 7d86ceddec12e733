"""Streamlit dashboard helpers: codec, figures, text, sidebar, runs (engine stays UI-free)."""
