"""A sweep's output directory: valid at every instant, resumable, one tidy table at the end.

    OUT/manifest.json        spec, engine version and digest, seeds, every run (id, seed, knobs),
                             status (running / interrupted / complete), sessions with timestamps
    OUT/parts/part-*.parquet finished runs' rows (run id + summary), each file written atomically
    OUT/runs.parquet, .csv   the tidy table: one row per run × class, knobs and seed joined in,
                             in the spec's order (written when a session ends, also on Ctrl-C)

Parts are a cache keyed by run id (the hash of the scenario), so a rerun skips whatever is
already there, even after the spec grew; a process killed outright loses only the runs since the
last part. `read_table(OUT)` joins parts and manifest and works at any of those moments.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from .sweep_runs import Run, SweepError, knob_columns

MANIFEST, PARTS, TABLE, CSV = "manifest.json", "parts", "runs.parquet", "runs.csv"
FORMAT = 1


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def engine_version(folder: Path | None = None) -> dict[str, str]:
    """The engine's version and a digest of its source files (`folder`: the engine package, every
    folder of it): runs are reused only under the same digest."""
    import hashlib

    from .. import __version__

    folder = folder or Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*.py")):
        h.update(f.relative_to(folder).as_posix().encode() + b"\0" + f.read_bytes())
    return {"version": __version__, "digest": h.hexdigest()[:16]}


def write_atomic(path: Path, write) -> None:
    """`write(tmp_path)`, then rename over `path`: readers see the old file or the new, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: dict) -> None:
    write_atomic(path, lambda p: p.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8"))


class Store:
    """Writes one output directory; see the module docstring for the layout."""

    def __init__(self, out: Path, manifest: dict):
        self.out = out
        self.manifest = manifest
        self.parts = out / PARTS
        self.done: set[str] = set()
        self._buffer: list[dict] = []
        self._seq = 0
        self._runs: dict[str, dict] = {}
        self._knobs: list[str] = []
        self._started = time.time()

    @classmethod
    def open(cls, out: str | Path, *, kind: str, spec: dict, spec_path: str | None = None,
             fresh: bool = False) -> Store:
        """Open `out` for writing: new, or resuming an output of the same kind and engine.

        An output written by another engine (digest) is refused unless `fresh` (start over)."""
        out = Path(out)
        if out.exists() and not out.is_dir():
            raise SweepError(f"--out {out}: exists and is not a directory")
        engine = engine_version()
        old = read_manifest(out) if (out / MANIFEST).exists() else None
        if old is None and out.exists() and any(out.iterdir()):
            raise SweepError(f"--out {out}: the directory is not empty and holds no sweep (no {MANIFEST})")
        if old is not None and not fresh:
            if old.get("kind") != kind:
                raise SweepError(f"--out {out}: holds a {old.get('kind')} output, not a {kind}; use another --out")
            if old.get("engine", {}).get("digest") != engine["digest"]:
                raise SweepError(f"--out {out}: its runs come from another engine build ({old.get('engine')}); "
                                 "use another --out, or --fresh to discard them")
        if fresh and old is not None:
            shutil.rmtree(out / PARTS, ignore_errors=True)
            for name in (TABLE, CSV, "plan.json"):
                (out / name).unlink(missing_ok=True)
            old = None
        (out / PARTS).mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": FORMAT, "kind": kind, "engine": engine, "spec": spec, "spec_path": spec_path,
            "created": (old or {}).get("created", now()), "updated": now(), "finished": None,
            "status": "running", "sessions": (old or {}).get("sessions", []),
        }
        store = cls(out, manifest)
        store.done = set(read_parts(out)["run"].unique()) if store._part_files() else set()
        store._seq = 1 + max((int(p.stem.split("-")[-1]) for p in store._part_files()), default=0)
        return store

    def _part_files(self) -> list[Path]:
        return sorted(self.parts.glob("part-*.parquet"))

    def set_runs(self, runs: Sequence[Run], knobs: Sequence[str]) -> None:
        """The runs this output is about (its table's rows, in order); written to the manifest now,
        so even an output killed mid-way can be read back with knobs and seeds."""
        self._knobs = list(knobs)
        self._runs = {r.run_id: {"run": r.run_id, "seed": r.seed, "knobs": r.knobs} for r in runs}
        self._meta = pd.DataFrame({"run": [r.run_id for r in runs], "seed": [r.seed for r in runs],
                                   **knob_columns(runs, self._knobs)})
        self._write_manifest()

    def add(self, run: Run, rows: list[dict]) -> None:
        """A finished run's rows (buffered until the next checkpoint)."""
        self._buffer.extend({"run": run.run_id, **r} for r in rows)
        self.done.add(run.run_id)

    def checkpoint(self) -> None:
        """Write buffered rows as one new part (atomically)."""
        if not self._buffer:
            return
        frame = pd.DataFrame(self._buffer)
        path = self.parts / f"part-{self._seq:06d}.parquet"
        write_atomic(path, lambda p: frame.to_parquet(p, index=False))
        self._seq += 1
        self._buffer = []

    def finish(self, status: str, **session: Any) -> pd.DataFrame:
        """End a session: last part, the consolidated table (Parquet + CSV), the manifest."""
        self.checkpoint()
        table = self.table()
        if len(table):
            write_atomic(self.out / TABLE, lambda p: table.to_parquet(p, index=False))
            write_atomic(self.out / CSV, lambda p: table.to_csv(p, index=False))
        self._compact()
        self.manifest["status"] = status
        self.manifest["finished"] = now() if status == "complete" else None
        self.manifest["sessions"].append({"started": datetime.fromtimestamp(self._started, UTC).isoformat(
            timespec="seconds"), "ended": now(), "status": status, **session})
        self._write_manifest()
        return table

    def table(self) -> pd.DataFrame:
        return join(read_parts(self.out), self._meta, self._knobs)

    def _compact(self) -> None:
        """Many small parts → one (written before the old ones go, so a crash leaves duplicates,
        which readers drop, never a gap)."""
        files = self._part_files()
        if len(files) <= 1:
            return
        rows = read_parts(self.out)
        path = self.parts / f"part-{self._seq:06d}.parquet"
        write_atomic(path, lambda p: rows.to_parquet(p, index=False))
        self._seq += 1
        for f in files:
            f.unlink(missing_ok=True)

    def _write_manifest(self) -> None:
        self.manifest["updated"] = now()
        self.manifest["knobs"] = self._knobs
        self.manifest["seeds"] = sorted({r["seed"] for r in self._runs.values()})
        self.manifest["total"] = len(self._runs)
        self.manifest["done"] = sum(1 for r in self._runs if r in self.done)
        self.manifest["runs"] = list(self._runs.values())
        write_json(self.out / MANIFEST, self.manifest)


def read_manifest(out: Path) -> dict:
    try:
        data = json.loads((Path(out) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SweepError(f"{out}: cannot read {MANIFEST}: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SweepError(f"{out}: {MANIFEST} is not a sweep manifest (format {FORMAT})")
    return data


def read_parts(out: Path) -> pd.DataFrame:
    """Every finished run's rows (duplicates from an interrupted compaction dropped)."""
    files = sorted((Path(out) / PARTS).glob("part-*.parquet"))
    if not files:
        return pd.DataFrame({"run": pd.Series(dtype=str)})
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return frame.drop_duplicates(subset=["run", "class"], keep="first").reset_index(drop=True)


def join(rows: pd.DataFrame, meta: pd.DataFrame, knobs: Sequence[str]) -> pd.DataFrame:
    """The tidy table: rows of the runs in `meta` (in its order), with their seed and knob values."""
    if not len(rows) or not len(meta):
        return pd.DataFrame(columns=["run", "seed", *knobs])
    rows = rows.drop(columns=[c for c in ("seed", *knobs) if c in rows.columns])
    order = meta.assign(_order=range(len(meta)))
    table = order.merge(rows.assign(_row=range(len(rows))), on="run", how="inner")
    table = table.sort_values(["_order", "_row"], kind="stable").drop(columns=["_order", "_row"])
    return table.reset_index(drop=True)


def meta_frame(manifest: dict) -> pd.DataFrame:
    """Run id, seed and knob columns from a manifest's run list."""
    runs = [Run("", r["run"], r.get("knobs") or {}, int(r["seed"])) for r in manifest.get("runs", [])]
    knobs = manifest.get("knobs") or []
    return pd.DataFrame({"run": [r.run_id for r in runs], "seed": [r.seed for r in runs],
                         **knob_columns(runs, knobs)})


def read_table(out: str | Path) -> pd.DataFrame:
    """The tidy table of an output directory at any moment (complete, interrupted or killed)."""
    out = Path(out)
    manifest = read_manifest(out)
    rows = read_parts(out)
    if not len(rows) and (out / TABLE).exists():  # parts removed by hand: the last consolidated table
        return pd.read_parquet(out / TABLE)
    return join(rows, meta_frame(manifest), manifest.get("knobs") or [])
