"""What the repository itself must not hold."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Built from parts, so that this file does not name them either.
REGISTRY_HOSTS = (
    "pypi" + ".org",
    "files." + "pythonhosted.org",
    "download." + "pytorch.org",
    "registry." + "npmjs.org",
)
INDEX_FLAGS = ("--index" + "-url", "--extra-index" + "-url")


def tracked_files():
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_file_names_a_package_registrys_host_or_index():
    """Failure 9: the Makefile passed pip an explicit index address; pip's default is meant."""
    found = []
    for path in tracked_files():
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [
            f"{path.relative_to(ROOT)}: {h}" for h in REGISTRY_HOSTS + INDEX_FLAGS if h in text
        ]
    assert not found, found
