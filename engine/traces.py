"""Readers for real request traces: Azure LLM 2023 CSV, Mooncake JSONL, simulator CSV.

Each reader returns a DataFrame with `arrival_s` (seconds; Azure and Mooncake traces are shifted so
the first request arrives at 0, a simulator CSV keeps its own `arrived_at`),
`prompt_tokens`, `output_tokens` and, when the file has them, `priority` and `class`.
Problems raise `TraceError` with one line naming the file, the line of the file and the column.

Mooncake rule: its arrivals are quantised to ~3 s buckets (10,851 of 12,030 gaps are 0 in the
conversation trace). Replaying a bucket as one burst would invent bursts the service never saw, so
the n requests that share a timestamp t are spread evenly over [t, t + 3 s): request k of the
bucket (file order) arrives at t + 3·k/n. Deterministic, no random draw.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

MOONCAKE_BUCKET_S = 3.0
MAX_TRACE_BYTES = 64 * 1024 * 1024
FORMATS = ("azure", "mooncake", "simulator")


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message says which file and why."""


def detect_format(head: str) -> str:
    """Guess the format from the first line of the file."""
    first = head.lstrip("\ufeff").strip().splitlines()[0] if head.strip() else ""
    if first.startswith("{"):
        return "mooncake"
    cols = [c.strip() for c in first.split(",")]
    if "TIMESTAMP" in cols and "ContextTokens" in cols:
        return "azure"
    if "arrived_at" in cols:
        return "simulator"
    raise TraceError(
        "unknown trace format: expected an Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens), "
        "Mooncake JSONL (timestamp,input_length,output_length) or a simulator CSV "
        "(arrived_at,num_prefill_tokens,num_decode_tokens)"
    )


def read_trace(path: str | Path, fmt: str | None = None) -> pd.DataFrame:
    """Read a trace file into the common frame (sorted by arrival)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise TraceError(f"{path.name}: {size / 2**20:.0f} MiB is over the {MAX_TRACE_BYTES >> 20} MiB limit")
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TraceError(f"cannot read trace {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{path.name}: not a UTF-8 text file") from None
    return parse_trace(text, fmt, path.name)


def parse_trace(text: str, fmt: str | None = None, origin: str = "trace") -> pd.DataFrame:
    """Parse trace text (from a file or an upload) into the common frame."""
    if not text.strip():
        raise TraceError(f"{origin}: the file is empty")
    fmt = fmt or detect_format(text[:4096])
    if fmt not in FORMATS:
        raise TraceError(f"{origin}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    try:
        df = {"azure": _azure, "mooncake": _mooncake, "simulator": _simulator}[fmt](text)
    except TraceError as err:
        raise TraceError(f"{origin}: {err}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise TraceError(f"{origin}: not a valid {fmt} trace ({err})") from None
    return _check(df, origin)


def _csv(text: str) -> pd.DataFrame:
    from io import StringIO

    return pd.read_csv(StringIO(text), skipinitialspace=True)


def _need(df: pd.DataFrame, cols: list[str]) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise TraceError(f"missing column(s) {', '.join(missing)} (found {', '.join(map(str, df.columns))})")


def _azure(text: str) -> pd.DataFrame:
    df = _csv(text)
    _need(df, ["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    ts = pd.to_datetime(df["TIMESTAMP"], format="%Y-%m-%d %H:%M:%S.%f", errors="coerce")
    bad = ts.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0]) + 2
        raise TraceError(f"line {row}: bad TIMESTAMP {df['TIMESTAMP'].iloc[row - 2]!r}")
    t = (ts - ts.min()).dt.total_seconds().to_numpy()
    return pd.DataFrame(
        {"arrival_s": t, "prompt_tokens": _ints(df, "ContextTokens"), "output_tokens": _ints(df, "GeneratedTokens")}
    )


def _mooncake(text: str) -> pd.DataFrame:
    rows, lines, hashes = [], [], []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            rows.append((float(rec["timestamp"]), rec["input_length"], rec["output_length"]))
            lines.append(i)
            hashes.append(rec.get("hash_ids"))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise TraceError(f"line {i}: expected JSON with timestamp, input_length, output_length ({err})") from None
    df = pd.DataFrame(rows, columns=["timestamp", "input_length", "output_length"])
    ms = df["timestamp"].to_numpy()
    back = np.flatnonzero(np.diff(ms) < 0)
    if back.size:
        raise TraceError(f"line {lines[back[0] + 1]}: timestamp goes backwards (the file must be sorted)")
    # Spread each quantised bucket evenly over [t, t + 3 s) (see module docstring).
    _, start, count = np.unique(ms, return_index=True, return_counts=True)
    rank = np.arange(len(ms)) - np.repeat(start, count)
    spread = ms / 1000.0 + MOONCAKE_BUCKET_S * rank / np.repeat(count, count)
    out = pd.DataFrame(
        {
            "arrival_s": spread - spread.min(),
            "prompt_tokens": _ints(df, "input_length", lines=lines),
            "output_tokens": _ints(df, "output_length", lines=lines),
        }
    )
    if any(h is not None for h in hashes):  # 512-token prefix block hashes (engine.prefix)
        for k, h in enumerate(hashes):
            if h is not None and (not isinstance(h, list) or not all(isinstance(x, int) and x >= 0 for x in h)):
                raise TraceError(f"line {lines[k]}: hash_ids must be a list of integers >= 0")
        out["hash_ids"] = pd.Series(hashes, dtype=object)
    return out


def _simulator(text: str) -> pd.DataFrame:
    df = _csv(text)
    _need(df, ["arrived_at", "num_prefill_tokens", "num_decode_tokens"])
    out = pd.DataFrame(
        {
            "arrival_s": pd.to_numeric(df["arrived_at"], errors="coerce"),
            "prompt_tokens": _ints(df, "num_prefill_tokens"),
            "output_tokens": _ints(df, "num_decode_tokens"),
        }
    )
    if out["arrival_s"].isna().any():
        row = int(np.flatnonzero(out["arrival_s"].isna().to_numpy())[0]) + 2
        raise TraceError(f"line {row}: arrived_at is not a number")
    if "priority" in df.columns:
        out["priority"] = _ints(df, "priority", lo=0)
    if "class" in df.columns:
        out["class"] = df["class"].astype(str).str.strip()
    if "prefix_group" in df.columns:  # prefix identity (engine.prefix): a group's shared tokens
        out["prefix_group"] = _ints(df, "prefix_group", lo=-1)
        out["prefix_tokens"] = _ints(df, "prefix_tokens", lo=0) if "prefix_tokens" in df.columns else 0
    return out


def _ints(df: pd.DataFrame, col: str, lo: int = 1, lines: list[int] | None = None) -> np.ndarray:
    """The column as integers >= lo; `lines` maps rows to file lines (CSV: row + 2, after the header)."""
    v = pd.to_numeric(df[col], errors="coerce")
    bad = v.isna() | (v < lo) | (v != np.floor(v))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        line = lines[i] if lines is not None else i + 2
        raw = df[col].iloc[i]
        raw = raw.item() if hasattr(raw, "item") else raw
        raise TraceError(f"line {line}: {col} = {raw!r} is not an integer >= {lo}")
    return v.to_numpy().astype(np.int64)


def _check(df: pd.DataFrame, origin: str) -> pd.DataFrame:
    if df.empty:
        raise TraceError(f"{origin}: no requests in the file")
    t = df["arrival_s"].to_numpy(dtype=float)
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise TraceError(f"{origin}: arrival times must be finite and >= 0")
    order = np.argsort(t, kind="stable")
    return df.iloc[order].reset_index(drop=True)
