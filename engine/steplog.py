"""The step log: one row per engine step, stored run-length encoded, grouped by replica.

A busy engine spends most steps in pure decode: every running request computes one token, nobody
arrives, finishes or is admitted. The replica runs such stretches as one *run* (`Replica`), and
the log stores a run as one row whose `steps` column says how many steps it covers; the columns
that change inside a run — the step time and the KV blocks per class — are kept per step in two
side arrays. `expand()` turns the log back into one row per step, value for value what stepping
one at a time would have logged.

While the run appends, rows go into typed buffers (times as float64, every count as int32: blocks
≤ 10M, tokens ≤ 1M per step). When it ends (`seal`, or the first read) the rows are grouped by
replica and each count column is kept in the smallest integer type that holds its values, so a
day of traffic (7.7M steps) stays within memory; what the summary needs is computed from the
run-length rows (`totals`), and one value per step is built only for a consumer that asks.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pandas as pd

from .reasons import LABELS

# waiting requests per wait reason (`waiting_for_<reason>`) and in vLLM's two words
# (`waiting_by_reason_capacity`, `_deferred`: see `reasons.VLLM_REASON`)
WAITING_FOR = tuple(f"waiting_for_{label}" for label in LABELS[1:])
COLUMNS = ("replica", "t_s", "dt_s", "prefill_tokens", "decode_tokens", "batch_size", "admitted", "preempted",
           "kv_used", "kv_free", "reserve_idle", "waiting_by_reason_capacity", "waiting_by_reason_deferred",
           *WAITING_FOR)
_INT = [c for c in COLUMNS if c not in ("t_s", "dt_s")]
_SMALL = (np.int8, np.int16, np.int32)


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
    """Rows appended by the replicas: `add` for a step, `add_run` for a run of pure decode steps."""

    def __init__(self, class_names: list[str], capacity: int):
        self.names = list(class_names)
        self.capacity = capacity
        self.n_int = len(_INT) + 1 + 3 * len(self.names)  # + steps; running, waiting, kv per class
        self.times = array("d")  # t_s, dt_s per row
        self.ints = array("i")  # _INT, steps, running_c, waiting_c, kv_c per row
        self.run_t = array("d")  # per step of every run (rows with steps > 1), in order: start,
        self.run_dt = array("d")  # step time,
        self.run_kv = array("i")  # and KV blocks per class during the step
        self.run_rows = array("q")  # per run: its row (in logging order), first and last step in the side arrays
        self._rows: dict[str, np.ndarray] | None = None  # sealed rows, grouped by replica (`seal`)
        self._side: dict[str, np.ndarray] = {}  # sealed side arrays (t, dt, kv_<class>), runs in row order

    def add(self, t: float, dt: float, ints: list[int]) -> None:
        """One step: `ints` = _INT columns, then running, waiting and KV blocks per class."""
        self.times.append(t)
        self.times.append(dt)
        self.ints.extend(ints[:len(_INT)])
        self.ints.append(1)
        self.ints.extend(ints[len(_INT):])

    def add_run(self, ts: list[float], dts: list[float], ints: list[int], kv: list[list[int]]) -> None:
        """len(ts) pure decode steps that differ only in start, step time and KV blocks per class
        (`kv`, one list per step); `ints` as in `add` (its KV columns are replaced by the first
        step's)."""
        c = len(self.names)
        first = list(ints)
        first[-c:] = kv[0]
        first[6] = used = sum(kv[0])  # kv_used, kv_free
        first[7] = self.capacity - used
        self.add(ts[0], dts[0], first)
        if len(ts) == 1:
            return
        self.ints[len(self.ints) - self.n_int + len(_INT)] = len(ts)  # the row's `steps`
        self.run_rows.extend((len(self.ints) // self.n_int - 1, len(self.run_t), len(self.run_t) + len(ts)))
        self.run_t.extend(ts)
        self.run_dt.extend(dts)
        self.run_kv.extend(chain.from_iterable(kv))

    # -- sealing: from append buffers to compact columns ------------------------------------
    def _row_names(self) -> list[str]:
        return [*_INT, "steps", *(f"{kind}_{n}" for kind in ("running", "waiting", "kv") for n in self.names)]

    def seal(self) -> None:
        """Move the appended rows into compact columns, grouped by replica, and free the buffers.

        Called when the run ends (reads seal first). Rows appended after a seal are merged in at
        the next one: sealed rows come first within each replica, as they were logged first."""
        if not len(self.times):
            if self._rows is None:
                self._rows, self._side = self._empty()
            return
        c, names = len(self.names), self._row_names()
        times = np.frombuffer(self.times, dtype=np.float64).reshape(-1, 2)
        rows = {"t_s": times[:, 0], "dt_s": times[:, 1]}  # views: the buffer is kept, not copied
        ints = np.frombuffer(self.ints, dtype=np.int32).reshape(-1, self.n_int)
        rows.update({name: _compact(ints[:, j]) for j, name in enumerate(names)})
        del ints
        self.ints = array("i")  # (the int buffer is freed here: only compact copies are left)
        kv = np.frombuffer(self.run_kv, dtype=np.int32).reshape(-1, c)
        side = {"t": np.frombuffer(self.run_t, dtype=np.float64), "dt": np.frombuffer(self.run_dt, dtype=np.float64)}
        side.update({f"kv_{n}": _compact(kv[:, j]) for j, n in enumerate(self.names)})
        del kv
        runs = np.frombuffer(self.run_rows, dtype=np.int64).reshape(-1, 3).copy()
        self.times, self.run_t, self.run_dt, self.run_kv, self.run_rows = (
            array("d"), array("d"), array("d"), array("i"), array("q"))
        if self._rows is not None:  # rows appended after an earlier seal
            rows, side, runs = self._merged(rows, side, runs)
        self._rows, self._side = self._grouped(rows, side, runs)

    def _empty(self):
        rows = {name: np.empty(0, np.int8) for name in self._row_names()}
        rows["t_s"], rows["dt_s"] = np.empty(0), np.empty(0)
        side = {"t": np.empty(0), "dt": np.empty(0), **{f"kv_{n}": np.empty(0, np.int8) for n in self.names}}
        return rows, side

    def _merged(self, rows, side, runs):
        old, old_side = self._rows, self._side
        steps = old["steps"].astype(np.int64)
        at = np.flatnonzero(steps > 1)
        ends = np.cumsum(steps[at])
        old_runs = np.stack([at, ends - steps[at], ends], axis=1) if len(at) else np.empty((0, 3), np.int64)
        runs = np.concatenate([old_runs, runs + np.array([len(steps), len(old_side["t"]), len(old_side["t"])])])
        rows = {k: np.concatenate([old[k], v]) for k, v in rows.items()}
        side = {k: np.concatenate([old_side[k], v]) for k, v in side.items()}
        return rows, side, runs

    @staticmethod
    def _grouped(rows, side, runs):
        """Rows grouped by replica (each replica logs its own steps in time order), and the side
        arrays' runs in the order their rows are then read."""
        rep = rows["replica"]
        if not len(rep) or (rep == rep[0]).all():
            return rows, side
        order = np.argsort(rep, kind="stable")
        rows = {k: v[order] for k, v in rows.items()}
        if len(runs):
            rank = np.empty(len(order), np.int64)
            rank[order] = np.arange(len(order))
            runs = runs[np.argsort(rank[runs[:, 0]], kind="stable")]
            take = np.concatenate([np.arange(a, b) for a, b in runs[:, 1:].tolist()])
            side = {k: v[take] for k, v in side.items()}
        return rows, side

    def _sealed(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        if self._rows is None or len(self.times):
            self.seal()
        return self._rows, self._side

    # -- reading ------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        rows, _ = self._sealed()
        return int(rows["steps"].sum(dtype=np.int64))

    def runs(self) -> pd.DataFrame:
        """The log as stored: one row per step or run (`steps` > 1), KV columns of its first step."""
        rows, _ = self._sealed()
        cols = {"replica": rows["replica"].astype(np.int32), "t_s": rows["t_s"].copy(), "dt_s": rows["dt_s"].copy()}
        for c in self._row_names()[1:]:
            cols[c] = rows[c].astype(np.int32)
        return pd.DataFrame(cols, copy=False)

    def column(self, name: str) -> np.ndarray:
        """One column expanded to one value per step (what `expand()[name]` holds): float64 for
        times, int32 for counts."""
        rows, side = self._sealed()
        steps = rows["steps"]
        in_run = np.repeat(steps > 1, steps) if len(side["t"]) else None  # every step of a run
        return self._column(name, rows, side, steps, in_run)

    def _column(self, name, rows, side, steps, in_run) -> np.ndarray:
        if name in ("kv_used", "kv_free") and in_run is not None:  # Σ KV per class (a run's change per step)
            used = np.zeros(int(steps.sum(dtype=np.int64)), np.int32)
            for n in self.names:
                used += self._column(f"kv_{n}", rows, side, steps, in_run)
            return used if name == "kv_used" else np.int32(self.capacity) - used
        times = name in ("t_s", "dt_s")
        out = np.repeat(rows[name].astype(np.float64 if times else np.int32, copy=False), steps)
        if in_run is not None and (times or name.startswith("kv_")):
            out[in_run] = side[name[:-2] if times else name]
        return out

    def expand(self) -> pd.DataFrame:
        """One row per step, exactly as stepping one at a time logs it (built column by column)."""
        rows, side = self._sealed()
        steps = rows["steps"]
        in_run = np.repeat(steps > 1, steps) if len(side["t"]) else None
        names = ["replica", "t_s", "dt_s", *self._row_names()[1:]]
        names.remove("steps")
        return pd.DataFrame({c: self._column(c, rows, side, steps, in_run) for c in names}, copy=False)

    def end(self) -> float | None:
        """The end of the last step (None if there was none)."""
        rows, side = self._sealed()
        if not len(rows["t_s"]):
            return None
        end = float((rows["t_s"] + rows["dt_s"]).max())
        return max(end, float((side["t"] + side["dt"]).max())) if len(side["t"]) else end

    def totals(self) -> StepTotals:
        """The summary's step figures (see `StepTotals`), without a frame of one row per step."""
        rows, side = self._sealed()
        steps = rows["steps"].astype(np.int64)
        tokens = rows["prefill_tokens"].astype(np.int64) + rows["decode_tokens"]
        waiting = np.zeros(len(steps), np.int64)
        for n in self.names:
            waiting += rows[f"waiting_{n}"]
        loaded = waiting > 0
        in_run = np.repeat(steps > 1, steps) if len(side["t"]) else None
        dt = pd.Series(self._column("dt_s", rows, side, steps, in_run))
        busy = float(dt.sum())
        kv_block_s = float((pd.Series(self._column("kv_used", rows, side, steps, in_run)) * dt).sum())
        return StepTotals(
            steps=int(steps.sum()), tokens=int((tokens * steps).sum()),
            loaded_tokens=int((tokens * steps)[loaded].sum()), loaded_steps=int(steps[loaded].sum()),
            reserve_idle=int((rows["reserve_idle"].astype(np.int64) * steps).sum()), busy_s=busy, kv_block_s=kv_block_s)
