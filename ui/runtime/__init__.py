"""Where runs happen: worker processes and their pools, the polling fragments that draw what has
come back, sweeps, capacity searches, the sizing aid and the story audit's runs.
"""
