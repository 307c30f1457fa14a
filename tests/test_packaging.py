"""How the repository installs: every package folder is its import path under lifelong/."""

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_names() -> set[str]:
    """Every folder with an ``__init__.py`` under ``lifelong/``, named by its path."""
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "lifelong").glob("**/__init__.py")
    }


def test_every_package_folder_is_installed_as_its_path():
    config = setuptools_config()
    assert set(config["packages"]) == package_names()
    assert "package-dir" not in config  # no folder installs under another name


def test_no_package_folder_sits_outside_lifelong():
    outside = [
        init.parent.relative_to(ROOT)
        for init in ROOT.glob("*/__init__.py")
        if init.parent.name not in ("lifelong", "tests", "tools")
    ]
    assert not outside, outside


def test_no_generic_top_level_package_is_importable_outside_the_repository(tmp_path):
    code = (
        "import importlib.util, lifelong, lifelong.strategies.replay, lifelong.streams.core; "
        "lifelong.TaskStream, lifelong.text_classification_stream; "
        "print(importlib.util.find_spec('strategies'), importlib.util.find_spec('streams'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["None", "None"]
