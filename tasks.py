"""The two commands of the README, with their own set-up (needs only Python 3.11+).

    python3 tasks.py app    # create .venv, install requirements, run the app on the default scenario
    python3 tasks.py serve --processes N   # the app as N Streamlit processes behind nginx (installs
                            # Debian's nginx if root; see README "Serving a room")
    python3 tasks.py test   # create .venv, install test requirements (+ chromium, nginx), run every test
                            # (+ the Ray tests in .venv-ray when CI=true or .venv-ray exists)
    python3 tasks.py test --quick      # the edit loop: no browser, nothing marked slow, stop at the first failure
    python3 tasks.py test-ray          # create .venv-ray (Ray, ~285 MB) and run the Ray tests
    python3 tasks.py build  # compile the engine's event path with mypyc into .build/ (needs a C compiler;
                            # without one, or with INVERSION_LAB_PURE=1, the same source runs interpreted)
    python3 tasks.py bench  # the speed benchmark (python -m engine bench)
    python3 tasks.py fidelity          # install vLLM 0.33.0 into .venv-vllm, re-record the corpus, compare
    python3 tasks.py fidelity compare  # compare the stored corpus with the engine only (no vLLM)

Installs are skipped when the requirements files have not changed since the last install.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
CHROMIUM = "/usr/bin/chromium"
NGINX = "/usr/sbin/nginx"  # Debian's nginx: the proxy in front of `serve`'s Streamlit processes
VLLM_VENV = ROOT / ".venv-vllm"  # vLLM and torch (~9 GB): never in .venv, never a requirement
VLLM_PY = VLLM_VENV / "bin" / "python"
VLLM_PIN = "vllm==0.33.0"
RAY_VENV = ROOT / ".venv-ray"  # Ray (~80 MB wheel, ~285 MB installed, ~15 s): never in .venv, the app's
RAY_PY = RAY_VENV / "bin" / "python"
RAY_TESTS = ["tests/engine/test_sweep_ray.py"]
# The whole suite: the tests without a browser spread over the cores (pytest-xdist; each file stays
# in one worker, so a module's fixtures are built once), then the browser tests one after another
# (each drives a Streamlit server and Chromium, which already keep two cores busy).
UNIT = ["-m", "not browser", "-n", str(min(os.cpu_count() or 1, 4)), "--dist", "loadfile", "--durations=15"]
BROWSER = ["-m", "browser", "--durations=15"]
QUICK = ["-m", "not slow and not browser", "-x", "-q", "-n", UNIT[3], "--dist", "loadfile"]
# The engine's own rules, run a second time on the interpreted engine when the suite ran compiled:
# both builds of the one source must decide alike (goldens in three modes, properties, the corpus
# recorded from vLLM, hand-worked timelines, the fast paths against the plain loops).
ENGINE_SUITE = ["tests/engine/test_golden.py", "tests/engine/test_properties.py", "tests/fidelity",
                "tests/engine/test_timelines.py", "tests/engine/test_fast_paths.py", "tests/engine/test_long_queue.py",
                "tests/engine/test_sglang.py", "tests/engine/test_prefix_cache.py", "tests/engine/test_mitigations.py",
                "tests/engine/test_kv_and_queue.py", "tests/engine/test_gateway.py", "tests/engine/test_feeds.py",
                "tests/engine/test_steplog.py", "tests/engine/test_queueing.py"]


def sh(*cmd: str, **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def ensure_venv(req: str) -> None:
    if not PY.exists():
        venv.create(VENV, with_pip=True)
    files = [ROOT / "requirements.txt", ROOT / req]
    stamp = VENV / f".installed-{req}"
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    reqs = [a for f in dict.fromkeys(files) for a in ("-r", str(f))]
    sh(str(PY), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *reqs)
    stamp.write_text(digest)


def has_cjk_font() -> bool:
    """A font with Chinese glyphs (the browser tests screenshot the 中文 UI)."""
    if not shutil.which("fc-list"):
        return False
    out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout
    return bool(out.strip())


def has_nginx() -> bool:
    return Path(NGINX).exists()


def apt_install(need: list[str]) -> bool:
    """Install Debian packages (as root), without letting their install scripts start services
    (nginx's would start a daemon on port 80): a policy-rc.d that says no, unless one exists."""
    if not (shutil.which("apt-get") and os.geteuid() == 0):
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    policy = Path("/usr/sbin/policy-rc.d")
    ours = not policy.exists()
    if ours:
        policy.write_text("#!/bin/sh\n# tasks.py: no service starts while it installs packages\nexit 101\n")
        policy.chmod(0o755)
    try:
        sh("apt-get", "update", "-q", env=env)
        sh("apt-get", "install", "-y", "-q", *need, env=env)
    finally:
        if ours:
            policy.unlink()
    return True


def ensure_debs(test: bool = True) -> None:
    """For the tests: Debian's chromium (Playwright never downloads its own), a CJK font
    (fonts-noto-cjk) so the Chinese pages render with real glyphs, and nginx for the tests of
    `serve`. For `serve` (`test=False`): nginx alone."""
    wanted = [("nginx", has_nginx())]
    if test:
        wanted = [("chromium", Path(CHROMIUM).exists()), ("fonts-noto-cjk", has_cjk_font()), *wanted]
    need = [pkg for pkg, ok in wanted if not ok]
    if not need or apt_install(need):
        return
    if test:
        print(f"note: missing {', '.join(need)} and cannot apt-get it; browser and serve tests that need it will "
              "be skipped (they fail instead when CI=true)", flush=True)
    else:
        raise SystemExit("serve needs nginx: apt-get install nginx (as root), or run as root to let tasks.py do it")


def ensure_vllm_venv() -> None:
    """`.venv-vllm` with vLLM 0.33.0 from PyPI (it pins torch 2.14.0 and pulls the CUDA wheels;
    the scheduler runs on CPU). Skipped once installed."""
    if not VLLM_PY.exists():
        venv.create(VLLM_VENV, with_pip=True)
    stamp = VLLM_VENV / ".installed"
    if stamp.exists() and stamp.read_text() == VLLM_PIN:
        return
    sh(str(VLLM_PY), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", VLLM_PIN)
    stamp.write_text(VLLM_PIN)


def ensure_ray_venv() -> None:
    """`.venv-ray`: Ray alone (requirements-ray.txt), with `.venv`'s packages behind it through a
    .pth file, so the Ray tests use the same engine dependencies without a second copy of them.
    Rebuilt from scratch when requirements-ray.txt changes: the .pth is added after pip ran, so
    pip never sees (and never touches) the packages of `.venv`."""
    ensure_venv("requirements-dev.txt")
    req = ROOT / "requirements-ray.txt"
    digest = hashlib.sha256(req.read_bytes()).hexdigest()
    stamp = RAY_VENV / ".installed"
    if stamp.exists() and stamp.read_text() == digest:
        return
    shutil.rmtree(RAY_VENV, ignore_errors=True)
    venv.create(RAY_VENV, with_pip=True)
    sh(str(RAY_PY), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(req))
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    base = subprocess.run([str(PY), "-c", where], check=True, capture_output=True, text=True).stdout.strip()
    mine = subprocess.run([str(RAY_PY), "-c", where], check=True, capture_output=True, text=True).stdout.strip()
    (Path(mine) / "_inversion_lab_base_venv.pth").write_text(base + "\n")
    stamp.write_text(digest)


def build_engine(wait: bool = True) -> bool:
    """The compiled engine (`engine.native_build`), unless it is fresh already; `wait=False`: in the
    background (the app starts at once on the interpreted engine, its next start finds the build).
    Returns whether the compiled engine will run."""
    if os.environ.get("INVERSION_LAB_PURE") == "1":
        return False
    cmd = [str(PY), "-m", "engine.native_build", "--if-stale"]
    if not wait:
        log = ROOT / ".build" / "build.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("w") as out:
            subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return False
    subprocess.call(cmd, cwd=ROOT)
    check = "import engine.native as n, sys; sys.exit(n.why_pure() is not None)"
    return subprocess.call([str(PY), "-c", check], cwd=ROOT) == 0


def _can_build() -> bool:
    """mypyc is in .venv (installed by `build` or `test`): the app may build in the background."""
    return subprocess.call([str(PY), "-c", "import mypyc"], cwd=ROOT, stderr=subprocess.DEVNULL) == 0


def test_ray(argv: list[str]) -> int:
    """The Ray tests in .venv-ray, where a missing Ray fails instead of skipping (`argv`: pytest options)."""
    ensure_ray_venv()
    env = {**os.environ, "INVERSION_LAB_REQUIRE_RAY": "1"}
    return subprocess.call([str(RAY_PY), "-m", "pytest", *argv, *RAY_TESTS], cwd=ROOT, env=env)


def fidelity(argv: list[str]) -> int:
    """Re-record the differential corpus with vLLM's own scheduler, then replay it on the engine."""
    if argv[:1] != ["compare"]:
        ensure_vllm_venv()
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
        rc = subprocess.call([str(VLLM_PY), "-m", "fidelity.record", *argv], cwd=ROOT, env=env)
        if rc:
            return rc
    else:
        argv = argv[1:]
    ensure_venv("requirements.txt")
    return subprocess.call([str(PY), "-m", "fidelity.replay", "--show", "1", *argv], cwd=ROOT)


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "help"
    if cmd == "app":
        ensure_venv("requirements.txt")
        if os.environ.get("INVERSION_LAB_PURE") != "1" and _can_build():
            build_engine(wait=False)
        return subprocess.call([str(PY), "-m", "streamlit", "run", str(ROOT / "app.py"), *argv[1:]], cwd=ROOT)
    if cmd == "test":
        ensure_venv("requirements-dev.txt")
        ensure_debs()
        if not argv[1:]:  # the whole suite starts with the linter (ruff, configured in pyproject.toml)
            lint = subprocess.call([str(PY), "-m", "ruff", "check", "."], cwd=ROOT)
            if lint:
                return lint
        if argv[1:2] == ["--quick"]:
            return subprocess.call([str(PY), "-m", "pytest", *QUICK, *argv[2:]], cwd=ROOT)
        if argv[1:]:
            return subprocess.call([str(PY), "-m", "pytest", *argv[1:]], cwd=ROOT)
        compiled = build_engine()
        rc = subprocess.call([str(PY), "-m", "pytest", *UNIT], cwd=ROOT)
        if compiled:  # and the engine's rules once more, interpreted
            pure = {**os.environ, "INVERSION_LAB_PURE": "1"}
            rc = subprocess.call([str(PY), "-m", "pytest", *UNIT, *ENGINE_SUITE], cwd=ROOT, env=pure) or rc
        rc = subprocess.call([str(PY), "-m", "pytest", *BROWSER], cwd=ROOT) or rc
        if os.environ.get("CI") == "true" or RAY_PY.exists():
            rc = test_ray([]) or rc  # CI always covers Ray; locally once .venv-ray exists
        return rc
    if cmd == "serve":
        ensure_venv("requirements.txt")
        ensure_debs(test=False)
        os.chdir(ROOT)  # serve itself from here on: Ctrl-C and SIGTERM reach it, and it stops what it started
        os.execv(str(PY), [str(PY), "-m", "deploy.serve", *argv[1:]])
    if cmd == "test-ray":
        return test_ray(argv[1:])
    if cmd == "build":
        ensure_venv("requirements-build.txt")
        return subprocess.call([str(PY), "-m", "engine.native_build", *argv[1:]], cwd=ROOT)
    if cmd == "bench":
        ensure_venv("requirements.txt")
        return subprocess.call([str(PY), "-m", "engine", "bench", *argv[1:]], cwd=ROOT)
    if cmd == "fidelity":
        return fidelity(argv[1:])
    print(__doc__)
    return 0 if cmd == "help" else 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
