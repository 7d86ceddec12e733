"""Helpers the test files share, imported as `tests.support.…` (fixtures stay in each folder's
conftest.py, where pytest finds them)."""
