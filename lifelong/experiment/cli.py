"""The ``lifelong`` command line: ``run``, ``sweep``, ``report`` and ``strategies``.

Only what parsing needs is imported up front; torch, transformers, FAISS and pandas load when a
command needs them, so ``lifelong --help`` answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from lifelong import registry
from lifelong.encoders.names import EncoderError
from lifelong.experiment.config import (
    DEMO_CONFIG,
    ConfigError,
    Key,
    RunConfig,
    config_from_yaml,
    config_keys,
    flatten,
    load_yaml,
    read_yaml,
)
from lifelong.experiment.index import RunIndexError
from lifelong.experiment.trust import LOCATION_FLAGS
from lifelong.options import OptionsError, did_you_mean, given_text
from lifelong.streams import DataFormatError, UnknownNameError


def _positive_int(value: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value!r}")
    return number


EXAMPLES = """examples:
  lifelong run                                   the demo: the bundled sample, order i, MiniLM
  lifelong run --strategy mbpa++ --order ii      another strategy and paper order
  lifelong run --save-model                      keep the model; lifelong predict DIR --text T
  lifelong run --stream fewrel --encoder tiny    lifelong FewRel (tiny: plumbing checks only)
  lifelong sweep experiments/smoke.yaml          a grid, resumable; then: lifelong report runs/smoke
  lifelong report results/real_budget/text       the committed real-data table
  lifelong strategies | lifelong encoders        what --strategy and --encoder accept

`lifelong COMMAND --help` describes each command and its flags."""


COMMAND_EXAMPLES = {
    "run": """examples:
  lifelong run                                        the demo (bundled sample, order i, MiniLM)
  lifelong run --strategy mbpa++ -o adapt_scope=head  a strategy and one of its options
  lifelong run --config my_run.yaml --lr 3e-5         a YAML config, a flag on top
  lifelong run --stream qa --order ii                 the QA sample in paper order ii
  lifelong run --config experiments/text_classification/real_budget.yaml \
      --strategy mbpa++ --order ii                    one cell of the real-data table
  lifelong run --resume runs/DIR                      continue a killed run""",
    "sweep": """examples:
  lifelong sweep experiments/smoke.yaml --jobs 2
  lifelong sweep experiments/text_classification/real_budget.yaml \\
      --data-dir ../shared/data/text_real --strategies replay,mbpa++ --seeds 0""",
    "report": """examples:
  lifelong report runs/smoke                              tables and plots of a sweep
  lifelong report results/real_budget/text --compare replay,seq
  lifelong report results/real_budget/fewrel --claims fewrel""",
    "strategies": """example:
  lifelong strategies        name and one line per registered strategy (plug-ins included)""",
    "encoders": """example:
  lifelong encoders          name, family, memory kind and one line per encoder""",
    "predict": """examples:
  lifelong predict runs/DIR --text "Stocks fell as oil rose"   a run kept with --save-model
  lifelong predict runs/DIR --file texts.txt                    one text a line""",
    "lm": """examples:
  lifelong lm --modules transformer,transformer-xl --steps 200
  lifelong lm --modules memformer --segments 4 --segment-length 64""",
}
"""Each command's ``--help`` examples (checked to parse by the tests)."""


def version() -> str:
    """The installed package's version (the source tree's when it is not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("lifelong")
    except PackageNotFoundError:
        from lifelong import __version__

        return __version__


class Parser(argparse.ArgumentParser):
    """argparse, with "did you mean" on a mistyped choice (an order, a stream, a command)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(
                action,
                f"invalid choice: {value!r}{did_you_mean(value, action.choices)} "
                f"(choose from {choices})",
            )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``lifelong`` command."""
    parser = Parser(
        prog="lifelong",
        description="Continual learning for NLP with episodic memory: run a strategy on a task\n"
        "stream, sweep a grid, report forgetting and transfer, train memory LMs.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lifelong {version()}")
    parser.add_argument(
        "--online",
        action="store_true",
        help="let the command reach the Hugging Face hub (models, datasets); without it, or "
        f"{ONLINE_VARIABLE}=1, commands run offline, so a mistyped name fails in seconds",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="train a strategy on a task stream and print the accuracy matrix and metrics",
        description="With no arguments, runs the embedded demo: the bundled sample of the five "
        "text-classification datasets in order i with the offline MiniLM encoder.",
        epilog=COMMAND_EXAMPLES["run"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--config",
        type=given_text,
        help=f"YAML run config (default: the demo, {DEMO_CONFIG.name}); a sweep file gives "
        "one cell of its grid: the run block with the per_strategy changes of --strategy, "
        "--order, --seed (each default: the grid's first)",
    )
    run.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="strategy option, repeatable (e.g. -o replay_every=100; `lifelong strategies`)",
    )
    run.add_argument(
        "--resume",
        type=given_text,
        metavar="RUN_DIR",
        help="continue a killed or interrupted run from its directory (no other run flags but "
        f"{', '.join('--' + k.replace('_', '-') for k in RESUME_FLAGS)})",
    )
    run.add_argument(
        "--runs",
        type=_positive_int,
        default=1,
        help="FewRel: average over N shuffled cluster orders (cluster_order 0..N-1)",
    )
    add_config_flags(run)

    sweep = sub.add_parser(
        "sweep",
        help="run a grid of strategies x orders x seeds, skipping finished runs",
        description="Runs every grid point of a sweep file (see lifelong.sweep); finished runs "
        "are skipped and interrupted ones resumed, so the command can simply be run again.",
        epilog=COMMAND_EXAMPLES["sweep"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("config", type=given_text, help="sweep YAML (e.g. experiments/smoke.yaml)")
    sweep.add_argument(
        "--strategies", type=given_text, help="comma-separated strategies (replaces the file's)"
    )
    sweep.add_argument(
        "--orders", type=given_text, help="comma-separated task orders (replaces the file's)"
    )
    sweep.add_argument(
        "--seeds", type=given_text, help="comma-separated seeds (replaces the file's)"
    )
    sweep.add_argument("--backend", choices=["local", "ray"], default="local")
    sweep.add_argument("--jobs", type=int, default=1, help="concurrent runs (local backend)")
    sweep.add_argument(
        "--address", type=given_text, help="Ray cluster address (default: start a local Ray)"
    )
    sweep.add_argument("--output-dir", type=given_text, help="replace the sweep's output_dir")
    sweep.add_argument(
        "--data-dir",
        type=given_text,
        help="replace the runs' data_dir (e.g. ../shared/data/text_real); per_strategy keys "
        "still apply on top",
    )
    sweep.add_argument(
        "--gpus-per-run",
        type=float,
        help="GPUs per run, fractions share a GPU: ray requests them per task (default: 1 where "
        "runs may use CUDA and the cluster has GPUs, else 0); the local pool gives each worker "
        "its own (default: worker w sees GPU w mod the GPU count)",
    )

    report = sub.add_parser(
        "report",
        help="forgetting/transfer tables (Markdown, LaTeX, CSV) and plots from run directories",
        epilog=COMMAND_EXAMPLES["report"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_report_arguments(report)

    sub.add_parser(
        "strategies",
        help="list registered strategies",
        epilog=COMMAND_EXAMPLES["strategies"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_parser(
        "encoders",
        help="list the built-in encoders: name, family, memory kind, one line each",
        epilog=COMMAND_EXAMPLES["encoders"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    predict = sub.add_parser(
        "predict",
        help="label texts with a model a run kept (--save-model), its test-time behaviour included",
        epilog=COMMAND_EXAMPLES["predict"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    predict.add_argument("model", type=given_text, help="the run directory (or its model/)")
    predict.add_argument(
        "--text", action="append", default=[], type=given_text, help="a text (repeatable)"
    )
    predict.add_argument("--file", type=given_text, help="a UTF-8 file of texts, one a line")
    predict.add_argument("--device", default="cpu", help="where to predict (default: cpu)")
    from lifelong.lm.flags import add_arguments as add_lm_arguments

    lm = sub.add_parser(
        "lm",
        help="train memory modules as character LMs on real text; one row per module",
        description="Trains each module with the same budget on a UTF-8 text (default: Tiny "
        "Shakespeare, nanoGPT's split and CPU recipe) and prints validation bits per "
        "character, parameters, tokens/s, training memory and datastore size.",
        epilog=COMMAND_EXAMPLES["lm"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_lm_arguments(lm)
    return parser


RESUME_FLAGS = ("device", "precision", "compile", "checkpoint_every", "progress", *LOCATION_FLAGS)
"""Config keys a ``--resume`` may set: where and how fast it computes, bookkeeping, places."""


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per config key, generated from its section's field (`config_keys`).

    Name, type, choices and help come from the field (its annotation and its class's
    docstring); the default shown is the demo config's where it sets the key, else the
    field's. Every flag defaults to None ("not given"), so a flag overrides its key only when
    given. Values are converted and checked as YAML values are (`RunConfig.replace`).
    """
    demo = flatten(read_yaml(DEMO_CONFIG))
    groups: dict[str, argparse._ArgumentGroup] = {}
    for key in config_keys().values():
        if typing.get_origin(_without_none(key.hint)) is Mapping:  # options: -o KEY=VALUE
            continue
        if key.section not in groups:
            groups[key.section] = parser.add_argument_group(f"{key.section} (config section)")
        flag = "--" + key.flag.replace("_", "-")
        groups[key.section].add_argument(flag, dest=key.name, default=None, **_flag_kind(key, demo))


def _flag_kind(key: Key, demo: Mapping[str, Any]) -> dict[str, Any]:
    """Argparse's action, type, choices and help for ``key``'s flag."""
    base = _without_none(key.hint)
    default = demo.get(key.name, key.default)
    shown = "" if default in (None, (), []) else f" (default: {_shown(default)})"
    text = _plain_text(key.doc) + (
        f" Only the {' and '.join(key.streams)} stream(s)." if key.streams else ""
    )
    out: dict[str, Any] = {"help": (text + shown).replace("%", "%%")}
    if base is bool:
        out["action"] = argparse.BooleanOptionalAction
    elif typing.get_origin(base) is tuple:  # names: comma-separated (or a repeatable flag)
        element = _without_none(typing.get_args(base)[0])
        if key.metadata.get("repeatable"):
            out["action"] = "append"
            out["help"] += " Repeatable."
        else:
            out["metavar"] = "A,B,..."
        if key.metadata.get("repeatable") and typing.get_origin(element) is Literal:
            out["choices"] = [str(c) for c in typing.get_args(element)]
        else:
            out["type"] = given_text
    elif typing.get_origin(base) is Literal:
        out["choices"] = [str(c) for c in typing.get_args(base)]
    else:
        out["type"] = given_text
        out["metavar"] = key.name.upper()
    return out


def _without_none(hint: Any) -> Any:
    """``hint`` without ``| None`` and ``Annotated`` (what its flag parses)."""
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _without_none(args[0])
    return hint


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _plain_text(doc: str) -> str:
    """A docstring description as plain text (no reST quoting)."""
    return doc.replace("``", "").replace("`", "")


def is_sweep_file(values: Any) -> bool:
    """Whether a YAML mapping is a sweep file (a ``run:`` block and ``strategies:``)."""
    return isinstance(values, Mapping) and "run" in values and "strategies" in values


def _base_config(args: argparse.Namespace) -> RunConfig:
    """``--config``'s run config (default: the demo); a sweep file gives one grid point.

    From a sweep file (``experiments/text_classification/real_budget.yaml``): its run block,
    the strategy, order and seed given as flags (default: the grid's first), and that
    strategy's ``per_strategy`` changes (`Sweep.point_config`): one cell of the sweep's table.
    """
    if args.config is None:
        return load_yaml(DEMO_CONFIG)
    values = read_yaml(args.config)  # read once: a run config or a sweep file
    if not is_sweep_file(values):
        return config_from_yaml(values, args.config)
    from lifelong.experiment.sweep import sweep_from_dict

    sweep = sweep_from_dict(values, where=args.config)
    order = getattr(args, sweep.base.order_key, None)
    return sweep.point_config(args.strategy, None if order is None else str(order), args.seed)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The run config: the YAML (or the demo) with every given flag applied on top.

    Raises:
        ConfigError: A flag only other streams read (`Key.streams`), or a tracker's flag
            without that tracker (`Key.metadata` ``logger``), even at its default value: it
            would change nothing, so it is a mistake.

    """
    config = _base_config(args)
    keys = config_keys()
    changes: dict[str, Any] = {}
    for key in keys.values():
        value = getattr(args, key.name, None)
        if isinstance(value, list):  # a repeatable flag's values
            value = [name.strip() for v in value for name in v.split(",") if name.strip()]
        if value is not None:
            changes[key.name] = value
    loggers = changes.get("loggers", config.tracking.loggers)
    stream = changes.get("stream", config.stream.name)
    for name in changes:
        key, flag = keys[name], "--" + keys[name].flag.replace("_", "-")
        logger = key.metadata.get("logger")
        if logger and logger not in loggers:
            raise ConfigError(
                f"{flag}: read by the {logger} tracker only; add --logger "
                f"{logger} (this run's trackers: {', '.join(loggers) or 'none'})"
            )
        if key.streams and stream not in key.streams:
            raise ConfigError(
                f"{flag}: read by the {' and '.join(key.streams)} stream(s) "
                f"only; this run's stream is {stream!r}"
            )
    if args.option:
        strategy = changes.get("strategy", config.strategy.name)
        options = {**config.options_for(strategy), **_parse_options(args.option)}
        changes["strategy_options"] = {**config.to_dict()["strategy_options"], strategy: options}
    return config.replace("command line", **changes) if changes else config


def _parse_options(pairs: Sequence[str]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {pair!r}: expected KEY=VALUE")
        options[key.strip()] = value.strip()
    return options


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``lifelong report`` arguments to ``parser``."""
    parser.add_argument(
        "runs",
        nargs="*",
        type=given_text,
        default=["runs"],
        help="run directories, or folders searched for them at any depth (default: runs)",
    )
    parser.add_argument(
        "--out",
        type=given_text,
        help="where report.md/.tex/.csv and plots/ go (default: <first runs path>/report)",
    )
    parser.add_argument(
        "--format",
        choices=("markdown", "latex", "csv"),
        default="markdown",
        help="the table printed to stdout (default: markdown)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    either = parser.add_mutually_exclusive_group()  # one question at a time
    either.add_argument(
        "--compare",
        type=given_text,
        metavar="A,B",
        help="print strategy A minus B on each stream, paired by (order, seed), with its 95%% "
        "confidence interval and whether it excludes zero (writes no files)",
    )
    either.add_argument(
        "--claims",
        choices=("text", "fewrel"),
        help="judge every ordering the papers claim on this stream (e.g. REPLAY > SEQ): holds, "
        "reversed or not resolved by the paired 95%% interval (writes no files)",
    )
    parser.add_argument(
        "--metric",
        type=given_text,
        default=None,
        help="the metric --compare and --claims compare (a metrics.json key; default: each "
        "stream's own, pooled_accuracy on fewrel, average_accuracy elsewhere)",
    )
    parser.add_argument(
        "--method",
        choices=("t", "bootstrap"),
        default="t",
        help="--compare's interval: Student's t on the paired differences (default) or a "
        "percentile bootstrap of their mean",
    )


def cmd_report(args: argparse.Namespace) -> int:
    """``lifelong report`` (see `lifelong.experiment.reports.command`)."""
    from lifelong.experiment.reports import command

    return command(args)


def cmd_run(args: argparse.Namespace) -> int:
    """``lifelong run``: run, then print the matrix and the metrics table."""
    from lifelong.experiment.runs import resume, run

    if args.resume is not None:
        # a checkpoint resumes anywhere, and its interval may change; the places it writes
        # to are the command's to confirm (lifelong.experiment.trust.check_locations)
        given = [
            "--" + key.flag.replace("_", "-")
            for key in config_keys().values()
            if getattr(args, key.name, None) is not None and key.name not in RESUME_FLAGS
        ]
        if given or args.config or args.option:
            raise ConfigError(
                f"--resume continues a run with its own config.yaml; drop {given or '--config/-o'}"
            )
        outcome = resume(
            args.resume,
            progress=args.progress,
            device=args.device,
            precision=args.precision,
            compile=args.compile,
            checkpoint_every=args.checkpoint_every,
            **{key: getattr(args, key) for key in LOCATION_FLAGS},
        )
    else:
        config = config_from_args(args)
        if args.runs != 1:
            return _run_cluster_orders(config, args.runs)
        outcome = run(config)
    print(outcome.summary())
    print(f"\nrun directory: {outcome.run_dir}")
    return 0


def _run_cluster_orders(config: RunConfig, n: int) -> int:
    """``--runs N`` on FewRel: one run per cluster order 0..N-1, then the mean over them."""
    import numpy as np

    from lifelong.experiment.runs import run

    spec = config.stream
    if not isinstance(getattr(spec, spec.order_key), int):  # named paper orders, not seeds
        raise ConfigError(
            f"--runs {n} averages numbered task orders (FewRel's cluster orders); it needs "
            f"--stream fewrel (this run's stream is {config.stream.name!r}, whose orders are "
            "named: `lifelong sweep` runs them)"
        )
    scores = []
    for order in range(n):
        outcome = run(config.replace(**{spec.order_key: order}))
        print(f"\n== cluster order {order} ({outcome.run_dir})")
        print(outcome.summary())
        scores.append(outcome.metrics["average_accuracy"])
    print(
        f"\naverage accuracy over {n} cluster orders: {np.mean(scores):.1f} ± "
        f"{np.std(scores, ddof=1) if n > 1 else 0.0:.1f} ({', '.join(f'{s:.1f}' for s in scores)})"
    )
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """``lifelong sweep``: run the grid, print one line per run.

    Exit status: 0 when every point finished (or had), 1 when one failed, else 4 when one
    was busy (held by another process).
    """
    from lifelong.experiment.sweep import load_sweep, parse_seeds, run_sweep

    sweep = load_sweep(args.config)
    if args.output_dir:
        sweep = dataclasses.replace(sweep, base=sweep.base.replace(output_dir=args.output_dir))
    if args.data_dir:
        sweep = sweep.with_run(data_dir=args.data_dir)
    seeds = parse_seeds(args.seeds) if args.seeds is not None else []
    sweep = sweep.with_grid(_split(args.strategies), _split(args.orders), seeds)

    def show(result: Any) -> None:
        detail = result.error or ""
        if result.metrics:
            detail = f"average accuracy {result.metrics['average_accuracy']:.1f}"
        print(f"{result.status:<9} {result.run_dir}  {detail}", flush=True)

    results = run_sweep(
        sweep,
        backend=args.backend,
        jobs=args.jobs,
        address=args.address,
        on_result=show,
        gpus_per_run=args.gpus_per_run,
    )
    statuses = ("finished", "skipped", "busy", "failed")
    counts = {s: sum(r.status == s for r in results) for s in statuses}
    shown = [f"{n} {s}" for s, n in counts.items() if n or s != "busy"]  # busy: when any
    print(f"\nsweep {sweep.name}: " + ", ".join(shown))
    print(f"runs in {sweep.root}; `lifelong report {sweep.root}` makes the tables")
    if counts["busy"]:
        print("busy points are being run by another process: run the sweep again after it")
    if counts["failed"]:
        return EXIT_FAILED
    return EXIT_BUSY if counts["busy"] else EXIT_OK


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []


def cmd_strategies(args: argparse.Namespace) -> int:
    """``lifelong strategies``: every registered strategy with its one-line description."""
    described = registry.describe()
    width = max(len(n) for n in described)
    for name, text in described.items():
        print(f"{name:<{width}}  {text}")
    print("\navalanche:* run Avalanche's templates; they need the avalanche extra")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    """``lifelong predict``: one ``label<TAB>text`` line per text."""
    texts = list(args.text)
    if args.file is not None:
        path = Path(args.file)
        if not path.is_file():
            raise ConfigError(f"--file {args.file}: no such file")
        texts += [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not texts:
        raise ConfigError("give texts to label: --text TEXT (repeatable) or --file FILE")
    from lifelong.experiment.saved import load_model

    model = load_model(args.model, device=args.device)
    for label, text in zip(model.predict(texts), texts, strict=True):
        print(f"{label}\t{text}")
    return 0


def cmd_lm(args: argparse.Namespace) -> int:
    """``lifelong lm``: the language-modelling bench (`lifelong.lm.bench`)."""
    from lifelong.lm.bench import command

    return command(args)


def cmd_encoders(args: argparse.Namespace) -> int:
    """``lifelong encoders``: every encoder in the table (any Hugging Face name also works)."""
    from lifelong.encoders.names import encoder_entry, installed_encoders

    rows = [("name", "family", "memory", "what")]
    for name in installed_encoders():
        entry = encoder_entry(name)
        rows.append((name, entry.paper, entry.memory, entry.description))  # type: ignore[union-attr]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[3]
        )
    print("\nAlso any Hugging Face model name or local directory (--encoder bert-base-uncased).")
    return 0


class _ConsoleFormatter(logging.Formatter):
    """One line per record: tracebacks belong in the run's log.txt, not on the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname} {record.name}: {record.getMessage()}"


def _console_logging() -> logging.Handler:
    # Progress and results go to the terminal at INFO; the run's log.txt also gets DEBUG lines
    # and tracebacks. Records marked console=False (a failed run's error, which the command
    # prints itself) stay out of the terminal.
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO)
    handler.setFormatter(_ConsoleFormatter())
    handler.addFilter(lambda record: getattr(record, "console", True))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    return handler


EXIT_OK = 0
EXIT_FAILED = 1  # a run failed while running (the error's line here, its traceback in log.txt)
EXIT_USAGE = 2  # refused: a bad option, config, path or data file; an OS error outside a run
EXIT_DIVERGED = 3  # training diverged (nan/inf); the run is marked failed, its checkpoint kept
EXIT_BUSY = 4  # another live process holds the run directory (or a sweep point's)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): the run stays resumable

INPUT_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    OptionsError,
    DataFormatError,
    UnknownNameError,
    registry.UnknownStrategyError,
    EncoderError,
    RunIndexError,
    KeyError,
    ValueError,
)
"""What the command reports as bad input (exit 2): one line naming the key, file or row."""


ONLINE_VARIABLE = "LIFELONG_ONLINE"
"""Set to 1, the same as ``lifelong --online``."""

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
"""What the Hugging Face libraries read to stay offline (set unless the command is online)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lifelong`` command (exit codes: the ``EXIT_*`` constants).

    Commands run offline unless ``--online`` (or ``LIFELONG_ONLINE=1``): the Hugging Face
    libraries' offline variables are set for the command's span (and its worker processes),
    so a name that is neither built in, local nor cached fails at once instead of after the
    hub's retries; a variable the user set is kept.
    """
    handler = _console_logging()
    try:
        args = build_parser().parse_args(
            attach_signed_values(sys.argv[1:] if argv is None else argv)
        )
        with _offline_unless(args.online or os.environ.get(ONLINE_VARIABLE) == "1"):
            return _dispatch(args)
    finally:
        logging.getLogger().removeHandler(handler)


@contextlib.contextmanager
def _offline_unless(online: bool) -> Iterator[None]:
    """The Hugging Face offline variables set (where unset) for the block, unless ``online``."""
    added = [] if online else [v for v in OFFLINE_VARIABLES if v not in os.environ]
    os.environ.update(dict.fromkeys(added, "1"))
    try:
        yield
    finally:
        for variable in added:
            os.environ.pop(variable, None)


def attach_signed_values(argv: Sequence[str]) -> list[str]:
    """``--lr -inf`` as ``--lr=-inf``: a value that starts with ``-`` and reads as a number.

    argparse takes ``-1`` and ``-0.5`` as values but ``-inf``, ``-nan`` and ``-1e-5`` as
    unknown flags; joined to its flag, such a value reaches the flag's own check, which names
    the key and what it allows.
    """
    out: list[str] = []
    for token in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and _signed_number(token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def _signed_number(token: str) -> bool:
    if not token.startswith("-") or token.startswith("--"):
        return False
    try:
        float(token)
    except ValueError:
        return False
    return True


def _dispatch(args: argparse.Namespace) -> int:
    from lifelong.experiment.lock import RunLockedError
    from lifelong.learner import DivergenceError

    commands = {
        "run": cmd_run,
        "sweep": cmd_sweep,
        "report": cmd_report,
        "strategies": cmd_strategies,
        "encoders": cmd_encoders,
        "predict": cmd_predict,
        "lm": cmd_lm,
    }
    prefix = f"lifelong {args.command}"
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print(f"\n{prefix}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RunLockedError as err:
        print(f"{prefix}: error: {err}", file=sys.stderr)
        return EXIT_BUSY
    except DivergenceError as err:
        print(f"{prefix}: error: {err}{_log_hint(err)}", file=sys.stderr)
        return EXIT_DIVERGED
    except INPUT_ERRORS as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"{prefix}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:  # the file system or the environment: one line naming the path
        where = f"{err.filename}: " if err.filename else ""
        print(f"{prefix}: error: {where}{err.strerror or err}{_log_hint(err)}", file=sys.stderr)
        return EXIT_FAILED if getattr(err, "run_dir", None) is not None else EXIT_USAGE
    except Exception as err:
        if getattr(err, "run_dir", None) is None:
            raise  # not in a run: a bug, whose traceback is the report
        print(f"{prefix}: error: {type(err).__name__}: {err}{_log_hint(err)}", file=sys.stderr)
        return EXIT_FAILED


def _log_hint(err: BaseException) -> str:
    run_dir = getattr(err, "run_dir", None)
    return f" (run marked failed; details in {run_dir}/log.txt)" if run_dir is not None else ""


if __name__ == "__main__":
    sys.exit(main())
