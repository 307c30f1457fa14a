"""Generated inputs for what runs read back and what commands take: sweep files, run
directories (the reports' readers), the ``lifelong lm`` corpus, checkpoints, and every integer
and float flag's range (integers up to 2**70 either way).

Each reader is judged by an oracle written from its rules: what the oracle accepts must be read
as given; anything else must end in the project's own one-line error naming the file (or the
key, or the flag). A traceback, a hang or a file that runs code fails the test.
"""

import contextlib
import io
import json
import math
import os
import pickle
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lifelong import registry
from lifelong.experiment import runs as runs_module
from lifelong.experiment.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint
from lifelong.experiment.cli import main
from lifelong.experiment.config import ConfigError
from lifelong.experiment.rundir import RunDirError, load_run, unfinished_runs
from lifelong.experiment.sweep import load_sweep
from lifelong.learner import StreamPosition
from lifelong.lm.bench import TooLargeError, check_flags, check_size, check_window
from lifelong.lm.flags import add_arguments
from lifelong.lm.text import load_corpus
from lifelong.options import SEED_MAX
from lifelong.streams.core import DataFormatError

settings.load_profile("lifelong-fuzz")

SCRATCH = tempfile.TemporaryDirectory(prefix="lifelong-fuzz-")
HUGE = 2**70
INTEGER = st.one_of(
    st.integers(-HUGE, HUGE),
    st.integers(-3, 600),
    st.sampled_from([0, 1, 2**31 - 1, 2**31, SEED_MAX, SEED_MAX + 1, 2**63 - 1, 2**63, HUGE]),
)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(dir=SCRATCH.name))


def one_line(message: str) -> bool:
    return bool(message) and "\n" not in message and "Traceback" not in message


# --- sweep files ----------------------------------------------------------------------------

NAMES = st.sampled_from(["seq", "replay", "mbpa++", "bogus", "", "seq,replay"])
SEED = st.one_of(INTEGER, st.sampled_from(["a", "1", "", "1.5", None, True, 1.0, 2.5]))


@settings(max_examples=300)
@given(
    name=st.one_of(st.sampled_from(["grid", "", "a/b", ".hidden"]), st.text(max_size=5)),
    strategies=st.one_of(NAMES, st.lists(NAMES, max_size=3)),
    seeds=st.one_of(st.none(), SEED, st.lists(SEED, max_size=3)),
    orders=st.one_of(
        st.none(),
        st.sampled_from(["i", "v", "i,ii"]),
        st.lists(st.sampled_from(["i", "ii", "x"]), max_size=3),
    ),
    extra=st.one_of(st.none(), st.sampled_from(["per_strategy", "unknown"])),
)
def test_sweep_file(name, strategies, seeds, orders, extra, tried):
    tried("sweep yaml")
    spec = {"name": name, "strategies": strategies, "run": {"encoder": "tiny"}}
    if seeds is not None:
        spec["seeds"] = seeds
    if orders is not None:
        spec["orders"] = orders
    if extra == "per_strategy":
        spec["per_strategy"] = {"seq": {"lr": 1e-3}}
    elif extra == "unknown":
        spec["jobs"] = 3
    path = scratch_dir() / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    try:
        sweep = load_sweep(path)
    except ConfigError as err:
        assert str(err).startswith(str(path)) and one_line(str(err)), str(err)
        return
    assert extra != "unknown"
    for axis in (sweep.strategies, sweep.orders, sweep.seeds):
        assert len(set(axis)) == len(axis), axis
    assert all(isinstance(s, int) and 0 <= s <= SEED_MAX for s in sweep.seeds), sweep.seeds
    assert all(s in registry.names() for s in sweep.strategies)
    assert len(sweep.points()) == len(sweep.strategies) * len(sweep.orders) * len(sweep.seeds)


# --- run directories, as reports read them ----------------------------------------------------

NUMBER = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    INTEGER,
    st.sampled_from(["12", True, [], {}]),
)


def metrics_text(values: dict, depth: int) -> str:
    text = json.dumps(values, allow_nan=True)
    if depth:  # a deeply nested value: the parser's limit, not the reader's traceback
        text = text[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
    return text


@settings(max_examples=300)
@given(
    config=st.dictionaries(
        st.sampled_from(["stream", "strategy", "seed", "order", "tasks", "cluster_order", "x"]),
        st.one_of(
            st.sampled_from(["text", "fewrel", "qa", "seq", "i", "iv", ["ag_news"], [], "bogus"]),
            INTEGER,
            st.none(),
        ),
        max_size=6,
    ),
    metrics=st.dictionaries(
        st.sampled_from(["average_accuracy", "bwt", "fwt", "forgetting", "seconds", "y"]),
        NUMBER,
        max_size=6,
    ),
    rows=st.lists(
        st.lists(st.one_of(st.floats(-1, 101), st.sampled_from(["x", ""])), min_size=1, max_size=2),
        max_size=3,
    ),
    depth=st.sampled_from([0, 0, 5, 100_000]),
    missing=st.sampled_from([None, "config.yaml", "metrics.json", "accuracy.csv"]),
)
def test_run_directory(config, metrics, rows, depth, missing, tried):
    tried("run directory")
    run_dir = scratch_dir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    (run_dir / "metrics.json").write_text(metrics_text(metrics, depth))
    header = "row," + ",".join(f"t{i}" for i in range(len(rows[0]) if rows else 1))
    names = ["before", *(f"after t{i}" for i in range(len(rows) - 1))]
    body = [f"{n}," + ",".join(str(v) for v in r) for n, r in zip(names, rows)]
    (run_dir / "accuracy.csv").write_text("\n".join([header, *body]) + "\n")
    if missing:
        (run_dir / missing).unlink()
    try:
        record = load_run(run_dir)
    except RunDirError as err:
        message = str(err)
        assert one_line(message) and (str(run_dir) in message or message.startswith("config:"))
        return
    assert missing is None and depth < 1000
    for key in ("average_accuracy", "bwt", "fwt", "forgetting"):
        value = record.metrics[key]
        assert value is None or (isinstance(value, int | float) and math.isfinite(value))
    assert record.strategy == config["strategy"] and record.seed == config["seed"]
    assert not record.accuracy.isna().any().any()


@settings(max_examples=100)
@given(log=st.binary(max_size=200), checkpoint=st.booleans())
def test_unfinished_run_directories_are_named_with_a_reason(log, checkpoint, tried):
    tried("unfinished runs")
    root = scratch_dir()
    run_dir = root / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("stream: text\n")
    (run_dir / "log.txt").write_bytes(log)
    if checkpoint:
        (run_dir / CHECKPOINT_NAME).write_bytes(b"")
    ((found, why),) = unfinished_runs(root)
    assert found == run_dir and one_line(why)


# --- the lm corpus --------------------------------------------------------------------------


@settings(max_examples=200)
@given(
    data=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)),
    window=INTEGER,
)
def test_lm_corpus(data, window, tried):
    tried("lm corpus")
    path = scratch_dir() / "corpus.txt"
    path.write_bytes(data)
    try:
        corpus = load_corpus(path)
        check_window(corpus, window)
    except DataFormatError as err:
        assert str(err).startswith(str(path)) and one_line(str(err)), str(err)
        return
    text = data.decode("utf-8-sig")
    assert len(corpus.train) + len(corpus.val) == len(text)
    assert len(corpus.val) > window and len(corpus.train) > window


# --- checkpoints ----------------------------------------------------------------------------


def checkpoint_payload(seed: int) -> dict:
    generator = np.random.default_rng(seed)
    position = StreamPosition(1, 2, np.zeros(2), [np.ones(2)])
    return {
        "version": 1,
        "position": position.to_dict(),
        "strategy": {"model": {"w": torch.randn(3, 2)}, "rng": generator.bit_generator.state},
        "rng": {"python": random.getstate(), "numpy": np.random.get_state()},
        "trained_as": {"strategy": "seq"},
        "stream": None,
    }


class Planted:
    """Unpickling calls one of a few functions a planted file would: each leaves a trace."""

    def __init__(self, how: str, marker: Path) -> None:
        self.how, self.marker = how, str(marker)

    def __reduce__(self):
        if self.how == "open":
            return (open, (self.marker, "w"))
        if self.how == "system":
            return (os.system, (f"touch {self.marker}",))
        if self.how == "exec":
            return (exec, (f"open({self.marker!r}, 'w')",))
        return (getattr, (Path(self.marker), "touch"))


@settings(max_examples=250)
@given(
    cut=st.one_of(st.none(), st.floats(0, 1)),
    flip=st.one_of(st.none(), st.tuples(st.floats(0, 1), st.integers(1, 255))),
    planted=st.one_of(st.none(), st.sampled_from(["open", "system", "exec", "getattr"])),
    where=st.sampled_from(["strategy", "rng", "position", "top"]),
    form=st.sampled_from(["torch.save", "pickle"]),
)
def test_checkpoint_loader(cut, flip, planted, where, form, tried):
    tried("checkpoint")
    run_dir = scratch_dir()
    marker = run_dir / "planted-file-ran"
    payload = checkpoint_payload(0)
    if planted:
        evil = Planted(planted, marker)
        if where == "top":
            payload["extra"] = evil
        else:
            payload[where] = {"inner": [evil]}
    buffer = io.BytesIO()
    torch.save(payload, buffer) if form == "torch.save" else pickle.dump(payload, buffer)
    data = buffer.getvalue()
    if cut is not None:
        data = data[: int(cut * len(data))]
    if flip is not None:
        at = int(flip[0] * (len(data) - 1)) if data else 0
        data = data[:at] + bytes([data[at] ^ flip[1]]) + data[at + 1 :] if data else data
    (run_dir / CHECKPOINT_NAME).write_bytes(data)
    try:
        checkpoint = load_checkpoint(run_dir)
    except CheckpointError as err:
        assert one_line(str(err)) and str(run_dir) in str(err), str(err)
    else:
        assert planted is None, "a checkpoint holding code was accepted"
        assert checkpoint.position.task == 1
    assert not marker.exists(), "the planted file ran"


# --- flag ranges ----------------------------------------------------------------------------


class AcceptedError(Exception):
    """Stands in for the run: the command accepted every flag (preflight passed)."""


def preflight_only(config, **_):
    from lifelong.experiment.config import preflight

    preflight(config)
    raise AcceptedError(config)


RUN_INTEGERS = {
    # flag: (extra flags, the allowed range as a predicate, or the key's name in refusals)
    "--train-size": ([], lambda n: n >= 1, "train_size"),
    "--test-size": ([], lambda n: n >= 1, "test_size"),
    "--batch-size": ([], lambda n: n >= 1, "batch_size"),
    "--eval-batch-size": ([], lambda n: n >= 1, "eval_batch_size"),
    "--max-length": ([], lambda n: 1 <= n <= 512, "max_length"),
    "--seed": ([], lambda n: 0 <= n <= SEED_MAX, "seed"),
    "--checkpoint-every": ([], lambda n: n >= 0, "checkpoint_every"),
    "--fewrel-tasks": (["--stream", "fewrel"], lambda n: n >= 1, "fewrel_tasks"),
    "--doc-stride": (
        ["--stream", "qa", "--max-length", "384"],
        lambda n: 0 <= n < 317,
        "doc_stride",
    ),
    "--segment-length": (["--encoder", "transformer"], lambda n: 1 <= n <= 128, "segment_length"),
    "--document-passes": (["--encoder", "transformer"], lambda n: 1 <= n <= 16, "document_passes"),
}
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, -1e-5]),
)


def run_command(argv: list[str]) -> tuple[str, str]:
    """``main(argv)`` with the run replaced by its preflight: ("accepted" | "refused", stderr)."""
    stderr = io.StringIO()
    with (
        contextlib.redirect_stderr(stderr),
        contextlib.redirect_stdout(io.StringIO()),
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(runs_module, "run", preflight_only)
        try:
            code = main(argv)
        except AcceptedError:
            return "accepted", ""
        except SystemExit as exit_:  # argparse: a value of the wrong type
            code = exit_.code
    assert code == 2, (argv, code, stderr.getvalue())
    return "refused", stderr.getvalue().strip()


@settings(max_examples=400)
@given(flag=st.sampled_from(sorted(RUN_INTEGERS)), value=INTEGER)
def test_run_integer_flag_ranges(flag, value, tried):
    tried("run integer flags")
    extra, allowed, key = RUN_INTEGERS[flag]
    out = scratch_dir()
    argv = ["run", "--encoder", "tiny", "--output-dir", str(out), *extra, flag, str(value)]
    outcome, error = run_command(argv)
    if allowed(value):
        assert outcome == "accepted", (flag, value, error)
    else:
        assert outcome == "refused", (flag, value)
        assert one_line(error) and (key in error or flag in error), error


@settings(max_examples=150)
@given(flag=st.sampled_from(["--lr"]), value=FLOATS)
def test_run_float_flag_ranges(flag, value, tried):
    tried("run float flags")
    argv = ["run", "--encoder", "tiny", "--output-dir", str(scratch_dir()), f"{flag}={value!r}"]
    outcome, error = run_command(argv)
    if math.isfinite(value) and value > 0:
        assert outcome == "accepted", (value, error)
    else:
        assert outcome == "refused" and one_line(error) and "lr" in error, (value, error)


LM_INTEGERS = (
    "--steps",
    "--segments",
    "--segment-length",
    "--batch-size",
    "--width",
    "--layers",
    "--heads",
    "--seed",
)


@settings(max_examples=300)
@given(flag=st.sampled_from(LM_INTEGERS), value=INTEGER)
def test_lm_flag_ranges(flag, value, tried):
    """Every ``lifelong lm`` integer flag is checked before a model is built: in range, or
    one line naming the flag (the corpus's windows and the model's size against the device's
    memory included)."""
    import argparse

    tried("lm flags")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([flag, str(value)])
    try:
        check_flags(args)
        from lifelong.lm.bench import BenchSettings
        from lifelong.lm.text import Corpus

        settings_ = BenchSettings(
            width=args.width, layers=args.layers, heads=args.heads,
            segment_length=args.segment_length, segments=args.segments,
        )  # fmt: skip
        check_size(settings_, 65, torch.device("cpu"))
        corpus = Corpus(Path("corpus.txt"), None, np.zeros(900, np.int64), np.zeros(100, np.int64))
        check_window(corpus, args.segments * args.segment_length)
    except (ValueError, TooLargeError, DataFormatError) as err:
        assert one_line(str(err)), str(err)
        named = flag in str(err) or "window" in str(err) or "GiB" in str(err)
        assert named, str(err)
        return
    if flag == "--seed":
        assert 0 <= value <= SEED_MAX
    else:
        assert value >= 1
