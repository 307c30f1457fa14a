"""Generated inputs for the configuration readers: YAML run configs and ``-o KEY=VALUE``.

A value the reader accepts must arrive as given (converted by its type, finite if a float);
anything else must raise the project's own error naming the file and line, or the key.
"""

import dataclasses
import math
import tempfile
import typing
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lifelong import registry
from lifelong.experiment.config import ConfigError, config_keys, load_yaml
from lifelong.options import OptionsError

settings.load_profile("lifelong-fuzz")

FIELDS = config_keys()  # every key by its flat name (the old dialect still loads)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 600),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from(
        [
            "",
            "auto",
            "inf",
            "-inf",
            "nan",
            "1e-3",
            "7",
            "tiny",
            "seq",
            "replay",
            "cpu",
            "i",
            "ag_news",
            "ag_news,yelp",
            "fp32",
            "text",
            "fewrel",
            "true",
            "none",
            "csv",
            "Flat",
        ]
    ),  # fmt: skip
    st.text(max_size=6),
)
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=3))
KEY = st.one_of(st.sampled_from(sorted(set(FIELDS) - {"strategy_options"})), st.text(max_size=6))


def same(given, kept) -> bool:
    """Whether an accepted config value is what was given (up to the documented conversions)."""
    if given is None or (isinstance(given, str) and given.lower() in ("none", "null")):
        return kept is None or kept == () or kept == given
    if isinstance(kept, tuple):
        names = (
            [g.strip() for g in given.split(",") if g.strip()] if isinstance(given, str) else given
        )
        return list(kept) == list(names)
    if isinstance(kept, bool):
        return kept == given if isinstance(given, bool) else str(given).lower() in (
            ("true", "1", "yes") if kept else ("false", "0", "no"))  # fmt: skip
    if isinstance(kept, int | float):
        return not isinstance(given, bool) and math.isfinite(kept) and float(given) == kept
    return str(given) == str(kept)


# one folder per module for every generated file, removed when the session ends
SCRATCH = tempfile.TemporaryDirectory(prefix="lifelong-fuzz-")


def scratch_yaml(text: str) -> Path:
    path = Path(tempfile.mkdtemp(dir=SCRATCH.name)) / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@settings(max_examples=800)
@given(
    values=st.dictionaries(KEY, VALUE, max_size=4),
    twice=st.one_of(st.none(), st.sampled_from(sorted(FIELDS))),
    cut=st.one_of(st.none(), st.integers(0, 200)),
)
def test_yaml_run_config(values, twice, cut, tried):
    tried("yaml config")
    text = yaml.safe_dump(values, allow_unicode=True) if values else ""
    if twice is not None:  # the same key twice: YAML keeps the last, we refuse
        text += f"{twice}: 1\n{twice}: 2\n"
    if cut is not None:
        text = text[:cut]
    path = scratch_yaml(text)
    try:
        config = load_yaml(path)
    except ConfigError as err:
        message = str(err)
        assert message.startswith(str(path)) and "\n" not in message, message
        if twice is not None and cut is None:
            assert "given twice" in message or any(f"'{k}'" in message for k in values), message
        return
    parsed = yaml.safe_load(text)
    assert parsed is not None and (twice is None or cut is not None), "accepted wrongly"
    flat = config.to_dict()
    for key, value in parsed.items():
        kept = flat.get(key, FIELDS[key].default)  # absent: another stream's, at its default
        kept = tuple(kept) if isinstance(kept, list) else kept
        assert same(value, kept), (key, value, kept)
    for key, kept in flat.items():
        assert not isinstance(kept, float) or math.isfinite(kept), key


STRATEGIES = registry.available()


def option_fields(strategy):
    cls = registry.options_class(strategy)
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


@settings(max_examples=800)
@given(
    strategy=st.sampled_from(STRATEGIES),
    data=st.data(),
    value=st.one_of(
        st.sampled_from(
            [
                "0",
                "1",
                "-1",
                "0.5",
                "1e400",
                "inf",
                "-inf",
                "nan",
                "NaN",
                "true",
                "none",
                "all",
                "head",
                "top2",
                "lora",
                "1_0",
                "",
                " 3 ",
                "2.0",
            ]
        ),
        st.text(max_size=5),
    ),  # fmt: skip
)
def test_dash_o_options(strategy, data, value, tried):
    tried("-o options")
    fields = option_fields(strategy)
    key = data.draw(st.one_of(st.sampled_from(sorted(fields) or ["x"]), st.text(max_size=5)))
    try:
        options = registry.parse(strategy, {key: value})
    except OptionsError as err:
        assert f"strategy {strategy!r}: " in str(err) and repr(key) in str(err), str(err)
        return
    kept = getattr(options, key)
    assert key in fields
    if isinstance(kept, float):
        assert math.isfinite(kept) and kept == float(value)
    elif isinstance(kept, bool):
        assert value.strip().lower() in ("true", "1", "yes", "false", "0", "no")
    elif isinstance(kept, int):
        assert kept == int(float(value))
    elif kept is None:
        assert value.lower() in ("none", "null")
    else:
        assert str(kept) == value
