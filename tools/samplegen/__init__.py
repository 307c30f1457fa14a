"""Writers of the bundled samples in ``lifelong/streams/samples/`` (never imported by the runtime).

``python -m tools.samplegen [text|qa|fewrel ...] [--out DIR] [--seed N]`` rewrites them; the
output depends only on the seed, and a test regenerates every sample and compares it byte for
byte with the shipped files. Templates are data (``templates/``) where that is clearer: the
text-classification rows and lexicons and the FewRel relations; the QA generator builds whole
documents and keeps its templates in code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "lifelong" / "streams" / "samples"
"""Where the shipped samples live (the loaders' sample directories)."""

KINDS = ("text", "qa", "fewrel")
"""The samples, by stream name, and the folder each goes to under `SAMPLES`."""

FOLDERS = {"text": "text_classification", "qa": "qa", "fewrel": "fewrel"}


def writer(kind: str) -> Callable[[Path, int], None]:
    """The function that writes the ``kind`` sample into a directory with a seed."""
    if kind == "text":
        from tools.samplegen.text_sample import generate

        return lambda root, seed: generate(root, seed=seed)
    if kind == "qa":
        from tools.samplegen.qa_sample import write_qa_sample

        return lambda root, seed: write_qa_sample(root, seed) and None
    if kind == "fewrel":
        from tools.samplegen.fewrel_sample import write_fewrel_sample

        return write_fewrel_sample
    raise ValueError(f"unknown sample {kind!r}; expected one of {', '.join(KINDS)}")


def write(kind: str, root: Path | None = None, seed: int = 0) -> Path:
    """Write the ``kind`` sample under ``root`` (default: its shipped folder); return the folder."""
    out = Path(root) if root is not None else SAMPLES / FOLDERS[kind]
    writer(kind)(out, seed)
    return out
