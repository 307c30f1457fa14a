"""The transcripts in the README and the guide are what the command prints (they had drifted)."""

import re
import shlex
from pathlib import Path

import pytest

from lifelong.experiment.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]


def transcripts():
    """``(command, printed line)`` of every ``$ lifelong ...`` line in a code block of a page."""
    found = []
    for page in PAGES:
        fenced, lines = False, page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("```"):
                fenced = not fenced
            elif fenced and line.startswith("$ ") and " lifelong " in f" {line} ":
                found.append((line[2:], lines[i + 1]))
    return found


def test_the_readme_has_transcripts():
    assert len(transcripts()) >= 5


@pytest.mark.parametrize("command, printed", transcripts(), ids=lambda x: x[:40])
def test_a_readme_transcript_is_what_the_command_prints(
    command, printed, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)  # whatever it would write goes here (it should write nothing)
    words = shlex.split(command)
    while re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(name, value)
    assert words[0] == "lifelong"
    assert main(words[1:]) != 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    if printed.endswith("..."):
        assert line.startswith(printed[:-3]), line
    else:
        assert line == printed
    assert not list(tmp_path.iterdir()), "a refused command wrote something"
