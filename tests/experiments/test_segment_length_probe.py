"""The segment-length probe trains one model per length and tables its loss by position."""

import pytest


@pytest.fixture
def probe_script(load_script):
    return load_script("lm/segment_length_probe.py")


def test_one_row_per_length_with_the_shared_positions_as_columns(probe_script, capsys):
    table = probe_script.main(["--steps", "2", "--lengths", "16", "32"])
    rows = [
        line for line in table.splitlines() if line.startswith("| 16 ") or line.startswith("| 32 ")
    ]
    assert len(rows) == 2
    assert "| 0–15 | all |" in table  # only the positions every length shares
    for row in rows:
        cells = [float(c) for c in row.strip("|").split("|")[1:]]
        assert all(1.0 < c < 6.0 for c in cells)  # nats per character, near ln(65) untrained


def test_lengths_must_divide_the_window(probe_script):
    with pytest.raises(SystemExit):
        probe_script.main(["--steps", "1", "--lengths", "24", "32"])


def test_the_segment_length_alone_differs(probe_script, monkeypatch):
    built = []
    real = probe_script.build_lm
    monkeypatch.setattr(probe_script, "build_lm", lambda *a: built.append(a[2]) or real(*a))
    probe_script.main(["--steps", "1", "--lengths", "16", "32"])
    assert [s.segment_length for s in built] == [16, 32]
    assert {s.window for s in built} == {32} and {s.train.steps for s in built} == {1}
