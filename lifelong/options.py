r"""Typed options, checked where they enter: one parser for the CLI, YAML and the Python API.

Options are frozen dataclasses whose field types say what is allowed:

* ``Literal["a", "b"]`` — one of these values;
* ``Annotated[int, Range(min=1)]`` (or the aliases `PositiveInt`, `NonNegativeInt`,
  `PositiveFloat`, `NonNegativeFloat`, `Probability`) — a number in a range;
* ``Annotated[str, Pattern(r"top\\d+", "top<N>")]`` — a string matching a pattern, optionally
  besides ``Literal`` values (``Annotated[str, Choice("all", "head", pattern=...)]``);
* plain ``int``, ``float``, ``bool``, ``str`` and ``X | None``.

Every ``float`` is finite: ``nan``, ``inf`` and ``-inf`` (``-o lr=inf``, YAML ``.inf``) are
refused where they enter, like any value outside its range. No option means "unbounded" by
infinity; where one means "none", it says so with 0 or ``None``.

`option_group` turns a class into such a dataclass and checks every field when an instance is
built, so ``MbPAOptions(adapt_scope="bogus")`` fails exactly like ``-o adapt_scope=bogus`` or a
YAML value: with an `OptionsError` naming the key, the value and what is allowed. Groups compose
by inheritance of their fields only (``class MbPAPlusPlusOptions(ReplayOptions,
AdaptationOptions)``): each group declares its fields once and the checks need no chaining.
`parse_options` converts strings (from ``-o KEY=VALUE``) by type and rejects unknown keys.

This module is light (standard library only): option checks run before any model or data loads.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar


class OptionsError(ValueError):
    """An option is unknown or has a value that is not allowed."""


def given_text(value: str) -> str:
    """An argparse type: a flag's value that is not empty.

    ``--resume ''`` or ``--output-dir ''`` is a mistake (an unset shell variable), not the
    flag's default: refused, with how to get the default.

    Raises:
        argparse.ArgumentTypeError: ``value`` is empty or blank.

    """
    import argparse

    if not value.strip():
        raise argparse.ArgumentTypeError(
            "expected a value, got an empty string (leave the flag out for its default)"
        )
    return value


def did_you_mean(given: object, choices: Iterable[object]) -> str:
    """``" (did you mean 'x'?)"`` for the choice closest to a mistyped ``given``, else ``""``.

    What every "unknown name" error appends: a config key, a strategy option or name, an
    encoder, an order, a dataset (difflib's ratio of at least 0.6, as its default).
    """
    import difflib

    names = [str(c) for c in choices]
    close = difflib.get_close_matches(str(given), names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Range:
    """A number between ``min`` and ``max`` (inclusive unless ``*_open``)."""

    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False

    def check(self, value: float) -> str | None:
        """A description of what is allowed if ``value`` is outside the range, else None."""
        low_ok = self.min is None or (value > self.min if self.min_open else value >= self.min)
        high_ok = self.max is None or (value < self.max if self.max_open else value <= self.max)
        return None if low_ok and high_ok else f"expected a value {self.describe()}"

    def describe(self) -> str:
        """The range in words, e.g. ``in [0, 1]`` or ``>= 1``."""
        if self.min is not None and self.max is not None:
            left = "(" if self.min_open else "["
            right = ")" if self.max_open else "]"
            return f"in {left}{_num(self.min)}, {_num(self.max)}{right}"
        if self.min is not None:
            return f"{'>' if self.min_open else '>='} {_num(self.min)}"
        return f"{'<' if self.max_open else '<='} {_num(self.max)}"


@dataclass(frozen=True)
class Choice:
    """A string among ``values`` or matching ``pattern`` (described as ``pattern_name``)."""

    values: tuple[str, ...] = ()
    pattern: str | None = None
    pattern_name: str = ""

    def __init__(self, *values: str, pattern: str | None = None, pattern_name: str = "") -> None:
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "pattern_name", pattern_name or (pattern or ""))

    def check(self, value: str) -> str | None:
        """A description of what is allowed if ``value`` is not, else None."""
        if value in self.values or (self.pattern and re.fullmatch(self.pattern, value)):
            return None
        allowed = [*self.values, *([self.pattern_name] if self.pattern else [])]
        return f"expected one of {', '.join(allowed)}"


@dataclass(frozen=True)
class StandsFor:
    """Field metadata: an option whose ``sentinel`` value means "what the run's ``key`` is".

    E.g. OML-ER's ``outer_lr`` of 0 means the run's learning rate: ``StandsFor("lr", 0.0)``.
    Reports that name a run's configuration (`lifelong.experiment.rundir.distinguish_variants`)
    read the value it ran with from ``key``, a key of `lifelong.experiment.config.RunConfig`, so
    a run left at the sentinel is not labelled by it (``outer_lr=0.0`` would read as zero).
    """

    key: str
    sentinel: Any = None


def stands_for(cls: type) -> dict[str, StandsFor]:
    """The fields of an options class that carry `StandsFor`, by name."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {
        name: marker
        for name, hint in hints.items()
        for marker in _metadata(hint)
        if isinstance(marker, StandsFor)
    }


def _metadata(hint: Any) -> list[Any]:
    """Every ``Annotated`` metadata item in ``hint``, inside unions too."""
    found = list(typing.get_args(hint)[1:]) if typing.get_origin(hint) is Annotated else []
    inner = typing.get_args(hint)[:1] if found else typing.get_args(hint)
    return found + [m for arg in inner for m in _metadata(arg)]


PositiveInt = Annotated[int, Range(min=1)]
NonNegativeInt = Annotated[int, Range(min=0)]
SEED_MAX = 2**32 - 1
"""The largest seed NumPy's and torch's generators take (an unsigned 32-bit integer)."""
Seed = Annotated[int, Range(min=0, max=SEED_MAX)]
"""A seed: an integer in [0, 2**32 - 1], what every generator a run seeds accepts."""
PositiveFloat = Annotated[float, Range(min=0, min_open=True)]
NonNegativeFloat = Annotated[float, Range(min=0)]
Probability = Annotated[float, Range(0, 1)]

T = TypeVar("T")


NOT_A_KEY: Mapping[str, Any] = types.MappingProxyType({"key": False})
"""Field metadata: a field of a config section that is not a config key (set by the code)."""


def field_docs(cls: type) -> dict[str, str]:
    """Each field's description from the Google-style ``Attributes:`` sections of ``cls``.

    A field's type, default and description are declared once, on its class: the type and
    default in the annotation, the description in the docstring. The command line's help text
    is read from here. Base classes are read first; a subclass may redescribe a field.

    Returns:
        Field name -> its description on one line (fields without one are absent).

    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        docs.update(_attributes(klass.__dict__.get("__doc__") or ""))
    return docs


def _attributes(docstring: str) -> dict[str, str]:
    """The ``name: text`` entries of a docstring's ``Attributes:`` section, joined per entry."""
    out: dict[str, str] = {}
    lines = docstring.expandtabs().splitlines()
    inside, indent, name = False, 0, ""
    for line in lines:
        stripped = line.strip()
        if stripped == "Attributes:":
            inside, indent, name = True, -1, ""
            continue
        if not inside:
            continue
        if not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        if indent < 0:
            indent = depth
        if depth < indent or (depth == indent and stripped.endswith(":") and " " not in stripped):
            inside = False  # the next section (``Raises:``) or the docstring's text again
            continue
        entry = re.match(r"(\w+)(?: \(.*?\))?: (.*)", stripped) if depth == indent else None
        if entry:
            name = entry.group(1)
            out[name] = entry.group(2)
        elif name:
            out[name] += " " + stripped
    return out


def option_group(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen dataclass whose fields are checked on construction.

    A ``check(self)`` method on the class, if any, runs after the field checks for rules that
    involve several fields; it raises `OptionsError`.
    """

    def __post_init__(self: Any) -> None:  # noqa: N807 (the dataclass hook's own name)
        check_fields(self, owner=type(self).__name__)
        for klass in reversed(type(self).__mro__):  # every group's own cross-field rule
            rule = klass.__dict__.get("check")
            if callable(rule):
                rule(self)

    cls.__post_init__ = __post_init__  # type: ignore[attr-defined]  # before dataclass() sees it
    cls = dataclass(frozen=True)(cls)
    return cls


def check_fields(instance: Any, *, owner: str = "") -> None:
    """Check every field of a dataclass instance against its type (see the module docstring).

    Raises:
        OptionsError: A value of the wrong type or outside what its field allows.

    """
    hints = typing.get_type_hints(type(instance), include_extras=True)
    for field in dataclasses.fields(instance):
        value = getattr(instance, field.name)
        _check(
            value, hints[field.name], f"{owner or type(instance).__name__}: option {field.name!r}"
        )


def parse_options(cls: type[T], values: Mapping[str, Any], *, owner: str = "") -> T:
    """Build an options dataclass from a mapping, converting strings (from the CLI) by type.

    Args:
        cls: The options dataclass.
        values: Option names to values (strings are converted to the field's type).
        owner: Who the options are for, used in error messages (e.g. ``"strategy 'replay'"``).

    Raises:
        OptionsError: An unknown key (naming it and the valid keys), an unconvertible value,
            or a value the field does not allow (naming the key, the value and what is).

    """
    where = owner or cls.__name__
    if not isinstance(values, Mapping):
        raise OptionsError(f"{where}: expected a mapping of options, got {type(values).__name__}")
    fields = {f.name for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls, include_extras=True)
    kwargs = {}
    for key, value in values.items():
        if key not in fields:
            raise OptionsError(
                f"{where}: unknown option {key!r}{did_you_mean(key, fields)}; valid options: "
                f"{', '.join(sorted(fields)) or '(none)'}"
            )
        kwargs[key] = convert(value, hints[key], f"{where}: option {key!r}")
    try:
        return cls(**kwargs)
    except OptionsError as err:
        raise OptionsError(f"{where}: {_strip_owner(str(err), cls)}") from None


def convert(value: Any, hint: Any, where: str) -> Any:
    """Convert ``value`` (possibly a string) to the type ``hint`` and check it.

    Raises:
        OptionsError: The value cannot be converted or is not allowed (message starts with
            ``where``).

    """
    base, constraints = _unwrap(hint)
    origin = typing.get_origin(base)
    args = typing.get_args(base)
    if origin in (typing.Union, types.UnionType):
        if _is_none(value) and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                out = convert(value, arg, where)
                _apply(out, constraints, where)
                return out
            except OptionsError as err:
                errors.append(str(err))
        raise OptionsError(errors[0] if errors else f"{where}: cannot use {value!r}")
    if origin is Literal:
        choices = args
        for choice in choices:
            if value == choice or (isinstance(value, str) and str(choice) == value):
                return choice
        raise OptionsError(
            f"{where}: {value!r} is not allowed{did_you_mean(value, choices)}; expected one of "
            f"{', '.join(str(c) for c in choices)}"
        )
    out = _scalar(value, base, where)
    _apply(out, constraints, where)
    return out


def _scalar(value: Any, hint: Any, where: str) -> Any:
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
            return value.lower() in ("true", "1", "yes")
        raise OptionsError(f"{where}: expected true/false, got {value!r}")
    if hint is str and not isinstance(value, str):  # not None -> "None", 7 -> "7"
        raise OptionsError(f"{where}: expected a string, got {value!r}")
    if hint in (int, float, str):
        if hint is int and isinstance(value, float) and not value.is_integer():
            raise OptionsError(f"{where}: expected an integer, got {value!r}")
        if hint in (int, float) and isinstance(value, bool):
            raise OptionsError(f"{where}: expected {hint.__name__}, got {value!r}")
        try:
            out = hint(value)
        except (TypeError, ValueError, OverflowError):
            raise OptionsError(f"{where}: expected {hint.__name__}, got {value!r}") from None
        if hint is float:
            _require_finite(out, where)
        return out
    return value


def _require_finite(value: float, where: str) -> None:
    if not math.isfinite(value):
        raise OptionsError(f"{where}: {value!r} is not allowed; expected a finite number")


def _check(value: Any, hint: Any, where: str) -> None:
    """Check an already-typed value (dataclass construction from Python)."""
    base, constraints = _unwrap(hint)
    origin = typing.get_origin(base)
    args = typing.get_args(base)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                _check(value, arg, where)
                _apply(value, constraints, where)
                return
            except OptionsError as err:
                errors.append(str(err))
        raise OptionsError(errors[0] if errors else f"{where}: {value!r} is not allowed")
    if origin is Literal:
        if value not in args:
            raise OptionsError(
                f"{where}: {value!r} is not allowed; expected one of "
                f"{', '.join(str(c) for c in args)}"
            )
        return
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if base in (int, float, str, bool) and not _is_instance(value, base):
        raise OptionsError(f"{where}: expected {base.__name__}, got {value!r}")
    if base is float:
        _require_finite(value, where)
    _apply(value, constraints, where)


def _is_instance(value: Any, base: type) -> bool:
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if base is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, base)


def _apply(value: Any, constraints: tuple[Any, ...], where: str) -> None:
    for constraint in constraints:
        check: Callable[[Any], str | None] | None = getattr(constraint, "check", None)
        if check is None or value is None:
            continue
        problem = check(value)
        if problem:
            raise OptionsError(f"{where}: {value!r} is not allowed; {problem}")


def _unwrap(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(hint) is Annotated:
        base, *constraints = typing.get_args(hint)
        return base, tuple(constraints)
    return hint, ()


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.lower() in ("none", "null"))


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _strip_owner(message: str, cls: type) -> str:
    prefix = f"{cls.__name__}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


@option_group
class NoOptions:
    """A strategy without options."""
