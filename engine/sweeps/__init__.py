"""Many runs: sweeps with their stores and executors, the SLO predicate, capacity and plans,
figures over seeds, scenario stories and their claims.
"""
