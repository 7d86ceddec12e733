"""The room store: rooms and predictions in one SQLite file, shared by every server process,
surviving a restart, refusing malformed input, and safe under many concurrent writers."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ui.teach import room_store
from ui.teach.room_store import RoomError, RoomStore, choice_counts, normalize_code, target_from

PIDS = [f"{k:012x}" for k in range(1, 41)]


@pytest.fixture
def store(tmp_path):
    return RoomStore(tmp_path / "rooms.sqlite")


def test_a_room_is_opened_and_found_by_its_code(store):
    code = store.open_room()
    assert room_store.CODE.match(code) and not set(code) & set("01IO")
    assert store.exists(code)
    assert not store.exists("ZZZZZ") and not store.exists("abc") and not store.exists(None)
    assert len({store.open_room() for _ in range(30)}) == 30


def test_typed_codes_are_normalized_and_bad_ones_refused():
    assert normalize_code(" abc-de ") == "ABCDE"
    for bad in ["", "ABCD", "ABCDEF", "ABCD0", "AB<DE", "x" * 40, None, 12345]:
        assert normalize_code(bad) is None, bad


def test_a_prediction_is_stored_and_replaced_not_duplicated(store):
    code = store.open_room()
    store.submit(code, "no-alarm", PIDS[0], 3, 2.5)
    store.submit(code, "no-alarm", PIDS[1], 0, None)
    store.submit(code, "no-alarm", PIDS[0], 1, 4.0)  # the same person changes their mind
    store.submit(code, "primer", PIDS[0], None, 12.0)
    preds = {p.participant: p for p in store.predictions(code, "no-alarm")}
    assert set(preds) == {PIDS[0], PIDS[1]}
    assert (preds[PIDS[0]].choice, preds[PIDS[0]].estimate) == (1, 4.0)
    assert (preds[PIDS[1]].choice, preds[PIDS[1]].estimate) == (0, None)
    assert [p.estimate for p in store.predictions(code, "primer")] == [12.0]
    assert store.predictions(store.open_room(), "no-alarm") == []
    assert store.participants(code) == 2
    assert choice_counts(store.predictions(code, "no-alarm"), 4) == [1, 1, 0, 0]


@pytest.mark.parametrize("args, why", [
    (("ZZZZZ", "primer", PIDS[0], 0, 1.0), "no room"),
    ((None, "primer", PIDS[0], 0, 1.0), "no room"),
    (("<code>", "<b>x</b>", PIDS[0], 0, 1.0), "slug"),
    (("<code>", "primer", "me", 0, 1.0), "participant"),
    (("<code>", "primer", PIDS[0], -1, 1.0), "choice"),
    (("<code>", "primer", PIDS[0], True, 1.0), "choice"),
    (("<code>", "primer", PIDS[0], 0, float("nan")), "finite"),
    (("<code>", "primer", PIDS[0], 0, float("inf")), "finite"),
    (("<code>", "primer", PIDS[0], 0, 1e300), "finite"),
    (("<code>", "primer", PIDS[0], 0, "3"), "number"),
])
def test_malformed_input_is_refused(store, args, why):
    code = store.open_room()
    args = tuple(code if a == "<code>" else a for a in args)
    with pytest.raises(RoomError, match=why):
        store.submit(*args)
    assert store.predictions(code, "primer") == []


def test_a_drawn_curve_is_stored_with_its_prediction_and_replaced_with_it(store):
    code = store.open_room()
    slug = "reserve-when-budget-binds"
    store.submit(code, slug, PIDS[0], 1, None, [1.0, None, 0.5, 0.25])
    store.submit(code, slug, PIDS[1], 0, None, [2, 1, 1, 1])
    store.submit(code, slug, PIDS[2], 2, 3.0)  # no curve drawn
    got = {p.participant: p.curve for p in store.predictions(code, slug)}
    assert got == {PIDS[0]: (1.0, None, 0.5, 0.25), PIDS[1]: (2.0, 1.0, 1.0, 1.0), PIDS[2]: None}
    store.submit(code, slug, PIDS[0], 1, None, [0.9, 0.8, 0.7, 0.6])  # drawn again: replaced
    store.submit(code, slug, PIDS[1], 0, None, [None, None, None, None])  # a new prediction with nothing drawn
    got = {p.participant: p.curve for p in store.predictions(code, slug)}
    assert got[PIDS[0]] == (0.9, 0.8, 0.7, 0.6) and got[PIDS[1]] is None
    assert store.predictions(code, "primer") == [] and store.participants(code) == 3


@pytest.mark.parametrize("curve, why", [
    ("1,2,3", "list"), ([], "list"), ([1.0] * 13, "list"), ([1.0, float("nan")], "finite"),
    ([1.0, "2"], "number"), ([True, 1.0], "number"), ([1e300], "finite"),
])
def test_a_malformed_curve_is_refused_and_nothing_is_written(store, curve, why):
    code = store.open_room()
    with pytest.raises(RoomError, match=why):
        store.submit(code, "primer", PIDS[0], 0, 1.0, curve)
    assert store.predictions(code, "primer") == []


def test_a_curve_a_hand_edited_file_spoiled_reads_as_none(store, tmp_path):
    code = store.open_room()
    store.submit(code, "primer", PIDS[0], 0, 1.0, [1.0, 2.0])
    db = sqlite3.connect(tmp_path / "rooms.sqlite")
    db.execute("UPDATE curves SET points = '[\"<b>\", 1e999]'")
    db.commit()
    assert [p.curve for p in store.predictions(code, "primer")] == [None]


def test_a_file_written_before_curves_were_stored_opens_and_takes_them(tmp_path):
    """A rooms file from before this table existed (a restart onto an older file): its rooms and
    predictions are read, and a curve can be added, with no migration step."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    for statement in room_store.SCHEMA[:2]:
        db.execute(statement)
    db.execute("INSERT INTO rooms VALUES ('ABCDE', 0)")
    db.execute(f"INSERT INTO predictions VALUES ('ABCDE', 'primer', '{PIDS[0]}', 1, 2.0, 0)")
    db.commit()
    db.close()
    store = RoomStore(path)
    assert [(p.choice, p.estimate, p.curve) for p in store.predictions("ABCDE", "primer")] == [(1, 2.0, None)]
    store.submit("ABCDE", "primer", PIDS[1], 0, None, [1.0, 0.5])
    assert [p.curve for p in store.predictions("ABCDE", "primer")] == [None, (1.0, 0.5)]


def test_a_room_survives_a_restart(tmp_path):
    """A restarted server opens the same file: the room and its predictions are there."""
    path = tmp_path / "rooms.sqlite"
    first = RoomStore(path)
    code = first.open_room()
    first.submit(code, "kv-caps", PIDS[0], 2, 0.25)
    del first
    again = RoomStore(path)
    assert again.exists(code)
    assert [(p.choice, p.estimate) for p in again.predictions(code, "kv-caps")] == [(2, 0.25)]
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_thirty_threads_write_at_once_and_nothing_is_lost(store):
    code = store.open_room()
    start = threading.Barrier(30)
    errors = []

    def participant(k: int) -> None:
        try:
            start.wait()
            for lesson in ("primer", "no-alarm", "kv-caps"):
                store.submit(code, lesson, PIDS[k], k % 4, float(k))
        except Exception as err:  # noqa: BLE001 — collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=participant, args=(k,)) for k in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for lesson in ("primer", "no-alarm", "kv-caps"):
        preds = store.predictions(code, lesson)
        assert sorted(p.estimate for p in preds) == [float(k) for k in range(30)]


WRITER = """
import sys
from ui.teach.room_store import RoomStore
path, code, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = RoomStore(path)  # each process opens the file itself, as each server process does
for n in range(5):
    s.submit(code, "no-alarm", f"{k + 1:012x}", n % 4, float(k * 10 + n))
"""


def test_thirty_processes_write_to_one_file(tmp_path):
    """What `tasks.py serve` does: several server processes write one room's file at once. (Plain
    interpreters, not a multiprocessing pool: after an AppTest, `__main__` is Streamlit's script
    and spawned pool workers would die on start.)"""
    path = tmp_path / "rooms.sqlite"
    code = RoomStore(path).open_room()
    root = Path(__file__).resolve().parents[2]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), code, str(k)], cwd=root,
                              stderr=subprocess.PIPE, text=True) for k in range(30)]
    errors = [err for p in procs if (err := p.communicate(timeout=120)[1]) or p.returncode]
    assert not errors, errors[:3]
    preds = RoomStore(path).predictions(code, "no-alarm")
    assert len(preds) == 30 and sorted(p.estimate for p in preds) == [float(k * 10 + 4) for k in range(30)]


def test_where_the_database_is(tmp_path, monkeypatch):
    assert target_from("/srv/rooms.sqlite").as_posix() == "/srv/rooms.sqlite"
    assert target_from("sqlite:///data/rooms.db").as_posix() == "data/rooms.db"
    assert target_from("sqlite:////srv/rooms.db").as_posix() == "/srv/rooms.db"
    assert target_from("postgresql+psycopg://lab@db/lab") == "postgresql+psycopg://lab@db/lab"  # SQLAlchemy's
    with pytest.raises(RoomError, match="no host"):
        target_from("sqlite://host/x.db")
    monkeypatch.setenv(room_store.ENV_DB, str(tmp_path / "a.sqlite"))
    assert room_store.default_target() == tmp_path / "a.sqlite"
    monkeypatch.delenv(room_store.ENV_DB)
    monkeypatch.setenv(room_store.ENV_DIR, str(tmp_path / "d"))
    assert room_store.default_target() == tmp_path / "d" / "rooms.sqlite"


def test_a_database_url_goes_through_sqlalchemy(tmp_path):
    """The option for a server database, exercised on SQLite through SQLAlchemy's own driver: the
    same rooms, upserts, restart and concurrent writers."""
    pytest.importorskip("sqlalchemy")
    url = f"sqlite+pysqlite:///{tmp_path / 'sa.db'}"
    store = RoomStore(url)
    assert type(store._db).__name__ == "_Alchemy"
    code = store.open_room()
    threads = [threading.Thread(target=store.submit, args=(code, "primer", PIDS[k], k % 3, float(k)))
               for k in range(30)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    store.submit(code, "primer", PIDS[0], 2, 99.0, [1.5, None, 0.5])
    again = RoomStore(url)  # a restart
    preds = {p.participant: p for p in again.predictions(code, "primer")}
    assert len(preds) == 30 and (preds[PIDS[0]].choice, preds[PIDS[0]].estimate) == (2, 99.0)
    assert preds[PIDS[0]].curve == (1.5, None, 0.5) and preds[PIDS[1]].curve is None
    assert again.participants(code) == 30 and again.exists(code)


def test_a_database_url_without_its_library_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    with pytest.raises(RoomError, match="needs SQLAlchemy"):
        RoomStore("postgresql+psycopg://lab@db/lab")


def test_an_unreachable_database_is_a_clear_error():
    pytest.importorskip("sqlalchemy")
    with pytest.raises(RoomError, match="cannot use the room database"):
        RoomStore("postgresql+nosuchdriver://lab@127.0.0.1:1/lab")


def test_a_database_it_cannot_use_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RoomError, match="cannot use the room database"):
        RoomStore(tmp_path / "file" / "rooms.sqlite")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(RoomError, match="cannot use the room database"):
        RoomStore(bad)
