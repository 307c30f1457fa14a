"""The module table of `lifelong lm` over seeds, and each paper's claim judged on it.

`lifelong lm --json PATH` writes one file per seed (the budget, then one row per module). This
reads several such files, checks that they ran under the same budget (everything but the seed),
and prints one markdown table: per module its family and memory (`lifelong encoders`), parameters,
validation bits per character on each seed and their mean, the held-out bpc (the validation text's
second half, which kNN-LM's k and λ were not tuned on), speeds, peak memory and datastore size.

Below it, each claim the seeds' papers make that this table can test, judged on the held-out
bpc of every seed: "shows" when the claimed module is lower on every seed, "reversed" when it
is higher on every seed, "mixed" otherwise; with two seeds that is a direction, not a confidence
interval, and the table says so.

    python experiments/lm/lm_table.py results/lm/lm_s0.json results/lm/lm_s1.json [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifelong.encoders.names import CATALOGUE, MEMORY_FAMILIES
from lifelong.files import atomic_write_text
from lifelong.lm.flags import FULL_ATTENTION, KNN_LM, SPALM

BASELINE = "transformer"
"""The memory-less model every memory is measured against (reads the same segments)."""

OTHER_LABELS = {
    FULL_ATTENTION: ("baseline", "none (whole window)"),
    KNN_LM: ("kNN-LM (Khandelwal et al. 2020)", "datastore (kNN)"),
    SPALM: ("SPALM (Yogatama et al. 2021)", "segment cache + gated datastore"),
}
"""Family and memory of the `lifelong lm` rows that are not `lifelong encoders` names."""


@dataclass(frozen=True)
class Claim:
    """A paper's claim this table can test: ``module`` scores lower held-out bpc than ``than``."""

    module: str
    than: str
    says: str
    not_applicable: str | None = None  # why a causal LM cannot test it (then not judged)


CLAIMS = (
    Claim(KNN_LM, BASELINE, "kNN-LM: the datastore lowers perplexity of the same trained LM"),
    Claim("pkm", BASELINE, "PKM: a product-key memory layer beats the model without it"),
    Claim(SPALM, "transformer-xl", "SPALM: the gated long-term memory beats Transformer-XL"),
    Claim("ernie-doc", "transformer-xl", "ERNIE-Doc: same-layer recurrence beats Transformer-XL"),
    Claim("segatron", "transformer-xl", "Segatron: segment-aware positions beat token-only ones"),
    Claim("feedback", "transformer-xl", "Feedback: its memory beats Transformer-XL at equal depth"),
    Claim("transformer-xl", BASELINE, "Transformer-XL: the segment cache beats no memory"),
    Claim("compressive", "transformer-xl", "Compressive: compressed memory beats Transformer-XL"),
    Claim(
        "infinity-former", "transformer-xl", "∞-former: the continuous memory beats Transformer-XL"
    ),
    Claim("memoria", "transformer-xl", "Memoria: its three memories beat Transformer-XL"),
    Claim("memorizing", BASELINE, "Memorizing: the kNN memory beats the local-only model"),
    Claim("rmt", BASELINE, "RMT: recurrent memory tokens beat no memory"),
    Claim(
        "memory-transformer",
        BASELINE,
        "Memory Transformer: [mem] tokens beat none",
        not_applicable=(
            "not applicable: under the causal mask the [mem] tokens before a segment read "
            "nothing, so they are the same for every input (learned registers, not a memory); "
            "its memory is judged where it reads the input (sorting, recall)"
        ),
    ),
)
"""The claims judged (language-modelling claims only: MemSizer's is about cost, RMT's recall
and the sorting results are the other tables'; Feedback's at lower depth compares
rows of two budgets: results/lm/lm_2layers_s0.json against the 4-layer table)."""


def load_runs(paths: Sequence[Path]) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """Each file's seed and rows, after checking that every file shares one budget.

    Returns:
        The shared budget (without the seed) and ``(seed, rows by module)`` per file.

    Raises:
        ValueError: A file that is not `lifelong lm --json` output, a budget key that differs
            between files (naming both files, the key and both values), or a repeated seed.

    """
    budget: dict[str, Any] | None = None
    first = None
    runs: list[tuple[int, dict[str, Any]]] = []
    for path in paths:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            this, rows = dict(payload["budget"]), payload["modules"]
            seed = this.pop("seed")
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"{path}: not a `lifelong lm --json` file (expected 'budget' with a 'seed' "
                f"and 'modules'): {error}"
            ) from error
        if budget is None:
            budget, first = this, path
        for key in sorted(set(budget) | set(this)):
            if budget.get(key) != this.get(key):
                raise ValueError(
                    f"{path}: budget key {key!r} is {this.get(key)!r} but {budget.get(key)!r} "
                    f"in {first}; a table compares runs of one budget"
                )
        if seed in [s for s, _ in runs]:
            raise ValueError(f"{path}: seed {seed} is already in another file")
        runs.append((seed, rows))
    if budget is None:
        raise ValueError("no files given")
    return budget, runs


ORDER = (BASELINE, FULL_ATTENTION, KNN_LM, "transformer-xl", SPALM, *MEMORY_FAMILIES)
"""Row order: the baselines, the datastore rows beside their base models, then the families."""


def _modules(runs: Sequence[tuple[int, dict[str, Any]]]) -> list[str]:
    found = set(name for _, rows in runs for name in rows)
    ranked = list(dict.fromkeys(ORDER))
    return sorted(found, key=lambda n: (ranked.index(n) if n in ranked else len(ranked), n))


def _labels(module: str) -> tuple[str, str]:
    if module in OTHER_LABELS:
        return OTHER_LABELS[module]
    family, memory, _ = CATALOGUE.get(module, ("", "", ""))
    return family, memory


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _cell(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _values(runs: Sequence[tuple[int, dict[str, Any]]], module: str, key: str) -> list[float]:
    return [
        rows[module][key] for _, rows in runs if module in rows and rows[module][key] is not None
    ]


def _every_seed(runs: Sequence[tuple[int, dict[str, Any]]], module: str, key: str) -> list[float]:
    """``_values`` when every seed that ran ``module`` has the value, else none (kNN-LM scores
    only the held-out half, so a seed run before that has a val bpc the others lack)."""
    values = _values(runs, module, key)
    ran = sum(module in rows for _, rows in runs)
    return values if len(values) == ran else []


def budget_line(budget: dict[str, Any], seeds: Sequence[int]) -> str:
    """One line stating the shared budget, as `lifelong lm` prints it."""
    train = budget["train"]
    window = budget["segments"] * budget["segment_length"]
    return (
        f"budget: width {budget['width']}, {budget['layers']} layers, {budget['heads']} heads, "
        f"window {window} = {budget['segments']} x {budget['segment_length']} characters, "
        f"{train['steps']} steps of {train['batch_size']} windows, lr {train['lr']:g}; "
        f"seeds {', '.join(str(s) for s in seeds)}; corpus {Path(budget['corpus']).name}"
    )


def table(budget: dict[str, Any], runs: Sequence[tuple[int, dict[str, Any]]]) -> str:
    """The module table: one row per module, one val-bpc column per seed, then means."""
    seeds = [s for s, _ in runs]
    head = (
        ["module", "family", "memory", "params"]
        + [f"val bpc s{s}" for s in seeds]
        + [
            "val bpc",
            "held-out bpc",
            "train tok/s",
            "eval tok/s",
            "memory MB",
            "datastore",
            "minutes",
        ]  # fmt: skip
    )
    lines = [budget_line(budget, seeds), "", "| " + " | ".join(head) + " |",
             "|" + "---|" * 3 + "---:|" * (len(head) - 3)]  # fmt: skip
    for module in _modules(runs):
        family, memory = _labels(module)
        params = _values(runs, module, "params")
        per_seed = [
            _cell(rows[module]["val_bpc"] if module in rows else None, ".3f") for _, rows in runs
        ]
        store = _values(runs, module, "datastore")
        cells = [
            f"`{module}`", family, memory, f"{int(params[0]):,}" if params else "–", *per_seed,
            _cell(_mean(_every_seed(runs, module, "val_bpc")), ".3f"),
            _cell(_mean(_values(runs, module, "heldout_bpc")), ".3f"),
            _cell(_mean(_values(runs, module, "train_tokens_per_s")), ",.0f"),
            _cell(_mean(_values(runs, module, "eval_tokens_per_s")), ",.0f"),
            _cell(_mean(_values(runs, module, "memory_mb")), ".1f"),
            f"{int(store[0]):,}" if store else "",
            _cell(_mean([s / 60 for s in _values(runs, module, "seconds")]), ".1f"),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def judge(claim: Claim, runs: Sequence[tuple[int, dict[str, Any]]]) -> tuple[list[float], str]:
    """Held-out bpc differences (module − than) on the seeds that ran both, and the verdict."""
    diffs = [
        rows[claim.module]["heldout_bpc"] - rows[claim.than]["heldout_bpc"]
        for _, rows in runs
        if claim.module in rows and claim.than in rows
    ]
    if claim.not_applicable:
        return diffs, claim.not_applicable
    if not diffs:
        return diffs, "not run"
    if all(d < 0 for d in diffs):
        return diffs, "shows" if len(diffs) > 1 else "shows (one seed)"
    if all(d > 0 for d in diffs):
        return diffs, "reversed" if len(diffs) > 1 else "reversed (one seed)"
    return diffs, "mixed"


def claims(runs: Sequence[tuple[int, dict[str, Any]]]) -> str:
    """Each testable claim's held-out bpc difference per seed and its verdict."""
    lines = [
        "| claim | module − than, held-out bpc per seed | verdict |",
        "|---|---|---|",
    ]
    for claim in CLAIMS:
        diffs, verdict = judge(claim, runs)
        shown = ", ".join(f"{d:+.3f}" for d in diffs) or "–"
        lines.append(f"| {claim.says} (`{claim.module}` − `{claim.than}`) | {shown} | {verdict} |")
    extras = _spalm_gate(runs) + _knn_cost(runs) + _speed(runs, "pkm")
    return "\n".join(lines + ([""] + extras if extras else [])) + "\n"


def _spalm_gate(runs: Sequence[tuple[int, dict[str, Any]]]) -> list[str]:
    rows = [(s, r[SPALM]["extra"]) for s, r in runs if SPALM in r and r[SPALM].get("extra")]
    return [
        f"SPALM's gate g (1 = the local model alone), seed {s}: mean {e['gate_mean']:.3f}; "
        f"{100 * sum(e['gate_histogram'][:-1]):.1f}% of validation characters below 0.9, "
        f"{100 * e['gate_below_half']:.2f}% below 0.5 (the long-term memory outweighs the "
        "local state)"
        for s, e in rows
    ]


def _knn_cost(runs: Sequence[tuple[int, dict[str, Any]]]) -> list[str]:
    rows = [(s, r[KNN_LM]) for s, r in runs if KNN_LM in r and r[KNN_LM].get("extra")]
    return [
        f"kNN-LM, seed {s}: k {r['extra']['k']}, λ {r['extra']['lambda']:g}{_grid(r['extra'])}; "
        f"evaluation {r['extra']['eval_cost_vs_lm']:.1f}x the LM's own forward per token "
        f"(datastore {r['datastore']:,} entries){_recall(r['extra'])}"
        for s, r in rows
    ]


def _grid(extra: dict[str, Any]) -> str:
    """The grid `KNNLM.tune` searched, where the row records it."""
    grid = extra.get("grid")
    if not grid:
        return ""
    return f" (of k {', '.join(map(str, grid['k']))}; λ up to {max(grid['lambda']):g})"


def _recall(extra: dict[str, Any]) -> str:
    """The search's recall on held-out contexts, where the row records it."""
    found = extra.get("held_out_recall")
    if not found:
        return ""
    return (
        f"; search {extra.get('index')}: recall@{found['k']} {found['recall']:.3f} "
        f"(± {found['se']:.3f}) on {found['queries']} held-out contexts"
    )


def _speed(runs: Sequence[tuple[int, dict[str, Any]]], module: str) -> list[str]:
    ratios = [
        (s, r[module]["train_tokens_per_s"] / r[BASELINE]["train_tokens_per_s"])
        for s, r in runs
        if module in r and BASELINE in r
    ]
    return [f"`{module}` trains at {x:.2f}x `{BASELINE}`'s tokens/s, seed {s}" for s, x in ratios]


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", nargs="+", type=Path, help="`lifelong lm --json` files, one a seed")
    parser.add_argument("--out", type=Path, help="also write the tables here (markdown)")
    args = parser.parse_args(argv)
    try:
        budget, runs = load_runs(args.json)
    except ValueError as error:
        parser.error(str(error))
    text = (
        table(budget, runs)
        + "\nClaims, judged on the held-out bpc of every seed (a direction over "
        f"{len(runs)} seed{'s' if len(runs) > 1 else ''}, not a confidence interval):\n\n"
        + claims(runs)
    )
    print(text)
    if args.out:
        atomic_write_text(args.out, text)
    return text


if __name__ == "__main__":
    main()
