"""Workshop rooms and the predictions made in them, in one SQLite file.

A room is what a presenter opens so that a workshop's participants' predictions (each lesson's
multiple-choice answer and numeric estimate) reach the presenter's screen. `tasks.py serve` runs
several Streamlit processes, and a room must outlive any of them (a restart, a crashed process),
so the store is a database file, not process memory: SQLite from the standard library, in WAL mode
(readers never wait for the writer), with a busy timeout, one short transaction per write, and a
new connection per call (safe from any thread or process). Where it lives:

- `INVERSION_LAB_ROOM_DB`: a file path, or a URL `sqlite:///relative/path` / `sqlite:////abs/path`;
- otherwise `rooms.sqlite` under `INVERSION_LAB_DATA_DIR` (default `.data/` in the repository).

Only SQLite is spoken: a URL of another database (postgresql://…) is refused with a message; a
room's traffic (30 people, a write every few minutes each) is far below what one SQLite file
carries on the server's disk. Pure: no streamlit import. Everything stored is checked here (codes,
ids, numbers), so no caller can put a malformed row in.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

ENV_DB = "INVERSION_LAB_ROOM_DB"
ENV_DIR = "INVERSION_LAB_DATA_DIR"
DEFAULT_DIR = Path(__file__).resolve().parent.parent / ".data"
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: a code is read aloud and typed
CODE_LEN = 5
CODE = re.compile(rf"^[{ALPHABET}]{{{CODE_LEN}}}$")
PARTICIPANT = re.compile(r"^[0-9a-f]{12}$")
LESSON = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_CHOICE = 50
MAX_ABS = 1e12
TIMEOUT_S = 10.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (
    code TEXT PRIMARY KEY,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS predictions (
    room TEXT NOT NULL REFERENCES rooms(code),
    lesson TEXT NOT NULL,
    participant TEXT NOT NULL,
    choice INTEGER,
    estimate REAL,
    updated REAL NOT NULL,
    PRIMARY KEY (room, lesson, participant)
);
"""


class RoomError(ValueError):
    """Input the store refuses (a malformed code, id or number), or a database it cannot use."""


def normalize_code(text: object) -> str | None:
    """A typed room code as stored (upper case, spaces and dashes dropped), or None if it cannot be one."""
    if not isinstance(text, str) or len(text) > 32:
        return None
    code = re.sub(r"[\s-]", "", text).upper()
    return code if CODE.match(code) else None


def new_participant() -> str:
    return secrets.token_hex(6)


def valid_participant(text: object) -> bool:
    return isinstance(text, str) and bool(PARTICIPANT.match(text))


def path_from(spec: str) -> Path:
    """A database file from `INVERSION_LAB_ROOM_DB`'s value: a path or a sqlite:/// URL."""
    if "://" not in spec:
        return Path(spec).expanduser()
    url = urlparse(spec)
    if url.scheme != "sqlite":
        raise RoomError(f"{ENV_DB}: only SQLite is supported (a path, or sqlite:///path), not {url.scheme}://")
    if url.netloc:
        raise RoomError(f"{ENV_DB}: a sqlite URL has no host: sqlite:///relative or sqlite:////absolute")
    path = unquote(url.path)
    return Path(path[1:] if path.startswith("/") else path)


def default_path() -> Path:
    spec = os.environ.get(ENV_DB, "").strip()
    if spec:
        return path_from(spec)
    return Path(os.environ.get(ENV_DIR) or DEFAULT_DIR) / "rooms.sqlite"


@dataclass(frozen=True)
class Prediction:
    participant: str
    choice: int | None
    estimate: float | None
    updated: float


class RoomStore:
    """Rooms and predictions in one SQLite file (created with its tables on first use)."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as err:
            raise RoomError(f"cannot use the room database {self.path}: {err}") from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One connection, one transaction: committed on success, rolled back on error, then closed."""
        db = sqlite3.connect(self.path, timeout=TIMEOUT_S, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout={int(TIMEOUT_S * 1000)}")
            yield db
        finally:
            db.close()

    def open_room(self) -> str:
        """A new room; its code (five characters, no look-alikes)."""
        for _attempt in range(20):
            code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))
            with self._connect() as db:
                cur = db.execute("INSERT OR IGNORE INTO rooms (code, created) VALUES (?, ?)", (code, time.time()))
                if cur.rowcount == 1:
                    return code
        raise RoomError("could not find a free room code")

    def exists(self, code: str) -> bool:
        if not isinstance(code, str) or not CODE.match(code):
            return False
        with self._connect() as db:
            return db.execute("SELECT 1 FROM rooms WHERE code = ?", (code,)).fetchone() is not None

    def submit(self, code: str, lesson: str, participant: str, choice: int | None, estimate: float | None) -> None:
        """Store (or replace) one participant's prediction for one lesson of a room."""
        if not self.exists(code):
            raise RoomError(f"no room {code!r}")
        if not isinstance(lesson, str) or not LESSON.match(lesson):
            raise RoomError("a lesson is named by its slug")
        if not valid_participant(participant):
            raise RoomError("a participant id is 12 hexadecimal digits")
        if choice is not None and not (isinstance(choice, int) and not isinstance(choice, bool)
                                       and 0 <= choice <= MAX_CHOICE):
            raise RoomError(f"a choice is an option's index (0..{MAX_CHOICE})")
        if estimate is not None:
            if isinstance(estimate, bool) or not isinstance(estimate, int | float):
                raise RoomError("an estimate is a number")
            estimate = float(estimate)
            if not math.isfinite(estimate) or abs(estimate) > MAX_ABS:
                raise RoomError("an estimate is a finite number")
        with self._connect() as db:
            db.execute(
                "INSERT INTO predictions (room, lesson, participant, choice, estimate, updated) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (room, lesson, participant) DO UPDATE SET "
                "choice = excluded.choice, estimate = excluded.estimate, updated = excluded.updated",
                (code, lesson, participant, choice, estimate, time.time()))

    def predictions(self, code: str, lesson: str) -> list[Prediction]:
        """Every participant's prediction for a lesson of a room (oldest first)."""
        with self._connect() as db:
            rows = db.execute("SELECT participant, choice, estimate, updated FROM predictions "
                              "WHERE room = ? AND lesson = ? ORDER BY updated, participant", (code, lesson)).fetchall()
        return [Prediction(*r) for r in rows]

    def participants(self, code: str) -> int:
        """How many people have predicted anything in the room."""
        with self._connect() as db:
            return db.execute("SELECT COUNT(DISTINCT participant) FROM predictions WHERE room = ?",
                              (code,)).fetchone()[0]


def choice_counts(preds: list[Prediction], n_options: int) -> list[int]:
    """How many chose each option (choices outside the options are left out)."""
    counts = [0] * n_options
    for p in preds:
        if p.choice is not None and 0 <= p.choice < n_options:
            counts[p.choice] += 1
    return counts
