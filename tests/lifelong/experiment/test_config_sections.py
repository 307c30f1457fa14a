"""The run config by section: each section typed and checked by its owner; flat keys still load."""

import dataclasses

import pytest
import yaml

from lifelong.encoders.names import EncoderOptions
from lifelong.experiment.config import (
    ConfigError,
    RunConfig,
    Sections,
    flatten,
    from_dict,
    load_run_config,
    load_yaml,
    section_keys,
)
from lifelong.experiment.trackers import TrackingOptions
from lifelong.registry import StrategyChoice
from lifelong.streams import FewRelSpec, TextSpec
from lifelong.tasks.settings import TaskSettings
from lifelong.training import TrainingOptions

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


def test_every_flat_key_belongs_to_exactly_one_section():
    owners = {}
    for section, fields in section_keys().items():
        for key in fields.values():
            assert key not in owners, f"{key} in {owners.get(key)} and {section}"
            owners[key] = section
    assert set(owners) == {f.name for f in dataclasses.fields(RunConfig)}


def test_a_sectioned_config_is_the_flat_config_it_names(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(SECTIONED))
    assert load_yaml(path) == from_dict(FLAT)
    assert flatten(SECTIONED) == FLAT


def test_each_component_receives_its_section_typed_by_its_owner():
    parts = from_dict(SECTIONED).sections()
    assert isinstance(parts, Sections)
    assert parts.stream == TextSpec(order="ii", train_size=40)
    assert parts.task == TaskSettings(max_length=64)
    assert parts.encoder == EncoderOptions(name="tiny")
    assert parts.strategy == StrategyChoice("replay", {"replay": {"replay_every": 80}})
    assert parts.training == TrainingOptions(lr=1e-4, batch_size=8, seed=3)
    assert parts.tracking == TrackingOptions(loggers=("csv",), output_dir="out")
    fewrel = from_dict({"stream": {"name": "fewrel", "cluster_order": 2}}).sections().stream
    assert fewrel == FewRelSpec(cluster_order=2)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"training": {"lr": 1e-4, "order": "i"}}, "unknown key 'training.order'; the training"),
        ({"training": 0.1}, "section 'training' must be a mapping"),
        ({"lr": 1e-4, "training": {"lr": 1e-3}}, "key 'training.lr' is given twice"),
        ({"encoder": {"name": "tiny", "lr": 1}}, "unknown key 'encoder.lr'"),
        ({"training": {"lr": "fast"}}, "key 'lr'"),
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
    path.write_text(yaml.safe_dump(RunConfig(encoder="tiny", lr=1e-4).to_dict()))
    assert load_run_config(path) == RunConfig(encoder="tiny", lr=1e-4)


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
