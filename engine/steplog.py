"""The step log: one row per engine step, stored run-length encoded, grouped by replica.

A busy engine spends most steps in pure decode: every running request computes one token, nobody
arrives, finishes or is admitted. The replica runs such stretches as one *run* (`Replica`), and
the log stores a run as one row whose `steps` column says how many steps it covers; the columns
that change inside a run — the step time and the KV blocks per class — are kept per step in two
side arrays. `expand()` turns the log back into one row per step, value for value what stepping
one at a time would have logged.

Storage is typed: times as float64, every count as int32 (blocks ≤ 10M, tokens ≤ 1M per step),
so a day of traffic stays within memory.
"""

from __future__ import annotations

from array import array

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
STEPS = len(_INT)  # where a stored row keeps its `steps` (after the _INT columns)


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

    def add(self, t: float, dt: float, ints: list[int]) -> None:
        """One step: `ints` = _INT columns, then running, waiting and KV blocks per class."""
        self.add_row(t, dt, [*ints[:len(_INT)], 1, *ints[len(_INT):]])

    def add_row(self, t: float, dt: float, row: list[int]) -> None:
        """One step, its row already in storage order (`STEPS` holds 1): the replica's hot path."""
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
        n_t = len(self.run_t)
        self.run_rows.fromlist([len(self.ints) // self.n_int - 1, n_t, n_t + m])
        self.run_t.fromlist(ts)
        self.run_dt.fromlist(dts)
        self.run_kv.fromlist(kv)

    @property
    def steps(self) -> int:
        ints = self._ints()
        return int(ints[:, len(_INT)].sum()) if len(ints) else 0

    def _order(self, ints: np.ndarray) -> np.ndarray | None:
        """Rows grouped by replica (each replica logs its own steps in time order)."""
        rep = ints[:, 0]
        if not len(rep) or (rep == rep[0]).all():
            return None
        return np.argsort(rep, kind="stable")

    def _ints(self) -> np.ndarray:
        ints = np.frombuffer(self.ints, dtype=np.int32).reshape(-1, self.n_int)
        order = self._order(ints)
        return ints if order is None else ints[order]

    def _times(self) -> np.ndarray:
        times = np.frombuffer(self.times, dtype=np.float64).reshape(-1, 2)
        order = self._order(np.frombuffer(self.ints, dtype=np.int32).reshape(-1, self.n_int))
        return times if order is None else times[order]

    def runs(self) -> pd.DataFrame:
        """The log as stored: one row per step or run (`steps` > 1), KV columns of its first step."""
        ints, times = self._ints(), self._times()
        cols = {"replica": ints[:, 0].astype(np.int64), "t_s": times[:, 0].copy(), "dt_s": times[:, 1].copy()}
        for j, c in enumerate(_INT[1:], start=1):
            cols[c] = ints[:, j].astype(np.int64)
        cols["steps"] = ints[:, len(_INT)].astype(np.int64)
        base = len(_INT) + 1
        for k, kind in enumerate(("running", "waiting", "kv")):
            for j, name in enumerate(self.names):
                cols[f"{kind}_{name}"] = ints[:, base + k * len(self.names) + j].astype(np.int64)
        return pd.DataFrame(cols)

    def column(self, name: str) -> np.ndarray:
        """One column expanded to one value per step (what `expand()[name]` holds)."""
        ints, times = self._ints(), self._times()
        steps = ints[:, len(_INT)].astype(np.int64)
        many = np.flatnonzero(steps > 1)
        if name in ("t_s", "dt_s"):
            j = 0 if name == "t_s" else 1
            out = np.repeat(times[:, j], steps)
            if len(many):
                out[self._run_slots(steps, many)] = self._side("t" if j == 0 else "dt")
            return out
        kv = self._kv_per_step(ints, steps, many)
        if name == "kv_used":
            return kv.sum(axis=1)
        if name == "kv_free":
            return self.capacity - kv.sum(axis=1)
        if name.startswith("kv_") and name[3:] in self.names:
            return kv[:, self.names.index(name[3:])]
        return np.repeat(self.runs()[name].to_numpy(), steps)

    def expand(self) -> pd.DataFrame:
        """One row per step, exactly as stepping one at a time logs it."""
        rl = self.runs()
        steps = rl.pop("steps").to_numpy()
        if not (steps > 1).any():
            return rl
        out = rl.loc[np.repeat(np.arange(len(rl)), steps)].reset_index(drop=True)
        for name in ["dt_s", "t_s", "kv_used", "kv_free"] + [f"kv_{n}" for n in self.names]:
            out[name] = self.column(name)
        return out

    # -- helpers ------------------------------------------------------------------------------
    @staticmethod
    def _run_slots(steps: np.ndarray, many: np.ndarray) -> np.ndarray:
        """Positions, in the expanded order, of every step of the runs."""
        first = (np.cumsum(steps) - steps)[many]
        k = steps[many]
        return np.repeat(first - (np.cumsum(k) - k), k) + np.arange(int(k.sum()))

    def _side(self, name: str) -> np.ndarray:
        """A side array (`t`, `dt` or `kv`) with its runs in the order their rows are read."""
        buf = {"t": self.run_t, "dt": self.run_dt, "kv": self.run_kv}[name]
        arr = np.frombuffer(buf, dtype=np.float64 if name != "kv" else np.int32)
        if name == "kv":
            arr = arr.reshape(-1, len(self.names))
        order = self._order(np.frombuffer(self.ints, dtype=np.int32).reshape(-1, self.n_int))
        if order is None:
            return arr
        runs = np.frombuffer(self.run_rows, dtype=np.int64).reshape(-1, 3)
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        runs = runs[np.argsort(rank[runs[:, 0]], kind="stable")]
        return np.concatenate([arr[a:b] for a, b in runs[:, 1:].tolist()])

    def _kv_per_step(self, ints: np.ndarray, steps: np.ndarray, many: np.ndarray) -> np.ndarray:
        c = len(self.names)
        kv = np.repeat(ints[:, -c:].astype(np.int64), steps, axis=0)
        if len(many):
            kv[self._run_slots(steps, many)] = self._side("kv")
        return kv
