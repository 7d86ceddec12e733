"""The recorded corpus: what vLLM's own scheduler did on each workload, as compact JSON lines.

One gzip-compressed JSON-lines file per mode, `fidelity/corpus/<mode>.jsonl.gz`. Standard library
only (it is read by the tests and written inside `.venv-vllm`).

Line 1 is a header::

    {"format": "inversion-lab/vllm-corpus/1", "mode": "fcfs", "vllm_version": "0.33.0",
     "vllm_commit": "...", "request_columns": [...], "result_columns": [...]}

Every further line is one workload::

    {"id": "fcfs-0007", "seed": "fcfs:7:0",
     "config": {"num_gpu_blocks": 23, "block_size": 8, "max_num_batched_tokens": 128,
                "max_num_seqs": 4, "long_prefill_token_threshold": 0,
                "long_prefill_token_threshold_adaptive": false, "watermark": 0.0,
                "policy": "fcfs", "async_scheduling": false, "enable_prefix_caching": false},
     "requests": [[arrival_step, prompt_len, output_len, priority, prefix_group, prefix_tokens,
                   parent], ...],
     "result": {"requests": [[first_scheduled, first_token, finish, preemptions, cached_tokens,
                              cached_tokens_all], ...],
                "step_tokens": [tokens of step 0, of step 1, ...],
                "empty_calls": 0}}

A request's id is its index in `requests`; requests are listed in the order they were added to
vLLM (arrival step, then generation order), so a trace written in that order keeps the ids.
`num_gpu_blocks` is vLLM's pool size: one block of it is vLLM's null block, so N-1 are usable.

**Prefix identity.** `prefix_group` = -1 means the prompt is unique. Otherwise the request's first
`prefix_tokens` prompt tokens are the first `prefix_tokens` tokens of its group's token stream
(identical across the group); the rest of the prompt is unique to the request. When
`prefix_tokens` equals the prompt length (multi-turn conversations: `parent` >= 0 names the
previous turn, whose prompt and output this prompt re-sends before new user tokens; or a
repeated identical prompt), the request's output tokens continue the group's stream, so the
next turn shares them too (and two identical prompts produce identical outputs, as with greedy
sampling). Otherwise (prompt longer than `prefix_tokens`) the outputs are unique.

**Step numbering.** A step is one forward pass (a batch with at least one scheduled token) or one
idle tick; steps are numbered 0, 1, 2, … on a fixed grid (step k occupies [k·DT, (k+1)·DT) for a
fixed step time DT).

- A request with `arrival_step` k is added immediately before the schedule() call that builds
  step k's batch; if the scheduler has nothing to do, time moves on to the next arrival's step
  (those steps have 0 tokens).
- A schedule() call that schedules 0 tokens while requests exist (under `priority` every running
  request preempted; under async scheduling every running request's last token already in
  flight; the call that only flushes finished ids) executes no forward pass and takes no time:
  the next call builds the same step. `empty_calls` counts them.
- `first_scheduled`: the step of the first batch that schedules any token of the request.
- `first_token`: the step whose forward pass completes the prompt for the first time (the first
  batch that samples a token for it). TTFT in steps = first_token + 1 - arrival_step.
- `finish`: the step whose forward pass samples the request's last (`output_len`-th) token.
- `preemptions`: vLLM's `num_preemptions` at the end.
- `cached_tokens`: prefix-cache hit tokens at the first admission; `cached_tokens_all`: summed
  over every admission (first and after each preemption). 0 when caching is off.
- `step_tokens[k]`: total tokens scheduled in step k, from step 0 to the last step.

**Async scheduling** (`async_scheduling: true`): vLLM's `AsyncScheduler` driven the way
`EngineCore.step_with_batch_queue` drives it with two batches in flight: the batch of step k is
built before the output of step k-1 is processed (so a request finished in step k-1 still holds
its blocks when step k is built). Step numbers mean the same thing in both modes.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

FORMAT = "inversion-lab/vllm-corpus/1"
CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
REQUEST_COLUMNS = ["arrival_step", "prompt_len", "output_len", "priority", "prefix_group", "prefix_tokens",
                   "parent"]
RESULT_COLUMNS = ["first_scheduled", "first_token", "finish", "preemptions", "cached_tokens",
                  "cached_tokens_all"]
CONFIG_KEYS = ["num_gpu_blocks", "block_size", "max_num_batched_tokens", "max_num_seqs",
               "long_prefill_token_threshold", "long_prefill_token_threshold_adaptive", "watermark",
               "policy", "async_scheduling", "enable_prefix_caching"]


def corpus_path(mode: str, directory: Path = CORPUS_DIR) -> Path:
    return Path(directory) / f"{mode}.jsonl.gz"


def write(path: Path, header: dict, workloads: list[dict]) -> None:
    """Write one mode's corpus (deterministic bytes: fixed gzip mtime, compact JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"format": FORMAT, **header, "request_columns": REQUEST_COLUMNS, "result_columns": RESULT_COLUMNS}
    lines = [json.dumps(head, separators=(",", ":"))]
    lines += [json.dumps(w, separators=(",", ":")) for w in workloads]
    data = ("\n".join(lines) + "\n").encode()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(data)


def read(path: Path) -> tuple[dict, list[dict]]:
    """(header, workloads) of one corpus file; raises ValueError on a foreign format."""
    with gzip.open(path, "rt") as f:
        lines = iter(f)
        header = json.loads(next(lines))
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: format {header.get('format')!r}, expected {FORMAT!r}")
        return header, [json.loads(line) for line in lines if line.strip()]


def modes(directory: Path = CORPUS_DIR) -> list[str]:
    """The modes present in a corpus directory."""
    return sorted(p.name.removesuffix(".jsonl.gz") for p in Path(directory).glob("*.jsonl.gz"))


def iter_corpus(directory: Path = CORPUS_DIR) -> Iterator[tuple[str, dict, list[dict]]]:
    for mode in modes(directory):
        header, workloads = read(corpus_path(mode, directory))
        yield mode, header, workloads
