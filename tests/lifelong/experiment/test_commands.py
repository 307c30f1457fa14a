"""The command line helps a newcomer: every command listed, a version, examples, and a mistyped
name answered with the name meant (issue 64: commands)."""

import os
import re

import pytest

from lifelong import registry
from lifelong.encoders.names import EncoderError, check_encoder_name
from lifelong.experiment.cli import build_parser, main
from lifelong.experiment.config import ConfigError, from_dict
from lifelong.options import OptionsError, did_you_mean
from lifelong.streams import UnknownNameError, text_classification_stream


def test_help_lists_every_command_with_examples_and_no_markup(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    commands = build_parser()._subparsers._group_actions[0].choices
    assert set(commands) == {"run", "sweep", "report", "strategies", "encoders", "predict", "lm"}
    for name in commands:
        assert re.search(rf"^    {name}\b", text, re.M), name
    assert "examples:" in text and "lifelong run --strategy mbpa++" in text
    assert "``" not in text and "lazy" not in text


def test_version(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert re.fullmatch(r"lifelong \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


def test_did_you_mean_names_the_closest_choice_or_nothing():
    assert did_you_mean("replya", ["replay", "seq"]) == " (did you mean 'replay'?)"
    assert did_you_mean("zzz", ["replay", "seq"]) == ""


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"training": {"max_length": 64}}, "it belongs in the task section: task.max_length"),
        ({"stream": {"name": "text", "lr": 1e-4}}, "it belongs in the training section"),
        ({"trainning": {"lr": 1e-4}}, "unknown key 'trainning' (did you mean 'training'?)"),
        ({"training": {"lrr": 1e-4}}, "unknown key 'training.lrr' (did you mean 'lr'?)"),
        ({"stream": {"order": "iii2"}}, "'iii2' is not allowed (did you mean 'iii'?)"),
        ({"encoder": {"pooling": "pooled"}}, "(did you mean 'pooler'?)"),
    ],
)
def test_a_misplaced_or_mistyped_config_key_is_named_with_its_place(values, said):
    with pytest.raises(ConfigError) as caught:
        from_dict(values)
    assert said in str(caught.value)


def test_mistyped_names_are_answered_with_the_name_meant(monkeypatch):
    with pytest.raises(registry.UnknownStrategyError, match=r"\(did you mean 'replay'\?\)"):
        registry.get("replya")
    with pytest.raises(OptionsError, match=r"\(did you mean 'replay_every'\?\)"):
        registry.parse("mbpa++", {"replay_evry": 3})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EncoderError, match=r"\(did you mean 'memformer'\?\)"):
        check_encoder_name("memformr")
    with pytest.raises(UnknownNameError, match=r"\(did you mean 'ag_news'\?\)"):
        text_classification_stream("i", tasks=("ag_new",))


def test_commands_run_offline_unless_asked_so_a_mistyped_name_fails_at_once(
    tmp_path, monkeypatch, capsys
):
    from lifelong.experiment import cli

    for variable in (*cli.OFFLINE_VARIABLES, cli.ONLINE_VARIABLE):
        monkeypatch.delenv(variable, raising=False)
    argv = ["run", "--encoder", "bert-nope", "--output-dir", str(tmp_path / "runs")]
    assert main(argv) == 2
    assert "--online to download" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
    assert not any(v in os.environ for v in cli.OFFLINE_VARIABLES)  # restored
    with cli._offline_unless(online=False):
        assert all(os.environ[v] == "1" for v in cli.OFFLINE_VARIABLES)
    with cli._offline_unless(online=True):
        assert not any(v in os.environ for v in cli.OFFLINE_VARIABLES)


def example_commands(text: str) -> list[list[str]]:
    """The commands of an examples epilog (a description follows two spaces; ``\\`` joins)."""
    import shlex

    joined = text.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines() if line.strip().startswith("lifelong ")]
    return [shlex.split(re.split(r"\s{2,}", line)[0]) for line in lines]


def test_every_command_has_examples_that_parse():
    from lifelong.experiment.cli import COMMAND_EXAMPLES, EXAMPLES

    commands = build_parser()._subparsers._group_actions[0].choices
    assert set(COMMAND_EXAMPLES) == set(commands)
    for name, parser in commands.items():
        assert parser.epilog == COMMAND_EXAMPLES[name]
    for text in (EXAMPLES, *COMMAND_EXAMPLES.values()):
        for words in example_commands(text):
            if "|" in words:  # two commands on one line
                continue
            build_parser().parse_args(words[1:])  # SystemExit on a flag that does not exist


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["run", "--order", "iiv"], "'iiv' (did you mean 'iv'?)"),
        (["rn"], "'rn' (did you mean 'run'?)"),
        (["run", "--stream", "fewrl"], "'fewrl' (did you mean 'fewrel'?)"),
        (
            ["lm", "--modules", "transformer-xll"],
            "'transformer-xll' (did you mean 'transformer-xl'?)",
        ),
    ],
)
def test_a_mistyped_choice_or_lm_module_says_did_you_mean(words, said, capsys):
    """Friction 10: orders, streams, commands and LM modules named no close choice."""
    try:
        code = main(words)
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    assert code == 2
    assert said in capsys.readouterr().err
