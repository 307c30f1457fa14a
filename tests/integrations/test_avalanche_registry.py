"""`--strategy avalanche:NAME` where Avalanche is missing: a clear error before anything loads.

Runs in every environment (``make test`` too); the Avalanche runs themselves are in
``test_avalanche.py`` (``make test-avalanche``).
"""

from __future__ import annotations

import pytest

from lifelong import registry
from lifelong.experiment.cli import main
from lifelong.integrations import avalanche as ava


def avalanche_imports() -> bool:
    try:
        ava.require_avalanche()
    except ava.AvalancheUnavailableError:
        return False
    return True


def test_unknown_avalanche_name_lists_the_wrapped_ones():
    with pytest.raises(registry.UnknownStrategyError, match="avalanche:naive.*avalanche:der"):
        registry.get("avalanche:icarl")


@pytest.mark.skipif(avalanche_imports(), reason="avalanche-lib imports here")
def test_missing_avalanche_names_the_extra(tmp_path, capsys):
    with pytest.raises(ava.AvalancheUnavailableError, match=r"lifelong\[avalanche\]"):
        registry.options_class("avalanche:Replay")
    code = main(
        ["run", "--encoder", "tiny", "--strategy", "avalanche:replay"]
        + ["--output-dir", str(tmp_path / "runs")]
    )
    assert code == 2
    assert "make setup-avalanche" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # refused before any run directory
