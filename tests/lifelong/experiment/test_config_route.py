"""Following the run config from `run`: each module is entered at most twice (issue 63).

The measure: `run` is profiled (`sys.setprofile`) on a tiny run, and every call into a
`lifelong` function that receives the run config or one of its section objects as an argument
(a method of a section counts: its ``self``) is recorded with its module. Consecutive calls in
one module are one visit; a module entered again after the config went elsewhere is a second
visit. Before the renovation `config.py` was entered 11 times and `runs.py` 6 (the flat config
and its sections round-tripped, and each builder went back to the config); now `plan_run`
derives everything once and each section goes to its component once.
"""

import collections
import dataclasses
import sys
from pathlib import Path

import pytest

import lifelong
from lifelong.experiment.config import DEMO_CONFIG, RunConfig, load_yaml
from lifelong.experiment.runs import run

PACKAGE = Path(lifelong.__file__).parent


def config_route(config: RunConfig) -> list[tuple[str, list[str]]]:
    """The modules the config (or a section of it) enters during `run`, in order, as visits."""
    tracked: set[int] = set()

    def is_config(value: object) -> bool:
        if isinstance(value, RunConfig):
            tracked.update(id(getattr(value, f.name)) for f in dataclasses.fields(value))
            return True
        return id(value) in tracked

    calls: list[tuple[str, str]] = []

    def profile(frame, event, arg):  # noqa: ARG001 (the profiler's signature)
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(str(PACKAGE)):
            return
        arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(is_config(frame.f_locals.get(name)) for name in arguments):
            module = Path(code.co_filename).relative_to(PACKAGE.parent).as_posix()
            calls.append((module, code.co_name))

    is_config(config)
    sys.setprofile(profile)
    try:
        run(config)
    finally:
        sys.setprofile(None)
    visits: list[tuple[str, list[str]]] = []
    for module, function in calls:
        if visits and visits[-1][0] == module:
            visits[-1][1].append(function)
        else:
            visits.append((module, [function]))
    return visits


@pytest.mark.parametrize("stream", ["text", "qa"])
def test_the_run_config_visits_no_module_more_than_twice(tmp_path, stream):
    config = load_yaml(DEMO_CONFIG).replace(
        stream=stream,
        encoder="tiny",
        train_size=16,
        test_size=8,
        batch_size=8,
        progress=False,
        output_dir=str(tmp_path),
    )
    if stream == "text":
        config = config.replace(tasks=["ag_news", "yelp"])
    visits = config_route(config)
    counts = collections.Counter(module for module, _ in visits)
    route = "\n".join(f"{module}: {', '.join(sorted(set(f)))}" for module, f in visits)
    assert counts["lifelong/experiment/runs.py"] >= 1, route  # the profile saw the run
    assert max(counts.values()) <= 2, f"{counts.most_common(3)}\n{route}"
