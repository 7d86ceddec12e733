"""The one share-link codec: short URL parameters ⇄ the scenario's dotted keys.

Every sidebar control is a `Param`: a short name (the URL parameter and the widget key), the dotted
scenario key it writes, and the range its widget accepts. Values live in "widget units" (an
optional cap is 0 for "none"; a prompt size is one integer). Only values that differ from the
preset's are written to the URL or turned into overrides, so an untouched control never changes
the scenario and a link stays short. A `Codec` is built once per preset (or upload) and then
answers every question about its controls. Pure Python: no streamlit import, so it is unit-tested
(and fuzzed) alone.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from engine.config.presets import GPUS, MODELS
from engine.config.scenario import Scenario, ScenarioError, apply_overrides, from_dict, get_dotted, to_dict
from engine.config.shipped_traces import SHIPPED, shipped_name
from engine.core.policies import POLICIES as _POLICY_CLASSES

from .i18n import N_, _

POLICIES = tuple(_POLICY_CLASSES)  # the engine's registry is the one list of policy names
POLICY_UPSTREAM = "; ".join(f"{name}: {cls.upstream}" for name, cls in _POLICY_CLASSES.items())
PRESET_KEY = "preset"
DEFAULT_PRESET = "default"
MAX_TEXT = 200  # longer URL values are refused before parsing (nothing legitimate is that long)


@dataclass(frozen=True)
class Param:
    """One control: URL name, scenario key, value kind and the range its widget accepts."""

    short: str
    dotted: str
    kind: str  # "int" | "float" | "choice" | "bool" | "ints" (a list like "0,1"; "" = none) | "names" | "text"
    label: str
    lo: float = 0
    hi: float = 0
    step: float = 1
    options: tuple[str, ...] = ()
    none_at_zero: bool = False  # widget 0 ⇄ scenario None ("off", "no cap", "from memory")
    values: tuple[Any, ...] = ()  # "choice" with scenario values other than its labels: options[i] ⇄ values[i]
    scale: tuple[str, ...] = field(default=())  # dotted keys scaled by the same ratio (shape kept)
    help: str = ""
    section: str = "main"
    synthetic: bool = False  # a synthetic class's arrivals or lengths: idle while a shipped trace replaces them

    def describe_range(self) -> str:
        if self.kind == "choice":
            return _("one of {values}").format(values=", ".join(self.options))
        if self.kind == "names":
            return _("a comma-separated list of {values}").format(values=", ".join(self.options))
        if self.kind == "bool":
            return _("true or false")
        if self.kind == "text":
            return _("up to {n} characters").format(n=int(self.hi))
        if self.kind == "ints":
            return _("whole numbers from {lo} to {hi}, comma-separated").format(lo=fmt_number(self.lo),
                                                                                hi=fmt_number(self.hi))
        return _("a number from {lo} to {hi}").format(lo=fmt_number(self.lo), hi=fmt_number(self.hi))


def fmt_number(v: Any) -> str:
    """Numbers as Streamlit writes them into the URL: 5.0 → "5", 0.25 → "0.25"."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v))
    return str(v)


def fmt_value(p: Param, v: Any) -> str:
    """A widget value as URL text."""
    if p.kind == "names":
        return ",".join(v)
    return fmt_number(v)


WEIGHT_DTYPES = (("checkpoint", None), ("BF16", 2), ("FP8", 1))  # model.dtype_bytes
KV_DTYPES = (("auto", None), ("BF16", 2), ("FP8", 1))  # model.kv_dtype_bytes
DEFAULTS_HELP = N_("0 = vLLM 0.33's default for the GPU class: 16384 tokens / 1024 requests on GPUs with ≥ 160 GiB "
                 "(B200, MI300X), 8192 / 1024 on ≥ 70 GiB except A100 (H100, H200, H800, H20), 2048 / 256 otherwise "
                 "(A100, L40S, L20).")


def _dtype_choices(table: tuple[tuple[str, Any], ...], current: Any) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Labels and values, with a scenario's own value added if the table lacks it (never reject a preset)."""
    pairs = list(table) + ([] if current in [v for _, v in table] else [(f"{current} bytes", current)])
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def _global_params(raw: dict) -> list[Param]:
    gpu, model = get_dotted(raw, "hardware.gpu", "H100-80G"), get_dotted(raw, "model.name", "Llama-3-8B")
    gpus = tuple(GPUS) + (() if gpu in GPUS else (gpu,))
    models = tuple(MODELS) + (() if model in MODELS else (model,))
    w_opts, w_vals = _dtype_choices(WEIGHT_DTYPES, get_dotted(raw, "model.dtype_bytes"))
    kv_opts, kv_vals = _dtype_choices(KV_DTYPES, get_dotted(raw, "model.kv_dtype_bytes"))
    return [
        Param("engine", "scheduler.engine", "choice", N_("Engine rules"), options=("vllm", "sglang"), section="sched",
              help=N_("vllm: vLLM 0.33's scheduler. sglang: SGLang 0.5.23's — output-aware admission, prefill batches "
                      "run alone, preemption only when every seat is taken; it knows fcfs and priority, no remedies.")),
        Param("policy", "scheduler.policy", "choice", N_("Scheduling policy"), options=POLICIES, section="sched",
              help=N_("fcfs and priority behave like vLLM v1; backfill skips a request that does not fit; preempt lets "
                      "a blocked request evict lower-priority ones.")),
        Param("budget", "scheduler.max_num_batched_tokens", "int", N_("Token budget per step (0 = vLLM's default)"),
              0, 65536, 512, none_at_zero=True, section="sched",
              help=N_("max_num_batched_tokens: tokens one step may process (prefill + decode).")),
        Param("seqs", "scheduler.max_num_seqs", "int", N_("Max running requests (0 = vLLM's default)"), 0, 4096, 16,
              none_at_zero=True, section="sched", help=N_("max_num_seqs: at most this many requests run at once.")),
        Param("reserve", "mitigations.p0_token_reserve", "int", N_("Token reserve for the top priority"), 0, 4096,
              64,
              section="mit", help=N_("Tokens of every step's budget that only the most important class may use.")),
        Param("rmode", "mitigations.reserve_mode", "choice", N_("Reserve mode"), options=("strict", "lendable"),
              section="mit", help=N_("strict: an unused reserve stays idle (costs throughput); lendable: others may "
                                     "borrow it within the step.")),
        Param("kvres", "mitigations.p0_kv_reserve", "int", N_("KV reserve for the top priority (blocks)"), 0,
              1_000_000, 16, section="mit", help=N_("KV blocks only the most important class may allocate.")),
        Param("inherit", "mitigations.inheritance", "bool", N_("Priority inheritance"), section="mit",
              help=N_("While a top-priority request waits for KV, the requests holding it run first.")),
        Param("aging", "mitigations.aging_s", "float", N_("Aging: one level better every N s (0 = off)"), 0, 100_000,
              1.0, section="mit", help=N_("A waiting request's priority improves by one level per N seconds.")),
        Param("pmode", "mitigations.preempt_mode", "choice", N_("Preemption mode"), options=("recompute", "swap"),
              section="mit",
              help=N_("recompute drops the victim's KV (progress lost); swap copies it to host memory.")),
        Param("alert", "mitigations.alert_after_s", "float", N_("Alert when a top request waits (s, 0 = off)"), 0,
              100_000, 0.5, none_at_zero=True, section="mit",
              help=N_("Record an alert with the holders when a top-priority request waits this long.")),
        Param("gpu", "hardware.gpu", "choice", N_("GPU"), options=gpus, section="hw"),
        Param("model", "model.name", "choice", N_("Model"), options=models, section="hw",
              help=N_("Dense, MoE (Qwen3, DeepSeek, gpt-oss: step time from the active parameters, memory from all) "
                      "and MLA (DeepSeek: a small latent KV cache). A model from its config.json: GPU & memory page.")),
        Param("wdtype", "model.dtype_bytes", "choice", N_("Weights"), options=w_opts, values=w_vals, section="hw",
              help=N_("checkpoint: as released (FP8 for DeepSeek-V3/R1, BF16 for the others). FP8 halves the weights "
                      "and runs the matrix multiplies at the GPU's FP8 peak where it has one (not A100).")),
        Param("kvdtype", "model.kv_dtype_bytes", "choice", N_("KV cache"), options=kv_opts, values=kv_vals,
              section="hw", help=N_("vLLM's kv_cache_dtype: auto keeps the model's 16-bit activations; FP8 halves "
                                    "the bytes per token, so about twice the tokens fit.")),
        Param("tp", "hardware.num_gpus", "int", N_("GPUs per replica (tensor parallel)"), 1, 8, 1, section="hw"),
        Param("blocks", "kv.num_blocks", "int", N_("KV blocks override (0 = from memory)"), 0, 10_000_000, 256,
              none_at_zero=True, section="hw", help=N_("Set the KV cache size directly instead of from GPU memory.")),
        Param("seed", "seed", "int", N_("Seed"), 0, 2**32 - 1, 1, section="run"),
        Param("dur", "duration_s", "float", N_("Arrivals for (s)"), 1, 100_000, 10.0, section="run"),
        Param("util", "hardware.gpu_memory_utilization", "float", N_("GPU memory utilization"), 0.1, 1.0, 0.01,
              section="adv"),
        Param("bs", "kv.block_size", "int", N_("KV block size (tokens)"), 1, 1024, 16, section="adv"),
        Param("lpt", "scheduler.long_prefill_token_threshold", "int", N_("Long-prefill chunk limit (0 = off)"), 0,
              1_048_576, 256, section="adv"),
        Param("wm", "scheduler.watermark", "float", N_("KV watermark (fraction kept free)"), 0.0, 0.5, 0.01,
              section="adv"),
        Param("hostbw", "mitigations.host_bandwidth_gbs", "float", N_("Host link for swap (GB/s)"), 1, 10_000, 1.0,
              section="adv"),
        Param("reps", "replicas.count", "int", N_("Replicas"), 1, 16, 1, section="adv"),
        Param("routing", "replicas.routing", "choice", N_("Routing"), options=("shared", "pinned"), section="adv",
              help=N_("shared: any replica; pinned: each class to its replicas.pin list.")),
        Param("gw", "gateway.enabled", "bool", N_("Gateway priority"), section="adv",
              help=N_("An llm-d-style gateway in front of the replicas: the top class dispatched first, nothing "
                      "while the pool is saturated; the engine keeps its own policy.")),
    ]


def _length_param(short: str, base: str, spec: dict | None, labels: tuple[str, str], section: str) -> Param | None:
    """A prompt/output size control: the constant value, or a lognormal's median (shape kept)."""
    spec = spec or {}
    dist = spec.get("dist", "constant")
    if dist == "constant":
        return Param(short, f"{base}.value", "int", labels[0], 1, 10_000_000, 100, section=section)
    if dist == "lognormal":
        scale = tuple(f"{base}.{k}" for k in ("p90", "max") if k in spec)
        return Param(short, f"{base}.median", "int", labels[1], 1, 10_000_000, 100, scale=scale,
                     section=section, help=N_("The median; p90 and max scale with it, so the shape is kept."))
    return None


def class_names(raw: dict) -> list[str]:
    classes = raw.get("classes") or {}
    return sorted(classes, key=lambda n: ((classes[n] or {}).get("priority", 0), n))


def _class_params(raw: dict) -> list[Param]:
    out: list[Param] = []
    if raw.get("trace"):
        return out  # a trace drives arrivals and lengths; caps still apply below
    for name in class_names(raw):
        spec, c, sec = raw["classes"][name] or {}, name.lower(), f"class:{name}"
        if (spec.get("arrival") or {}).get("process", "poisson") in ("poisson", "gamma", "on_off"):
            out.append(Param(f"{c}_rate", f"classes.{name}.arrival.rate", "float", N_("Arrival rate (req/s)"), 0,
                             10_000, 0.05, section=sec, synthetic=True))
        for part, labels in (("prompt", (N_("Prompt tokens"), N_("Prompt tokens (median)"))),
                             ("output", (N_("Output tokens"), N_("Output tokens (median)")))):
            p = _length_param(f"{c}_{part[:3]}", f"classes.{name}.{part}", spec.get(part), labels, sec)
            if p:
                out.append(replace(p, synthetic=True))
    return out


def _cap_params(raw: dict) -> list[Param]:
    out: list[Param] = []
    for name in class_names(raw):
        c, sec, base = name.lower(), f"class:{name}", f"classes.{name}.caps"
        out += [
            Param(f"{c}_cap", f"{base}.max_prompt_tokens", "int", N_("Prompt cap (0 = none)"), 0, 10_000_000, 512,
                  none_at_zero=True, section=sec),
            Param(f"{c}_over", f"{base}.over_cap", "choice", N_("Over the cap"), options=("reject", "split"),
                  section=sec),
            Param(f"{c}_run", f"{base}.max_running", "int", N_("Max running (0 = none)"), 0, 65536, 1,
                  none_at_zero=True, section=sec),
            Param(f"{c}_kvcap", f"{base}.max_kv_blocks", "int", N_("Max KV blocks (0 = none)"), 0, 10_000_000, 64,
                  none_at_zero=True, section=sec),
            Param(f"{c}_pin", f"replicas.pin.{name}", "ints", N_("Pinned to replicas (e.g. 0,1; empty = any)"), 0, 63,
                  section=sec, help=N_("With routing 'pinned', this class only goes to these replicas.")),
        ]
    return out


# ---------------------------------------------------------------------------------------------
# Arrivals from a shipped trace (engine.config.shipped_traces): the source and the class mapping


SYNTHETIC = "synthetic"  # the source option for the scenario's own (synthetic) classes
DEFAULT_SHARE = 0.1  # the top class's sampled share when a trace replaces synthetic traffic
TRACE_SHORTS = ("trace", "tr_long", "tr_share", "tr_from", "tr_scale")


def trace_template(data: dict, name: str) -> dict:
    """The trace section a synthetic scenario gets when its arrivals come from shipped trace `name`:
    a sampled share to the top class, then prompt length: long prompts to the least important class,
    the rest to the middle one (with two classes: the top one)."""
    names = class_names(data)
    assign = None
    if len(names) >= 2:
        assign = {"by": "prompt_length", "edges": [SHIPPED[name].long_prompt],
                  "classes": [names[1] if len(names) >= 3 else names[0], names[-1]],
                  "sample": {names[0]: DEFAULT_SHARE}}
    return {"path": name, "assign": assign, "time_scale": 1.0, "start_s": 0.0}


def _one_edge(assign: dict | None) -> bool:
    """A prompt-length rule with one threshold: the shape the sidebar's threshold control edits."""
    return bool(assign) and assign.get("by") == "prompt_length" and len(assign.get("edges") or ()) == 1


def _trace_params(raw: dict) -> list[Param]:
    """The source control (synthetic or a shipped trace) and its mapping, unless the scenario replays
    a trace file of its own (an upload): that file is its source."""
    trace = raw.get("trace")
    if trace and shipped_name(trace) is None:
        return []
    names = class_names(raw)
    options = tuple(SHIPPED) if trace else (SYNTHETIC, *SHIPPED)
    values = tuple(None if o == SYNTHETIC else o for o in options)
    out = [Param("trace", "trace.path", "choice", N_("Arrivals from"), options=options, values=values, section="src",
                 help=N_("synthetic: each class's own arrival process and lengths. A shipped trace replays real "
                         "arrivals and lengths (azure-code, azure-conv: Azure LLM inference 2023; mooncake-conv: "
                         "Mooncake FAST'25) and maps its requests to the classes by the rules below."))]
    assign = (trace or {}).get("assign") if isinstance(trace, dict) else None
    if len(names) >= 2 and (not trace or _one_edge(assign)):
        out.append(Param("tr_long", "trace.assign.edges", "int", N_("Long prompts from (tokens; 0 = the trace's "
                                                                     "default)"), 0, 10_000_000, 256,
                         none_at_zero=True, section="src",
                         help=N_("Requests with at least this many prompt tokens go to the least important class, "
                                 "shorter ones to the middle class (the top class with two). Defaults: azure-code "
                                 "4096, azure-conv 2048, mooncake-conv 16384 (each trace's longest 14–23 %).")))
    if len(names) >= 2:
        out.append(Param("tr_share", f"trace.assign.sample.{names[0]}", "float",
                         N_("Share sent to the top class (sampled)"), 0, 1, 0.01, section="src",
                         help=N_("This share of the trace's requests, drawn at random (fixed by the seed), goes to "
                                 "the most important class whatever its length; the rest follow the prompt length.")))
    out += [Param("tr_from", "trace.start_s", "float", N_("Start this far into the trace (s)"), 0, 100_000, 60,
                  section="src", help=N_("The run replays the trace's arrivals from here on, for the run's "
                                         "'Arrivals for' seconds (after the time stretch).")),
            Param("tr_scale", "trace.time_scale", "float", N_("Time stretch (× the gaps; 2 = half the rate)"), 0.05,
                  1000, 0.1, section="src", help=N_("Multiplies every arrival time: above 1 spreads the trace out "
                                                   "(lighter load), below 1 packs it (heavier).")),
            ]
    return out


def _trace_value(p: Param, data: dict, own: bool) -> Any:
    """A trace control's widget value for a full scenario mapping; `own`: the preset itself replays a
    shipped trace (else the template's values are the defaults and 0 means the trace's threshold)."""
    trace = data.get("trace")
    name = shipped_name(trace)
    if trace is None or name is None:  # synthetic (or a trace file: no controls)
        section, name = trace_template(data, next(iter(SHIPPED))), None
    else:
        section = trace
    if p.short == "trace":
        return name or SYNTHETIC
    assign = section.get("assign") or {}
    if p.short == "tr_long":
        edge = (assign.get("edges") or [0])[0] if _one_edge(assign) else 0
        return 0 if name is None or (not own and edge == SHIPPED[name].long_prompt) else int(edge)
    if p.short == "tr_share":
        return float((assign.get("sample") or {}).get(p.dotted.rsplit(".", 1)[1], 0.0))
    return float(section.get("start_s" if p.short == "tr_from" else "time_scale"))


def params_for(raw: dict) -> list[Param]:
    """The control table for a preset (class controls depend on its classes)."""
    return _global_params(raw) + _trace_params(raw) + _class_params(raw) + _cap_params(raw)


def _widget_value(p: Param, data: dict, own_trace: bool = False) -> Any:
    """The scenario's value for `p` in widget units, filling schema defaults."""
    if p.short in TRACE_SHORTS:
        return _trace_value(p, data, own_trace)
    v = get_dotted(data, p.dotted)
    if p.values:
        return p.options[p.values.index(v)] if v in p.values else p.options[0]
    if p.kind == "ints":
        return ",".join(str(i) for i in v) if v else ""
    if v is None:
        if p.kind == "bool":
            return False  # an absent section's switch (no `gateway:`) is off
        if p.none_at_zero:
            return 0 if p.kind == "int" else 0.0
        raise KeyError(p.dotted)
    if p.kind == "int":
        return int(round(v))
    if p.kind == "float":
        return float(v)
    if p.kind == "bool":
        return bool(v)
    return str(v)


def widened(p: Param, default: Any) -> Param:
    """The param with its range widened to include the preset's own value (never reject a preset)."""
    if p.kind in ("int", "float") and not (p.lo <= default <= p.hi):
        return replace(p, lo=min(p.lo, default), hi=max(p.hi, default))
    return p


def parse(p: Param, text: Any) -> Any:
    """A URL string → widget value; ValueError if malformed or out of range (never anything else)."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise ValueError
    text = text.strip()
    if p.kind == "text":
        if not text or len(text) > p.hi or not text.isprintable():
            raise ValueError
        return text
    if p.kind == "ints":
        items = [t for t in text.replace(" ", ",").split(",") if t]
        if not all(t.isascii() and t.isdigit() and len(t) <= 6 for t in items):
            raise ValueError
        nums = [int(t) for t in items]
        if any(not p.lo <= n <= p.hi for n in nums):
            raise ValueError
        return ",".join(str(n) for n in nums)
    if p.kind == "choice":
        if text not in p.options:
            raise ValueError
        return text
    if p.kind == "names":
        items = [t.strip() for t in text.split(",") if t.strip()]
        if any(t not in p.options for t in items) or len(set(items)) != len(items):
            raise ValueError
        return [o for o in p.options if o in items]  # the options' order
    if p.kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ValueError
        return text.lower() == "true"
    if not text.isascii():
        raise ValueError  # float() accepts other scripts' digits; a link never needs them
    try:
        num = float(text)
    except OverflowError:  # pragma: no cover - float() returns inf instead; kept for safety
        raise ValueError from None
    if not math.isfinite(num) or not (p.lo <= num <= p.hi):
        raise ValueError
    if p.kind == "int":
        if num != math.floor(num):
            raise ValueError
        return int(num)
    return num


class Codec:
    """The controls of one preset (or uploaded scenario): its table, defaults, and conversions.

    Built once per run from the preset's raw mapping; every method is then a cheap look-up.
    """

    def __init__(self, raw: dict):
        self.raw = raw
        self.full = to_dict(from_dict(raw))
        self.own_trace = shipped_name(self.full.get("trace")) is not None  # the preset replays a shipped trace
        self.defaults: dict[str, Any] = {}
        table = []
        for p in params_for(raw):
            default = _widget_value(p, self.full, self.own_trace)
            self.defaults[p.short] = default
            table.append(widened(p, default))
        self.params: list[Param] = table
        self.by_short: dict[str, Param] = {p.short: p for p in table}

    @property
    def class_names(self) -> list[str]:
        return class_names(self.raw)

    def values_of(self, data: dict) -> dict[str, Any]:
        """Widget values of every control for a full scenario mapping (`to_dict` of a Scenario)."""
        values = {p.short: _widget_value(p, data, self.own_trace) for p in self.params}
        if self.trace_replaces(values):  # the synthetic arrivals a trace replaced: idle, left at the preset's
            values.update({p.short: self.defaults[p.short] for p in self.params if p.synthetic})
        return values

    def values_from_scenario(self, sc: Scenario) -> dict[str, Any]:
        """Widget values that describe `sc` relative to this preset (inverse of `scenario`)."""
        return self.values_of(to_dict(sc))

    def changed(self, values: dict[str, Any]) -> dict[str, Any]:
        """Only the values that differ from the preset's (what goes into the URL)."""
        return {k: v for k, v in values.items() if k in self.defaults and v != self.defaults[k]}

    def describe_changes(self, values: dict[str, Any], limit: int = 3) -> str:
        """The changed values in words, in the sidebar's order ("Scheduling policy = priority, …"),
        for a page's header: a preset's title names its settings ("… (vLLM's FCFS)"), so an edited
        scenario must say what differs."""
        changed = self.changed(values)
        parts = []
        for short, v in list(changed.items())[:limit]:
            p = self.by_short[short]
            who = _("{cls}: ").format(cls=p.section.split(":", 1)[1]) if p.section.startswith("class:") else ""
            parts.append(_("{who}{label} = {value}").format(who=who, label=_(p.label), value=fmt_value(p, v) or "—"))
        if len(changed) > limit:
            parts.append(_("{n} more").format(n=len(changed) - limit))
        return _(", ").join(parts)

    def encode(self, values: dict[str, Any], preset: str) -> dict[str, str]:
        """{short: text} for a share link: the preset (unless default) and changed values only."""
        out = {PRESET_KEY: preset} if preset != DEFAULT_PRESET else {}
        out.update({k: fmt_number(v) for k, v in self.changed(values).items()})
        return out

    def overrides(self, values: dict[str, Any]) -> dict[str, Any]:
        """Changed widget values → dotted scenario overrides (with scaled companions).

        Replica pins are written as one `replicas.pin` mapping, since a cleared pin removes its class.
        """
        out: dict[str, Any] = {}
        pins: dict[str, list[int]] | None = None
        changed = self.changed(values)
        if "model" in changed:  # another model: none of the preset's model fields (a custom shape) carry over
            out["model"] = {"name": changed["model"]}
        replaced = self.trace_replaces(values)
        for key, v in changed.items():
            p = self.by_short[key]
            if key == "model" or key in TRACE_SHORTS or (p.synthetic and replaced):
                continue
            if p.kind == "ints":
                try:
                    nums = [int(t) for t in parse(p, str(v)).split(",") if t]
                except ValueError:
                    raise ScenarioError(f"{p.dotted} = {v!r}: {p.describe_range()}") from None
                pins = dict(self.full["replicas"].get("pin") or {}) if pins is None else pins
                cls = p.dotted.rsplit(".", 1)[1]
                if nums:
                    pins[cls] = nums
                else:
                    pins.pop(cls, None)
                continue
            if p.none_at_zero and v == 0:
                out[p.dotted] = None
                continue
            if p.values:
                out[p.dotted] = p.values[p.options.index(v)] if v in p.options else v
                continue
            out[p.dotted] = v
            if p.scale and self.defaults[key]:
                ratio = v / self.defaults[key]
                for dotted in p.scale:
                    old = get_dotted(self.full, dotted)
                    new = old * ratio
                    out[dotted] = min(int(math.ceil(new)), 10_000_000) if isinstance(old, int) else new
        if pins is not None:
            out["replicas.pin"] = pins or None
        out.update(self._trace_overrides(values, changed))
        return out

    def trace_source(self, values: dict[str, Any]) -> str | None:
        """The shipped trace the controls replay, or None (synthetic arrivals, or a trace file)."""
        if "trace" not in self.by_short:
            return None
        v = values.get("trace", self.defaults["trace"])
        return v if v in SHIPPED else None

    def trace_replaces(self, values: dict[str, Any]) -> bool:
        """True when the controls put a shipped trace in place of the preset's synthetic arrivals."""
        return not self.own_trace and self.trace_source(values) is not None

    def _trace_overrides(self, values: dict[str, Any], changed: dict[str, Any]) -> dict[str, Any]:
        """The whole `trace` section when a trace control changed (and, where a trace replaces the
        synthetic arrivals, every class's arrivals off)."""
        name = self.trace_source(values)
        if name is None or not any(k in changed for k in TRACE_SHORTS):
            return {}
        section = copy.deepcopy(self.full["trace"]) if self.own_trace else trace_template(self.full, name)
        section["path"] = name
        assign = section.get("assign")

        def value(short: str) -> Any:
            return values.get(short, self.defaults[short])

        if "tr_long" in self.by_short and _one_edge(assign):
            assign["edges"] = [int(value("tr_long")) or SHIPPED[name].long_prompt]
        if "tr_share" in self.by_short and assign is not None:
            top = self.by_short["tr_share"].dotted.rsplit(".", 1)[1]
            sample = {k: v for k, v in (assign.get("sample") or {}).items() if k != top}
            if value("tr_share") > 0:
                sample = {top: float(value("tr_share")), **sample}
            assign["sample"] = sample or None
        section["start_s"] = float(value("tr_from"))
        section["time_scale"] = float(value("tr_scale"))
        out: dict[str, Any] = {"trace": section}
        if not self.own_trace:
            for cls in self.class_names:
                out[f"classes.{cls}.arrival"] = {"process": "poisson", "rate": 0.0}
        return out

    def scenario(self, values: dict[str, Any]) -> Scenario:
        """The scenario the controls describe (raises ScenarioError if the combination is invalid)."""
        return from_dict(apply_overrides(self.raw, self.overrides(values)))


def query_string(params: dict[str, str]) -> str:
    return urlencode(params)
