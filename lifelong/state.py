"""A strategy's resumable state, built from its parts' own ``state_dict``s.

    self.resumable = ResumableParts(trainer=self.trainer, replay=self.replay, rng=self.rng,
                                    counts=self.counts)

`StrategyHooks.state_dict` and ``load_state_dict`` (the defaults every strategy inherits) save
and restore ``self.resumable``: the parts' states, each under its name.

A part is anything with ``state_dict`` / ``load_state_dict`` (modules, optimisers, replay,
memory writers, `Counters`) or a NumPy generator (its bit-generator state).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Counters:
    """Named integer counters with a ``state_dict`` (e.g. ``Counters(projections=0)``)."""

    def __init__(self, **values: int) -> None:
        self.__dict__.update(values)

    def state_dict(self) -> dict[str, int]:
        """The counters' values."""
        return dict(self.__dict__)

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore the counters (unknown names are an error)."""
        unknown = set(state) - set(self.__dict__)
        if unknown:
            raise KeyError(f"no counters named {sorted(unknown)} (have {sorted(self.__dict__)})")
        self.__dict__.update({k: int(v) for k, v in state.items()})

    def __repr__(self) -> str:
        return f"Counters({', '.join(f'{k}={v}' for k, v in self.__dict__.items())})"


class ResumableParts:
    """The named parts of a strategy that a checkpoint saves and a resume restores, together.

    Args:
        **parts: Objects with ``state_dict`` / ``load_state_dict``, or NumPy generators.

    """

    def __init__(self, **parts: Any) -> None:
        for name, part in parts.items():
            if not isinstance(part, np.random.Generator) and not hasattr(part, "state_dict"):
                raise TypeError(f"part {name!r} ({type(part).__name__}) has no state_dict")
        self.parts = parts

    def state_dict(self) -> dict[str, Any]:
        """Each part's state under its name."""
        return {name: _state(part) for name, part in self.parts.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore every part from what `state_dict` returned.

        Raises:
            KeyError: A part is missing from ``state`` (named).

        """
        missing = set(self.parts) - set(state)
        if missing:
            raise KeyError(f"strategy state lacks {sorted(missing)}")
        for name, part in self.parts.items():
            if isinstance(part, np.random.Generator):
                part.bit_generator.state = state[name]
            else:
                part.load_state_dict(state[name])


def _state(part: Any) -> Any:
    if isinstance(part, np.random.Generator):
        return part.bit_generator.state
    return part.state_dict()
