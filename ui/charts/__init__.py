"""Figures: pure functions from results to plotly figures (the timeline, sweeps, the workshop's
charts, rooms, the decision).
"""
