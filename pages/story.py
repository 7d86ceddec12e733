"""Does this hold?: the preset's story, claim by claim, over seeds and ±10 % load (`ui.story_view`)."""

from ui.state import current
from ui.story_view import page

page(current())
