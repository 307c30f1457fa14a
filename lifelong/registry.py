"""The strategy registry, fed by the entry-point group ``lifelong.strategies``.

Built-in strategies register exactly like third-party ones: a package declares

    [project.entry-points."lifelong.strategies"]
    my-strategy = "my_package.module:MyStrategy"

and ``lifelong run --strategy my-strategy`` finds it. `register` adds one in-process (notebooks,
tests) without packaging.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from lifelong.strategy import NoOptions, Strategy, StrategyContext, parse_options

GROUP = "lifelong.strategies"

_registered: dict[str, type] = {}


class UnknownStrategyError(KeyError):
    """No strategy is registered under a name."""

    def __str__(self) -> str:
        return str(self.args[0])


def register(name: str, cls: type) -> None:
    """Register a strategy class under ``name`` for this process."""
    _registered[name] = cls


def names() -> list[str]:
    """Every registered strategy name, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)} | set(_registered))


def get(name: str) -> type:
    """The strategy class registered under ``name``.

    Raises:
        UnknownStrategyError: Nothing is registered under ``name`` (lists what is).

    """
    if name in _registered:
        return _registered[name]
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            return ep.load()
    raise UnknownStrategyError(
        f"unknown strategy {name!r}; registered strategies: {', '.join(names())}"
    )


def describe() -> dict[str, str]:
    """Name -> one-line description of every registered strategy."""
    return {n: getattr(get(n), "description", "") for n in names()}


def options_class(name: str) -> type:
    """The options dataclass of a strategy (`NoOptions` if it declares none)."""
    return getattr(get(name), "Options", NoOptions)


def build(
    name: str, context: StrategyContext, options: Mapping[str, Any] | None = None
) -> Strategy:
    """Construct the strategy registered under ``name`` with validated options."""
    cls = get(name)
    opts = parse_options(options_class(name), options or {}, owner=f"strategy {name!r}")
    return cls(context, opts)
