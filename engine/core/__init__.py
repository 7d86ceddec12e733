"""One engine's rules and state: the queue, running set, KV pool, prefix cache and requests, and
the two rulebooks (vLLM's, SGLang's) that decide a step over them. Imports nothing else of the engine.
"""

from .. import native

native.use()  # its event-path modules compiled, when a build made from this very source is there
