"""The strategy registry, fed by the entry-point group ``lifelong.strategies``.

Built-in strategies register exactly like third-party ones: a package declares

    [project.entry-points."lifelong.strategies"]
    my-strategy = "my_package.module:MyStrategy"

and ``lifelong run --strategy my-strategy`` finds it. `register` adds one in-process (notebooks,
tests) without packaging. Avalanche's strategies (`lifelong.integrations.avalanche`, extra
``avalanche``) are registered the same way, as ``avalanche:NAME``; a strategy that needs an
extra says so in its ``check_available``, which `parse` calls before anything loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from lifelong.options import NoOptions, OptionsError, did_you_mean, parse_options

if TYPE_CHECKING:
    from lifelong.strategy import Strategy, StrategyContext

GROUP = "lifelong.strategies"

_registered: dict[str, type] = {}


class UnknownStrategyError(ValueError):
    """No strategy is registered under a name."""


def register(name: str, cls: type) -> None:
    """Register a strategy class under ``name`` for this process."""
    _registered[name] = cls


def names() -> list[str]:
    """Every registered strategy name, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)} | set(_registered))


def available() -> list[str]:
    """The registered strategies that can run here (their ``check_available`` passes), sorted.

    Avalanche's, for one, are registered everywhere but run only where its extra imports.
    """
    out = []
    for name in names():
        try:
            get(name).check_available()
        except ValueError:
            continue
        out.append(name)
    return out


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
        f"unknown strategy {name!r}{did_you_mean(name, names())}; registered strategies: "
        f"{', '.join(names())}"
    )


def describe() -> dict[str, str]:
    """Name -> one-line description of every registered strategy."""
    return {n: getattr(get(n), "description", "") for n in names()}


def options_class(name: str) -> type:
    """The options dataclass of a strategy (`NoOptions` if it declares none)."""
    return getattr(get(name), "Options", NoOptions)


def parse(name: str, options: Mapping[str, Any] | None = None) -> Any:
    """The options of strategy ``name``, parsed and checked (once, before anything loads).

    Raises:
        UnknownStrategyError: Nothing is registered under ``name``.
        OptionsError: An unknown option or a value its field does not allow (named).

    """
    cls = checked(name)
    options_cls = getattr(cls, "Options", NoOptions)
    return parse_options(options_cls, options or {}, owner=f"strategy {name!r}")


def checked(name: str) -> type:
    """The class registered under ``name``, with its hooks and availability checked.

    What `parse` and `build` check before anything loads.

    Raises:
        UnknownStrategyError: Nothing is registered under ``name``.
        IncompleteStrategyError: The class lacks hooks the learner calls (named).
        ValueError: The strategy cannot run here (its ``check_available``: a missing extra).

    """
    from lifelong.strategy import require_hooks

    cls = get(name)
    require_hooks(cls, f"strategy {name!r} ({cls.__module__}.{cls.__qualname__})")
    cls.check_available()
    return cls


def build(name: str, context: StrategyContext, options: Any = None) -> Strategy:
    """Construct the strategy registered under ``name``.

    Args:
        name: A registered strategy name.
        context: What the strategy is built from.
        options: Its options: an instance of its ``Options`` class (already parsed: see
            `parse`), a mapping of option values (parsed here), or ``None`` for the defaults.

    """
    cls = checked(name)
    options_cls = getattr(cls, "Options", NoOptions)
    if not isinstance(options, options_cls):
        if options is not None and not isinstance(options, Mapping):
            raise OptionsError(
                f"strategy {name!r}: options must be a {options_cls.__name__} or a mapping, "
                f"got {type(options).__name__}"
            )
        options = parse_options(options_cls, options or {}, owner=f"strategy {name!r}")
    return cls(context, options)


@dataclass(frozen=True)
class StrategyChoice:
    """A run's ``strategy:`` section: the strategy's name and options per strategy name.

    Attributes:
        name: A registered strategy name (`names`).
        options: Option values per strategy name, e.g. ``{"replay": {"replay_every": 100}}``;
            only ``name``'s entry is used, but every entry is checked against its strategy.

    """

    name: str = "seq"
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def options_for(self, name: str | None = None) -> dict[str, Any]:
        """The option values given for ``name`` (default: the chosen strategy)."""
        return dict(self.options.get(name or self.name, {}))

    def parse(self) -> Any:
        """The chosen strategy's options, parsed and checked; every other entry is checked too.

        Raises:
            UnknownStrategyError: An unknown strategy.
            OptionsError: An unknown option or a value not allowed; for another strategy's
                entry the message starts ``strategy_options:``.

        """
        chosen = parse(self.name, self.options_for())
        for name in sorted(set(self.options) - {self.name}):
            try:
                parse(name, self.options_for(name))
            except (OptionsError, UnknownStrategyError) as err:
                raise type(err)(f"strategy_options: {err}") from None
        return chosen
