"""``python -m tools.samplegen [text] [qa] [fewrel] [--out DIR] [--seed N]``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tools.samplegen import FOLDERS, KINDS, write


def main(argv: Sequence[str] | None = None) -> None:
    """Rewrite the bundled samples (all three by default)."""
    parser = argparse.ArgumentParser(prog="python -m tools.samplegen", description=__doc__)
    parser.add_argument("kinds", nargs="*", metavar="KIND", help=f"any of {', '.join(KINDS)}")
    parser.add_argument(
        "--out", help="write under this directory instead of lifelong/streams/samples"
    )
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    args = parser.parse_args(argv)
    unknown = [k for k in args.kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown sample {', '.join(unknown)}; expected any of {', '.join(KINDS)}")
    for kind in args.kinds or KINDS:
        root = None if args.out is None else f"{args.out}/{FOLDERS[kind]}"
        print(f"wrote the {kind} sample to {write(kind, root, args.seed)}")


if __name__ == "__main__":
    main()
