"""Every table of docs/guide/encoders.md is traced to a committed result file: a changed digit on
either side fails here (its `lifelong lm` block is checked in tests/experiments/test_lm_table.py).
"""

import csv
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "encoders.md"
RESULTS = ROOT / "results"


def page_table(header_start: str) -> list[list[str]]:
    """The body rows (cells, stripped) of the page's table whose header starts so."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header_start)]
    assert len(starts) == 1, f"{len(starts)} tables start with {header_start!r}"
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def signed(value: float) -> str:
    """One decimal, the page's minus sign."""
    return f"{value:.1f}".replace("-", "−")


def load_script(relative: str):
    path = ROOT / "experiments" / relative
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # a dataclass resolves its annotations there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


# ---------------------------------------------------------------------------------------------
# Long inputs: REPLAY with each reader, one run each (results/long_inputs/train{500,2000}/)
# ---------------------------------------------------------------------------------------------

READERS = ("minilm-128", "minilm-512", "rmt-minilm-64", "rmt-minilm-64-unwrapped")
"""Each table's row order: a reader folder's runs (by seed) in this order, where it has any
(``rmt-minilm-64-unwrapped``: the runs before each segment was wrapped as [CLS] text [SEP])."""


def committed_runs(folder: str) -> list[tuple[str, Path]]:
    """(reader, run directory) of every committed run under ``folder``, in the tables' order."""
    runs = []
    for reader in READERS:
        found = sorted((RESULTS / "long_inputs" / folder / reader).glob("**/metrics.json"))
        runs += [(reader, metrics.parent) for metrics in found]
    return runs


def run_cells(run: Path) -> list[str]:
    """What the page shows of one run: accuracy, BWT, forgetting, minutes, the diagonal."""
    metrics = json.loads((run / "metrics.json").read_text())
    with (run / "accuracy.csv").open() as handle:
        matrix = list(csv.reader(handle))
    tasks = matrix[0][1:]
    diagonal = [float(matrix[2 + i][1 + i]) for i in range(len(tasks))]  # row "after <task i>"
    return [
        f"{metrics['average_accuracy']:.1f}",
        signed(metrics["bwt"]),
        f"{metrics['forgetting']:.1f}",
        f"{metrics['seconds'] / 60:.1f}",
        ", ".join(f"{a:.1f}" for a in diagonal),
    ]


@pytest.mark.parametrize(
    ("header", "folder"),
    [
        ("| REPLAY reads | average accuracy", "train500"),
        ("| REPLAY reads (2,000 rows a task)", "train2000"),
    ],
)
def test_the_long_input_tables_are_the_committed_runs(header, folder):
    rows = page_table(header)
    runs = committed_runs(folder)
    assert len(rows) == len(runs), f"{folder}: {len(rows)} rows, {len(runs)} committed runs"
    for row, (reader, run) in zip(rows, runs):
        assert ("rmt" in reader) == ("rmt-minilm" in row[0]), f"{folder}: {row[0]} is {reader}"
        assert ("unwrapped" in reader) == ("before" in row[0]), f"{folder}: {row[0]} is {reader}"
        assert row[1:] == run_cells(run), f"{folder}/{reader}/{run.name}"


def test_the_retrospective_feed_table_is_what_long_inputs_prints_from_the_committed_runs():
    long_inputs = load_script("text_classification/long_inputs.py")
    folder = RESULTS / "long_inputs" / "retrospective_feed"
    readers = ("ernie-doc-32", "ernie-doc-32-once", "transformer-xl-32")
    printed = long_inputs.table({r: folder / r for r in readers}, "mtl")
    assert printed == (folder / "table.md").read_text()
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")]
        for line in printed.splitlines()
        if line.startswith("| ") and not line.startswith("| mtl")
    }
    labels = ("two passes", "one pass", "`transformer-xl`")
    for page_row, reader, label in zip(page_table("| reader | average accuracy"), readers, labels):
        assert label in page_row[0]
        accuracy, minutes, runs = rows[reader][1], rows[reader][4], rows[reader][5]
        assert page_row[1:] == [accuracy, minutes, runs], reader


# ---------------------------------------------------------------------------------------------
# Long-range recall (results/recall/): the per-cell log and the later modules' tables
# ---------------------------------------------------------------------------------------------


def recall_results() -> dict[tuple[str, int], float]:
    """Accuracy (%) per (module, segments) from the committed recall files."""
    found: dict[tuple[str, int], float] = {}
    log = (RESULTS / "recall" / "recall_s0_log.txt").read_text()
    for name, segments, accuracy in re.findall(r"(\S+) segments=(\d+) .* accuracy ([\d.]+)%", log):
        found[(name, int(segments))] = float(accuracy)
    for table in sorted((RESULTS / "recall").glob("recall_s0_*.md")):
        found.update(markdown_cells(table.read_text()))  # later files replace earlier rows
    return found


def markdown_cells(text: str) -> dict[tuple[str, int], float]:
    """(module, segments) -> value of a `sorting_table.py` markdown table (rows: segments)."""
    return load_script("lm/sorting_seeds.py").read_table(text)[2]


def test_the_recall_table_is_the_committed_recall_runs():
    found = recall_results()
    rows = page_table("| module | 2 segments (64 tokens)")
    assert len(rows) == 17  # every memory module and full attention
    for row in rows:
        name = row[0].split("`")[1]
        assert row[1:3] == [f"{found[(name, 2)]:.1f}", f"{found[(name, 4)]:.1f}"], name


# ---------------------------------------------------------------------------------------------
# Encoder cost against sequence length (results/bench/encoders_*.txt)
# ---------------------------------------------------------------------------------------------


def bench_tables(path: Path) -> dict[str, dict[int, dict[str, str]]]:
    """module -> length -> column -> cell, from `experiments/bench/encoders.py`'s output."""
    tables: dict[str, dict[int, dict[str, str]]] = {}
    header: list[str] = []
    module = ""
    for line in path.read_text().splitlines():
        if line and not line.startswith("|") and " " not in line.strip():
            module = line.strip()
        elif line.startswith("| L |"):  # a module's table, or a comparison (not read)
            header = [c.strip() for c in line.strip("|").split("|")]
            header = header if "ms/seg" in header else []
        elif line.startswith("| ") and header and module:
            cells = [c.strip() for c in line.strip("|").split("|")]
            tables.setdefault(module, {})[int(cells[0])] = dict(zip(header, cells))
    return tables


def within_rounding(shown: str, numerator: str, denominator: str) -> bool:
    """Whether ``shown`` (2 decimals) is numerator / denominator for some unrounded values."""
    half = [0.5 * 10 ** -len(x.split(".")[1]) for x in (numerator, denominator, shown)]
    low = (float(numerator) - half[0]) / (float(denominator) + half[1])
    high = (float(numerator) + half[0]) / (float(denominator) - half[1])
    return low - half[2] <= float(shown) <= high + half[2]


def test_the_encoder_cost_table_is_the_committed_bench_output():
    tables = bench_tables(RESULTS / "bench" / "encoders_2026-11-26_cpu.txt")
    later = bench_tables(RESULTS / "bench" / "encoders_infinity_former_2026-11-27_cpu.txt")
    tables["infinity-former"] = later["infinity-former"]  # the module as it reads now
    rows = page_table("| module | ms per segment, 256 tokens")
    assert len(rows) == 17
    for row in rows:
        name = row[0].strip("`")
        by_length = tables[name]
        expected = [by_length[256]["ms/seg"]] + [by_length[n]["x seg"] for n in (512, 1024, 2048)]
        assert row[1:5] == expected, name
        saved = (by_length[2048]["saved MiB"], by_length[256]["saved MiB"])
        assert within_rounding(row[5], *saved), f"{name}: saved {row[5]} is not {saved}"
        assert row[6] == by_length[2048]["state KiB"], name


# ---------------------------------------------------------------------------------------------
# Why full attention trailed (results/lm/segment_length_probe_s0.md)
# ---------------------------------------------------------------------------------------------


def test_the_segment_length_table_is_the_committed_probe_output():
    text = (RESULTS / "lm" / "segment_length_probe_s0.md").read_text()
    committed = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if re.match(r"\| \d", line)
    ]
    assert page_table("| segment | training loss") == committed
    assert len(committed) == 3


# ---------------------------------------------------------------------------------------------
# Script blocks: what the command in the opening marker prints from the committed files
# ---------------------------------------------------------------------------------------------


def test_every_script_block_is_its_commands_output_on_the_committed_files():
    """``<!-- NAME: python experiments/... -->`` ... ``<!-- /NAME -->``: the block is what the
    command prints now (the LM table's block is checked in test_lm_table.py)."""
    import shlex

    page = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(
        r"<!-- (?P<name>[a-z-]+): (?P<cmd>python [^>]*?) -->\n(?P<block>.*?)<!-- /(?P=name) -->",
        page,
        re.S,
    )
    names = [name for name, _, _ in blocks]
    assert "sorting-table" in names
    for name, command, block in blocks:
        if name == "lm-table":
            continue
        args = shlex.split(command)
        script = load_script(args[1].removeprefix("experiments/"))
        printed = script.main([str(ROOT / a) for a in args[2:]])
        assert block.strip() == printed.strip(), f"{name}: regenerate with {command}"


# ---------------------------------------------------------------------------------------------
# Training and evaluation speed side by side (results/bench/lm_speed_*.txt)
# ---------------------------------------------------------------------------------------------


def test_the_lm_speed_table_is_the_committed_bench_output():
    text = (RESULTS / "bench" / "lm_speed_2026-12-02_cpu.txt").read_text()
    committed = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| module")
    ]
    assert page_table("| module | train tokens/s | x transformer") == committed
    assert [row[0] for row in committed] == ["transformer", "pkm", "pkm:dense"]


# ---------------------------------------------------------------------------------------------
# The sixteen designs at a glance: every number is one a committed file gives
# ---------------------------------------------------------------------------------------------

NUMBER = re.compile(r"[−+-]?\d[\d,]*\.\d+")  # a result: settings and years are whole numbers


def numbers(text: str) -> set[str]:
    """Every decimal in ``text``, the page's minus sign as ``-``."""
    return {n.replace("−", "-") for n in NUMBER.findall(text)}


def lm_numbers() -> set[str]:
    """Per-seed held-out bpc of every LM row and its difference from `transformer` and
    Transformer-XL (the 2-layer and dense-PKM runs' too), and the LM table's whole output."""
    lm_table = load_script("lm/lm_table.py")
    files = [RESULTS / "lm" / f"lm_s{seed}.json" for seed in (0, 1)]
    found = numbers(lm_table.main([str(f) for f in files]))
    ablation = json.loads((RESULTS / "lm" / "ablation" / "pkm_dense_values_rows.json").read_text())
    two_layers = json.loads((RESULTS / "lm" / "lm_2layers_s0.json").read_text())["modules"]
    for seed, path in enumerate(files):
        rows = json.loads(path.read_text())["modules"]
        extra = {"pkm:dense": ablation["rows"][f"seed {seed}"]}
        if seed == 0:
            extra |= {f"{m}:2 layers": row for m, row in two_layers.items()}
        baselines = [rows["transformer"], rows["transformer-xl"]]
        if seed == 0:
            baselines.append(two_layers["transformer-xl"])
        for row in [*rows.values(), *extra.values()]:
            found.add(f"{row['heldout_bpc']:.3f}")
            found.update(f"{row['heldout_bpc'] - b['heldout_bpc']:+.3f}" for b in baselines)
    return found


def sorting_numbers() -> set[str]:
    """The sorting table (`sorting_seeds.py` on every committed seed file) and the ∞-former's
    earlier files' cells."""
    sorting_seeds = load_script("lm/sorting_seeds.py")
    seeds = sorted(str(p) for p in (RESULTS / "sorting").glob("sorting_s*.md"))
    found = numbers(sorting_seeds.main(seeds))
    for path in (RESULTS / "sorting").glob("infinity_former_s*.md"):
        found.update(f"{v:.1f}" for v in markdown_cells(path.read_text()).values())
    return found


def traced_numbers() -> set[str]:
    """Every number the encoders page's tested tables and their committed files give."""
    found = lm_numbers() | sorting_numbers()
    found.update(f"{v:.1f}" for v in recall_results().values())
    for path in (RESULTS / "recall").glob("*.md"):  # the ablations' files too
        found.update(f"{v:.1f}" for v in markdown_cells(path.read_text()).values())
    for bench in (RESULTS / "bench").glob("encoders_*_cpu.txt"):
        found |= numbers(bench.read_text())
    found |= numbers((RESULTS / "bench" / "lm_speed_2026-12-02_cpu.txt").read_text())
    for metrics in (RESULTS / "long_inputs").glob("train*/*/**/metrics.json"):
        found |= numbers(" ".join(run_cells(metrics.parent)))
    found |= numbers((RESULTS / "long_inputs" / "retrospective_feed" / "table.md").read_text())
    return found


def test_every_number_of_the_designs_at_a_glance_is_a_committed_result():
    rows = page_table("| design (paper) | `--encoder`")
    assert len(rows) == 16
    traced = traced_numbers()
    untraced = {row[0]: sorted(numbers(row[3]) - traced) for row in rows}
    untraced = {design: found for design, found in untraced.items() if found}
    assert not untraced, f"numbers in no committed result file: {untraced}"


def test_rmt_without_the_curriculum_is_the_committed_ablation():
    cells = markdown_cells((RESULTS / "recall" / "rmt_no_curriculum_s0.md").read_text())
    found = recall_results()
    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    without = f"{cells[('rmt', 2)]:.1f}% at 2 segments and {cells[('rmt', 4)]:.1f}% at 4"
    with_it = f"with it, {found[('rmt', 2)]:.1f}% and {found[('rmt', 4)]:.1f}%"
    assert f"RMT stays at chance: {without}" in page and with_it in page
