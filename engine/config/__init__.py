"""What a run is given: the scenario schema and presets, GPU memory, models and step cost,
workloads and traces, and reading untrusted input safely. Imports only `engine.core` besides itself.
"""

from .. import native

native.use()  # its event-path modules compiled, when a build made from this very source is there
