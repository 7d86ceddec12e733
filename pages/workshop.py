"""Workshop: the lessons in presenter mode — goal, prediction, run, chart, reveal, discussion —
then a recap of every remedy and a handout (`ui.workshop`)."""

from ui.state import current
from ui.workshop import page

page(current())
