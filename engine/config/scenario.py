"""The scenario: one validated object that fully determines a simulation run.

Every surface (YAML files, CLI `--set`, share links, sidebar widgets) reads and writes this one
model through dotted keys such as `scheduler.policy` or `classes.P2.prompt.value`. Validation
errors are turned into one line per problem that names the key, the value and what is allowed.

This is the one gate for values from outside: numbers must be finite (no inf/nan, `1e999` or
"Infinity"), integers must lie in the schema's bounds (checked on the exact integer, before any
conversion to a machine type), strings and lists are bounded, YAML is parsed with bounded
nesting and alias expansion, and files a scenario names must be local files inside an allowed
folder. Messages never echo an input in full (`literal.brief`). How much *work* a valid scenario
implies is checked separately, before a run (`engine.sim.limits`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_serializer, model_validator

import scenarios

from ..core.policies import POLICIES
from . import safeyaml
from .literal import brief, clip
from .presets import GPUS, MODELS, vllm_batch_defaults
from .safeio import FileRefused, check_local, inside, read_bytes, shown
from .shipped_traces import SHIPPED, shipped_name

SCENARIO_DIR = Path(scenarios.__file__).resolve().parent
MAX_SCENARIO_BYTES = 1 << 20  # a scenario is a few hundred bytes; long `times` lists still fit
MAX_TOKENS = 10_000_000  # any token count: prompt, output, budget-sized lengths
MAX_ERRORS_SHOWN = 5
HARDWARE_NAME = r"^[A-Za-z0-9 ._+()/-]{1,64}$"  # shown in figure titles, where plotly reads <a href>
ONE_LINE = r"^[^\x00-\x1f\x7f]*$"  # names and titles: no control characters (line breaks, escapes)


class ScenarioError(ValueError):
    """A scenario (file, override or share link) that cannot be used; the message says why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Hardware(_Model):
    gpu: str = Field("H100-80G", pattern=HARDWARE_NAME)
    num_gpus: int = Field(1, ge=1, le=8)
    gpu_memory_utilization: float = Field(0.9, gt=0.05, le=1.0)
    activation_reserve_gib: float = Field(3.0, ge=0, le=64)
    memory_gib: float | None = Field(None, gt=0, le=1024)
    bandwidth_tbs: float | None = Field(None, gt=0, le=100)
    peak_tflops: float | None = Field(None, gt=0, le=100_000)
    fp8_tflops: float | None = Field(None, gt=0, le=200_000)

    @model_validator(mode="after")
    def _known_gpu(self) -> Hardware:
        custom = None not in (self.memory_gib, self.bandwidth_tbs, self.peak_tflops)
        if self.gpu not in GPUS and not custom:
            raise ValueError(
                f"unknown gpu {brief(self.gpu)}: use one of {', '.join(GPUS)} "
                "or give memory_gib, bandwidth_tbs and peak_tflops"
            )
        return self


class ModelSpec(_Model):
    name: str = Field("Llama-3-8B", pattern=HARDWARE_NAME)
    params_b: float | None = Field(None, gt=0, le=2000)
    layers: int | None = Field(None, ge=1, le=512)
    hidden: int | None = Field(None, ge=64, le=65536)
    q_heads: int | None = Field(None, ge=1, le=1024)
    kv_heads: int | None = Field(None, ge=1, le=1024)
    head_dim: int | None = Field(None, ge=8, le=1024)
    dtype_bytes: int | None = Field(None, ge=1, le=4)
    kv_dtype_bytes: int | None = Field(None, ge=1, le=4)
    experts: int | None = Field(None, ge=0, le=4096)  # routed experts per MoE layer (0 = dense)
    experts_per_token: int | None = Field(None, ge=1, le=4096)
    expert_params_b: float | None = Field(None, ge=0, le=2000)  # all routed experts, part of params_b
    expert_dtype_bytes: float | None = Field(None, ge=0.25, le=4)  # e.g. 0.53125 for MXFP4
    kv_lora_rank: int | None = Field(None, ge=0, le=8192)  # MLA latent width (0 = K and V per KV head)
    qk_rope_head_dim: int | None = Field(None, ge=0, le=1024)
    kv_layers: int | None = Field(None, ge=1, le=512)  # layers whose KV grows with the context

    @model_validator(mode="after")
    def _known_model(self) -> ModelSpec:
        shape = (self.params_b, self.layers, self.hidden, self.q_heads, self.kv_heads, self.head_dim)
        if self.name not in MODELS and None in shape:
            raise ValueError(
                f"unknown model {brief(self.name)}: use one of {', '.join(MODELS)} or give params_b, "
                "layers, hidden, q_heads, kv_heads and head_dim"
            )
        _check_model_shape(self)
        return self


def _check_model_shape(spec: ModelSpec) -> None:
    """MoE and layer fields that only make sense together (the preset fills what is not given)."""
    base = MODELS.get(spec.name)

    def val(field: str, base_field: str, scale: float = 1.0):
        v = getattr(spec, field)
        b = getattr(base, base_field) if base else None
        return v if v is not None else (b / scale if b is not None and scale != 1 else b)

    experts = val("experts", "experts") or 0
    if experts:
        k, ep, p = val("experts_per_token", "experts_per_token"), val("expert_params_b", "expert_params", 1e9), \
            val("params_b", "params", 1e9)
        if not k or k > experts:
            raise ValueError(f"experts_per_token ({k}) must be 1 to experts ({experts}) for an MoE model")
        if ep is None or not 0 < ep < p:
            raise ValueError(f"expert_params_b ({ep}) must be above 0 and below params_b ({p}) for an MoE model")
    layers, kv_layers = val("layers", "layers"), val("kv_layers", "kv_layers")
    if kv_layers is not None and kv_layers > layers:
        raise ValueError(f"kv_layers ({kv_layers}) must be at most layers ({layers})")


class KV(_Model):
    block_size: int = Field(16, ge=1, le=1024)
    num_blocks: int | None = Field(None, ge=2, le=10_000_000)  # vLLM's num_gpu_blocks: one is the null block
    prefix_caching: bool = True  # vLLM's default (engine.core.prefix)


class Cost(_Model):
    model: Literal["roofline", "fixed"] = "roofline"
    step_time_s: float = Field(0.02, gt=0, le=60)
    mfu: float = Field(0.6, gt=0, le=1)
    bandwidth_efficiency: float = Field(0.72, gt=0, le=1)
    overhead_s: float = Field(0.002, ge=0, le=1)
    tp_comm_s_per_layer: float = Field(2e-5, ge=0, le=0.01)


class SGLangArgs(_Model):
    """SGLang 0.5.23's server arguments the `sglang` engine models (engine/core/sglang_rules.py)."""

    chunked_prefill_size: int | None = Field(None, ge=1, le=1_048_576)  # None: max_num_batched_tokens
    max_prefill_tokens: int = Field(16384, ge=1, le=1_048_576)
    enable_mixed_chunk: bool = False
    schedule_conservativeness: float = Field(1.0, ge=0, le=100)
    schedule_low_priority_values_first: bool = False
    priority_scheduling_preemption_threshold: int = Field(10, ge=0, le=1_000_000)
    disable_priority_preemption: bool = False
    retraction_policy: Literal["length", "priority"] = "length"
    ignore_eos: bool = False
    class_priority: dict[str, int] | None = Field(None, max_length=1000)  # SGLang priority per class
    init_new_token_ratio: float = Field(0.7, gt=0, le=1)  # SGLANG_INIT_NEW_TOKEN_RATIO
    min_new_token_ratio_factor: float = Field(0.14, ge=0, le=1)  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
    new_token_ratio_decay_steps: int = Field(600, ge=1, le=1_000_000)  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS

    @model_validator(mode="after")
    def _priorities(self) -> SGLangArgs:
        if self.class_priority and any(abs(v) > 1_000_000 for v in self.class_priority.values()):
            raise ValueError("class_priority values must lie in -1000000..1000000")
        return self


class Scheduler(_Model):
    engine: Literal["vllm", "sglang"] = "vllm"  # whose scheduling rules: vLLM 0.33 or SGLang 0.5.23
    sglang: SGLangArgs = SGLangArgs()
    policy: Literal[tuple(POLICIES)] = "fcfs"  # type: ignore[valid-type]  # the names in engine.core.policies
    max_num_batched_tokens: int | None = Field(None, ge=1, le=1_048_576)  # None: vLLM's default for the GPU
    max_num_seqs: int | None = Field(None, ge=1, le=65536)  # None: vLLM's default for the GPU
    long_prefill_token_threshold: int = Field(0, ge=0, le=1_048_576)
    long_prefill_token_threshold_adaptive: bool = False
    async_scheduling: bool = True  # vLLM 0.33's default (AsyncScheduler)
    max_num_queued_reqs: int | None = Field(None, ge=0, le=10_000_000)  # vLLM's API server: HTTP 503 beyond
    max_num_queued_tokens: int | None = Field(None, ge=0, le=1_000_000_000)
    watermark: float = Field(0.0, ge=0, lt=1)
    chunked_prefill: bool = True


class Arrival(_Model):
    process: Literal["poisson", "gamma", "on_off", "times"] = "poisson"
    rate: float = Field(1.0, ge=0, le=100_000)
    cv: float = Field(1.0, gt=0, le=100)
    on_s: float = Field(10.0, gt=0, le=1e6)
    off_s: float = Field(10.0, ge=0, le=1e6)
    start_s: float = Field(0.0, ge=0, le=1e7)
    times: list[float] | None = Field(None, max_length=100_000)

    @model_validator(mode="after")
    def _times(self) -> Arrival:
        if self.process == "times":
            if not self.times:
                raise ValueError("process 'times' needs a non-empty list `times` (seconds)")
            if any(t < 0 for t in self.times):
                raise ValueError("`times` must be non-negative numbers")
        return self


class Length(_Model):
    dist: Literal["constant", "uniform", "lognormal", "empirical"] = "constant"
    value: int = Field(256, ge=1, le=MAX_TOKENS)
    low: int = Field(1, ge=1, le=MAX_TOKENS)
    high: int = Field(1024, ge=1, le=MAX_TOKENS)
    median: float = Field(256, gt=0, le=MAX_TOKENS)
    p90: float = Field(1024, gt=0, le=MAX_TOKENS)
    path: str | None = Field(None, min_length=1, max_length=4096)
    column: str | None = Field(None, min_length=1, max_length=200)
    min: int = Field(1, ge=1, le=MAX_TOKENS)
    max: int = Field(1_000_000, ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _shape(self) -> Length:
        if self.dist == "uniform" and self.low > self.high:
            raise ValueError(f"uniform needs low <= high (got {self.low} > {self.high})")
        if self.dist == "lognormal" and self.p90 < self.median:
            raise ValueError(f"lognormal needs p90 >= median (got {self.p90} < {self.median})")
        if self.dist == "empirical" and not (self.path and self.column):
            raise ValueError("empirical needs `path` (CSV file) and `column`")
        if self.min > self.max:
            raise ValueError(f"min must be <= max (got {self.min} > {self.max})")
        return self


class Slo(_Model):
    ttft_s: float | None = Field(None, gt=0, le=1e6)
    tpot_s: float | None = Field(None, gt=0, le=1e6)


class Caps(_Model):
    max_prompt_tokens: int | None = Field(None, ge=1, le=10_000_000)
    over_cap: Literal["reject", "split"] = "reject"
    max_running: int | None = Field(None, ge=1, le=65536)
    max_kv_blocks: int | None = Field(None, ge=1, le=10_000_000)


class RequestClass(_Model):
    priority: int = Field(0, ge=0, le=1000)
    arrival: Arrival = Arrival()
    prompt: Length = Length()
    output: Length = Length(value=128)
    slo: Slo = Slo()
    caps: Caps = Caps()
    prefix_tokens: int = Field(0, ge=0, le=10_000_000)  # a shared system prompt: the first tokens of every prompt


class Assign(_Model):
    """How a trace's requests become the scenario's classes (real traces have none).

    `sample` is drawn first: each request goes to a sampled class with its share, by one seeded
    draw per row of the trace file (so a request keeps its class when the replayed window moves);
    the rest follow `by`. Every request lands in exactly one class (engine.config.workload._assign)."""

    by: Literal["column", "fraction", "prompt_length"] = "fraction"
    fractions: dict[str, float] | None = Field(None, max_length=10_000)
    edges: list[int] | None = Field(None, max_length=10_000)
    classes: list[str] | None = Field(None, max_length=10_001)
    sample: dict[str, float] | None = Field(None, max_length=1_000)  # {class: share of all requests}, drawn first

    @model_validator(mode="after")
    def _rule(self) -> Assign:
        if self.by == "fraction" and not self.fractions:
            raise ValueError("assign by fraction needs `fractions` {class: share}")
        if self.fractions and any(not 0 <= v <= 1e6 for v in self.fractions.values()):
            raise ValueError("fractions must be numbers from 0 to 1e6")
        if self.edges and any(not 1 <= e <= MAX_TOKENS for e in self.edges):
            raise ValueError(f"edges must be token counts from 1 to {MAX_TOKENS:,}")
        if self.by == "prompt_length":
            if not self.edges or not self.classes or len(self.classes) != len(self.edges) + 1:
                raise ValueError("assign by prompt_length needs `edges` and one more `classes`")
            if list(self.edges) != sorted(self.edges):
                raise ValueError("edges must be increasing")
        if self.sample:
            if any(not 0 <= v <= 1 for v in self.sample.values()):
                raise ValueError("sample shares must be numbers from 0 to 1")
            if sum(self.sample.values()) > 1 + 1e-9:
                raise ValueError(f"sample shares add up to {sum(self.sample.values()):.4g}, more than 1")
        return self

    def named_classes(self) -> list[tuple[str, str]]:
        """(key, class name) of every class the rule names."""
        return ([(f"fractions.{k}", k) for k in self.fractions or ()] + [("classes", c) for c in self.classes or ()]
                + [(f"sample.{k}", k) for k in self.sample or ()])


class Trace(_Model):
    path: str = Field(min_length=1, max_length=4096)  # a file, or a shipped trace's short name (azure-code)
    format: Literal["azure", "mooncake", "simulator"] | None = None
    assign: Assign | None = None
    time_scale: float = Field(1.0, gt=0, le=1000)
    start_s: float = Field(0.0, ge=0, le=1e9)
    limit: int | None = Field(None, ge=1, le=10_000_000)

    @model_validator(mode="before")
    @classmethod
    def _short_name(cls, data: Any) -> Any:
        """`trace: azure-code` is `trace: {path: azure-code}`; only for shipped traces (a file needs `path`)."""
        if isinstance(data, str):
            if shipped_name(data) is None:
                raise ValueError(f"{brief(data)} is not a shipped trace (use one of {', '.join(SHIPPED)}); "
                                 "a trace file is named by trace.path")
            return {"path": data}
        return data


class Mitigations(_Model):
    p0_token_reserve: int = Field(0, ge=0, le=1_048_576)
    reserve_mode: Literal["strict", "lendable"] = "strict"
    p0_kv_reserve: int = Field(0, ge=0, le=10_000_000)
    inheritance: bool = False
    aging_s: float = Field(0.0, ge=0, le=1e6)
    preempt_mode: Literal["recompute", "swap"] = "recompute"
    host_bandwidth_gbs: float = Field(25.0, gt=0, le=10_000)
    alert_after_s: float | None = Field(None, gt=0, le=1e6)


class Replicas(_Model):
    count: int = Field(1, ge=1, le=64)
    routing: Literal["shared", "pinned"] = "shared"
    pin: dict[str, list[int]] | None = Field(None, max_length=10_000)


class GatewayClass(_Model):
    """One class's flow at the gateway (llm-d's InferenceObjective for the class)."""

    priority: int | None = Field(None, ge=-(2**31), le=2**31 - 1)  # spec.priority: higher first, < 0 sheddable
    ceiling: float | None = Field(None, gt=0, le=100)  # holdback: dispatch only while saturation < ceiling


class Gateway(_Model):
    """An llm-d-router style gateway in front of the replicas (engine.sim.gateway); absent = off."""

    enabled: bool = True
    queue_depth_threshold: float = Field(5.0, gt=0, le=1e6)  # llm-d utilization detector: queue / this
    kv_cache_threshold: float = Field(0.8, gt=0, le=1)  # and KV usage / this; saturated at a mean >= 1
    fairness: Literal["global-strict", "round-robin"] = "global-strict"
    scrape_interval_s: float = Field(0.0, ge=0, le=10)  # 0: live metrics; llm-d scrapes every 0.05 s
    shed_when_saturated: bool = True  # sheddable (priority < 0) arrivals get HTTP 429 while saturated
    request_ttl_s: float | None = Field(None, gt=0, le=1e6)  # dropped (HTTP 429) after this long queued
    classes: dict[str, GatewayClass] = Field(default_factory=dict, max_length=10_000)


class Scenario(_Model):
    name: str = Field("custom", max_length=200, pattern=ONE_LINE)
    title: str = Field("", max_length=500, pattern=ONE_LINE)
    description: str = Field("", max_length=20_000)
    seed: int = Field(0, ge=0, le=2**32 - 1)
    duration_s: float = Field(60.0, gt=0, le=1e6)
    warmup_s: float = Field(0.0, ge=0, le=1e6)
    drain_limit_s: float = Field(3600.0, gt=0, le=1e7)
    hardware: Hardware = Hardware()
    model: ModelSpec = ModelSpec()
    kv: KV = KV()
    cost: Cost = Cost()
    scheduler: Scheduler = Scheduler()
    classes: dict[str, RequestClass] = Field(default_factory=dict)
    trace: Trace | None = None
    mitigations: Mitigations = Mitigations()
    replicas: Replicas = Replicas()
    gateway: Gateway | None = None
    _device_defaults: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s ({self.warmup_s}) must be < duration_s ({self.duration_s})")
        folded: dict[str, str] = {}
        for name in self.classes:
            if not valid_class_name(name):
                raise ValueError(f"class name {brief(name)}: use 1-40 letters, digits, '_' or '-'")
            if name.casefold() in folded:
                raise ValueError(f"class names {folded[name.casefold()]!r} and {name!r} differ only in letter case")
            folded[name.casefold()] = name
        pin = self.replicas.pin or {}
        for cls, idx in pin.items():
            if cls not in self.class_names:
                raise ValueError(f"replicas.pin names unknown class {brief(cls)}")
            if not idx or any(not 0 <= i < self.replicas.count for i in idx):
                raise ValueError(f"replicas.pin.{cls} must list replica numbers 0..{self.replicas.count - 1}")
        if self.replicas.routing == "pinned" and set(pin) != set(self.class_names):
            missing = sorted(set(self.class_names) - set(pin))
            raise ValueError(f"routing 'pinned' needs replicas.pin for every class (missing {missing})")
        if self.trace is not None and self.trace.assign is not None:
            for key, name in self.trace.assign.named_classes():
                if name not in self.class_names:
                    raise ValueError(f"trace.assign.{clip(key, 60)} names class {brief(name)}, which is not in "
                                     f"classes ({', '.join(self.class_names)})")
        return self

    @model_validator(mode="after")
    def _gateway_consistent(self) -> Scenario:
        gw = self.gateway
        if gw is None:
            return self
        for name in gw.classes:
            if name not in self.class_names:
                raise ValueError(f"gateway.classes names unknown class {brief(name)}")
        if gw.enabled and self.replicas.routing != "shared":
            raise ValueError("gateway needs replicas.routing 'shared': its saturation is one pool's")
        return self

    @model_validator(mode="after")
    def _gpu_batch_defaults(self) -> Scenario:
        """A budget or seat count left unset takes vLLM 0.33's default for the GPU class."""
        scheduler, unset = device_batch_defaults(self.scheduler, self.hardware)
        if unset:
            object.__setattr__(self, "scheduler", scheduler)
            self._device_defaults = unset
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        """Keys that took the GPU's default are written back unset, so a changed GPU changes them."""
        data = handler(self)
        if self._device_defaults and isinstance(data, dict) and isinstance(data.get("scheduler"), dict):
            for key in self._device_defaults:
                data["scheduler"][key] = None
        return data

    @property
    def device_defaults(self) -> frozenset[str]:
        """The `scheduler` keys whose values are vLLM's defaults for the GPU (not set explicitly)."""
        return self._device_defaults

    @property
    def class_names(self) -> list[str]:
        """Class names in a stable order: by priority, then name (default class if none)."""
        if not self.classes:
            return ["default"]
        return sorted(self.classes, key=lambda n: (self.classes[n].priority, n))

    def request_class(self, name: str) -> RequestClass:
        return self.classes.get(name) or RequestClass()

    def key(self) -> str:
        """A canonical, hashable text of the whole scenario (cache keys, equality)."""
        return self.model_dump_json()


DEVICE_DEFAULT_KEYS = ("max_num_batched_tokens", "max_num_seqs")


def device_batch_defaults(settings: Scheduler, hardware: Hardware) -> tuple[Scheduler, frozenset[str]]:
    """The scheduler with unset budget/seats filled from vLLM 0.33's per-device defaults, and the keys
    filled. The device class comes from the memory the driver reports and the GPU's name."""
    unset = frozenset(k for k in DEVICE_DEFAULT_KEYS if getattr(settings, k) is None)
    if not unset:
        return settings, unset
    memory = hardware.memory_gib if hardware.memory_gib is not None else GPUS[hardware.gpu].memory_gib
    budget, seqs = vllm_batch_defaults(hardware.gpu, memory)
    values = {"max_num_batched_tokens": budget, "max_num_seqs": seqs}
    return settings.model_copy(update={k: values[k] for k in unset}), unset


def valid_class_name(name: object) -> bool:
    """1-40 ASCII letters, digits, '_' or '-' (class names become widget keys and CSV values)."""
    return isinstance(name, str) and 0 < len(name) <= 40 and all(c.isascii() and (c.isalnum() or c in "_-")
                                                                 for c in name)


# ---------------------------------------------------------------------------------------------
# Loading, dotted overrides and error messages


def format_errors(err: ValidationError) -> str:
    """One line per problem (the first few): `dotted.key = value: what is allowed`.

    Keys and values are shown bounded (`literal.brief`): the input may be huge or hostile.
    """
    problems = err.errors(include_url=False, include_context=False, include_input=True)
    lines = []
    for e in problems[:MAX_ERRORS_SHOWN]:
        loc = ".".join(clip(p, 40) for p in e["loc"])
        msg = clip(e["msg"].removeprefix("Value error, "), 300)
        if e["type"] == "extra_forbidden":
            lines.append(f"{loc}: unknown key")
        elif loc and e["type"] != "value_error":
            lines.append(f"{loc} = {brief(e.get('input'))}: {msg}")
        else:
            lines.append(f"{loc + ': ' if loc else ''}{msg}")
    if len(problems) > MAX_ERRORS_SHOWN:
        lines.append(f"and {len(problems) - MAX_ERRORS_SHOWN} more problem(s)")
    return "; ".join(lines)


def from_dict(data: dict[str, Any]) -> Scenario:
    """Validate a plain mapping into a Scenario, or raise ScenarioError with a clear message."""
    if not isinstance(data, dict):
        raise ScenarioError(f"a scenario must be a mapping of keys, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(format_errors(err)) from None
    except RecursionError:  # a structure nested deeper than any YAML we parse would allow
        raise ScenarioError("the scenario is nested too deeply") from None


def to_dict(sc: Scenario) -> dict[str, Any]:
    """The scenario as plain data (what `from_dict` reads back)."""
    return sc.model_dump(mode="json")


def to_yaml(sc: Scenario) -> str:
    return yaml.safe_dump(to_dict(sc), sort_keys=False, allow_unicode=True)


def scenario_names() -> list[str]:
    """Names of the scenarios shipped in `scenarios/` (the app's presets and the lessons')."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def bench_names() -> list[str]:
    """Names of the benchmark scenarios in `scenarios/bench/` (CLI only: too big for the app)."""
    return sorted(p.stem for p in (SCENARIO_DIR / "bench").glob("*.yaml"))


def read_yaml(path: Path) -> dict[str, Any]:
    """A scenario file's mapping: a local regular file of at most MAX_SCENARIO_BYTES, UTF-8 YAML."""
    try:
        data = read_bytes(path, MAX_SCENARIO_BYTES)
    except FileRefused as err:
        raise ScenarioError(f"cannot read scenario {err}") from None
    except OSError as err:
        raise ScenarioError(f"cannot read {shown(path)}: {err.strerror or type(err).__name__}") from None
    return parse_yaml(decode_text(data, shown(Path(path).name), ScenarioError), shown(Path(path).name))


def decode_text(data: bytes, origin: str, error: type[Exception]) -> str:
    """UTF-8 text (a leading byte-order mark dropped), or `error` naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise error(f"{origin}: not UTF-8 text (byte {err.start} is 0x{data[err.start]:02x})") from None


def parse_yaml(text: str, origin: str = "scenario") -> dict[str, Any]:
    origin = clip(origin, 80)
    try:
        data = safeyaml.load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        why = getattr(err, "problem", None) or getattr(err, "reason", None) or type(err).__name__
        raise ScenarioError(f"{origin}: not valid YAML{where}: {clip(why, 120)}") from None
    except safeyaml.YamlLimitError as err:
        raise ScenarioError(f"{origin}: {err}") from None
    except RecursionError:
        raise ScenarioError(f"{origin}: nested too deeply") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{origin}: a scenario must be a YAML mapping")
    return data


def resolve_path(name_or_path: str) -> Path:
    """A shipped scenario name (`default`) or a path to a YAML file."""
    try:
        p = check_local(name_or_path)
    except FileRefused as err:
        raise ScenarioError(f"scenario {err}") from None
    if name_or_path in scenario_names():
        return SCENARIO_DIR / f"{name_or_path}.yaml"
    if p.suffix in (".yaml", ".yml") or _exists(p):
        return p
    if name_or_path in bench_names():
        return SCENARIO_DIR / "bench" / f"{name_or_path}.yaml"
    names = ", ".join(scenario_names() + bench_names())
    raise ScenarioError(f"no scenario {brief(name_or_path)}: use one of {names} or a .yaml path")


def load_raw(name_or_path: str, _seen: tuple[str, ...] = (), allow_dirs: tuple[Path, ...] | None = None
             ) -> dict[str, Any]:
    """The scenario's plain data, with relative file paths made relative to the file.

    A file may start from another scenario with `base: NAME` and override only what differs
    (the remedy scenarios do this, so they share the exact traffic of `classic-inversion`).

    Files a scenario names (`base`, `trace.path`, empirical `path`s) must lie in an allowed
    folder: the first file's own folder (and below), the shipped scenarios, or `allow_dirs`.
    """
    path = resolve_path(name_or_path)
    roots = allow_dirs if _seen else (path.parent, SCENARIO_DIR, *(allow_dirs or ()))
    data = read_yaml(path)
    data.pop("story", None)  # what the file's runs show (engine.sweeps.story): not the scenario, never inherited
    _anchor_paths(data, path.parent, roots)
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str) or base in _seen or len(_seen) > 8:
            raise ScenarioError(f"{shown(path.name)}: `base` must name another scenario (no cycles)")
        if base not in scenario_names():
            target = _anchored(base, path.parent)
            if Path(target).suffix not in (".yaml", ".yml"):
                raise ScenarioError(f"base = {brief(base)}: use a shipped scenario name or a .yaml file")
            _check_inside("base", target, roots)
            base = target
        data = merge(load_raw(base, (*_seen, path.stem), roots), data)
    data["name"] = data.get("name") or path.stem
    return data


def load_shipped(name: str) -> dict[str, Any]:
    """A shipped scenario's plain data by name only (for names from a link: never a path)."""
    if name not in scenario_names():
        raise ScenarioError(f"no shipped scenario {brief(name)}: use one of {', '.join(scenario_names())}")
    return load_raw(name)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, anything else in `over` replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def file_references(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(dotted key, path) of every file the scenario mapping names (trace, empirical lengths)."""
    refs = []
    trace = data.get("trace")
    if isinstance(trace, dict) and trace.get("path") is not None and shipped_name(trace) is None:
        refs.append(("trace.path", trace["path"]))  # a shipped trace's short name reads no user file
    classes = data.get("classes")
    for name, cls in (classes.items() if isinstance(classes, dict) else ()):
        for part in ("prompt", "output"):
            spec = cls.get(part) if isinstance(cls, dict) else None
            if isinstance(spec, dict) and spec.get("path") is not None:
                refs.append((f"classes.{clip(name, 40)}.{part}.path", spec["path"]))
    return refs


def _anchor_paths(data: dict[str, Any], base: Path, roots: tuple[Path, ...]) -> None:
    trace = data.get("trace")
    if isinstance(trace, dict) and isinstance(trace.get("path"), str) and shipped_name(trace) is None:
        trace["path"] = _anchored(trace["path"], base)
    for cls in (data.get("classes") or {}).values() if isinstance(data.get("classes"), dict) else ():
        for part in ("prompt", "output"):
            spec = cls.get(part) if isinstance(cls, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("path"), str):
                spec["path"] = _anchored(spec["path"], base)
    for key, p in file_references(data):
        if isinstance(p, str):
            _check_inside(key, p, roots)


def _anchored(p: str, base: Path) -> str:
    try:
        path = check_local(p)
    except FileRefused:
        return p  # refused with its key when checked
    if path.is_absolute() or _exists(path):
        return p
    candidate = base / path
    return str(candidate) if _exists(candidate) else p


def _exists(p: Path) -> bool:
    try:
        return p.exists()
    except OSError:  # a name too long for the file system, a loop of links
        return False


def _check_inside(key: str, p: str, roots: tuple[Path, ...]) -> None:
    try:
        check_local(p)
    except FileRefused as err:
        raise ScenarioError(f"{key}: {err}") from None
    if not inside(p, roots):
        folders = ", ".join(shown(r, 60) for r in roots)
        raise ScenarioError(f"{key} = {shown(p)}: outside the allowed folders ({folders}); "
                            "a scenario may only name files next to it or below (the CLI's --allow-dir adds a folder)")


def load(name_or_path: str, overrides: dict[str, Any] | None = None,
         allow_dirs: tuple[Path, ...] = ()) -> Scenario:
    """Load a shipped or file scenario, apply dotted overrides, validate.

    `allow_dirs`: folders besides the file's own where the files it names may lie.
    """
    data = load_raw(name_or_path, allow_dirs=tuple(Path(d) for d in allow_dirs))
    if overrides:
        data = apply_overrides(data, overrides)
    return from_dict(data)


def parse_value(text: str) -> Any:
    """A `--set` / URL value: YAML scalars and lists (`8192`, `true`, `null`, `[1, 2]`)."""
    try:
        return safeyaml.load(text, max_depth=8, max_values=100_000)
    except (yaml.YAMLError, safeyaml.YamlValueError):
        return text  # validated as the text it is
    except safeyaml.YamlLimitError as err:
        raise ScenarioError(f"value {brief(text)}: {err}") from None


def parse_assignment(item: str) -> tuple[str, Any]:
    """`dotted.key=value` → (key, value)."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key or len(key) > 300 or any(not part for part in key.split(".")):
        raise ScenarioError(f"bad --set {brief(item)}: expected dotted.key=value")
    try:
        return key, parse_value(value)
    except ScenarioError as err:
        raise ScenarioError(f"{clip(key)}: {err}") from None


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of `data` with each dotted key set; unknown keys surface when validating."""
    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        node = out
        parts = dotted.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ScenarioError(f"{clip(dotted)}: {clip(part)!r} is a value, not a group of keys")
            node = child
        node[parts[-1]] = value
    return out


def get_dotted(data: dict[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def load_with_sets(name: str, sets: list[str], seed: int | None = None, allow: tuple | list = ()) -> Scenario:
    """A scenario as the command line names it: a shipped name or a file, `--set key=value`
    assignments (YAML scalars or lists) and `--seed`."""
    overrides = dict(parse_assignment(s) for s in sets)
    if seed is not None:
        overrides["seed"] = seed
    return load(name, overrides, allow_dirs=tuple(allow))
