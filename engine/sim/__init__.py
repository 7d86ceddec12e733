"""A run in time: replicas and their step loops, routing and the gateway, clocks, what is observed
and recorded, the result frames; the checks before a run and the work it may take.
"""

from .. import native

native.use()  # its event-path modules compiled, when a build made from this very source is there
