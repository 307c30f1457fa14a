"""The bundled samples are what their generators write, byte for byte."""

import subprocess
import sys
from pathlib import Path

import pytest

from lifelong.streams.fewrel import TRAIN_FILE, read_relation_file
from tools.samplegen import FOLDERS, KINDS, SAMPLES, write

ROOT = Path(__file__).resolve().parents[2]


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("kind", KINDS)
def test_regenerating_a_sample_reproduces_the_shipped_files(kind, tmp_path):
    out = write(kind, tmp_path / kind, seed=0)
    shipped = files(SAMPLES / FOLDERS[kind])
    assert shipped and files(out) == shipped


def test_the_command_writes_every_sample_and_the_seed_changes_them(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tools.samplegen", "--out", str(tmp_path), "--seed", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.count("wrote the") == 3
    fewrel = tmp_path / "fewrel" / TRAIN_FILE
    assert fewrel.read_bytes() != (SAMPLES / "fewrel" / TRAIN_FILE).read_bytes()
    lines = read_relation_file(fewrel, 20)
    assert len(lines) == 320 and all(len(x.negatives) == 10 for x in lines)


def test_the_runtime_never_imports_the_generators():
    code = (
        "import sys, lifelong, lifelong.experiment.cli, lifelong.streams, "
        "lifelong.strategies.replay; "
        "assert not [m for m in sys.modules if m.startswith('tools')]"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
