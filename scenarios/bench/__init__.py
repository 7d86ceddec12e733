"""Benchmark scenarios: CLI only (too big for the app)."""
