"""Serve a room: N Streamlit processes behind nginx, one address for everybody.

    python3 tasks.py serve --processes N [--port 8501] [--address 0.0.0.0]
    python -m deploy.serve --processes N ...      (the same, once .venv and nginx are there)

Why several processes: every session's script runs in the one interpreter of a Streamlit server,
under one GIL, so one process carries about as many people as one core can (README, *Serving a
room*). nginx (Debian's package) spreads browsers over the processes and keeps each browser on
its own: its WebSocket, uploads and media are served by the process that holds its session. The
stickiness hashes a cookie nginx sets (`deploy/nginx.conf.template`), not the client address.
All of a page's state is in its URL, so a browser whose process stops reconnects to another one
and reopens the same view. The config is generated from the template into a working folder, with
nginx's pid, logs and temporary files; nothing is written elsewhere.

Workers: each process keeps its own page and sweep workers (`ui/runtime/runs.py`; its cache is its own
too), and the machine's cores are divided between the processes, so N processes start no more
workers in all than one does (at least one of each per process).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
MAX_UPLOAD_MB = 20  # .streamlit/config.toml server.maxUploadSize


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def render(template: str, values: dict[str, str]) -> str:
    """Fill the template's @NAME@ placeholders (nginx uses $ and braces itself); every one must be given."""
    for name, value in values.items():
        template = template.replace(f"@{name}@", value)
    if "@" in "".join(line.split("#", 1)[0] for line in template.splitlines()):
        raise ValueError("nginx template: a placeholder was left unfilled")
    return template


def worker_counts(processes: int, cores: int | None = None) -> dict[str, str]:
    """Each process's page and sweep workers: the machine's share of one process (2 page runs and
    up to 4 sweep points at once, never more than the cores) divided between the processes."""
    cores = cores or os.cpu_count() or 1
    return {"INVERSION_LAB_PAGE_WORKERS": str(max(1, min(2, cores) // processes)),
            "INVERSION_LAB_SWEEP_WORKERS": str(max(1, min(4, cores) // processes))}


def healthy(url: str, timeout_s: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=timeout_s) as r:
            return r.read().decode() == "ok"
    except OSError:
        return False


@dataclass
class Backend:
    """One Streamlit process on a local port."""

    port: int
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Room:
    """N Streamlit processes and nginx in front of them; a context manager that stops them all
    (by their PIDs) on exit.

    `env` is added to every Streamlit process's environment (tests pass hooks through it)."""

    processes: int = 2
    port: int = 8501
    address: str = "0.0.0.0"
    env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    backends: list[Backend] = field(default_factory=list)
    nginx: subprocess.Popen | None = None
    _own_workdir: bool = False
    _secret: str = field(default_factory=lambda: secrets.token_hex(32))

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.address in ("0.0.0.0", "::", "") else self.address
        return f"http://{host}:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.workdir / "access.log"

    def __enter__(self) -> Room:
        if self.processes < 1:
            raise ValueError("--processes must be at least 1")
        if not Path(NGINX).exists():
            raise RuntimeError(f"{NGINX} not found: apt-get install nginx (python3 tasks.py serve does it as root)")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="inversion-lab-serve-"))
            self._own_workdir = True
        self.workdir.chmod(0o755)  # nginx's workers (user nobody when started as root) read and write in it
        try:
            self.backends = [Backend(free_port()) for _ in range(self.processes)]
            for b in self.backends:
                self.start_backend(b)
            self._wait(lambda: all(healthy(b.url) for b in self.backends), "the Streamlit processes")
            self._start_nginx()
            self._wait(lambda: healthy(self.url), "nginx")
        except BaseException:
            self._own_workdir = False  # keep the logs the message points at
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        procs = [p for p in [self.nginx, *(b.proc for b in self.backends)] if p is not None]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in getattr(self, "_logs", []):
            log.close()
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def start_backend(self, b: Backend) -> None:
        log = open(self.workdir / f"streamlit-{b.port}.log", "a")
        self.__dict__.setdefault("_logs", []).append(log)
        env = {**os.environ, **worker_counts(self.processes), **self.env,
               "STREAMLIT_SERVER_COOKIE_SECRET": self._secret}  # one secret: cookies are good on every process
        b.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(b.port), "--server.fileWatcherType", "none",
             "--browser.gatherUsageStats", "false", "--global.developmentMode", "false"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)

    def _start_nginx(self) -> None:
        servers = "\n".join(f"        server 127.0.0.1:{b.port} max_fails=1 fail_timeout=5s;" for b in self.backends)
        conf = render(TEMPLATE.read_text(), {
            "WORKDIR": str(self.workdir), "SERVERS": servers, "ADDRESS": self.address, "PORT": str(self.port),
            "MAX_BODY": f"{MAX_UPLOAD_MB + 1}m"})
        path = self.workdir / "nginx.conf"
        path.write_text(conf)
        args = [NGINX, "-p", str(self.workdir), "-c", str(path), "-e", str(self.workdir / "error.log")]
        check = subprocess.run([*args, "-t", "-q"], capture_output=True, text=True)
        if check.returncode:
            raise RuntimeError(f"nginx refused its config {path}: {check.stderr.strip()}")
        self.nginx = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _wait(self, ready, what: str, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in [self.nginx, *(b.proc for b in self.backends)] if p is not None and p.poll() is not None]
            if dead:
                raise RuntimeError(f"{what}: a process exited with code {dead[0].returncode} (logs in {self.workdir})")
            if ready():
                return
            time.sleep(0.25)
        raise RuntimeError(f"{what} did not become ready in {timeout_s:.0f} s (logs in {self.workdir})")

    def watch(self, interval_s: float = 2.0) -> None:
        """Until interrupted: restart a Streamlit process that stopped (its browsers have moved to
        the others meanwhile; new ones come back to it), and stop if nginx does."""
        while True:
            time.sleep(interval_s)
            if self.nginx is not None and self.nginx.poll() is not None:
                raise RuntimeError(f"nginx stopped (code {self.nginx.returncode}); see {self.workdir}/error.log")
            for b in self.backends:
                if b.proc is not None and b.proc.poll() is not None:
                    print(f"Streamlit on port {b.port} stopped (code {b.proc.returncode}); restarting it", flush=True)
                    self.start_backend(b)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 tasks.py serve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                    help="Streamlit processes (default: one per core)")
    ap.add_argument("--port", type=int, default=8501, help="the port people open (default 8501, as `app`)")
    ap.add_argument("--address", default="0.0.0.0", help="the address nginx listens on (default: every interface)")
    a = ap.parse_args(argv)

    def stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        with Room(a.processes, a.port, a.address) as room:
            ports = ", ".join(str(b.port) for b in room.backends)
            print(f"Inversion Lab: {room.url}/ — {a.processes} Streamlit process(es) on 127.0.0.1:{ports} behind "
                  f"nginx ({room.workdir}). Ctrl-C stops everything.", flush=True)
            room.watch()
    except KeyboardInterrupt:
        return 0
    except (RuntimeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
