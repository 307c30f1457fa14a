import subprocess
import sys
from dataclasses import dataclass

import pytest

from lifelong import registry
from lifelong.experiment.cli import main
from lifelong.options import OptionsError, parse_options
from lifelong.strategies.mbpa_plus_plus import MbPAPlusPlusOptions


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
    with pytest.raises(
        OptionsError, match=r"unknown option 'step' \(did you mean 'steps'\?\); valid options: cap"
    ):
        parse_options(Opts, {"step": 1}, owner="strategy 'x'")


def test_bad_values_are_errors():
    with pytest.raises(OptionsError, match="option 'steps': expected int"):
        parse_options(Opts, {"steps": "many"})
    with pytest.raises(OptionsError, match="expected true/false"):
        parse_options(Opts, {"fast": "maybe"})
    with pytest.raises(OptionsError, match="expected an integer"):
        parse_options(Opts, {"steps": 2.5})


# --- options checked where they enter ---------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"adapt_scope": "bogus"},
            r"option 'adapt_scope': 'bogus' is not allowed; "
            r"expected one of all, head, lora, top<N>",
        ),
        (
            {"write_prob": 7},
            r"option 'write_prob': 7.0 is not allowed; expected a value in \[0, 1\]",
        ),
        ({"replay_every": -5}, r"option 'replay_every': -5 is not allowed; expected a value >= 1"),
        ({"k": "0"}, r"option 'k': 0 is not allowed; expected a value >= 1"),
        (
            {"retrieval": "far"},
            r"option 'retrieval': 'far' is not allowed; expected one of nearest",
        ),
        ({"adapt_scope": "top0"}, r"option 'adapt_scope': 'top0' is not allowed"),
    ],
)
def test_parse_options_rejects_values_naming_the_key(values, message):
    with pytest.raises(OptionsError, match=message):
        parse_options(MbPAPlusPlusOptions, values, owner="strategy 'mbpa++'")
    with pytest.raises(OptionsError, match=message):  # the Python API, alike
        MbPAPlusPlusOptions(
            **{k: type(getattr(MbPAPlusPlusOptions(), k))(v) for k, v in values.items()}
        )


def test_every_strategys_options_reject_a_bad_value_at_parse_time():
    checks = {"adapt_scope": "bogus", "meta_scope": "bogus", "project": "sometimes"}
    for name in registry.available():
        fields = set(registry.options_class(name).__dataclass_fields__)
        for key, bad in checks.items():
            if key in fields:
                with pytest.raises(OptionsError, match=key):
                    registry.parse(name, {key: bad})
        for key in fields & {"write_prob", "write_rate"}:
            with pytest.raises(OptionsError, match=key):
                registry.parse(name, {key: 7})


def test_a_bad_option_fails_before_anything_loads(tmp_path, monkeypatch, capsys):
    """``lifelong run -o adapt_scope=bogus``: no encoder, tokenizer or data is touched."""
    import lifelong.encoders.factory
    import lifelong.encoders.hf
    import lifelong.streams.text_classification

    def must_not_load(*args, **kwargs):
        raise AssertionError("loaded before the options were checked")

    for module, name in (
        (lifelong.encoders.factory, "load_run_encoder"),
        (lifelong.encoders.hf, "load_encoder"),
        (lifelong.encoders.hf, "load_tokenizer"),
        (lifelong.streams.text_classification.TextSpec, "build"),
    ):
        monkeypatch.setattr(module, name, must_not_load)
    out = tmp_path / "runs"
    code = main(
        ["run", "--strategy", "mbpa++", "-o", "adapt_scope=bogus", "--output-dir", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "option 'adapt_scope': 'bogus' is not allowed" in err
    assert not out.exists()  # no run directory either


def test_a_bad_encoder_is_one_clear_line_offline(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lifelong.experiment.cli",
            "run",
            "--encoder",
            "bert-nope",
            "--output-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": ""},
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "encoder 'bert-nope'" in lines[0] and "minilm, tiny" in lines[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity", float("inf"), float("nan")])
def test_non_finite_floats_are_refused_where_they_enter(value):
    """Failure 3: ``inf`` passed every check and crashed mid-run (OverflowError)."""
    with pytest.raises(OptionsError, match="option 'rate': .* expected a finite number"):
        parse_options(Opts, {"rate": value})
    with pytest.raises(OptionsError, match="option 'replay_ratio': .*finite"):
        MbPAPlusPlusOptions(replay_ratio=float("inf"))  # built from Python: checked the same


@pytest.mark.parametrize(
    "args, key",
    [
        (["--lr", "inf"], "'lr'"),
        (["--lr", "1e400"], "'lr'"),
        (["-o", "replay_ratio=inf", "-o", "replay_every=16"], "'replay_ratio'"),
        (["--strategy", "mbpa++", "-o", "adapt_lr=inf"], "'adapt_lr'"),
    ],
)
def test_non_finite_flags_are_refused_before_the_run(args, key, tmp_path, capsys):
    code = main(["run", "--encoder", "tiny", "--output-dir", str(tmp_path), *args])
    assert code == 2
    err = capsys.readouterr().err
    assert key in err and "finite" in err and not list(tmp_path.iterdir())


def test_yaml_infinity_is_refused(tmp_path):
    from lifelong.experiment.config import ConfigError, load_yaml

    path = tmp_path / "run.yaml"
    path.write_text("lr: .inf\n")
    with pytest.raises(ConfigError, match=r"run.yaml: key 'lr': inf .*finite"):
        load_yaml(path)
    path.write_text("strategy_options:\n  replay:\n    replay_ratio: .nan\n")
    with pytest.raises(ConfigError, match="replay_ratio"):
        from lifelong.experiment.config import preflight

        preflight(load_yaml(path))
