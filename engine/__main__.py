"""`python -m engine …`: the command line (engine.cli), in a process that spares the cyclic
garbage collector its pointless passes over what the imports leave.

The command's imports (pandas, pyarrow, numpy, pydantic, the engine) create some 10^5 long-lived
objects: modules, classes, functions, constants. Left alone, the collector walks them again and
again while they are imported, and all of them once more when the interpreter exits; measured on
`run default --json`, that is about a fifth of the process's wall time (gc_collect_main under
`perf`; 0.57 s → 0.45 s without it). None of it can free anything: the imports leave about a
thousand small cyclic leftovers, a few hundred KB. So the collector is off while the command's
modules are imported, then everything imported is frozen (`gc.freeze`: left out of every later
collection) and the collector is back on for the command itself, whose own garbage it collects as
usual. Only this process does so: the app, its workers and `engine.cli.main` called from Python
keep the interpreter's defaults.
"""

import gc

gc.disable()
from .cli import main  # noqa: E402  (imported with the collector off: see above)

gc.freeze()
gc.enable()
raise SystemExit(main())
