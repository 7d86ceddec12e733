"""The scenario: one validated object that fully determines a simulation run.

Every surface (YAML files, CLI `--set`, share links, sidebar widgets) reads and writes this one
model through dotted keys such as `scheduler.policy` or `classes.P2.prompt.value`. Validation
errors are turned into one line per problem that names the key, the value and what is allowed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

import scenarios

from .policies import POLICIES
from .presets import GPUS, MODELS

SCENARIO_DIR = Path(scenarios.__file__).resolve().parent


class ScenarioError(ValueError):
    """A scenario (file, override or share link) that cannot be used; the message says why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hardware(_Model):
    gpu: str = "H100-80G"
    num_gpus: int = Field(1, ge=1, le=8)
    gpu_memory_utilization: float = Field(0.9, gt=0.05, le=1.0)
    activation_reserve_gib: float = Field(3.0, ge=0, le=64)
    memory_gib: float | None = Field(None, gt=0, le=1024)
    bandwidth_tbs: float | None = Field(None, gt=0, le=100)
    peak_tflops: float | None = Field(None, gt=0, le=100_000)

    @model_validator(mode="after")
    def _known_gpu(self) -> Hardware:
        custom = None not in (self.memory_gib, self.bandwidth_tbs, self.peak_tflops)
        if self.gpu not in GPUS and not custom:
            raise ValueError(
                f"unknown gpu {self.gpu!r}: use one of {', '.join(GPUS)} "
                "or give memory_gib, bandwidth_tbs and peak_tflops"
            )
        return self


class ModelSpec(_Model):
    name: str = "Llama-3-8B"
    params_b: float | None = Field(None, gt=0, le=2000)
    layers: int | None = Field(None, ge=1, le=512)
    hidden: int | None = Field(None, ge=64, le=65536)
    q_heads: int | None = Field(None, ge=1, le=1024)
    kv_heads: int | None = Field(None, ge=1, le=1024)
    head_dim: int | None = Field(None, ge=8, le=1024)
    dtype_bytes: int | None = Field(None, ge=1, le=4)
    kv_dtype_bytes: int | None = Field(None, ge=1, le=4)

    @model_validator(mode="after")
    def _known_model(self) -> ModelSpec:
        shape = (self.params_b, self.layers, self.hidden, self.q_heads, self.kv_heads, self.head_dim)
        if self.name not in MODELS and None in shape:
            raise ValueError(
                f"unknown model {self.name!r}: use one of {', '.join(MODELS)} or give params_b, "
                "layers, hidden, q_heads, kv_heads and head_dim"
            )
        return self


class KV(_Model):
    block_size: int = Field(16, ge=1, le=1024)
    num_blocks: int | None = Field(None, ge=1, le=10_000_000)


class Cost(_Model):
    model: Literal["roofline", "fixed"] = "roofline"
    step_time_s: float = Field(0.02, gt=0, le=60)
    mfu: float = Field(0.6, gt=0, le=1)
    bandwidth_efficiency: float = Field(0.72, gt=0, le=1)
    overhead_s: float = Field(0.002, ge=0, le=1)
    tp_comm_s_per_layer: float = Field(2e-5, ge=0, le=0.01)


class Scheduler(_Model):
    policy: Literal[tuple(POLICIES)] = "fcfs"  # type: ignore[valid-type]  # the names in engine.policies
    max_num_batched_tokens: int = Field(8192, ge=1, le=1_048_576)
    max_num_seqs: int = Field(256, ge=1, le=65536)
    long_prefill_token_threshold: int = Field(0, ge=0, le=1_048_576)
    watermark: float = Field(0.0, ge=0, lt=1)
    chunked_prefill: bool = True


class Arrival(_Model):
    process: Literal["poisson", "gamma", "on_off", "times"] = "poisson"
    rate: float = Field(1.0, ge=0, le=100_000)
    cv: float = Field(1.0, gt=0, le=100)
    on_s: float = Field(10.0, gt=0, le=1e6)
    off_s: float = Field(10.0, ge=0, le=1e6)
    start_s: float = Field(0.0, ge=0, le=1e7)
    times: list[float] | None = None

    @model_validator(mode="after")
    def _times(self) -> Arrival:
        if self.process == "times":
            if not self.times:
                raise ValueError("process 'times' needs a non-empty list `times` (seconds)")
            if any(t < 0 or t != t for t in self.times):
                raise ValueError("`times` must be non-negative numbers")
        return self


class Length(_Model):
    dist: Literal["constant", "uniform", "lognormal", "empirical"] = "constant"
    value: int = Field(256, ge=1, le=10_000_000)
    low: int = Field(1, ge=1, le=10_000_000)
    high: int = Field(1024, ge=1, le=10_000_000)
    median: float = Field(256, gt=0, le=10_000_000)
    p90: float = Field(1024, gt=0, le=10_000_000)
    path: str | None = None
    column: str | None = None
    min: int = Field(1, ge=1, le=10_000_000)
    max: int = Field(1_000_000, ge=1, le=10_000_000)

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


class Assign(_Model):
    by: Literal["column", "fraction", "prompt_length"] = "fraction"
    fractions: dict[str, float] | None = None
    edges: list[int] | None = None
    classes: list[str] | None = None

    @model_validator(mode="after")
    def _rule(self) -> Assign:
        if self.by == "fraction" and not self.fractions:
            raise ValueError("assign by fraction needs `fractions` {class: share}")
        if self.fractions and any(v < 0 for v in self.fractions.values()):
            raise ValueError("fractions must be >= 0")
        if self.by == "prompt_length":
            if not self.edges or not self.classes or len(self.classes) != len(self.edges) + 1:
                raise ValueError("assign by prompt_length needs `edges` and one more `classes`")
            if list(self.edges) != sorted(self.edges):
                raise ValueError("edges must be increasing")
        return self


class Trace(_Model):
    path: str
    format: Literal["azure", "mooncake", "simulator"] | None = None
    assign: Assign | None = None
    time_scale: float = Field(1.0, gt=0, le=1000)
    start_s: float = Field(0.0, ge=0)
    limit: int | None = Field(None, ge=1, le=10_000_000)


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
    pin: dict[str, list[int]] | None = None


class Scenario(_Model):
    name: str = "custom"
    title: str = ""
    description: str = ""
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

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s ({self.warmup_s}) must be < duration_s ({self.duration_s})")
        for name in self.classes:
            if not name or len(name) > 40 or not all(c.isalnum() or c in "_-" for c in name):
                raise ValueError(f"class name {name!r}: use 1-40 letters, digits, '_' or '-'")
        pin = self.replicas.pin or {}
        for cls, idx in pin.items():
            if cls not in self.class_names:
                raise ValueError(f"replicas.pin names unknown class {cls!r}")
            if not idx or any(not 0 <= i < self.replicas.count for i in idx):
                raise ValueError(f"replicas.pin.{cls} must list replica numbers 0..{self.replicas.count - 1}")
        if self.replicas.routing == "pinned" and set(pin) != set(self.class_names):
            missing = sorted(set(self.class_names) - set(pin))
            raise ValueError(f"routing 'pinned' needs replicas.pin for every class (missing {missing})")
        return self

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


# ---------------------------------------------------------------------------------------------
# Loading, dotted overrides and error messages


def format_errors(err: ValidationError) -> str:
    """One line per problem: `dotted.key = value: what is allowed`."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            lines.append(f"{loc}: unknown key")
        elif loc and e["type"] != "value_error":
            lines.append(f"{loc} = {e.get('input')!r}: {msg}")
        else:
            lines.append(f"{loc + ': ' if loc else ''}{msg}")
    return "; ".join(lines)


def from_dict(data: dict[str, Any]) -> Scenario:
    """Validate a plain mapping into a Scenario, or raise ScenarioError with a clear message."""
    if not isinstance(data, dict):
        raise ScenarioError(f"a scenario must be a mapping of keys, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(format_errors(err)) from None


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
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"cannot read {path}: {err.strerror}") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, origin: str = "scenario") -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise ScenarioError(f"{origin}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{origin}: a scenario must be a YAML mapping")
    return data


def resolve_path(name_or_path: str) -> Path:
    """A shipped scenario name (`default`) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    for folder in (SCENARIO_DIR, SCENARIO_DIR / "bench"):
        shipped = folder / f"{name_or_path}.yaml"
        if shipped.exists():
            return shipped
    names = ", ".join(scenario_names() + bench_names())
    raise ScenarioError(f"no scenario {name_or_path!r}: use one of {names} or a .yaml path")


def load_raw(name_or_path: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The scenario's plain data, with relative file paths made relative to the file.

    A file may start from another scenario with `base: NAME` and override only what differs
    (the remedy scenarios do this, so they share the exact traffic of `classic-inversion`).
    """
    path = resolve_path(name_or_path)
    data = read_yaml(path)
    _anchor_paths(data, path.parent)
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str) or base in _seen or len(_seen) > 8:
            raise ScenarioError(f"{path.name}: `base` must name another scenario (no cycles)")
        data = merge(load_raw(base, (*_seen, path.stem)), data)
    data["name"] = data.get("name") or path.stem
    return data


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, anything else in `over` replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def _anchor_paths(data: dict[str, Any], base: Path) -> None:
    trace = data.get("trace")
    if isinstance(trace, dict) and isinstance(trace.get("path"), str):
        trace["path"] = _anchored(trace["path"], base)
    for cls in (data.get("classes") or {}).values():
        for part in ("prompt", "output"):
            spec = cls.get(part) if isinstance(cls, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("path"), str):
                spec["path"] = _anchored(spec["path"], base)


def _anchored(p: str, base: Path) -> str:
    path = Path(p)
    if path.is_absolute() or path.exists():
        return p
    candidate = base / path
    return str(candidate) if candidate.exists() else p


def load(name_or_path: str, overrides: dict[str, Any] | None = None) -> Scenario:
    """Load a shipped or file scenario, apply dotted overrides, validate."""
    data = load_raw(name_or_path)
    if overrides:
        data = apply_overrides(data, overrides)
    return from_dict(data)


def parse_value(text: str) -> Any:
    """A `--set` / URL value: YAML scalars and lists (`8192`, `true`, `null`, `[1, 2]`)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_assignment(item: str) -> tuple[str, Any]:
    """`dotted.key=value` → (key, value)."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ScenarioError(f"bad --set {item!r}: expected dotted.key=value")
    return key, parse_value(value)


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
                raise ScenarioError(f"{dotted}: {part!r} is a value, not a group of keys")
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
