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


def readme_commands():
    """Every command line in the README's ``bash`` blocks (comments dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = re.split(r"\s#", line)[0].strip()
            if line:
                lines.append(line)
    return lines


def test_every_readme_command_exists():
    """Each `lifelong` line parses, each `make` target exists, each pip line names a real file."""
    from lifelong.experiment.cli import build_parser

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    kinds = set()
    for line in readme_commands():
        words = shlex.split(line)
        kinds.add(words[0])
        if words[0] == "lifelong":
            build_parser().parse_args(words[1:])  # SystemExit on a flag that does not exist
        elif words[0] == "make":
            assert all(re.search(rf"^{t}:", makefile, re.M) for t in words[1:]), line
        elif words[0] == "pip":
            for word in words:
                if word.startswith("-c"):
                    continue
                if word.endswith(".txt"):
                    assert (ROOT / word).is_file(), line
        else:
            raise AssertionError(f"a README command no test checks: {line}")
    assert {"lifelong", "make", "pip"} <= kinds


def test_the_readme_real_data_command_runs_the_headline_protocol():
    """Friction 2: the README's real-rows command ran the demo's settings, not the table's."""
    from lifelong.experiment.cli import build_parser, config_from_args
    from lifelong.experiment.sweep import load_sweep

    (line,) = [c for c in readme_commands() if "real_budget.yaml" in c]
    args = build_parser().parse_args(shlex.split(line)[1:])
    config = config_from_args(args)
    sweep = load_sweep(ROOT / "experiments/text_classification/real_budget.yaml")
    assert config == sweep.point_config(args.strategy, args.order)
    assert (config.training.lr, config.task.max_length, config.training.batch_size) == (
        3e-5,
        64,
        16,
    )
    assert config.options_for()["replay_ratio"] == 0.1
    assert config.stream.train_size == 2000 and config.stream.data_dir.endswith("text_real")


def test_the_readme_python_example_runs(tmp_path, monkeypatch):
    """The README's Python block, executed as written, on the tiny encoder and two small tasks
    (the names, calls and keywords are the README's; only the demo config is made small)."""
    import lifelong
    from lifelong.experiment.config import RunConfig

    (block,) = re.findall(r"## From Python\n\n```python\n(.*?)```", readme_text(), re.S)
    demo = RunConfig.demo.__func__
    small = dict(encoder="tiny", tasks=["ag_news", "yelp"], train_size=16, test_size=8)
    small.update(progress=False, output_dir=str(tmp_path / "runs"))
    monkeypatch.setattr(
        RunConfig, "demo", classmethod(lambda cls, **changes: demo(cls, **changes, **small))
    )
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["outcome"].run_dir.is_dir() and len(scope["frame"]) == 3
    (label,) = scope["labels"]
    assert label in lifelong.load_model(scope["kept"].run_dir).label_names
    assert set(scope["table"].index.get_level_values("strategy")) == {"seq", "replay"}


def readme_text() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_library_page_example_runs_and_prints_what_it_says(tmp_path, monkeypatch):
    """The Library page's first block, as written, on the tiny encoder (its printed
    ``memory_examples: 1500`` is checked: REPLAY writes all 5 x 300 examples of the sample)."""
    import lifelong

    page = (ROOT / "docs" / "guide" / "library.md").read_text(encoding="utf-8")
    block = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    real_run = lifelong.run

    def tiny_run(config, **kwargs):
        small = config.replace(encoder="tiny", progress=False, output_dir=str(tmp_path))
        return real_run(small, **kwargs)

    monkeypatch.setattr(lifelong, "run", tiny_run)
    scope: dict = {}
    exec(compile(block, "library.md", "exec"), scope)
    said = re.search(r"'memory_examples': (\d+)", block)
    assert scope["outcome"].metrics["memory_examples"] == int(said.group(1))
    assert scope["outcome"].result.task_names == ("dbpedia", "yahoo", "ag_news", "amazon", "yelp")


def guide_commands():
    """Every ``lifelong`` command in the guide's ``bash`` blocks (comments dropped, continued
    lines joined; a line of a shell loop, naming ``$variables``, is left to the loop)."""
    found = []
    for page in sorted((ROOT / "docs" / "guide").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            lines = [re.split(r"\s#", line)[0].rstrip() for line in block.splitlines()]
            joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
            for line in joined.splitlines():
                line = line.strip()
                if line.startswith("lifelong ") and "$" not in line:
                    found.append((page.name, line))
    return found


@pytest.mark.parametrize(("page", "line"), guide_commands(), ids=lambda x: str(x)[:50])
def test_every_guide_command_parses(page, line):
    from lifelong.experiment.cli import build_parser

    build_parser().parse_args(shlex.split(line)[1:])  # SystemExit on a flag that does not exist


def test_installing_into_your_own_environment_is_documented_and_run_by_ci():
    """Friction 7: only `make setup` into .venv was documented. The README says how to install
    into one's own environment, and CI runs that route (`make wheel-check`: the wheel in a fresh
    virtual environment, a small run from outside the source tree)."""
    readme = readme_text()
    assert "Into your own environment" in readme and "pip install -c constraints.txt" in readme
    assert re.search(r"^make wheel-check\b", (ROOT / ".ci" / "run").read_text(), re.M)
    target = (ROOT / "Makefile").read_text().split("\nwheel-check:")[1].split("\n\n")[0]
    assert "pip wheel" in target and "-m venv" in target and "lifelong run" in target
    assert "grep -q wheel-venv" in target  # lifelong imported from the wheel, not the tree
