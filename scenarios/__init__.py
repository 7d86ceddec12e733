"""The shipped scenarios (YAML files, read by `engine.config.scenario`); a package only so that an
installed engine (`pip install .`) carries them as package data."""
