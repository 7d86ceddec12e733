"""Scenario-file fuzz through the CLI (in-process): every file gives exit 0 with the promised output,
or exit 2 with exactly one `error:` line — never a traceback, a second line or a hang.

Small deterministic budget here (every known attack + a slice of the mutation stream);
`FUZZ_BUDGET=N` runs N cases of the stream, `python tests/fuzz/run_fuzz.py scenarios` runs each
case in its own process under 60 s / 4 GiB limits (README: Fuzzing).
"""

from __future__ import annotations

import json

import pytest
from fuzzgen import ATTACKS, scenario_case, workdir_files

from engine import cli
from engine.sim.limits import WorkLimits
from tests.support.fuzz import budget

SEED = 7
SMALL = WorkLimits(requests=20_000, classes=64, seconds=2.0, memory_mib=1024)  # keeps accepted runs short


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    workdir_files(folder)
    return folder


def _check(path, capsys):
    for args in (["validate", str(path)], ["run", str(path), "--json"]):
        code = cli.main(args, limits=SMALL)
        out, err = capsys.readouterr()
        if code == 0:
            assert err == "", (args, err)
            if args[0] == "validate":
                assert out.startswith("ok: ") and out.count("\n") == 1, out
            else:
                assert out.count("\n") == 1 and isinstance(json.loads(out), dict), out[:300]
        else:
            assert code == 2, (args, code, err[:500])
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and out == "", (args, err[:500])
            assert "internal error" not in lines[0] and len(lines[0]) < 2100, lines[0][:500]


@pytest.mark.parametrize("k", range(len(ATTACKS)), ids=[a[0] for a in ATTACKS])
def test_known_attacks(k, workdir, capsys, watchdog):
    label, name, make = ATTACKS[k]
    import random

    path = workdir / f"attack-{name}"
    path.write_bytes(make(random.Random(k)))
    _check(path, capsys)


@pytest.mark.parametrize("i", range(budget(40)))
def test_mutated_scenarios(i, workdir, capsys, watchdog):
    label, name, data = scenario_case(SEED, i)
    path = workdir / f"m{i}-{name}"
    path.write_bytes(data)
    _check(path, capsys)
