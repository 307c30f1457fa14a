from dataclasses import dataclass

import pytest

from lifelong.strategy import OptionsError, parse_options


@dataclass(frozen=True)
class Opts:
    steps: int = 3
    rate: float = 0.1
    fast: bool = False
    scope: str = "all"
    cap: int | None = None


def test_strings_are_converted_by_type():
    opts = parse_options(Opts, {"steps": "5", "rate": "1e-3", "fast": "true", "cap": "none"})
    assert opts == Opts(steps=5, rate=1e-3, fast=True, cap=None)
    assert parse_options(Opts, {"cap": "7"}).cap == 7


def test_unknown_key_names_it_and_the_valid_ones():
    with pytest.raises(OptionsError, match=r"unknown option 'step'; valid options: cap, fast"):
        parse_options(Opts, {"step": 1}, owner="strategy 'x'")


def test_bad_values_are_errors():
    with pytest.raises(OptionsError, match="option 'steps': expected int"):
        parse_options(Opts, {"steps": "many"})
    with pytest.raises(OptionsError, match="expected true/false"):
        parse_options(Opts, {"fast": "maybe"})
    with pytest.raises(OptionsError, match="expected an integer"):
        parse_options(Opts, {"steps": 2.5})
