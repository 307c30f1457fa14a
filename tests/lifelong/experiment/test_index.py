import multiprocessing

import pytest

from lifelong.experiment.config import from_dict
from lifelong.experiment.index import RunIndex, RunIndexError


def config(seed=0, strategy="seq"):
    return from_dict(dict(strategy=strategy, seed=seed)).to_dict()


def test_start_finish_fail_and_filter(tmp_path):
    index = RunIndex(tmp_path / "index.sqlite")
    index.start(tmp_path / "a", config(0))
    index.start(tmp_path / "b", config(1, "replay"))
    index.finish(tmp_path / "a", {"average_accuracy": 50.0})
    index.fail(tmp_path / "b", "ValueError: boom")
    a, b = index.rows()
    assert (a["status"], a["metrics"], a["strategy"], a["seed"]) == (
        "finished",
        {"average_accuracy": 50.0},
        "seq",
        0,
    )
    assert (b["status"], b["error"], b["task_order"]) == ("failed", "ValueError: boom", "i")
    assert a["config"]["strategy"] == "seq" and a["run_dir"] == str((tmp_path / "a").resolve())
    assert [r["name"] for r in index.rows(status="failed")] == ["b"]
    index.start(tmp_path / "b", config(1, "replay"))  # resumed: same row, running again
    assert len(index.rows()) == 2 and index.get(tmp_path / "b")["error"] is None


def test_errors_name_what_is_wrong(tmp_path):
    index = RunIndex(tmp_path / "index.sqlite")
    with pytest.raises(RunIndexError, match="no run"):
        index.finish(tmp_path / "never-started", {})
    with pytest.raises(RunIndexError, match="cannot filter"):
        index.rows(colour="red")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RunIndexError, match="bad.sqlite"):
        RunIndex(bad)


def _writer(path, worker, n):
    index = RunIndex(path)
    for i in range(n):
        run_dir = f"{path}.runs/w{worker}-{i}"
        index.start(run_dir, config(i))
        index.finish(run_dir, {"average_accuracy": float(i)})


def test_concurrent_writers_lose_no_rows(tmp_path):
    path = tmp_path / "index.sqlite"
    RunIndex(path)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, w, 60)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    rows = RunIndex(path).rows()
    assert len(rows) == 180 and {r["status"] for r in rows} == {"finished"}


def test_a_lock_met_while_opening_is_waited_out_and_a_lasting_one_named(tmp_path, monkeypatch):
    # SQLite answers "database is locked" at once, without its busy handler, to some opens of
    # a cold index by several processes together (a Ray sweep's workers did, in CI): opening
    # retries that until `timeout`, and still names the file when the lock does not pass
    import sqlite3

    real = RunIndex._set_up
    refusals = iter([True, True, False])

    def sometimes_locked(self):
        if next(refusals, False):
            raise sqlite3.OperationalError("database is locked")
        real(self)

    monkeypatch.setattr(RunIndex, "_set_up", sometimes_locked)
    RunIndex(tmp_path / "index.sqlite", timeout=5).start(tmp_path / "a", config(0))
    assert [r["name"] for r in RunIndex(tmp_path / "index.sqlite").rows()] == ["a"]

    def always_locked(self):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(RunIndex, "_set_up", always_locked)
    with pytest.raises(RunIndexError, match=r"other\.sqlite: not a usable run index: .*locked"):
        RunIndex(tmp_path / "other.sqlite", timeout=0.2)


def _opener(path, start, errors):
    start.wait()
    try:
        RunIndex(path, timeout=30)
    except RunIndexError as err:
        errors.put(str(err))


def test_many_processes_opening_a_cold_index_together_all_get_it(tmp_path):
    path = tmp_path / "index.sqlite"
    context = multiprocessing.get_context("spawn")
    start, errors = context.Event(), context.Queue()
    openers = [context.Process(target=_opener, args=(path, start, errors)) for _ in range(8)]
    for p in openers:
        p.start()
    start.set()
    for p in openers:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert errors.empty()
    assert sqlite3_mode(path) == "wal"


def sqlite3_mode(path):
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]
