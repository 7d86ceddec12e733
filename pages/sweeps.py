"""Sweeps: explore the output of `python -m engine sweep` or `plan` (`ui.panels.sweep_view`)."""

from ui.frame.state import current
from ui.panels.sweep_view import page

current()  # the app's frame (sidebar, share link); this page reads files, not the sidebar's scenario
page()
