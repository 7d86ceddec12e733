"""Workshop rooms and the predictions made in them, in one database: a SQLite file by default.

A room is what a presenter opens so that a workshop's participants' predictions (each lesson's
multiple-choice answer and numeric estimate, and the curve a sweep lesson asks them to draw) reach
the presenter's screen. `tasks.py serve` runs
several Streamlit processes, and a room must outlive any of them (a restart, a crashed process),
so the store is a database, not process memory: SQLite from the standard library, in WAL mode
(readers never wait for the writer), with a busy timeout, one short transaction per call, and a
new connection per call (safe from any thread or process). Where it lives:

- `INVERSION_LAB_ROOM_DB`: a file path, or a URL `sqlite:///relative/path` / `sqlite:////abs/path`;
- otherwise `rooms.sqlite` under `INVERSION_LAB_DATA_DIR` (default `.data/` in the repository).

Another database is an option: any other SQLAlchemy URL in `INVERSION_LAB_ROOM_DB`
(`postgresql+psycopg://user@host/lab`) goes through SQLAlchemy Core, imported only then (`pip
install sqlalchemy` and the database's driver; a clear message when they are missing). The SQL is
the subset SQLite and PostgreSQL share (`ON CONFLICT` upserts, `DOUBLE PRECISION`). SQLite alone
carries a room's traffic (30 people, a write every few minutes each); a server database is for
hosts whose processes share no disk. Pure: no streamlit import. Everything stored is checked here
(codes, ids, numbers), so no caller can put a malformed row in.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

ENV_DB = "INVERSION_LAB_ROOM_DB"
ENV_DIR = "INVERSION_LAB_DATA_DIR"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / ".data"
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: a code is read aloud and typed
CODE_LEN = 5
CODE = re.compile(rf"^[{ALPHABET}]{{{CODE_LEN}}}$")
PARTICIPANT = re.compile(r"^[0-9a-f]{12}$")
LESSON = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_CHOICE = 50
MAX_ABS = 1e12
MAX_POINTS = 12  # a drawn curve's points (a lesson asks for 2 to 6)
TIMEOUT_S = 10.0

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rooms (code VARCHAR(16) PRIMARY KEY, created DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS predictions (room VARCHAR(16) NOT NULL REFERENCES rooms(code), "
    "lesson VARCHAR(64) NOT NULL, participant VARCHAR(16) NOT NULL, choice INTEGER, estimate DOUBLE PRECISION, "
    "updated DOUBLE PRECISION NOT NULL, PRIMARY KEY (room, lesson, participant))",
    # a drawn curve, beside the prediction it belongs to: a table of its own, so a file written
    # before curves were stored opens as it is (CREATE … IF NOT EXISTS, no ALTER TABLE to race on)
    "CREATE TABLE IF NOT EXISTS curves (room VARCHAR(16) NOT NULL REFERENCES rooms(code), "
    "lesson VARCHAR(64) NOT NULL, participant VARCHAR(16) NOT NULL, points VARCHAR(512) NOT NULL, "
    "updated DOUBLE PRECISION NOT NULL, PRIMARY KEY (room, lesson, participant))",
)


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


def target_from(spec: str) -> Path | str:
    """Where the store lives from `INVERSION_LAB_ROOM_DB`'s value: a file (a path, or a plain
    sqlite:/// URL) or another database's SQLAlchemy URL (returned as given)."""
    if "://" not in spec:
        return Path(spec).expanduser()
    url = urlparse(spec)
    if url.scheme != "sqlite":
        return spec
    if url.netloc:
        raise RoomError(f"{ENV_DB}: a sqlite URL has no host: sqlite:///relative or sqlite:////absolute")
    path = unquote(url.path)
    return Path(path[1:] if path.startswith("/") else path)


def default_target() -> Path | str:
    spec = os.environ.get(ENV_DB, "").strip()
    if spec:
        return target_from(spec)
    return Path(os.environ.get(ENV_DIR) or DEFAULT_DIR) / "rooms.sqlite"


class _SqliteFile:
    """The standard library's sqlite3: a connection per call, autocommit (each statement its own
    short transaction), WAL, a busy timeout."""

    def __init__(self, path: Path):
        self.where = str(path)
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=TIMEOUT_S, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout={int(TIMEOUT_S * 1000)}")
        return db

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> tuple[list[tuple], int]:
        db = self._db()
        try:
            cur = db.execute(sql, dict(params or {}))
            return [tuple(r) for r in cur.fetchall()], cur.rowcount
        finally:
            db.close()


class _Alchemy:
    """Any database SQLAlchemy speaks, through its Core (a pooled engine, a transaction per call)."""

    def __init__(self, url: str):
        try:
            import sqlalchemy
        except ImportError:
            raise RoomError(f"{ENV_DB} names a database URL; that needs SQLAlchemy and the database's driver "
                            "(pip install sqlalchemy psycopg), or give a file path for SQLite") from None
        self._sa = sqlalchemy
        self.where = sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
        self.engine = sqlalchemy.create_engine(url, pool_pre_ping=True)

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> tuple[list[tuple], int]:
        with self.engine.begin() as conn:
            res = conn.execute(self._sa.text(sql), dict(params or {}))
            rows = [tuple(r) for r in res.fetchall()] if res.returns_rows else []
            return rows, res.rowcount


def _db_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (OSError, sqlite3.Error)
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:
        return errors
    return (*errors, SQLAlchemyError)


@dataclass(frozen=True)
class Prediction:
    participant: str
    choice: int | None
    estimate: float | None
    updated: float
    curve: tuple[float | None, ...] | None = None  # a drawn curve's points in the lesson's order (None: not drawn)


def _number(v: object, what: str) -> float:
    """A finite number within ±MAX_ABS, or RoomError naming `what`."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise RoomError(f"{what} is a number")
    v = float(v)
    if not math.isfinite(v) or abs(v) > MAX_ABS:
        raise RoomError(f"{what} is a finite number")
    return v


def checked_curve(curve: object) -> tuple[float | None, ...] | None:
    """A drawn curve as stored: 1 to MAX_POINTS points, each a finite number or None (a point left
    blank), at least one drawn; None for no curve. RoomError for anything else."""
    if curve is None:
        return None
    if not isinstance(curve, list | tuple) or not 1 <= len(curve) <= MAX_POINTS:
        raise RoomError(f"a curve is a list of 1 to {MAX_POINTS} points")
    points = tuple(None if v is None else _number(v, "a curve's point") for v in curve)
    return points if any(v is not None for v in points) else None


def _stored_curve(text: object) -> tuple[float | None, ...] | None:
    """A curve read back (a row another program wrote is checked too: anything malformed is no curve)."""
    if not isinstance(text, str) or len(text) > 512:
        return None
    try:
        return checked_curve(json.loads(text))
    except (ValueError, RoomError):
        return None


class RoomStore:
    """Rooms and predictions (the tables are created on first use). Any database failure is a
    RoomError naming the database."""

    def __init__(self, target: Path | str | None = None):
        target = default_target() if target is None else target
        if isinstance(target, str):
            target = target_from(target)
        try:
            self._db = _SqliteFile(target) if isinstance(target, Path) else _Alchemy(target)
            for statement in SCHEMA:
                self._db.run(statement)
        except _db_errors() as err:
            raise RoomError(f"cannot use the room database {target}: {err}") from None

    @property
    def where(self) -> str:
        return self._db.where

    def _run(self, sql: str, params: Mapping[str, Any] | None = None) -> tuple[list[tuple], int]:
        try:
            return self._db.run(sql, params)
        except _db_errors() as err:
            raise RoomError(f"the room database {self.where} failed: {err}") from None

    def open_room(self) -> str:
        """A new room; its code (five characters, no look-alikes)."""
        for _attempt in range(20):
            code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))
            _rows, n = self._run("INSERT INTO rooms (code, created) VALUES (:code, :t) ON CONFLICT (code) DO NOTHING",
                                 {"code": code, "t": time.time()})
            if n == 1:
                return code
        raise RoomError("could not find a free room code")

    def exists(self, code: str) -> bool:
        if not isinstance(code, str) or not CODE.match(code):
            return False
        rows, _n = self._run("SELECT 1 FROM rooms WHERE code = :code", {"code": code})
        return bool(rows)

    def submit(self, code: str, lesson: str, participant: str, choice: int | None, estimate: float | None,
               curve: list[float | None] | None = None) -> None:
        """Store (or replace) one participant's prediction for one lesson of a room: the answer, the
        number, and the curve drawn (a new prediction without one drops an earlier curve)."""
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
            estimate = _number(estimate, "an estimate")
        points = checked_curve(curve)
        who = {"room": code, "lesson": lesson, "who": participant}
        if points is None:
            self._run("DELETE FROM curves WHERE room = :room AND lesson = :lesson AND participant = :who", who)
        else:
            self._run("INSERT INTO curves (room, lesson, participant, points, updated) "
                      "VALUES (:room, :lesson, :who, :points, :t) ON CONFLICT (room, lesson, participant) "
                      "DO UPDATE SET points = excluded.points, updated = excluded.updated",
                      {**who, "points": json.dumps(list(points), allow_nan=False), "t": time.time()})
        self._run(
            "INSERT INTO predictions (room, lesson, participant, choice, estimate, updated) "
            "VALUES (:room, :lesson, :who, :choice, :estimate, :t) ON CONFLICT (room, lesson, participant) "
            "DO UPDATE SET choice = excluded.choice, estimate = excluded.estimate, updated = excluded.updated",
            {"room": code, "lesson": lesson, "who": participant, "choice": choice, "estimate": estimate,
             "t": time.time()})

    def predictions(self, code: str, lesson: str) -> list[Prediction]:
        """Every participant's prediction for a lesson of a room, with the curve drawn (oldest first)."""
        rows, _n = self._run(
            "SELECT p.participant, p.choice, p.estimate, p.updated, c.points FROM predictions p "
            "LEFT JOIN curves c ON c.room = p.room AND c.lesson = p.lesson AND c.participant = p.participant "
            "WHERE p.room = :room AND p.lesson = :lesson ORDER BY p.updated, p.participant",
            {"room": code, "lesson": lesson})
        return [Prediction(*r[:4], curve=_stored_curve(r[4])) for r in rows]

    def participants(self, code: str) -> int:
        """How many people have predicted anything in the room."""
        rows, _n = self._run("SELECT COUNT(DISTINCT participant) FROM predictions WHERE room = :room", {"room": code})
        return int(rows[0][0])


def choice_counts(preds: list[Prediction], n_options: int) -> list[int]:
    """How many chose each option (choices outside the options are left out)."""
    counts = [0] * n_options
    for p in preds:
        if p.choice is not None and 0 <= p.choice < n_options:
            counts[p.choice] += 1
    return counts
