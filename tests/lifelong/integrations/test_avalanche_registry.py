"""`--strategy avalanche:NAME` where Avalanche is missing: a clear error before anything loads.

Runs in every environment (``make test`` too); the Avalanche runs themselves are in
``test_avalanche.py`` (``make test-avalanche``).
"""

from __future__ import annotations

import pytest

from lifelong import registry
from lifelong.experiment.cli import main
from lifelong.integrations import avalanche as ava
from lifelong.strategy import require_hooks


def avalanche_imports() -> bool:
    try:
        ava.require_avalanche()
    except ava.AvalancheUnavailableError:
        return False
    return True


def test_unknown_avalanche_name_lists_the_wrapped_ones():
    with pytest.raises(registry.UnknownStrategyError, match="avalanche:der.*avalanche:naive"):
        registry.get("avalanche:icarl")


def test_the_adapters_are_registered_like_every_strategy():
    assert set(ava.names()) <= set(registry.names())
    for cls in ava.STRATEGIES:
        assert registry.get(cls.name) is cls
        require_hooks(cls)  # the learner's hooks, from AvalancheStrategy
        if avalanche_imports():
            assert registry.checked(cls.name) is cls
        assert cls.template and cls.description and cls.__name__ == f"Avalanche{cls.template}"
    assert ava.AvalancheReplay.buffer is not None and ava.AvalancheNaive.buffer is None
    runnable = set(registry.available())
    assert {"seq", "replay", "mbpa++"} <= runnable
    assert (set(ava.names()) <= runnable) == avalanche_imports()


@pytest.mark.skipif(avalanche_imports(), reason="avalanche-lib imports here")
def test_missing_avalanche_names_the_extra(tmp_path, capsys):
    with pytest.raises(ava.AvalancheUnavailableError, match=r"lifelong\[avalanche\]"):
        registry.parse("avalanche:replay")
    code = main(
        ["run", "--encoder", "tiny", "--strategy", "avalanche:replay"]
        + ["--output-dir", str(tmp_path / "runs")]
    )
    assert code == 2
    assert "make setup-avalanche" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # refused before any run directory
