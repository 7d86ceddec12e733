"""The step log: one row per engine step, stored run-length encoded, grouped by replica.

A busy engine spends most steps in pure decode: every running request computes one token, nobody
arrives, finishes or is admitted. The replica runs such stretches as one *run* (`Replica`), and
the log stores a run as one row whose `steps` column says how many steps it covers; the columns
that change inside a run — the step time and the KV blocks per class — are kept per step in two
side arrays. `expand()` turns the log back into one row per step, value for value what stepping
one at a time would have logged.

Rows are appended to typed buffers (times as float64, every count as int32: blocks ≤ 10M, tokens
≤ 1M per step); every `CHUNK_ROWS` rows (`compact`, called between steps by the run's driver)
and when the run ends (`seal`, or the first read) they move into compact columns, each count in
the smallest integer type that holds its values, and the rows are grouped by replica. So a day
of traffic (7.7M steps) stays within memory while it runs; what the summary needs is computed
from the run-length rows (`totals`), and one value per step is built only for a consumer that
asks (`column`, `expand`).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.kv import KVPool
from ..core.reasons import IN_ENGINE, VLLM_REASON
from ..core.step import Step

# waiting requests per wait reason (`waiting_for_<reason>`) and in vLLM's two words
# (`waiting_by_reason_capacity`, `_deferred`: see `reasons.VLLM_REASON`)
WAITING_FOR = tuple(f"waiting_for_{r.label}" for r in IN_ENGINE)
COLUMNS = ("replica", "t_s", "dt_s", "prefill_tokens", "decode_tokens", "batch_size", "admitted", "preempted",
           "kv_used", "kv_free", "reserve_idle", "waiting_by_reason_capacity", "waiting_by_reason_deferred",
           *WAITING_FOR)
_INT = [c for c in COLUMNS if c not in ("t_s", "dt_s")]
STEPS = len(_INT)  # where a stored row keeps its `steps` (after the _INT columns)
_DEFERRED = [int(r) - 1 for r, word in VLLM_REASON.items() if word == "deferred"]  # vLLM's two words
_NO_REASONS = [0] * len(IN_ENGINE)
_CODES = len(IN_ENGINE) + 1  # the engine's codes are 1 … len(IN_ENGINE)
_SMALL = (np.int8, np.int16, np.int32)
CHUNK_ROWS = 1 << 16  # rows per compacted chunk (8 MiB of typed buffers for three classes)
Chunk = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]  # compacted rows, and the side arrays of their runs


def _compact(a: np.ndarray) -> np.ndarray:
    """Integers in the smallest signed type that holds them all (a copy; exact by construction)."""
    if not len(a):
        return a.astype(np.int8)
    lo, hi = int(a.min()), int(a.max())
    for t in _SMALL:
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return a.astype(t)
    return a.astype(np.int64)


@dataclass(frozen=True)
class StepTotals:
    """What the summary needs of the steps, computed on the run-length rows: step count, tokens
    processed, the tokens of steps that left requests waiting (and how many such steps), reserved
    idle tokens, busy time (Σ step time) and Σ KV blocks used × step time. The two float sums are
    taken over one value per step in log order, as summing the expanded frame would."""

    steps: int
    tokens: int
    loaded_tokens: int
    loaded_steps: int
    reserve_idle: int
    busy_s: float
    kv_block_s: float


class StepLog:
    """Rows appended by the replicas: `add_row` for a step, `add_run` for a run of pure decode steps."""

    def __reduce__(self) -> tuple[type[StepLog], tuple[list[str], int], object]:
        """Pickled by its constructor's arguments and its fields (results cross processes: the app's
        workers, sweeps); compiled, the class has no `__dict__` for pickle's default to restore."""
        return StepLog, (self.names, self.capacity), self.__getstate__()

    def __init__(self, class_names: list[str], capacity: int):
        self.names = list(class_names)
        self.capacity = capacity
        self._no_waiting = [0] * len(self.names)
        self.n_int = len(_INT) + 1 + 3 * len(self.names)  # + steps; running, waiting, kv per class
        self.times = array("d")  # t_s, dt_s per row
        self.ints = array("i")  # _INT, steps, running_c, waiting_c, kv_c per row
        self.run_t = array("d")  # per step of every run (rows with steps > 1), in order: start,
        self.run_dt = array("d")  # step time,
        self.run_kv = array("i")  # and KV blocks per class during the step
        # compacted rows and side arrays (t, dt, kv_<class>: the runs' steps, in row order); in
        # logging order until sealed, then grouped by replica
        self._chunks: list[Chunk] = []
        self._grouped = False

    def row_of(self, replica: int, step: Step, cls: np.ndarray, running_cls: list[int], pool: KVPool) -> list[int]:
        """A step's stored row (`add_row`'s order): what it scheduled and preempted, KV used and
        free, who waits by reason (vLLM's two words) and by class (`cls`: each request's class),
        running and KV blocks per class."""
        used, c = pool.used, len(self.names)
        if len(step.waiting):
            waiting = np.bincount(cls[step.waiting], minlength=c).tolist()
            why = np.bincount(step.reasons, minlength=_CODES).tolist()[1:]
            deferred = sum(why[k] for k in _DEFERRED)
        else:
            waiting, why, deferred = self._no_waiting, _NO_REASONS, 0
        return [replica, step.tokens - step.decode, step.decode, step.batch, len(step.admitted),
                len(step.preempted), used, pool.capacity - used, step.reserve_idle,
                len(step.waiting) - deferred, deferred, *why, 1, *running_cls, *waiting, *pool.used_cls]

    def add_row(self, t: float, dt: float, row: list[int]) -> None:
        """One step: `row` = the _INT columns, `steps` (1), then running, waiting and KV blocks per
        class — the storage order, so the replica's hot path appends it as it is."""
        times = self.times
        times.append(t)
        times.append(dt)
        self.ints.fromlist(row)  # (fromlist: one resize, no iterator; twice as fast as extend)

    def add_run(self, ts: list[float], dts: list[float], row: list[int], kv: list[int]) -> None:
        """len(ts) pure decode steps that differ only in start, step time and KV blocks per class
        (`kv`: the blocks per class of each step, one after another); `row` in storage order as
        in `add_row` (its `steps`, KV columns and kv_used/kv_free are replaced)."""
        c, m = len(self.names), len(ts)
        first = row.copy()
        first[-c:] = kv[:c]
        first[6] = used = sum(first[-c:])  # kv_used, kv_free
        first[7] = self.capacity - used
        first[STEPS] = m
        times = self.times
        times.append(ts[0])
        times.append(dts[0])
        self.ints.fromlist(first)
        if m == 1:
            return
        self.run_t.fromlist(ts)
        self.run_dt.fromlist(dts)
        self.run_kv.fromlist(kv)

    # -- sealing: from append buffers to compact columns ------------------------------------
    def _row_names(self) -> list[str]:
        return [*_INT, "steps", *(f"{kind}_{n}" for kind in ("running", "waiting", "kv") for n in self.names)]

    def compact(self, at_least: int = CHUNK_ROWS) -> None:
        """Move the rows appended so far into a compact chunk once there are `at_least` of them.

        The run's driver calls this between steps now and then (each time it polls for
        arrivals), so the typed buffers never hold more than about a chunk: a day of traffic is
        kept at the compact size while it runs, not only after it."""
        if len(self.times) < 2 * at_least:
            return
        c, names = len(self.names), self._row_names()
        times = np.frombuffer(self.times, dtype=np.float64).reshape(-1, 2)
        rows = {"t_s": times[:, 0].copy(), "dt_s": times[:, 1].copy()}
        ints = np.frombuffer(self.ints, dtype=np.int32).reshape(-1, self.n_int)
        rows.update({name: _compact(ints[:, j]) for j, name in enumerate(names)})
        kv = np.frombuffer(self.run_kv, dtype=np.int32).reshape(-1, c)
        side = {"t": np.frombuffer(self.run_t, dtype=np.float64).copy(),
                "dt": np.frombuffer(self.run_dt, dtype=np.float64).copy()}
        side.update({f"kv_{n}": _compact(kv[:, j]) for j, n in enumerate(self.names)})
        del times, ints, kv
        self._chunks.append((rows, side))
        self._grouped = False
        # a chunk's runs are its rows with steps > 1, in order; the side arrays hold their steps in that order
        self.times, self.ints, self.run_t, self.run_dt, self.run_kv = (
            array("d"), array("i"), array("d"), array("d"), array("i"))

    def seal(self) -> None:
        """The run is over: every row in compact chunks, grouped by replica; buffers freed.

        Reads seal first. Rows appended after a seal are merged in at the next one: sealed rows
        come first within each replica, as they were logged first. The chunks are kept as they
        are (reads put one column together at a time): joining them into one array per column
        would hold both copies at once, and the small freed chunks would stay resident."""
        if len(self.times) or not self._chunks:
            self.compact(at_least=0)
        if not self._grouped:
            self._chunks = _by_replica(self._chunks)
            self._grouped = True

    def _read(self) -> list[Chunk]:
        if len(self.times) or not self._grouped or not self._chunks:
            self.seal()
        return self._chunks

    # -- reading ------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return sum(int(rows["steps"].sum(dtype=np.int64)) for rows, _ in self._read())

    def runs(self) -> pd.DataFrame:
        """The log as stored: one row per step or run (`steps` > 1), KV columns of its first step."""
        chunks = self._read()
        cols = {name: np.concatenate([rows[name] for rows, _ in chunks],
                                     dtype=np.float64 if name in ("t_s", "dt_s") else np.int32)
                for name in ["replica", "t_s", "dt_s", *self._row_names()[1:]]}
        return pd.DataFrame(cols, copy=False)

    def column(self, name: str) -> np.ndarray:
        """One column expanded to one value per step (what `expand()[name]` holds): float64 for
        times, int32 for counts. KV used/free are the sums over the classes' KV when the log
        has runs (a run's per-step KV lives per class), as logged otherwise."""
        chunks = self._read()
        return self._column(name, chunks, any(len(side["t"]) for _, side in chunks))

    def _column(self, name: str, chunks: list[Chunk], kv_sum: bool) -> np.ndarray:
        times = name in ("t_s", "dt_s")
        out: np.ndarray = np.empty(sum(int(rows["steps"].sum(dtype=np.int64)) for rows, _ in chunks),
                       np.float64 if times else np.int32)
        pos = 0
        for rows, side in chunks:
            steps = rows["steps"]
            part = out[pos:pos + int(steps.sum(dtype=np.int64))]
            pos += len(part)
            if name in ("kv_used", "kv_free") and kv_sum:
                part[:] = 0
                for n in self.names:
                    part += _per_step(rows, side, f"kv_{n}", steps)
                if name == "kv_free":
                    np.subtract(np.int32(self.capacity), part, out=part)
            else:
                part[:] = _per_step(rows, side, name, steps)
        return out

    def expand(self) -> pd.DataFrame:
        """One row per step, exactly as stepping one at a time logs it (built column by column)."""
        chunks = self._read()
        kv_sum = any(len(side["t"]) for _, side in chunks)
        names = ["replica", "t_s", "dt_s", *self._row_names()[1:]]
        names.remove("steps")
        return pd.DataFrame({c: self._column(c, chunks, kv_sum) for c in names}, copy=False)

    def end(self) -> float | None:
        """The end of the last step (None if there was none)."""
        ends = [float((t + dt).max()) for rows, side in self._read()
                for t, dt in ((rows["t_s"], rows["dt_s"]), (side["t"], side["dt"])) if len(t)]
        return max(ends) if ends else None

    def totals(self) -> StepTotals:
        """The summary's step figures (see `StepTotals`), without a frame of one row per step."""
        chunks = self._read()
        n = tokens = loaded_tokens = loaded_steps = reserve_idle = 0
        for rows, _ in chunks:
            steps = rows["steps"].astype(np.int64)
            work = (rows["prefill_tokens"].astype(np.int64) + rows["decode_tokens"]) * steps
            waiting = np.zeros(len(steps), np.int64)
            for name in self.names:
                waiting += rows[f"waiting_{name}"]
            n += int(steps.sum())
            tokens += int(work.sum())
            loaded_tokens += int(work[waiting > 0].sum())
            loaded_steps += int(steps[waiting > 0].sum())
            reserve_idle += int((rows["reserve_idle"].astype(np.int64) * steps).sum())
        # the float sums: over one value per step in log order, as the expanded frame sums them
        dt = self._column("dt_s", chunks, True)
        busy = float(pd.Series(dt).sum())
        pos = 0
        for rows, side in chunks:  # dt becomes KV used × step time in place, a chunk at a time
            steps = rows["steps"]
            part = dt[pos:pos + int(steps.sum(dtype=np.int64))]
            pos += len(part)
            kv = np.zeros(len(part))  # (counts as floats: exact below 2^53, the product the frame takes)
            for name in self.names:
                kv += _per_step(rows, side, f"kv_{name}", steps)
            part *= kv
        return StepTotals(steps=n, tokens=tokens, loaded_tokens=loaded_tokens, loaded_steps=loaded_steps,
                          reserve_idle=reserve_idle, busy_s=busy, kv_block_s=float(pd.Series(dt).sum()))


def _per_step(rows: dict[str, np.ndarray], side: dict[str, np.ndarray], name: str, steps: np.ndarray) -> np.ndarray:
    """One chunk's column, one value per step: the row's value repeated over its steps, with the
    per-step values of runs (times, KV per class) from the side arrays."""
    key = {"t_s": "t", "dt_s": "dt"}.get(name, name)
    if not (len(side["t"]) and key in side):
        return np.repeat(rows[name], steps)
    out = np.repeat(rows[name].astype(np.result_type(rows[name], side[key])), steps)  # (each compacted alone)
    out[np.repeat(steps > 1, steps)] = side[key]
    return out


def _by_replica(chunks: list[Chunk]) -> list[Chunk]:
    """The chunks split by replica, each replica's pieces in logging order, replicas in order
    (each replica logs its own steps in time order). A chunk of one replica is kept as it is.
    `chunks` is emptied on the way."""
    pieces: dict[int, list[Chunk]] = {}
    empty = chunks[:1]
    chunks.reverse()
    while chunks:
        rows, side = chunks.pop()  # (each chunk is freed as soon as it is split)
        reps = np.unique(rows["replica"]).tolist()
        for r in reps:
            piece = (rows, side) if len(reps) == 1 else _select(rows, side, rows["replica"] == r)
            pieces.setdefault(r, []).append(piece)
    return [piece for r in sorted(pieces) for piece in pieces[r]] or empty


def _select(rows: dict[str, np.ndarray], side: dict[str, np.ndarray], keep: np.ndarray) -> Chunk:
    """The rows `keep` of a chunk, and the side-array steps of the runs among them."""
    steps = rows["steps"].astype(np.int64)
    length = np.where(steps > 1, steps, 0)
    start = np.cumsum(length) - length  # where each row's run starts in the side arrays
    runs = np.flatnonzero(keep & (length > 0))
    k = length[runs]
    take = np.repeat(start[runs] - (np.cumsum(k) - k), k) + np.arange(int(k.sum()))
    return {name: v[keep] for name, v in rows.items()}, {name: v[take] for name, v in side.items()}
