"""The large fuzz budget, with per-run time and memory limits (the small one runs in pytest).

    python tests/fuzz/run_fuzz.py scenarios --n 320    # CLI validate + run --json on each file
    python tests/fuzz/run_fuzz.py traces --n 165       # readers + upload path (+ a run if accepted)

Scenario files: each case runs as `python -m engine validate FILE` and `… run FILE --json`, each in
its own process with a wall limit (--timeout, 60 s) and an address-space limit (--mem-gib, 4).
A run passes if it exits 0 with the expected output, or 2 with exactly one `error: …` line on
stderr and nothing on stdout; anything else (a traceback, exit 1, a hang, a kill) is a failure.
Traces: each case runs in a forked process with the same limits: `read_trace` on the file,
`parse_trace` on its text, and the app's upload path `uploads.try_trace` (and, if accepted, the
simulation it would start). Only TraceError/ScenarioError may come out, and an upload refusal
must not be an internal error in disguise. Prints every failure and the maximum wall time and
peak RSS observed; exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(HERE)]

import fuzzgen  # noqa: E402


def _limits(mem_bytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    return apply


def spawn(cmd: list[str], timeout: float, mem_bytes: int, cwd: Path) -> dict:
    """Run `cmd`; its exit code, output, wall time, peak RSS (MiB) and whether it timed out."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         preexec_fn=_limits(mem_bytes))
    out: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k, f: out.__setitem__(k, f.read(1 << 20)), args=(k, f), daemon=True)
               for k, f in (("stdout", p.stdout), ("stderr", p.stderr))]
    for t in readers:
        t.start()
    timed_out = False
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > timeout:
            timed_out = True
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.02)
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join(5)
    return {"rc": p.returncode, "stdout": out.get("stdout", b"").decode("utf-8", "replace"),
            "stderr": out.get("stderr", b"").decode("utf-8", "replace"), "wall_s": time.perf_counter() - t0,
            "rss_mib": ru.ru_maxrss / 1024, "timed_out": timed_out}


def judge_cli(cmd: str, r: dict) -> str | None:
    """None if the run behaved as the README promises, else what went wrong."""
    if r["timed_out"]:
        return "hang (timeout)"
    err_lines = r["stderr"].splitlines()
    if "Traceback" in r["stderr"]:
        return "traceback: " + (err_lines[-1] if err_lines else "")
    if r["rc"] == 0:
        if cmd == "validate" and r["stdout"].startswith("ok: ") and not r["stderr"]:
            return None
        if cmd == "run" and len(r["stdout"].splitlines()) == 1 and not r["stderr"]:
            try:
                json.loads(r["stdout"])
                return None
            except ValueError:
                return "run printed something that is not one JSON object"
        return f"exit 0 with unexpected output: {r['stdout'][:200]!r} {r['stderr'][:200]!r}"
    if r["rc"] == 2 and len(err_lines) == 1 and err_lines[0].startswith("error: ") and not r["stdout"]:
        return None
    return f"exit {r['rc']}: {r['stderr'][:300]!r}"


def fuzz_scenarios(n: int, seed: int, jobs: int, timeout: float, mem_gib: float) -> int:
    mem = int(mem_gib * 2**30)
    with tempfile.TemporaryDirectory(prefix="fuzz-scenarios-") as tmp:
        work = Path(tmp)
        fuzzgen.workdir_files(work)
        cases = []
        for i in range(n):
            label, name, data = fuzzgen.scenario_case(seed, i)
            path = work / f"{i:04d}-{name}"
            path.write_bytes(data)
            cases.append((i, label, path))

        def one(case):
            i, label, path = case
            rows = []
            for cmd, extra in (("validate", []), ("run", ["--json"])):
                r = spawn([sys.executable, "-m", "engine", cmd, str(path), *extra], timeout, mem, REPO)
                rows.append((cmd, r, judge_cli(cmd, r)))
            return i, label, rows

        results = []
        with ThreadPoolExecutor(jobs) as pool:
            for i, label, rows in pool.map(one, cases):
                results.append((i, label, rows))
                bad = [f"{cmd}: {why}" for cmd, _, why in rows if why]
                print(f"{i:4d} {'FAIL' if bad else 'ok  '} {label[:40]:<40} "
                      + " | ".join(f"{cmd} rc={r['rc']} {r['wall_s']:.1f}s {r['rss_mib']:.0f}MiB" for cmd, r, _ in rows)
                      + ("  " + "; ".join(bad) if bad else ""), flush=True)
    runs = [(cmd, r, why) for _, _, rows in results for cmd, r, why in rows]
    fails = [(i, label, cmd, why) for i, label, rows in results for cmd, _, why in rows if why]
    print(f"\n{n} scenario files (seed {seed}), {len(runs)} CLI runs (limits {timeout:g} s, {mem_gib:g} GiB):")
    for cmd in ("validate", "run"):
        rs = [r for c, r, _ in runs if c == cmd]
        print(f"  {cmd:<8} exit 0: {sum(r['rc'] == 0 for r in rs)}, exit 2 (one error line): "
              f"{sum(r['rc'] == 2 and why is None for c, r, why in runs if c == cmd)}, "
              f"tracebacks: {sum('Traceback' in r['stderr'] for r in rs)}, hangs: {sum(r['timed_out'] for r in rs)}, "
              f"other: {sum(1 for c, r, why in runs if c == cmd and why and not r['timed_out'])}; "
              f"max wall {max(r['wall_s'] for r in rs):.1f} s, max RSS {max(r['rss_mib'] for r in rs):.0f} MiB")
    for i, label, cmd, why in fails:
        print(f"  FAIL case {i} ({label}) {cmd}: {why}")
    return 1 if fails else 0


def _trace_child(label: str, name: str, data: bytes, work: Path) -> dict:
    """In the forked child: the three paths; what came out of each."""
    from engine import ScenarioError, TraceError, from_dict, simulate
    from engine.config.scenario import load_raw
    from engine.config.traces import parse_trace, read_trace
    from ui.frame import uploads

    out = {}
    path = work / name
    path.write_bytes(data)
    for what, call in (("read_trace", lambda: read_trace(path)),
                       ("parse_trace", lambda: parse_trace(data.decode("utf-8", "replace"), None, name))):
        try:
            df = call()
            out[what] = f"ok {len(df)} rows"
        except TraceError as err:
            out[what] = "TraceError" if "\n" not in str(err) else "FAIL multi-line TraceError"
        except Exception as err:  # noqa: BLE001 — what the fuzzer is looking for
            out[what] = f"FAIL {type(err).__name__}: {str(err)[:200]}"
    state: dict = {}
    up = uploads.try_trace(load_raw("default"), name, data, state)
    if up.error is not None:
        out["upload"] = "refused" if "could not be used (" not in up.error and "\n" not in up.error \
            else f"FAIL internal error as refusal: {up.error[:200]}"
    else:
        try:
            res = simulate(from_dict(up.raw))
            out["upload"] = f"accepted, ran {len(res.requests)} requests"
        except (ScenarioError, TraceError) as err:
            out["upload"] = f"FAIL accepted but cannot run: {str(err)[:200]}"
        except Exception as err:  # noqa: BLE001
            out["upload"] = f"FAIL accepted, run raised {type(err).__name__}: {str(err)[:200]}"
    return out


def run_forked(fn, timeout: float, mem_bytes: int) -> dict:
    """fn() in a forked child with limits; its JSON result, wall time and peak RSS."""
    rfd, wfd = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        code = 0
        try:
            resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
            signal.alarm(int(timeout) + 1)
            payload = json.dumps(fn()).encode()
        except BaseException as err:  # noqa: BLE001
            payload = json.dumps({"child": f"FAIL {type(err).__name__}: {str(err)[:200]}"}).encode()
            code = 1
        with os.fdopen(wfd, "wb") as w:
            w.write(payload)
        os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        data = r.read()
    _, status, ru = os.wait4(pid, 0)
    result = json.loads(data) if data else {"child": f"FAIL died (status {status}, e.g. the {timeout:g} s alarm)"}
    return {"result": result, "wall_s": time.perf_counter() - t0, "rss_mib": ru.ru_maxrss / 1024}


def fuzz_traces(n: int, seed: int, timeout: float, mem_gib: float) -> int:
    import importlib

    for module in ("engine.sim.simulation", "ui.frame.uploads"):  # imported once here, inherited by every forked child
        importlib.import_module(module)

    mem = int(mem_gib * 2**30)
    fails, walls, rss = [], [], []
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="fuzz-traces-") as tmp:
        for i in range(n):
            label, name, data = fuzzgen.trace_case(seed, i)
            work = Path(tmp) / f"{i:04d}"
            work.mkdir()
            r = run_forked(lambda a=(label, name, data, work): _trace_child(*a), timeout, mem)
            walls.append(r["wall_s"])
            rss.append(r["rss_mib"])
            bad = {k: v for k, v in r["result"].items() if str(v).startswith("FAIL")}
            for k, v in r["result"].items():
                key = f"{k}: {v.split(' ')[0]}"
                counts[key] = counts.get(key, 0) + 1
            if bad:
                fails.append((i, label, bad))
            print(f"{i:4d} {'FAIL' if bad else 'ok  '} {label:<28} {len(data):>9,} B {r['wall_s']:5.2f}s "
                  f"{r['rss_mib']:5.0f}MiB {r['result']}", flush=True)
    print(f"\n{n} corrupt traces (seed {seed}; limits {timeout:g} s, {mem_gib:g} GiB per case):")
    for k in sorted(counts):
        print(f"  {k}: {counts[k]}")
    print(f"  failures: {len(fails)}; max wall {max(walls):.2f} s, max RSS {max(rss):.0f} MiB (forked child, "
          "includes the parent's imports)")
    for i, label, bad in fails:
        print(f"  FAIL case {i} ({label}): {bad}")
    return 1 if fails else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("scenarios", "traces"))
    ap.add_argument("--n", type=int, default=320)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="scenario runs in parallel (traces run one at a time)")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--mem-gib", type=float, default=4.0)
    args = ap.parse_args(argv)
    if args.what == "scenarios":
        return fuzz_scenarios(args.n, args.seed, args.jobs, args.timeout, args.mem_gib)
    return fuzz_traces(args.n, args.seed, args.timeout, args.mem_gib)


if __name__ == "__main__":
    raise SystemExit(main())
