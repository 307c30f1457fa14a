"""Recall accuracy of the memory modules against the number of segments (RMT's memorisation task).

``experiments/lm/sorting_table.py --task recall``: three key–value facts open the first segment, the
question closes the last (`lifelong.lm.recall`); chance is 1/16. Every module trains with a
graph through all the segments. Same flags as the sorting script; ``--curriculum`` gives every
module RMT's curriculum over the number of segments.

    python experiments/lm/recall_table.py [--modules transformer rmt ...] [--segments 2 4 8]
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path


def _sorting_script():
    spec = importlib.util.spec_from_file_location(
        "sorting_experiment", Path(__file__).with_name("sorting_table.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["sorting_experiment"] = module  # its worker function must pickle by name
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None):
    args = list(sys.argv[1:] if argv is None else argv)
    return _sorting_script().main(["--task", "recall", *args])


if __name__ == "__main__":
    main()
