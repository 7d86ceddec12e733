"""Workshop: the lessons in presenter mode — goal, prediction, run, chart, reveal, discussion —
then a recap of every remedy and a handout (`ui.teach.workshop`)."""

from ui.frame.state import current
from ui.teach.workshop import page

page(current())
