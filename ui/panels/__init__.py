"""What pages show besides figures: cards and tables over seeds, the inversion timeline's rows,
words for numbers and wait reasons, remedies in words, capacity tables.
"""
