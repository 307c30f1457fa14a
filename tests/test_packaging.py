"""How the repository installs: strategies/ and streams/ under the lifelong namespace."""

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"strategies": "lifelong.strategies", "streams": "lifelong.streams"}


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_names() -> set[str]:
    """Every folder with an ``__init__.py``, named as it installs."""
    names = set()
    for init in ROOT.glob("*/**/__init__.py"):
        parts = init.parent.relative_to(ROOT).parts
        if parts[0] == "lifelong":
            names.add(".".join(parts))
        elif parts[0] in MAPPED:
            names.add(".".join((MAPPED[parts[0]], *parts[1:])))
    return names


def test_every_package_folder_is_installed_under_the_lifelong_namespace():
    config = setuptools_config()
    assert set(config["packages"]) == package_names()
    assert config["package-dir"] == {v: k for k, v in MAPPED.items()}


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


def test_no_module_imports_the_repository_folders_by_their_own_names():
    """An import of ``strategies.x`` would load a second copy of the module beside
    ``lifelong.strategies.x`` (two classes of one name) when run from the repository."""
    import ast

    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True)
    found = []
    for path in (ROOT / name for name in listed.stdout.split()):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in MAPPED]
    assert not found, found
