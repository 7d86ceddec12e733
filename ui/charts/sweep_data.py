"""Sweep outputs for the app: read one from an upload or from a path under the working
directory (never elsewhere), check it is a sweep table, list what the pickers can offer and what
they open on, and work out the frontier and the cheapest plan the page shows.

Pure (no streamlit). Errors are SweepFileError with a one-line message; names from a file or a
text box reach the page only through `inert()`.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from engine import ScenarioError
from engine.sweeps.plan import cheapest, knob_columns_of, pareto, points, read_plan
from engine.sweeps.sweep_store import MANIFEST, TABLE, read_manifest, read_table

from ..frame.untrusted import plain

REQUIRED = ("run", "class", "priority", "gpus", "ttft_p99", "tpot_p99", "served_tok_s", "slo_ttft_s", "slo_tpot_s",
            "rejected", "unfinished")  # (the SLO predicate, `engine.sweeps.slo.rows_ok`, reads the last five)
MAX_BYTES = 20 << 20  # the app's upload limit (.streamlit/config.toml)



class SweepFileError(ValueError):
    """A sweep output that cannot be shown; the message says why."""


@dataclass
class SweepData:
    table: pd.DataFrame
    plan: dict | None
    manifest: dict | None
    origin: str

    @property
    def knobs(self) -> list[str]:
        if self.manifest and self.manifest.get("knobs") is not None:
            return [k for k in self.manifest["knobs"] if k in self.table.columns]
        return knob_columns_of(self.table)


def inert(text: object) -> str:
    """Text from a file or a text box made inert for st.markdown: every special character escaped
    and no autolink left live (`ui.frame.untrusted.plain`)."""
    return plain(str(text))


def resolve_inside(text: str, root: Path) -> Path:
    """`text` as a path under `root` (relative to it, or absolute inside it); symlinks resolved
    first, so a link cannot lead out. Anything else is refused."""
    text = (text or "").strip()
    if not text:
        raise SweepFileError("enter a path under the working directory, e.g. runs/reserve-policy")
    if "\0" in text:
        raise SweepFileError("not a valid path")
    root = root.resolve()
    path = (root / text).resolve()
    if not path.is_relative_to(root):
        raise SweepFileError("only paths under the working directory can be opened; upload other files")
    if not path.exists():
        raise SweepFileError(f"{path.relative_to(root)}: no such file or directory")
    return path


def from_path(text: str, root: Path | None = None) -> SweepData:
    """A sweep output directory (or its runs.parquet / runs.csv) under `root` (default: cwd)."""
    root = Path.cwd() if root is None else root
    path = resolve_inside(text, root)
    shown = str(path.relative_to(root.resolve())) or "."
    try:
        if path.is_dir():
            if (path / MANIFEST).is_file():
                return SweepData(check_table(read_table(path), shown), read_plan(path), read_manifest(path), shown)
            if (path / TABLE).is_file():
                path = path / TABLE
            else:
                raise SweepFileError(f"{shown}: no {MANIFEST} or {TABLE} here; is it a sweep output?")
        if path.stat().st_size > 4 * MAX_BYTES:
            raise SweepFileError(f"{shown}: {path.stat().st_size / 2**20:.0f} MiB is too large to show here")
        table = read_bytes(path.name, path.read_bytes())
        folder = path.parent
        manifest = read_manifest(folder) if (folder / MANIFEST).is_file() else None
        return SweepData(table, read_plan(folder), manifest, shown)
    except ScenarioError as err:
        raise SweepFileError(str(err)) from None
    except OSError as err:
        raise SweepFileError(f"{shown}: cannot read: {err.strerror}") from None


def read_bytes(name: str, data: bytes) -> pd.DataFrame:
    """A sweep table from a file's bytes: Parquet or CSV, by name."""
    if len(data) > 4 * MAX_BYTES:
        raise SweepFileError(f"{name}: {len(data) / 2**20:.0f} MiB is too large")
    suffix = Path(name).suffix.lower()
    try:
        if suffix == ".parquet":
            table = pd.read_parquet(io.BytesIO(data))
        elif suffix == ".csv":
            table = pd.read_csv(io.BytesIO(data))
        else:
            raise SweepFileError(f"{name}: expected runs.parquet or runs.csv")
    except SweepFileError:
        raise
    except Exception as err:  # a malformed file: pyarrow and pandas raise many kinds
        raise SweepFileError(f"{name}: not a readable {suffix[1:]} table ({type(err).__name__})") from None
    return check_table(table, name)


def from_uploads(files: list[tuple[str, bytes]]) -> SweepData:
    """One table (runs.parquet or runs.csv) and optionally plan.json / manifest.json."""
    tables = [(n, d) for n, d in files if Path(n).suffix.lower() in (".parquet", ".csv")]
    if len(tables) != 1:
        raise SweepFileError("upload one table (runs.parquet or runs.csv), optionally with plan.json and manifest.json")
    name, data = tables[0]
    table = read_bytes(name, data)
    plan = manifest = None
    for n, d in files:
        if Path(n).suffix.lower() != ".json":
            continue
        try:
            obj = json.loads(d.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise SweepFileError(f"{n}: not a JSON file") from None
        if isinstance(obj, dict) and "cheapest" in obj:
            plan = obj
        elif isinstance(obj, dict) and "runs" in obj and "knobs" in obj:
            manifest = obj
        else:
            raise SweepFileError(f"{n}: neither a plan.json nor a manifest.json of a sweep")
    return SweepData(table, plan, manifest, name)


def check_table(table: pd.DataFrame, origin: str) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        raise SweepFileError(f"{origin}: not a sweep table (no column {', '.join(missing)})")
    if not len(table):
        raise SweepFileError(f"{origin}: the table has no runs yet")
    return table


def numeric_columns(table: pd.DataFrame) -> list[str]:
    """Columns a y axis can show: numbers (booleans excluded), knobs first."""
    num = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c]) and not pd.api.types.is_bool_dtype(
        table[c])]
    knobs = knob_columns_of(table)
    return [c for c in knobs if c in num] + [c for c in num if c not in knobs]


def axis_columns(table: pd.DataFrame) -> list[str]:
    """Columns an x axis or a colour can show: knobs, seed, then numbers."""
    knobs = knob_columns_of(table)
    return list(dict.fromkeys([*knobs, "seed", *numeric_columns(table)]))


def class_order(table: pd.DataFrame) -> list[str]:
    return list(table.sort_values(["priority", "class"], kind="stable")["class"].drop_duplicates())


@dataclass
class Frontier:
    """What the frontier chart and the cheapest plan show for one output."""

    points: pd.DataFrame  # one row per setting (seeds folded), with a "frontier" column
    cheapest_runs: list[str] | None  # the plan's cheapest runs (plan.json's, else the cheapest point's)
    slo_s: float | None  # the top class's TTFT SLO, when the table has one


def frontier(data: SweepData, top: str) -> Frontier:
    """Every setting as a point (judged by the plan's criterion, P99 by default), the Pareto frontier,
    and the cheapest plan: plan.json's when there is one, else the cheapest point that meets the SLOs."""
    table, plan = data.table, data.plan or {}
    pts = points(table, data.knobs, plan.get("criterion") or "p99", plan.get("target") or 0.99)
    pts["frontier"] = pareto(pts).to_numpy()
    best_runs = (plan.get("cheapest") or {}).get("runs") if plan else None
    if best_runs is None:
        best = cheapest(pts)
        best_runs = None if best is None else list(best["runs"])
    return Frontier(pts, best_runs, _ttft_slo(table, top))


def _ttft_slo(table: pd.DataFrame, top: str) -> float | None:
    """The class's TTFT SLO as the table records it (its first value), None without one."""
    if "slo_ttft_s" not in table:
        return None
    slo = table.loc[table["class"] == top, "slo_ttft_s"]
    return float(slo.dropna().iloc[0]) if slo.notna().any() else None


def cheapest_setting(f: Frontier) -> pd.Series | None:
    """The point that holds the cheapest plan's runs (None when there is no plan or no such point)."""
    if not f.cheapest_runs:
        return None
    best = set(f.cheapest_runs)
    row = f.points[f.points["runs"].apply(lambda r: bool(best & set(r)))]
    return row.iloc[0] if len(row) else None


def varied_columns(table: pd.DataFrame, knobs: list[str]) -> list[str]:
    """GPUs and the knobs that take more than one value in this table (the explorer's first guesses)."""
    return [c for c in ["gpus", *knobs] if c in table and table[c].nunique(dropna=False) > 1]


def default_x(xs: list[str], varied: list[str]) -> int:
    """x opens on the first varied column (else the first column)."""
    return xs.index(varied[0]) if varied and varied[0] in xs else 0


def default_y(ys: list[str]) -> int:
    """y opens on the P99 TTFT (else the first column)."""
    return ys.index("ttft_p99") if "ttft_p99" in ys else 0


def colour_columns(xs: list[str], x: str, varied: list[str]) -> tuple[list[str], int]:
    """The colour picker's options ("(none)", "class", every other axis column) and its default: the
    first varied knob that is not x, else none."""
    colours = ["(none)", "class", *[c for c in xs if c != x]]
    others = [c for c in varied if c != x and c in colours and c != "gpus"]
    return colours, colours.index(others[0]) if others else 0
