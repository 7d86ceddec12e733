"""The workload: every request of a run as flat numpy arrays, drawn before the run starts.

Randomness: each class (and the trace assignment) draws from its own numpy Generator, seeded from
the scenario seed and the stream's name through one SeedSequence. Changing one class's rate
therefore leaves every other class's arrivals untouched (common random numbers), which is what
makes "the same traffic with and without a mitigation" and sweep curves comparable.

A request over its class's `caps.max_prompt_tokens` is either rejected at arrival or split into
pieces that a client submits one after another (piece k+1 when piece k finishes); pieces are
rows of their own with `parent` pointing at the first piece.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from io import BytesIO

import numpy as np
import pandas as pd

from .literal import clip
from .safeio import FileRefused, file_key, read_bytes, shown
from .scenario import Arrival, Length, RequestClass, Scenario, ScenarioError
from .traces import MAX_TRACE_BYTES, TraceError, read_trace

Z90 = 1.2815515655446004  # standard normal quantile at 0.9


def rng_for(seed: int, *labels: str) -> np.random.Generator:
    """A Generator for one named stream of one seed (stable across processes and runs)."""
    keys = [seed] + [zlib.crc32(label.encode()) for label in labels]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(keys)))


@dataclass
class Workload:
    """All requests, sorted by arrival; follow-up pieces have `arrival_s = NaN` until released."""

    class_names: list[str]
    class_priority: np.ndarray
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    cls: np.ndarray
    parent: np.ndarray
    next_piece: np.ndarray
    rejected: dict[int, str] = field(default_factory=dict)
    # prefix identity (engine.core.prefix): the source of a request's shared leading tokens (-1: none;
    # a trace's prefix group >= 0, a class's system prompt -(class + 2)), how many tokens it
    # shares (-1: its whole sequence, outputs included: a conversation's turn or a repeated
    # prompt), and Mooncake's 512-token block hashes
    prefix_src: np.ndarray | None = None
    prefix_tokens: np.ndarray | None = None
    hash_ids: dict[int, list[int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prompt)


# ---------------------------------------------------------------------------------------------
# Arrivals and lengths


def arrivals(spec: Arrival, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival times in [start_s, duration_s) for one class."""
    if spec.process == "times":
        t = np.sort(np.asarray(spec.times, dtype=float))
        return t[t < duration_s]
    span = duration_s - spec.start_s
    if spec.rate <= 0 or span <= 0:
        return np.empty(0)
    if spec.process == "on_off":
        period = spec.on_s + spec.off_s
        on_total = spec.on_s * np.ceil(span / period)
        t_on = _renewal(spec.rate, 1.0, on_total, rng)
        cycle = np.floor(t_on / spec.on_s)
        t = spec.start_s + cycle * period + (t_on - cycle * spec.on_s)
        return t[t < duration_s]
    cv = spec.cv if spec.process == "gamma" else 1.0
    return spec.start_s + _renewal(spec.rate, cv, span, rng)


def _renewal(rate: float, cv: float, span: float, rng: np.random.Generator) -> np.ndarray:
    """Times of a renewal process with gamma gaps (cv = 1: Poisson) up to `span`."""
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate * shape)
    n = int(rate * span * 1.1 + 20 + 5 * np.sqrt(rate * span))
    t = np.cumsum(rng.gamma(shape, scale, size=n))
    while t[-1] < span:
        more = np.cumsum(rng.gamma(shape, scale, size=n)) + t[-1]
        t = np.concatenate([t, more])
    return t[t < span]


def lengths(spec: Length, n: int, rng: np.random.Generator) -> np.ndarray:
    """n token counts drawn from the spec, clipped to [min, max]."""
    if spec.dist == "constant":
        x = np.full(n, float(spec.value))
    elif spec.dist == "uniform":
        x = rng.integers(spec.low, spec.high + 1, size=n).astype(float)
    elif spec.dist == "lognormal":
        mu = np.log(spec.median)
        sigma = (np.log(spec.p90) - mu) / Z90
        x = rng.lognormal(mu, sigma, size=n)
    else:
        pool = read_column(spec.path, spec.column)
        x = pool[rng.integers(0, len(pool), size=n)]
    return np.clip(np.rint(x), spec.min, spec.max).astype(np.int64)


def read_column(path: str, column: str) -> np.ndarray:
    """The positive finite numbers of one CSV column (an empirical length distribution).

    The file is read like a trace (a local regular file, at most MAX_TRACE_BYTES: never a URL
    or a device) and parsed from memory; parsed columns are cached by (real path, size, mtime).
    """
    try:
        key = file_key(path)
    except FileRefused as err:
        raise ScenarioError(f"empirical lengths: {err}") from None
    except OSError as err:
        raise ScenarioError(f"empirical lengths: cannot read {shown(path)}: {_why(err)}") from None
    return _column_cached(key, path, column)


@lru_cache(maxsize=16)
def _column_cached(key: tuple[str, int, int], path: str, column: str) -> np.ndarray:
    where = f"column {clip(column, 40)!r} of {shown(path)}"
    try:
        data = read_bytes(path, MAX_TRACE_BYTES)
    except FileRefused as err:
        raise ScenarioError(f"empirical lengths: {err}") from None
    except OSError as err:
        raise ScenarioError(f"empirical lengths: cannot read {shown(path)}: {_why(err)}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = pd.read_csv(BytesIO(data), usecols=[column], low_memory=False)
        v = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=float)
    except (ValueError, TypeError, KeyError, OverflowError, UnicodeDecodeError) as err:
        why = clip(" ".join(str(err).split()), 120)
        raise ScenarioError(f"empirical lengths: cannot read {where}: {why}") from None
    v = v[np.isfinite(v) & (v >= 1)]
    if v.size == 0:
        raise ScenarioError(f"empirical lengths: {where} has no positive numbers")
    return v


def _why(err: OSError) -> str:
    return err.strerror or type(err).__name__


def expected_requests(sc: Scenario) -> float:
    """Expected number of requests: mean synthetic arrivals plus the trace rows that will replay.

    A cheap size check before a run (reading the trace once; parsed traces are cached).
    """
    total = 0.0
    for spec in sc.classes.values():
        a = spec.arrival
        if a.process == "times":
            total += sum(t < sc.duration_s for t in a.times or ())
            continue
        span = max(sc.duration_s - a.start_s, 0.0)
        share = a.on_s / (a.on_s + a.off_s) if a.process == "on_off" else 1.0
        total += a.rate * span * share
    if sc.trace is not None:
        total += len(_from_trace(sc, sc.class_names)[0])
    return total


# ---------------------------------------------------------------------------------------------
# Building the workload


def build(sc: Scenario) -> Workload:
    """Every request of the scenario (synthetic classes and trace), sorted by arrival."""
    names = sc.class_names
    parts = [_synthetic(sc, i, name) for i, name in enumerate(names) if name in sc.classes]
    if sc.trace is not None:
        parts.append(_from_trace(sc, names))
    if parts:
        t = np.concatenate([p[0] for p in parts])
        prompt = np.concatenate([p[1] for p in parts])
        output = np.concatenate([p[2] for p in parts])
        cls = np.concatenate([p[3] for p in parts])
    else:
        t = np.empty(0)
        prompt = output = np.empty(0, dtype=np.int64)
        cls = np.empty(0, dtype=np.int16)
    order = np.lexsort((cls, t))  # by time, then class order (stable)
    prio = np.array([sc.request_class(n).priority for n in names], dtype=np.int64)
    wl = _apply_prompt_caps(sc, names, prio, t[order], prompt[order], output[order], cls[order])
    return _with_prefixes(sc, names, wl, parts, order)


def _with_prefixes(sc: Scenario, names: list[str], wl: Workload, parts: list, order: np.ndarray) -> Workload:
    """Prefix identity per request: from the trace's columns, else its class's system prompt
    (`classes.X.prefix_tokens`: the first tokens of every prompt of the class)."""
    n0 = len(order)
    src, tok = np.full(n0, -1, np.int64), np.zeros(n0, np.int64)
    hashes: dict[int, list[int]] = {}
    ident = parts[-1][4] if parts and len(parts[-1]) > 4 else None
    if ident is not None:
        k = n0 - len(ident[0])  # the trace's rows come last
        src[k:], tok[k:] = ident[0], ident[1]
        hashes = {k + j: h for j, h in ident[2].items()}
    sys_tokens = np.array([sc.request_class(n).prefix_tokens for n in names], dtype=np.int64)
    cls0 = np.concatenate([p[3] for p in parts]) if parts else np.empty(0, np.int16)
    own = (src < 0) & (sys_tokens[cls0] > 0) if n0 else np.zeros(0, bool)
    src[own], tok[own] = -(cls0[own].astype(np.int64) + 2), sys_tokens[cls0[own]]
    if not (src >= -1).all() or (src >= 0).any() or hashes:
        rank = np.empty(n0, np.int64)
        rank[order] = np.arange(n0)
        wl.hash_ids = {int(rank[j]): h for j, h in hashes.items()}
        n = len(wl)
        wl.prefix_src, wl.prefix_tokens = np.full(n, -1, np.int64), np.zeros(n, np.int64)
        wl.prefix_src[:n0], wl.prefix_tokens[:n0] = src[order], tok[order]
        whole = wl.prefix_tokens[:n0] < 0
        cut = ~whole & (wl.prefix_tokens[:n0] > wl.prompt[:n0])  # a split piece, or a prompt shorter than
        wl.prefix_tokens[:n0][cut] = wl.prompt[:n0][cut]  # the system prompt: shares what it has
        wl.prefix_tokens[:n0][whole & (wl.parent[:n0] >= 0)] = wl.prompt[:n0][whole & (wl.parent[:n0] >= 0)]
    return wl


def _synthetic(sc: Scenario, idx: int, name: str):
    spec: RequestClass = sc.classes[name]
    t = arrivals(spec.arrival, sc.duration_s, rng_for(sc.seed, "arrival", name))
    prompt = lengths(spec.prompt, len(t), rng_for(sc.seed, "prompt", name))
    output = lengths(spec.output, len(t), rng_for(sc.seed, "output", name))
    return t, prompt, output, np.full(len(t), idx, dtype=np.int16)


def _from_trace(sc: Scenario, names: list[str]):
    tr = sc.trace
    try:
        df = read_trace(tr.path, tr.format)
    except TraceError as err:
        raise ScenarioError(f"trace.path: {err}") from None
    t = df["arrival_s"].to_numpy() * tr.time_scale - tr.start_s
    n_file = len(df)
    rows = np.flatnonzero((t >= 0) & (t < sc.duration_s))[: tr.limit]  # the file rows that replay
    df, t = df.iloc[rows].reset_index(drop=True), t[rows]
    cls = _assign(sc, names, df, rows, n_file)
    ident = None
    if "prefix_group" in df.columns or "hash_ids" in df.columns:
        prompt = df["prompt_tokens"].to_numpy(np.int64)
        src = df["prefix_group"].to_numpy(np.int64) if "prefix_group" in df.columns else np.full(len(df), -1)
        tok = df["prefix_tokens"].to_numpy(np.int64) if "prefix_tokens" in df.columns else np.zeros(len(df), np.int64)
        tok = np.where(src < 0, 0, np.where(tok >= prompt, -1, tok))  # the whole prompt: outputs shared too
        hashes = {j: list(h) for j, h in enumerate(df["hash_ids"]) if isinstance(h, list)} \
            if "hash_ids" in df.columns else {}
        ident = (np.where(src < 0, -1, src), tok, hashes)
    return t, df["prompt_tokens"].to_numpy(np.int64), df["output_tokens"].to_numpy(np.int64), cls, ident


def _assign(sc: Scenario, names: list[str], df: pd.DataFrame, rows: np.ndarray | None = None,
            n_file: int | None = None) -> np.ndarray:
    """Class index per replayed trace row, by the scenario's `trace.assign` rule.

    `rows` are the replayed rows' positions in the trace file (of `n_file` rows). `sample` is
    decided first, by one uniform draw per file row from the seed's "assign-sample" stream: row k
    goes to the first sampled class whose cumulative share exceeds its draw. So a request keeps
    its class whatever window of the trace replays, and the shares hold over the whole file.
    The remaining rows follow `by`; every row ends in exactly one class.
    """
    rule = sc.trace.assign
    index = {n: i for i, n in enumerate(names)}

    def idx_of(name: str) -> int:
        if name not in index:
            raise ScenarioError(f"trace.assign names class {name!r}, which is not in classes ({', '.join(names)})")
        return index[name]

    n = len(df)
    if rule is None:
        return np.zeros(n, dtype=np.int16)
    out = _assign_by(sc, rule, idx_of, df)
    if rule.sample:
        rows = np.arange(n) if rows is None else np.asarray(rows)
        draw = rng_for(sc.seed, "assign-sample").random(n_file if n_file is not None else n)[rows]
        keys = list(rule.sample)
        edges = np.cumsum([rule.sample[k] for k in keys])
        pick = np.searchsorted(edges, draw, side="right")  # draw < edges[0] → keys[0], …; ≥ the total → none
        hit = pick < len(keys)
        out[hit] = np.array([idx_of(k) for k in keys], dtype=np.int16)[pick[hit]]
    return out


def _assign_by(sc: Scenario, rule, idx_of, df: pd.DataFrame) -> np.ndarray:
    """Class index per row by `rule.by` alone."""
    n = len(df)
    if rule.by == "column":
        if "class" in df.columns:
            return np.array([idx_of(c) for c in df["class"]], dtype=np.int16)
        if "priority" in df.columns:
            names = sc.class_names
            by_prio = {sc.request_class(nm).priority: i for i, nm in reversed(list(enumerate(names)))}
            missing = sorted(set(df["priority"]) - set(by_prio))
            if missing:
                raise ScenarioError(f"trace priorities {missing} match no class priority")
            return np.array([by_prio[p] for p in df["priority"]], dtype=np.int16)
        raise ScenarioError("trace.assign by column needs a `class` or `priority` column in the trace")
    if rule.by == "fraction":
        keys = list(rule.fractions)
        w = np.array([rule.fractions[k] for k in keys], dtype=float)
        if w.sum() <= 0:
            raise ScenarioError("trace.assign.fractions must not all be 0")
        pick = rng_for(sc.seed, "assign").choice(len(keys), size=n, p=w / w.sum())
        return np.array([idx_of(k) for k in keys], dtype=np.int16)[pick]
    bins = np.searchsorted(np.asarray(rule.edges), df["prompt_tokens"].to_numpy(), side="right")
    return np.array([idx_of(c) for c in rule.classes], dtype=np.int16)[bins]


def _apply_prompt_caps(sc, names, prio, t, prompt, output, cls) -> Workload:
    """Reject or split requests over their class's `caps.max_prompt_tokens`."""
    n = len(t)
    parent = np.full(n, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    rejected: dict[int, str] = {}
    extra = []  # (first_index, piece prompts, piece outputs)
    for ci, name in enumerate(names):
        caps = sc.request_class(name).caps
        if caps.max_prompt_tokens is None:
            continue
        over = np.flatnonzero((cls == ci) & (prompt > caps.max_prompt_tokens))
        for i in over:
            if caps.over_cap == "reject":
                rejected[int(i)] = f"prompt {prompt[i]} tokens over the {name} cap of {caps.max_prompt_tokens}"
            else:
                k = -(-int(prompt[i]) // caps.max_prompt_tokens)
                p = np.full(k, caps.max_prompt_tokens, dtype=np.int64)
                p[-1] = prompt[i] - caps.max_prompt_tokens * (k - 1)
                o = np.full(k, -(-int(output[i]) // k), dtype=np.int64)
                extra.append((int(i), p, o))
    if not extra:
        return Workload(names, prio, t, prompt, output, cls, parent, nxt, rejected)
    t, prompt, output, cls = (list(a) for a in (t, prompt, output, cls))
    parent, nxt = list(parent), list(nxt)
    for first, p, o in extra:
        prompt[first], output[first], parent[first] = int(p[0]), int(o[0]), first
        prev = first
        for pp, oo in zip(p[1:], o[1:]):
            j = len(t)
            t.append(np.nan), prompt.append(int(pp)), output.append(int(oo)), cls.append(cls[first])
            parent.append(first), nxt.append(-1)
            nxt[prev] = j
            prev = j
    return Workload(
        names,
        prio,
        np.asarray(t, dtype=float),
        np.asarray(prompt, dtype=np.int64),
        np.asarray(output, dtype=np.int64),
        np.asarray(cls, dtype=np.int16),
        np.asarray(parent, dtype=np.int64),
        np.asarray(nxt, dtype=np.int64),
        rejected,
    )
