"""Readers for real request traces: Azure LLM 2023 CSV, Mooncake JSONL, simulator CSV.

Each reader returns a DataFrame with `arrival_s` (seconds; Azure and Mooncake traces are shifted so
the first request arrives at 0, a simulator CSV keeps its own `arrived_at`),
`prompt_tokens`, `output_tokens` and, when the file has them, `priority` and `class`.
Problems raise `TraceError` with one line naming the file, the line of the file and the column.

Input is untrusted: only a local regular file is read (never a URL or a device), at most
MAX_TRACE_BYTES; token counts must be integers from 1 to MAX_TOKENS (nothing wraps to a negative
int64), priorities 0..1000, class names as in a scenario, arrival times finite; any malformed
file, however broken (binary, nested JSON, ragged CSV), gives one TraceError line.

Mooncake rule: its arrivals are quantised to ~3 s buckets (10,851 of 12,030 gaps are 0 in the
conversation trace). Replaying a bucket as one burst would invent bursts the service never saw, so
the n requests that share a timestamp t are spread evenly over [t, t + 3 s): request k of the
bucket (file order) arrives at t + 3·k/n. Deterministic, no random draw. The shipped copy of the
conversation trace (`mooncake-conv`) is read by the same rule.
"""

from __future__ import annotations

import json
import warnings
from functools import lru_cache
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd

from .literal import brief, clip
from .safeio import FileRefused, file_key, read_bytes, shown
from .scenario import MAX_TOKENS, decode_text, valid_class_name
from .shipped_traces import SHIPPED, looks_like_a_name, resolve

MOONCAKE_BUCKET_S = 3.0
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_PRIORITY = 1000
MAX_ARRIVAL_S = 1e9
MAX_COLUMNS = 64
FORMATS = ("azure", "mooncake", "simulator")


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message says which file and why."""


def detect_format(head: str) -> str:
    """Guess the format from the first line of the file."""
    first = head.lstrip("\ufeff").strip().splitlines()[0][:1000] if head.strip() else ""
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
    """Read a trace file, or a shipped trace by its short name (`azure-code`: engine.config.shipped_traces),
    into the common frame (sorted by arrival).

    Parsed frames are cached by (real path, size, mtime): a run, its size estimate and its
    baseline read one file once. Callers get their own copy.
    """
    given, path = path, resolve(path)
    try:
        key = file_key(path)
    except FileRefused as err:
        raise TraceError(f"cannot read trace {err}") from None
    except FileNotFoundError as err:
        hint = (f", and it is not a shipped trace ({', '.join(SHIPPED)})" if looks_like_a_name(given) else "")
        raise TraceError(f"cannot read trace {shown(given)}: {err.strerror or 'no such file'}{hint}") from None
    except OSError as err:
        raise TraceError(f"cannot read trace {shown(path)}: {err.strerror or type(err).__name__}") from None
    return _read_cached(key, str(path), fmt).copy()


@lru_cache(maxsize=4)
def _read_cached(key: tuple[str, int, int], path: str, fmt: str | None) -> pd.DataFrame:
    name = shown(Path(path).name)
    try:
        data = read_bytes(path, MAX_TRACE_BYTES)
    except FileRefused as err:
        raise TraceError(f"cannot read trace {err}") from None
    except OSError as err:
        raise TraceError(f"cannot read trace {shown(path)}: {err.strerror or type(err).__name__}") from None
    return parse_trace(decode_text(data, name, TraceError), fmt, name)


def parse_trace(text: str, fmt: str | None = None, origin: str = "trace") -> pd.DataFrame:
    """Parse trace text (from a file or an upload) into the common frame."""
    origin = clip(origin, 80)
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise TraceError(f"{origin}: the file is empty")
    if "\x00" in text:
        raise TraceError(f"{origin}: a binary file, not CSV or JSONL text")
    try:
        fmt = fmt or detect_format(text[:4096])
    except TraceError as err:
        raise TraceError(f"{origin}: {err}") from None
    if fmt not in FORMATS:
        raise TraceError(f"{origin}: unknown format {brief(fmt)}; use one of {', '.join(FORMATS)}")
    try:
        with warnings.catch_warnings():  # pandas' dtype and parser warnings would be extra lines
            warnings.simplefilter("ignore")
            df = {"azure": _azure, "mooncake": _mooncake, "simulator": _simulator}[fmt](text)
    except TraceError as err:
        raise TraceError(f"{origin}: {err}") from None
    except (ValueError, KeyError, TypeError, OverflowError) as err:
        raise TraceError(f"{origin}: not a valid {fmt} trace ({clip(' '.join(str(err).split()), 160)})") from None
    except RecursionError:
        raise TraceError(f"{origin}: not a valid {fmt} trace (nested too deeply)") from None
    return _check(df, origin)


def _csv(text: str) -> pd.DataFrame:
    _check_fields(text)
    return pd.read_csv(StringIO(text), skipinitialspace=True, low_memory=False)


def _check_fields(text: str) -> None:
    """No line has more fields than the header, and the header is short: one line of 300,000
    commas would otherwise make pandas build 300,000 columns (tens of seconds, a gigabyte).
    No field of a valid trace contains a comma, so counting commas is exact for good files."""
    end = text.find("\n")
    fields = text[: end if end >= 0 else len(text)].count(",") + 1
    if fields > MAX_COLUMNS:
        raise TraceError(f"line 1: {fields:,} columns in the header (at most {MAX_COLUMNS})")
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    bounds = np.concatenate(([0], np.flatnonzero(raw == 10) + 1, [len(raw)]))
    per_line = np.diff(np.searchsorted(np.flatnonzero(raw == 44), bounds))
    over = np.flatnonzero(per_line > fields - 1)
    if over.size:
        raise TraceError(f"line {over[0] + 1}: {per_line[over[0]] + 1:,} fields, but the header has {fields}")


def _need(df: pd.DataFrame, cols: list[str]) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        found = ", ".join(clip(c, 40) for c in list(df.columns)[:10]) + (", …" if len(df.columns) > 10 else "")
        raise TraceError(f"missing column(s) {', '.join(missing)} (found {found})")


def _azure(text: str) -> pd.DataFrame:
    df = _csv(text)
    _need(df, ["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    ts = pd.to_datetime(df["TIMESTAMP"], format="%Y-%m-%d %H:%M:%S.%f", errors="coerce")
    bad = ts.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0]) + 2
        raise TraceError(f"line {row}: bad TIMESTAMP {brief(df['TIMESTAMP'].iloc[row - 2])}")
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
            if not isinstance(rec, dict):
                raise TypeError(f"a JSON object per line, got {type(rec).__name__}")
            rows.append((_json_number(rec, "timestamp"), _json_number(rec, "input_length"),
                         _json_number(rec, "output_length")))
            lines.append(i)
            hashes.append(rec.get("hash_ids"))
        except RecursionError:
            raise TraceError(f"line {i}: JSON nested too deeply") from None
        except KeyError as err:
            raise TraceError(f"line {i}: missing {clip(err.args[0] if err.args else '', 40)!r}; expected JSON with "
                             "timestamp, input_length, output_length") from None
        except (json.JSONDecodeError, TypeError, ValueError) as err:
            why = clip(" ".join(str(err).split()), 100)
            raise TraceError(f"line {i}: expected JSON with timestamp, input_length, output_length ({why})") from None
    df = pd.DataFrame(rows, columns=["timestamp", "input_length", "output_length"], dtype=float)
    ms = df["timestamp"].to_numpy()
    bad = np.flatnonzero(~np.isfinite(ms) | (ms < 0) | (ms > MAX_ARRIVAL_S * 1000))
    if bad.size:
        raise TraceError(f"line {lines[bad[0]]}: timestamp = {brief(float(ms[bad[0]]))} is not a time in ms "
                         f"from 0 to {MAX_ARRIVAL_S * 1000:g}")
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
    if any(h is not None for h in hashes):  # 512-token prefix block hashes (engine.core.prefix)
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
        out["priority"] = _ints(df, "priority", lo=0, hi=MAX_PRIORITY)
    if "class" in df.columns:
        names = df["class"].astype(str).str.strip()
        ok = names.map(valid_class_name).to_numpy(dtype=bool)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise TraceError(f"line {i + 2}: class = {brief(names.iloc[i])} is not a class name "
                             "(1-40 letters, digits, '_' or '-')")
        out["class"] = names
    if "prefix_group" in df.columns:  # prefix identity (engine.core.prefix): a group's shared tokens
        out["prefix_group"] = _ints(df, "prefix_group", lo=-1)
        out["prefix_tokens"] = _ints(df, "prefix_tokens", lo=0) if "prefix_tokens" in df.columns else 0
    return out


def _json_number(rec: dict, key: str) -> float:
    """A JSON number (not a bool, string or container) as a float; KeyError/TypeError if not."""
    v = rec[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{key} = {brief(v)} is not a number")
    return float(v) if not isinstance(v, int) or abs(v) < 2**63 else float("inf")


def _ints(df: pd.DataFrame, col: str, lo: int = 1, lines: list[int] | None = None,
          hi: int = MAX_TOKENS) -> np.ndarray:
    """The column as integers in [lo, hi] (checked before any cast, so nothing wraps); `lines` maps
    rows to file lines (CSV: row + 2, after the header)."""
    try:
        v = pd.to_numeric(df[col], errors="coerce").astype(float)
    except (TypeError, ValueError):  # values pandas cannot even try to convert (lists, dicts)
        v = pd.Series([_float_or_nan(x) for x in df[col]], index=df.index, dtype=float)
    bad = ~np.isfinite(v) | (v < lo) | (v > hi) | (v != np.floor(v))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        line = lines[i] if lines is not None else i + 2
        raw = df[col].iloc[i]
        raw = raw.item() if hasattr(raw, "item") else raw
        if isinstance(raw, float) and np.isfinite(raw) and raw == round(raw) and abs(raw) < 1e15:
            raw = int(raw)  # 0.0 read from JSON is shown as the 0 the file says
        raise TraceError(f"line {line}: {col} = {brief(raw)} is not an integer from {lo} to {hi:,}")
    return v.to_numpy().astype(np.int64)


def _float_or_nan(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _check(df: pd.DataFrame, origin: str) -> pd.DataFrame:
    if df.empty:
        raise TraceError(f"{origin}: no requests in the file")
    t = df["arrival_s"].to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(t) | (t < 0) | (t > MAX_ARRIVAL_S))
    if bad.size:
        raise TraceError(f"{origin}: row {bad[0] + 1}: arrival time {brief(float(t[bad[0]]))} is not from 0 to "
                         f"{MAX_ARRIVAL_S:g} s")
    order = np.argsort(t, kind="stable")
    return df.iloc[order].reset_index(drop=True)
