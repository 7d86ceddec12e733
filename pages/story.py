"""Does this hold?: the preset's story, claim by claim, over seeds and ±10 % load (`ui.panels.story_view`)."""

from ui.frame.state import current
from ui.panels.story_view import page

page(current())
