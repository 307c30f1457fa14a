"""The run config is its sections: each key declared once, by its owner; flat keys still load."""

import ast
import dataclasses
import inspect
import logging
import typing
from pathlib import Path

import pytest
import yaml

from lifelong.encoders.names import EncoderOptions
from lifelong.experiment import cli
from lifelong.experiment.config import (
    FLAT_KEYS,
    SECTION_NAMES,
    SECTIONS,
    ConfigError,
    RunConfig,
    config_keys,
    flat_keys_in,
    flatten,
    from_dict,
    load_run_config,
    load_yaml,
    read_yaml,
)
from lifelong.options import OptionsError
from lifelong.streams.registry import STREAMS

ROOT = Path(__file__).resolve().parents[3]

SECTIONED = {
    "stream": {"name": "text", "order": "ii", "train_size": 40},
    "task": {"max_length": 64},
    "encoder": {"name": "tiny"},
    "strategy": {"name": "replay", "options": {"replay": {"replay_every": 80}}},
    "training": {"lr": 1e-4, "batch_size": 8, "seed": 3},
    "tracking": {"loggers": ["csv"], "output_dir": "out"},
}
FLAT = {
    "stream": "text",
    "order": "ii",
    "train_size": 40,
    "max_length": 64,
    "encoder": "tiny",
    "strategy": "replay",
    "strategy_options": {"replay": {"replay_every": 80}},
    "lr": 1e-4,
    "batch_size": 8,
    "seed": 3,
    "loggers": ["csv"],
    "output_dir": "out",
}


def section_fields() -> list[tuple[str, str]]:
    """(section, field) of every config key, read from the owners' classes directly."""
    out = [("stream", "name")]
    for spec in STREAMS.values():
        out += [("stream", f.name) for f in dataclasses.fields(spec)]
    for section, cls in SECTIONS.items():
        out += [(section, f.name) for f in dataclasses.fields(cls) if f.name != "token_types"]
    return sorted(set(out))


def test_the_config_holds_its_sections_only():
    assert tuple(f.name for f in dataclasses.fields(RunConfig)) == SECTION_NAMES
    assert sorted((k.section, k.field) for k in config_keys().values()) == section_fields()
    assert len(FLAT_KEYS) == len(section_fields()) == 43  # one flat alias per field, no more


def test_every_run_flag_maps_to_exactly_one_section_field():
    parser = cli.build_parser()
    run = next(
        a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith(" run")
    )
    own = {"help", "config", "option", "resume", "runs"}  # the command's, not config keys
    dests = [a.dest for a in run._actions if a.dest not in own]
    assert sorted(dests) == sorted(k for k in FLAT_KEYS if k != "strategy_options")
    fields = [FLAT_KEYS[d] for d in dests]
    assert len(fields) == len(set(fields))  # one flag each
    for action in run._actions:
        if action.dest in own:
            continue
        key = config_keys()[action.dest]
        assert action.default is None  # given or not: the config's value otherwise
        assert key.doc and key.doc.split(".")[0].replace("``", "")[:20] in action.help.replace(
            "%%", "%"
        ), action.dest
        base = cli._without_none(key.hint)
        if typing.get_origin(base) is typing.Literal:
            assert action.choices == [str(c) for c in typing.get_args(base)]


def test_the_parser_names_no_config_key_itself():
    """``lifelong run`` adds four flags of its own; every other comes from add_config_flags."""
    literal = set()
    for node in ast.walk(ast.parse(inspect.getsource(cli))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            receiver = getattr(node.func.value, "id", "")
            if receiver in ("run", "parser", "groups"):
                literal |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    assert "--config" in literal
    run_flags = {f"--{k.flag.replace('_', '-')}" for k in config_keys().values()}
    assert not literal & run_flags  # (the sweep's --output-dir / --data-dir are its own)
    assert not any(f'"{key}"' in inspect.getsource(cli.add_config_flags) for key in FLAT_KEYS)


def test_help_shows_each_default_the_demo_config_sets(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--lr LR Learning rate of the main optimiser. (default: 0.0001)" in text  # the demo's
    assert "--strategy STRATEGY" in text and "(default: replay)" in text
    assert "Only the qa stream(s). (default: 32)" in text  # doc_stride, the demo's 32


def test_a_sectioned_config_is_the_flat_config_it_names(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(SECTIONED))
    flat = tmp_path / "flat.yaml"
    flat.write_text(yaml.safe_dump(FLAT))
    assert load_yaml(path) == load_yaml(flat) == from_dict(FLAT) == from_dict(SECTIONED)
    assert flatten(SECTIONED) == FLAT


def test_a_flat_file_loads_with_one_line_naming_each_key_s_new_place(tmp_path, caplog):
    flat = tmp_path / "flat.yaml"
    flat.write_text(yaml.safe_dump({"lr": 1e-4, "encoder": "tiny", "training": {"seed": 2}}))
    with caplog.at_level(logging.WARNING):
        config = load_yaml(flat)
    assert config.training.lr == 1e-4 and config.training.seed == 2
    (line,) = caplog.messages
    places = "encoder -> encoder.name, lr -> training.lr"
    assert line == f"{flat}: flat keys still load but belong in sections: {places}"


def test_every_yaml_under_experiments_and_the_bundled_configs_is_sectioned():
    files = sorted((ROOT / "experiments").rglob("*.yaml"))
    files += sorted((ROOT / "lifelong").rglob("*.yaml"))
    assert len(files) >= 10
    for path in files:
        values = read_yaml(path)
        runs = (
            [values["run"], *(values.get("per_strategy") or {}).values()]
            if "run" in values
            else [values]
        )
        for run in runs:
            assert flat_keys_in(run) == [], path


def test_python_builds_a_config_from_sections_names_or_mappings():
    config = RunConfig(stream="qa", encoder="tiny", training={"lr": 1e-3}, task={"doc_stride": 32})
    assert config == from_dict({"stream": "qa", "encoder": "tiny", "lr": 1e-3, "doc_stride": 32})
    assert config.stream.name == "qa" and config.encoder == EncoderOptions(name="tiny")
    with pytest.raises(OptionsError, match="key 'lr'"):
        RunConfig(training={"lr": -1})
    with pytest.raises(OptionsError, match="key 'cluster_order': read by the fewrel"):
        RunConfig(stream={"name": "text", "cluster_order": 3})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"training": {"lr": 1e-4, "order": "i"}},
            r"unknown key 'training.order' \(it belongs in the stream section: stream.order\)",
        ),
        ({"training": 0.1}, "section 'training' must be a mapping"),
        ({"lr": 1e-4, "training": {"lr": 1e-3}}, "key 'training.lr' is given twice"),
        ({"encoder": {"name": "tiny", "lr": 1}}, "unknown key 'encoder.lr'"),
        ({"training": {"lr": "fast"}}, "key 'lr'"),
        ({"stream": {"name": ["text"]}}, r"key 'stream': \['text'\] is not allowed"),  # fuzz
    ],
)
def test_a_key_in_the_wrong_section_or_twice_is_named(values, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(values)


def test_a_run_directory_holds_its_config_by_section_and_reloads_it(tmp_path):
    config = from_dict({**FLAT, "stream": "fewrel", "order": "i", "cluster_order": 4})
    sections = config.to_sections()
    assert set(sections) == {"stream", "task", "encoder", "strategy", "training", "tracking"}
    assert sections["stream"]["name"] == "fewrel" and "order" not in sections["stream"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(sections))
    assert load_run_config(path) == config


def test_an_old_flat_run_config_still_resumes(tmp_path):
    path = tmp_path / "config.yaml"
    old = {**RunConfig(encoder="tiny", training={"lr": 1e-4}).to_dict(), "cluster_order": 0}
    path.write_text(yaml.safe_dump(old))  # flat, with every stream's keys, as runs kept them
    assert load_run_config(path) == RunConfig(encoder="tiny", training={"lr": 1e-4})


def test_only_the_run_functions_take_the_whole_config():
    """Issue 31: builders used to take the whole RunConfig (the walk of run:config climbed
    back up 21 times); each now takes its section, and only run/preflight open the config."""
    import inspect

    from lifelong.experiment import config as config_module
    from lifelong.experiment import runs

    builders = [
        runs.build_model,
        runs.name_embedder,
        runs.run_encoder,
        runs.cached_kind,
        config_module.runtime_of,
        config_module.check_lengths,
        config_module.check_sources,
        config_module.check_tracking,
        config_module.check_outputs,
        config_module.check_memory_index,
        config_module.strategy_options,
    ]
    for builder in builders:
        annotations = [str(p.annotation) for p in inspect.signature(builder).parameters.values()]
        assert not any("RunConfig" in a for a in annotations), builder.__name__
    assert "RunConfig" in str(inspect.signature(runs.run).parameters["config"].annotation)
