"""The workshop: lessons and their audit over seeds, the page and its presenter mode, handouts,
the recap and the decision, numeric predictions and rooms.
"""
