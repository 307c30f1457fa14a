"""The ``lifelong`` command line: ``lifelong run`` and ``lifelong strategies``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from lifelong import registry
from lifelong.config import DEMO_CONFIG, ConfigError, RunConfig, load_yaml
from lifelong.strategy import OptionsError
from streams.text_classification import DATASETS, ORDERS, DataFormatError

# Flag -> config key, for the flags that override a config value one to one.
RUN_FLAGS = {
    "strategy": "strategy",
    "order": "order",
    "tasks": "tasks",
    "data_dir": "data_dir",
    "train_size": "train_size",
    "test_size": "test_size",
    "encoder": "encoder",
    "max_length": "max_length",
    "batch_size": "batch_size",
    "lr": "lr",
    "seed": "seed",
    "output_dir": "output_dir",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``lifelong`` command."""
    parser = argparse.ArgumentParser(prog="lifelong", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="train a strategy on a task stream and print the accuracy matrix and metrics",
        description="With no arguments, runs the embedded demo: the bundled sample of the five "
        "text-classification datasets in order i with the offline MiniLM encoder.",
    )
    run.add_argument("--config", help=f"YAML run config (default: the demo, {DEMO_CONFIG.name})")
    run.add_argument("--strategy", help="registered strategy name (see `lifelong strategies`)")
    run.add_argument("--order", choices=sorted(ORDERS), help="paper task order")
    run.add_argument("--tasks", help=f"comma-separated datasets in order, from {sorted(DATASETS)}")
    run.add_argument("--data-dir", help="directory of the real CSVs (default: bundled sample)")
    run.add_argument(
        "--train-size",
        type=int,
        help="train examples per dataset (default: 115000 with --data-dir, else all)",
    )
    run.add_argument(
        "--test-size",
        type=int,
        help="test examples per dataset (default: 7600 with --data-dir, else all)",
    )
    run.add_argument("--encoder", help="'minilm' (offline), 'tiny' (random) or a HF name/path")
    run.add_argument("--max-length", type=int, help="tokens per input")
    run.add_argument("--batch-size", type=int, help="training mini-batch size")
    run.add_argument("--lr", type=float, help="learning rate")
    run.add_argument("--seed", type=int, help="random seed")
    run.add_argument("--output-dir", help="where run directories go (default: runs)")
    run.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="strategy option, repeatable (e.g. -o replay_every=100)",
    )
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")

    sub.add_parser("strategies", help="list registered strategies")
    return parser


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The run config: the YAML (or the demo) with every given flag applied on top."""
    config = load_yaml(args.config or DEMO_CONFIG)
    changes: dict[str, Any] = {
        key: getattr(args, flag)
        for flag, key in RUN_FLAGS.items()
        if getattr(args, flag) is not None
    }
    if args.no_progress:
        changes["progress"] = False
    if args.option:
        strategy = changes.get("strategy", config.strategy)
        options = {**config.options_for(strategy), **_parse_options(args.option)}
        changes["strategy_options"] = {**config.to_dict()["strategy_options"], strategy: options}
    return config.replace(**changes) if changes else config


def _parse_options(pairs: Sequence[str]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {pair!r}: expected KEY=VALUE")
        options[key.strip()] = value.strip()
    return options


def cmd_run(args: argparse.Namespace) -> int:
    """``lifelong run``: run, then print the matrix and the metrics table."""
    from lifelong.runs import format_report, run

    config = config_from_args(args)
    outcome = run(config)
    print(format_report(outcome.result, outcome.metrics))
    print(f"\nrun directory: {outcome.run_dir}")
    return 0


def cmd_strategies(args: argparse.Namespace) -> int:
    """``lifelong strategies``: every registered strategy with its one-line description."""
    described = registry.describe()
    width = max(len(n) for n in described)
    for name, text in described.items():
        print(f"{name:<{width}}  {text}")
    return 0


def _console_logging() -> None:
    # Progress and results go to the terminal at INFO; the run's log.txt also gets DEBUG lines.
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lifelong`` command."""
    _console_logging()
    args = build_parser().parse_args(argv)
    commands = {"run": cmd_run, "strategies": cmd_strategies}
    try:
        return commands[args.command](args)
    except (
        ConfigError,
        OptionsError,
        DataFormatError,
        registry.UnknownStrategyError,
        KeyError,
        ValueError,
    ) as err:
        print(f"lifelong {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
