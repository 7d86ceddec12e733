"""Record the corpus: drive vLLM's own v1 `Scheduler` (and `AsyncScheduler`) on the workloads.

Runs inside `.venv-vllm` (vLLM 0.33.0, CPU, no GPU, no weights)::

    .venv-vllm/bin/python -m fidelity.record [--modes fcfs,priority] [--count 300] [--out DIR]

The scheduler is built the way vLLM's own scheduler tests build it: a tiny llama `config.json`
written to a temporary directory, `skip_tokenizer_init=True`, a `KVCacheConfig` with one
full-attention group of `num_gpu_blocks` blocks. Each request has `ignore_eos` and `max_tokens` =
its output length. A fake model runner answers each step: one sampled token for every scheduled
request whose prompt (or recompute) is complete after the step, nothing for partial prefills;
the answer goes back through `update_from_output`. Token ids are deterministic, so prefix
identity (`corpus` docstring) becomes real shared token ids and real block hashes.

The step loop follows vLLM's `EngineCore` (`vllm/v1/engine/core.py`):

- sync (`EngineCore.step`): add the step's arrivals; if the scheduler has requests,
  `schedule()`, run the fake model, `update_from_output()`.
- async (`EngineCore.step_with_batch_queue`, batch queue of 2 as `max_concurrent_batches` gives
  for async scheduling without pipeline parallelism): each call adds arrivals, schedules a new
  batch and queues it; while the queue holds fewer than two batches (and the batch ran or work
  remains) it returns without processing output; otherwise it processes the oldest batch's
  output. In steady state this is schedule(k), update(k-1), schedule(k+1), update(k), …

Step numbering and the stored fields are defined in `fidelity/corpus.py`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

from . import corpus  # noqa: E402
from .tokens import output_token, prompt_tokens  # noqa: E402
from .workloads import MODES, generate  # noqa: E402

MAX_STEPS = 1000  # a longer workload is redrawn (next attempt of the same index)
MAX_EMPTY_CALLS_IN_A_ROW = 8  # more means the scheduler is stuck: a generator bug, not a recording
MAX_MODEL_LEN = 32768
VOCAB = 65536
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
    "num_hidden_layers": 1, "vocab_size": VOCAB, "max_position_embeddings": MAX_MODEL_LEN,
    "torch_dtype": "float32", "rms_norm_eps": 1e-5, "hidden_act": "silu",
}


class TooLong(Exception):
    """The workload needs more than MAX_STEPS steps."""


class Stuck(Exception):
    """vLLM made no progress (should not happen with the generator's KV sizing)."""


# --- vLLM objects ---------------------------------------------------------------------------

class Vllm:
    """Imports and the model config, once per process (ModelConfig takes seconds)."""

    def __init__(self):
        import torch
        import vllm
        from vllm import _version
        from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.outputs import ModelRunnerOutput
        from vllm.v1.request import Request
        from vllm.v1.structured_output import StructuredOutputManager

        self.version = vllm.__version__
        self.commit = getattr(_version, "__commit_id__", None) or ""
        self.torch = torch
        self.CacheConfig, self.SchedulerConfig, self.VllmConfig = CacheConfig, SchedulerConfig, VllmConfig
        self.SamplingParams, self.Request, self.ModelRunnerOutput = SamplingParams, Request, ModelRunnerOutput
        self.Scheduler, self.AsyncScheduler = Scheduler, AsyncScheduler
        self.FullAttentionSpec, self.KVCacheConfig, self.KVCacheGroupSpec = (
            FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec)
        self.StructuredOutputManager = StructuredOutputManager
        self.get_request_block_hasher = get_request_block_hasher
        self._tmp = tempfile.TemporaryDirectory(prefix="tiny-llama-")
        Path(self._tmp.name, "config.json").write_text(json.dumps(TINY_LLAMA))
        self.model_config = ModelConfig(model=self._tmp.name, skip_tokenizer_init=True,
                                        max_model_len=MAX_MODEL_LEN, dtype="float32", seed=0)
        # What EngineCore does when prefix caching is on: one hash function for every request.
        self.hash_fn = get_hash_fn_by_name(CacheConfig(block_size=16).prefix_caching_hash_algo)
        init_none_hash(self.hash_fn)

    def scheduler(self, cfg: dict):
        sched_cfg = self.SchedulerConfig(
            max_num_seqs=cfg["max_num_seqs"],
            max_num_batched_tokens=cfg["max_num_batched_tokens"],
            max_model_len=MAX_MODEL_LEN,
            is_encoder_decoder=False,
            long_prefill_token_threshold=cfg["long_prefill_token_threshold"],
            long_prefill_token_threshold_adaptive=cfg["long_prefill_token_threshold_adaptive"],
            enable_chunked_prefill=True,
            policy=cfg["policy"],
            watermark=cfg["watermark"],
            async_scheduling=cfg["async_scheduling"],
        )
        cache_cfg = self.CacheConfig(block_size=cfg["block_size"],
                                     enable_prefix_caching=cfg["enable_prefix_caching"])
        vcfg = self.VllmConfig(scheduler_config=sched_cfg, model_config=copy.deepcopy(self.model_config),
                               cache_config=cache_cfg)
        # vLLM's CPU platform hook turns async scheduling off ("not required on CPU"); on a GPU it
        # stays as asked, so set it back (the scheduler itself only reads it under pipeline
        # parallelism; `max_concurrent_batches` reads it too).
        vcfg.scheduler_config.async_scheduling = cfg["async_scheduling"]
        assert vcfg.cache_config.enable_prefix_caching == cfg["enable_prefix_caching"]
        n = cfg["num_gpu_blocks"]
        spec = self.FullAttentionSpec(block_size=cfg["block_size"], num_kv_heads=1, head_size=1,
                                      dtype=self.torch.float32)
        kv_cfg = self.KVCacheConfig(num_blocks=n, kv_cache_tensors=[],
                                    kv_cache_groups=[self.KVCacheGroupSpec(["layer"], spec)])
        vcfg.cache_config.num_gpu_blocks = n
        cls = self.AsyncScheduler if cfg["async_scheduling"] else self.Scheduler
        return cls(vllm_config=vcfg, kv_cache_config=kv_cfg,
                   structured_output_manager=self.StructuredOutputManager(vcfg),
                   block_size=cfg["block_size"], log_stats=False)

    def block_hasher(self, cfg: dict):
        if not cfg["enable_prefix_caching"]:
            return None
        return self.get_request_block_hasher(cfg["block_size"], self.hash_fn)


# --- one workload ---------------------------------------------------------------------------

class Run:
    """One workload through vLLM: arrivals, the engine-core loop and the per-request record."""

    def __init__(self, v: Vllm, wl: dict):
        self.v, self.wl, self.cfg = v, wl, wl["config"]
        self.reqs = [dict(r) for r in wl["requests"]]
        self.sched = v.scheduler(self.cfg)
        self.hasher = v.block_hasher(self.cfg)
        self.followers: dict[int, list[int]] = {}
        for i, r in enumerate(self.reqs):
            if r["parent"] >= 0:
                self.followers.setdefault(r["parent"], []).append(i)
        self.due: dict[int, list[int]] = {}
        for i, r in enumerate(self.reqs):
            if r["arrival_step"] is not None:
                self.due.setdefault(r["arrival_step"], []).append(i)
        self.added: list[int] = []  # generator index, in the order added to vLLM
        self.obj: dict[int, object] = {}
        self.by_id: dict[str, int] = {}
        self.first_sched: dict[int, int] = {}
        self.first_token: dict[int, int] = {}
        self.finish: dict[int, int] = {}
        self.cached: dict[int, int] = {}
        self.cached_all: dict[int, int] = {}
        self.step_tokens: list[int] = []
        self.empty_calls = 0
        self.k = 0
        self.log: list[tuple] = []  # per call: (slot or None, {request: tokens}, preempted): debugging

    # arrivals
    def _arrive(self, k: int) -> None:
        # Requests due in the same step are added in priority order (then generation order): a
        # same-step tie is a free choice of the workload, and the engine orders same-time arrivals
        # by class, so the corpus avoids depending on it.
        for i in sorted(self.due.pop(k, []), key=lambda i: (self.reqs[i]["priority"], i)):
            r = self.reqs[i]
            seq = len(self.added)
            req = self.v.Request(
                request_id=f"r{i:03d}",
                prompt_token_ids=prompt_tokens(r, i),
                sampling_params=self.v.SamplingParams(max_tokens=r["output_len"], ignore_eos=True),
                pooling_params=None,
                arrival_time=k + seq * 1e-6,  # distinct, in the order added (like wall-clock arrivals)
                priority=r["priority"],
                block_hasher=self.hasher,
            )
            self.sched.add_request(req)
            self.added.append(i)
            self.obj[i] = req
            self.by_id[req.request_id] = i

    def _next_arrival(self) -> int | None:
        return min(self.due) if self.due else None

    # one schedule() call and the fake model's answer
    def _schedule(self):
        running_before = {r.request_id for r in self.sched.running}
        out = self.sched.schedule()
        slot = self.k if out.total_num_scheduled_tokens > 0 else None
        ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in ids:
            i = self.by_id[rid]
            req = self.obj[i]
            if slot is not None:
                self.first_sched.setdefault(i, slot)
            if rid not in running_before:  # admitted in this call: computed = hit + scheduled
                hit = req.num_computed_tokens - out.num_scheduled_tokens[rid]
                self.cached.setdefault(i, hit)
                self.cached_all[i] = self.cached_all.get(i, 0) + hit
            sampled.append(not req.is_prefill_chunk)  # prompt (or recompute) complete: a token
        self.log.append((slot, {self.by_id[rid]: n for rid, n in out.num_scheduled_tokens.items()},
                         sorted(self.by_id[rid] for rid in out.preempted_req_ids)))
        if slot is not None:
            self.step_tokens.extend([0] * (slot - len(self.step_tokens)))
            self.step_tokens.append(out.total_num_scheduled_tokens)
            self.k += 1
            if self.k > MAX_STEPS:
                raise TooLong(self.wl["id"])
        return out, ids, sampled, slot

    def _update(self, out, ids, sampled, slot) -> None:
        # The token's id depends on its output position, known only now: under async scheduling
        # the previous step's token may have been appended since this batch was built.
        tokens = [[output_token(self.reqs[self.by_id[rid]], self.by_id[rid],
                                len(self.obj[self.by_id[rid]].output_token_ids))] if s else []
                  for rid, s in zip(ids, sampled)]
        mro = self.v.ModelRunnerOutput(req_ids=ids, req_id_to_index={rid: n for n, rid in enumerate(ids)},
                                       sampled_token_ids=tokens)
        outputs = self.sched.update_from_output(out, mro)
        for eco in outputs.values():
            for o in eco.outputs:
                i = self.by_id[o.request_id]
                if o.new_token_ids:
                    self.first_token.setdefault(i, slot)
                if o.finish_reason is not None:
                    self.finish[i] = slot
                    for f in self.followers.get(i, []):
                        step = slot + 1 + self.reqs[f]["think"]
                        assert step >= self.k, "a next turn cannot arrive in a step already built"
                        self.reqs[f]["arrival_step"] = step
                        self.due.setdefault(step, []).append(f)

    def _empty(self) -> None:
        self.empty_calls += 1
        self._empty_row += 1
        if self._empty_row > MAX_EMPTY_CALLS_IN_A_ROW:
            raise Stuck(self.wl["id"])

    def run(self) -> dict:
        self._empty_row = 0
        if self.cfg["async_scheduling"]:
            self._run_async()
        else:
            self._run_sync()
        return self._result()

    def _unfinished(self) -> bool:
        return len(self.finish) < len(self.reqs)

    def _run_sync(self) -> None:
        while self._unfinished() or self.sched.has_requests():
            self._arrive(self.k)
            if not self.sched.has_requests():
                nxt = self._next_arrival()
                if nxt is None:
                    raise Stuck(f"{self.wl['id']}: requests unfinished but nothing to schedule")
                self.k = max(self.k + 1, nxt)
                continue
            out, ids, sampled, slot = self._schedule()
            if slot is None:
                self._empty()
            else:
                self._empty_row = 0
            self._update(out, ids, sampled, slot)

    def _run_async(self) -> None:
        queue: deque = deque()
        while self._unfinished() or self.sched.has_requests() or queue:
            self._arrive(self.k)
            if self.sched.has_requests():
                batch = self._schedule()
                executed = batch[3] is not None
                if executed:
                    self._empty_row = 0
                else:
                    self._empty()
                queue.appendleft(batch)
                if len(queue) < 2 and (executed or self.sched.has_requests()):
                    continue
            elif not queue:
                nxt = self._next_arrival()
                if nxt is None:
                    raise Stuck(f"{self.wl['id']}: requests unfinished but nothing to schedule")
                self.k = max(self.k + 1, nxt)
                continue
            self._update(*queue.pop())

    def _result(self) -> dict:
        order = self.added  # generator index in the order added = corpus request id order
        new_id = {g: n for n, g in enumerate(order)}
        requests = []
        for g in order:
            r = self.reqs[g]
            requests.append([r["arrival_step"], r["prompt_len"], r["output_len"], r["priority"],
                             r["prefix_group"], r["prefix_tokens"], new_id[r["parent"]] if r["parent"] >= 0 else -1])
        results = [[self.first_sched[g], self.first_token[g], self.finish[g], self.obj[g].num_preemptions,
                    self.cached.get(g, 0), self.cached_all.get(g, 0)] for g in order]
        return {"id": self.wl["id"], "seed": self.wl["seed"], "config": self.cfg, "requests": requests,
                "result": {"requests": results, "step_tokens": self.step_tokens, "empty_calls": self.empty_calls}}


def record_one(v: Vllm, mode: str, index: int, max_attempts: int = 50) -> dict:
    for attempt in range(max_attempts):
        wl = generate(mode, index, attempt)
        try:
            return Run(v, wl).run()
        except TooLong:
            continue
    raise RuntimeError(f"{mode}:{index}: no workload within {MAX_STEPS} steps in {max_attempts} attempts")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fidelity.record", description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated modes (default: all)")
    ap.add_argument("--count", type=int, default=300, help="workloads per mode")
    ap.add_argument("--out", type=Path, default=corpus.CORPUS_DIR, help="corpus directory")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"error: unknown mode(s) {', '.join(unknown)}: use {', '.join(MODES)}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    v = Vllm()
    print(f"vLLM {v.version} ({v.commit}) loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    for mode in modes:
        t1 = time.perf_counter()
        workloads = [record_one(v, mode, i) for i in range(args.count)]
        header = {"mode": mode, "description": MODES[mode], "vllm_version": v.version, "vllm_commit": v.commit,
                  "count": len(workloads)}
        path = corpus.corpus_path(mode, args.out)
        corpus.write(path, header, workloads)
        steps = sum(len(w["result"]["step_tokens"]) for w in workloads)
        reqs = sum(len(w["requests"]) for w in workloads)
        print(f"{mode:>13}: {len(workloads)} workloads, {reqs} requests, {steps} steps, "
              f"{path.stat().st_size / 1024:.0f} KiB, {time.perf_counter() - t1:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
