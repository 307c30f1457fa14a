"""The real-data tables of the README and the results page say what the committed runs say.

Every number in them is `lifelong report` on the runs under `results/real_budget/` (the pages
say so): the per-strategy tables are its summary (mean and 95% interval over orders x seeds),
the claims table is its ``--claims`` judgement. A run committed without its tables following, or
a number typed by hand, fails here.
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from lifelong.experiment.reports.claims import Judgement, claims, judge
from lifelong.experiment.reports.costs import pareto_table
from lifelong.experiment.reports.stats import compare, summary_table
from lifelong.experiment.reports.tables import DEFAULT_METRICS, METRIC_LABELS
from lifelong.experiment.rundir import find_runs
from lifelong.mechanisms.scopes import check_scope
from tests.conftest import headline_figure_folders

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "real_budget"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "guide" / "results.md"

DISPLAY = {
    "SEQ": "seq",
    "SEQ\\*": "seq-star",
    "REPLAY": "replay",
    "A-GEM": "agem",
    "EWC": "ewc",
    "MbPA": "mbpa",
    "MbPA++": "mbpa++",
    "MbPA++-rand": "mbpa++-rand",
    "Meta-MbPA": "meta-mbpa",
    "OML-ER": "oml-er",
    "ANML-ER": "anml-er",
    "MAML-ER": "maml-er",
    "Avalanche Naive": "avalanche:naive",
    "Avalanche Replay": "avalanche:replay",
    "Avalanche EWC": "avalanche:ewc",
    "Avalanche DER++": "avalanche:der",
    "Avalanche LwF": "avalanche:lwf",
    "MTL": "mtl",
    "NCM": "ncm",
    "NCM (no training)": "ncm",
    "RanPAC": "ranpac",
    "ER": "er",
    "ER (dense replay)": "er",
    "MTL (upper bound)": "mtl",
}
"""The pages' strategy names; a registry name (the results page's) stands for itself."""

ORDERS = ("i", "ii", "iii", "iv")
"""The paper orders, in order."""


def signed(x: float) -> str:
    """A difference as the pages print it: one decimal, its sign, a true minus."""
    return f"{x:+.1f}".replace("-", "−")


def stated_interval(d) -> str:
    """A paired difference's interval as the prose states it: ``95% CI [low, high]``."""
    return f"95% CI [{signed(d.low)}, {signed(d.high)}]"


def paired_statement(found) -> str:
    """A `compare` result as the prose states it: ``+x points, 95% CI [..] over the n pairs,
    verdict``."""
    d = found.difference
    return f"{signed(d.mean)} points, {stated_interval(d)} over the {d.n} pairs, {found.verdict}"


COSTS = ("tflops", "memory_mb", "minutes")
"""The cost columns: compute (measured or derived), memory held and wall minutes per run."""

LABELED = {label: key for key, label in METRIC_LABELS.items() if key in (*DEFAULT_METRICS, *COSTS)}
"""Column (or row) labels of the tables that carry a summary metric, to its key."""

TEXT_HEADER = "| strategy | runs | average accuracy | BWT | FWT | forgetting |"
FEWREL_HEADER = "| strategy | runs | pooled accuracy | average accuracy | BWT | FWT | forgetting |"
FEWREL_BY_COLUMN = "| strategy | SEQ | A-GEM | REPLAY |"
CLAIMS_HEADER = "| the papers' claim |"
COMPARISON_HEADER = "| comparison (a − b) |"


def markdown_tables(path: Path, header: str) -> list[list[list[str]]]:
    """Every Markdown table in ``path`` whose header line starts with ``header``, as cells."""
    tables, block = [], []
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block and block[0].startswith(header):
            tables.append([_cells(row) for row in block[:1] + block[2:]])  # no --- row
        block = []
    return tables


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def numbers(cell: str) -> list[str]:
    """The numbers a cell shows, to one decimal (``−`` read as minus, ``**`` and ``+`` dropped)."""
    plain = cell.replace("−", "-").replace("**", "").replace(",", "")
    return [f"{float(n):.1f}" for n in re.findall(r"[-+]?\d+(?:\.\d+)?", plain)]


MINILM_LAYERS = 6
"""The budget's encoder's stage-wise layers: the ``N`` of ``top<N>`` a run can name."""


def is_wider(scope: str) -> bool:
    """Whether ``scope`` is wider than ``head``, by `lifelong.mechanisms.scopes`' own check."""
    try:
        check_scope(scope, MINILM_LAYERS)
    except ValueError:
        return False
    return scope != "head"


def wider_row(name: str) -> re.Match | None:
    """A row of MbPA++ at a wider adaptation scope, e.g. ``MbPA++ (top1)``: its runs are
    ``wider_scope.py``'s, collected into ``results/real_budget/text_<scope>``."""
    row = re.fullmatch(r"(?P<name>.+) \((?P<scope>[^()]+)\)", name)
    return row if row and is_wider(row["scope"]) else None


def strategy(name: str) -> str:
    wider = wider_row(name)
    return strategy(wider["name"]) if wider else DISPLAY.get(name, name)


def folder(name: str, stream: str) -> str:
    """The folder under ``results/real_budget`` that holds a table row's runs."""
    wider = wider_row(name)
    return f"{stream}_{wider['scope']}" if wider and stream == "text" else stream


def wider_folders() -> list[str]:
    """The collected wider-scope folders (``text_top1``, ...): each needs a row in the tables."""
    return sorted(p.name for p in RESULTS.glob("text_*") if is_wider(p.name.removeprefix("text_")))


@cache
def summary(where: str) -> pd.DataFrame:
    """`lifelong report`'s over-all-runs summary of the committed runs in ``where``."""
    stream = where.split("_")[0]  # text_top1's runs are text runs
    metrics = (*DEFAULT_METRICS, *COSTS)  # minutes: the runs' metrics.json wall seconds / 60
    return summary_table(find_runs(RESULTS / where), metrics).xs(stream, level="stream")


@cache
def judgements(stream: str) -> dict[tuple[str, str, str], Judgement]:
    """`lifelong report --claims`'s judgement of the committed runs, by (a, relation, b)."""
    found = judge(find_runs(RESULTS / stream), stream)
    return {(j.claim.a, j.claim.relation, j.claim.b): j for j in found}


def expected(stream: str, name: str, metric: str) -> list[str]:
    """What `lifelong report` prints for one cell: mean, low, high (none without a value)."""
    row = summary(stream).loc[(name, metric)]
    if row["n"] == 0 or math.isnan(row["mean"]):
        return []
    bounds = [] if math.isnan(row["low"]) else [row["low"], row["high"]]
    return [f"{v:.1f}" for v in (row["mean"], *bounds)]


def check_cell(cell: str, stream: str, name: str, metric: str, where: str) -> None:
    """A cell shows the mean, or the mean and its interval, of what the runs give."""
    shown, want = numbers(cell), expected(stream, name, metric)
    assert shown == want[: len(shown)] and (shown or not want), (
        f"{where}: {name} {METRIC_LABELS[metric]} reads {cell!r}; the committed runs give "
        f"{' '.join(want) or 'no value'} (`lifelong report results/real_budget/{stream}`)"
    )


def check_by_row(table: list[list[str]], stream: str, where: str) -> int:
    """A table with a row a strategy: its run count and every metric column. Returns the rows."""
    header = table[0]
    for row in table[1:]:
        name, runs_in = strategy(row[0]), folder(row[0], stream)
        runs = int(summary(runs_in).loc[(name, "average_accuracy"), "n"])
        assert int(row[1]) == runs, f"{where}: {row[0]} reads {row[1]} runs; committed: {runs}"
        for label, cell in zip(header, row):
            if label in LABELED:
                check_cell(cell, runs_in, name, LABELED[label], where)
    return len(table) - 1


@pytest.mark.parametrize(
    ("path", "header", "stream"),
    [
        (README, TEXT_HEADER, "text"),
        (RESULTS_PAGE, TEXT_HEADER, "text"),
        (RESULTS_PAGE, FEWREL_HEADER, "fewrel"),
    ],
    ids=["readme-text", "results-text", "results-fewrel"],
)
def test_a_strategy_table_is_the_report_of_the_committed_runs(path, header, stream):
    (table,) = markdown_tables(path, header)
    every = sorted(set(summary(stream).index.get_level_values("strategy")))
    if stream == "text":  # and a row for MbPA++ at each collected wider scope
        every += [f"mbpa++ ({name.removeprefix('text_')})" for name in wider_folders()]
    rows = check_by_row(table, stream, path.name)  # every row is the committed runs' report
    if path == README:  # the front door's short table: at most eight rows, the rest linked
        assert 0 < rows <= 8 and "(docs/guide/results.md)" in README.read_text()
    else:
        assert rows == len(every), f"{path.name}: the {stream} table has a row for each of {every}"


def held_examples(where: str, name: str) -> str:
    """A row's memory (examples) as the tables show it: the runs' count, ``min–max`` where
    they differ (Meta-MbPA's diversity writes), ``–`` where the strategy keeps none."""
    counts = {r.metrics.get("memory_examples") for r in records(where) if r.strategy == name}
    counts.discard(None)
    if not counts:
        return "–"
    low, high = int(min(counts)), int(max(counts))
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def test_the_memory_columns_are_the_committed_runs():
    """The memory columns the summary check reads to one decimal or not at all: the examples
    (FewRel: sentences) a run's memory holds, from its metrics.json, and the megabytes, to the
    two decimals of `lifelong report`'s cost table."""
    for path in (RESULTS_PAGE, README):
        (table,) = markdown_tables(path, TEXT_HEADER)
        header = table[0]
        for row in table[1:]:
            name, where = strategy(row[0]), folder(row[0], "text")
            cells = dict(zip(header, row))
            if "memory (examples)" in cells:
                shown = cells["memory (examples)"]
                assert shown == held_examples(where, name), (path.name, row[0], shown)
            if "memory (MB)" in cells:
                costs = pareto_table(records(where))
                # a joint learner's point is marked as one: "mtl (joint: not continual)"
                costs.index = costs["configuration"].str.replace(" (joint: not continual)", "")
                held = costs["memory_mb"].get(name, math.nan)  # runs before cost counting: none
                want = "–" if math.isnan(held) else f"{held:.2f}"
                shown = cells["memory (MB)"]
                assert shown == want, (path.name, row[0], shown, want)
    (table,) = markdown_tables(RESULTS_PAGE, FEWREL_HEADER)
    column = table[0].index("memory (sentences)")
    for row in table[1:]:
        shown, want = row[column], held_examples("fewrel", strategy(row[0]))
        assert shown == want, ("fewrel", row[0], shown, want)


def test_the_fewrel_table_by_column_is_the_report_of_the_committed_runs():
    (table,) = markdown_tables(RESULTS_PAGE, FEWREL_BY_COLUMN)
    names = [strategy(n) for n in table[0][1:]]
    for row in table[1:]:
        for name, cell in zip(names, row[1:]):
            check_cell(cell, "fewrel", name, LABELED[row[0]], RESULTS_PAGE.name)


def claim_cell(stream: str, a: str, relation: str, b: str) -> str:
    """The claims table's cell: verdict, a − b, its interval and the pairs (report's words)."""
    found = judgements(stream).get((a, relation, b))
    if found is None:
        return "(not claimed)"
    if found.verdict == "not run":
        return "not run"
    d = found.comparison.difference
    interval = [] if math.isnan(d.low) else [d.low, d.high]
    shown = " ".join(f"{v:.1f}" for v in (d.mean, *interval))
    return f"{found.verdict} {shown} n={d.n}"


def shown_claim(cell: str) -> str:
    """A claims-table cell in `claim_cell`'s words."""
    if cell in ("(not claimed)", "not run"):
        return cell
    verdict = re.match(r"\**([a-z ]+?)\**\s+[−+-]?\d", cell)
    assert verdict, f"a claims cell reads {cell!r}"
    *values, n = numbers(cell)
    return f"{verdict.group(1)} {' '.join(values)} n={int(float(n))}"


@pytest.mark.parametrize("path", [RESULTS_PAGE], ids=["results"])
def test_the_claims_table_is_the_judgement_of_the_committed_runs(path):
    (table,) = markdown_tables(path, CLAIMS_HEADER)
    streams = ("text", "fewrel")
    listed = set()
    for row in table[1:]:
        a, relation, b = row[0].split(" ")
        a, b = strategy(a), strategy(b)
        listed.add((a, relation, b))
        for stream, cell in zip(streams, row[1:]):
            assert shown_claim(cell) == claim_cell(stream, a, relation, b), (
                f"{path.name}: {row[0]} on {stream} reads {cell!r}; "
                f"`lifelong report results/real_budget/{stream} --claims {stream}` gives "
                f"{claim_cell(stream, a, relation, b)!r}"
            )
    every = {(c.a, c.relation, c.b) for s in streams for c in claims(s)}
    assert listed == every, f"{path.name}: claims missing {every - listed}"


def test_the_cell_reader_reads_what_the_tables_show():
    assert numbers("**47.4** [41.7, 53.1]") == ["47.4", "41.7", "53.1"]
    assert numbers("−60.0 [−64.4, −55.6]") == ["-60.0", "-64.4", "-55.6"]
    assert numbers("+4.8 [−3.4, +13.0]") == ["4.8", "-3.4", "13.0"]
    assert numbers("(joint)") == numbers("–") == []
    assert shown_claim("**holds** +9.8 [+3.6, +16.1], n = 4") == "holds 9.8 3.6 16.1 n=4"
    assert (
        shown_claim("not resolved −6.6 [−14.0, +0.7], n = 4") == "not resolved -6.6 -14.0 0.7 n=4"
    )


@pytest.fixture
def wider_scope(load_script):
    """``experiments/text_classification/wider_scope.py`` as a module."""
    return load_script("text_classification/wider_scope.py")


def test_the_wider_scope_table_is_the_scripts_report_of_the_committed_runs(wider_scope):
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    for name in wider_folders():
        scope = name.removeprefix("text_")
        grid = {run.name for run in (RESULTS / name).iterdir() if run.is_dir()}
        want = wider_scope.table(RESULTS / "text", RESULTS / name, scope, grid)
        rows, paired = want.split("\n\n", 1)
        for line in rows.splitlines()[2:]:  # the scope rows, over the same orders x seeds
            assert line in page, (
                f"{RESULTS_PAGE.name}: no row {line!r}; `python experiments/text_classification/"
                f"wider_scope.py --collected results/real_budget --scope {scope} --orders ...`"
            )
        assert paired.strip() in page, f"{RESULTS_PAGE.name}: no {paired.strip()!r}"


@cache
def records(where: str) -> tuple:
    return tuple(find_runs(RESULTS / where))


def test_every_comparison_table_is_the_paired_report_of_the_committed_runs():
    """Rows ``A − B``: the mean paired difference (a − b) and its 95% interval, the pairs and
    the verdict, as `lifelong report --compare a,b` gives them on the committed text runs."""
    tables = markdown_tables(RESULTS_PAGE, COMPARISON_HEADER)
    assert tables, "the results page has a comparison table"
    for table in tables:
        metric = LABELED[table[0][1].split(",")[0]]
        for row in table[1:]:
            a, b = (strategy(n.strip()) for n in row[0].split(" − "))
            (found,) = compare(records("text"), a, b, metric, stream="text")
            d = found.difference
            want = [f"{v:.1f}" for v in (d.mean, d.low, d.high)]
            assert numbers(row[1]) == want, f"{row[0]}: {row[1]!r}; the runs give {want}"
            assert int(row[2]) == d.n, f"{row[0]}: {row[2]} pairs; the runs give {d.n}"
            assert row[3] == found.verdict, f"{row[0]}: {row[3]!r}; the runs: {found.verdict!r}"


def test_the_probing_statement_is_the_committed_probing_run(load_script):
    """The results page's probing table is probing.py's on the committed runs, and its prose
    reads the SEQ runs' matrices."""
    probing = load_script("text_classification/probing.py")
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    block = re.search(r"<!-- probing-table -->\n(.*?)<!-- /probing-table -->", page, re.S)
    documented = ["--collected", str(RESULTS), "--strategies", "seq,replay", "--orders", "i,ii"]
    out = io_of(probing.main, [*documented, "--seeds", "0"])
    assert block and block.group(1).strip() == out[out.index("| strategy") :].strip()
    run = RESULTS / "text_probe" / "seq_i_s0"
    metrics, probe, model = matrices(run)
    text = " ".join(page.split())
    last = "after yahoo"

    assert (
        f"the SEQ run's probe reads AG News at {one(probe[last]['ag_news'])} and DBpedia at "
        f"{one(probe[last]['dbpedia'])}, where SEQ's own head scores "
        f"{one(model[last]['ag_news'])} and {one(model[last]['dbpedia'])}"
    ) in text
    assert (
        f"of SEQ's forgetting of {one(metrics['forgetting'])} points, the probe's is "
        f"{one(metrics['probe_forgetting'])} (representation forgetting) and "
        f"{one(metrics['head_forgetting'])} is the head's"
    ) in text
    assert (
        f"rises from {one(metrics['probe_before'])} on the pre-trained encoder to "
        f"{one(metrics['probe_average_accuracy'])} after the stream"
    ) in text
    second, probe, model = matrices(RESULTS / "text_probe" / "seq_ii_s0")
    last = "after yelp"
    assert (
        f"SEQ forgets {one(second['forgetting'])} points, its probe "
        f"{one(second['probe_forgetting'])} (" in text
    )
    assert f"and its head {one(second['head_forgetting'])}; after the last task (Yelp)" in text
    assert (
        f"the probe reads DBpedia at {one(probe[last]['dbpedia'])} and AG News at "
        f"{one(probe[last]['ag_news'])}, where SEQ's own head scores "
        f"{one(model[last]['dbpedia'])} and {one(model[last]['ag_news'])}"
    ) in text
    row = next(r for r in block.group(1).splitlines() if r.startswith("| seq |")).split(" | ")
    head, represented = (
        row[2 + probing.METRICS.index(key)].replace("-", "−")  # the table's cells
        for key in ("head_forgetting", "probe_forgetting")
    )
    assert f"SEQ's head forgetting is {head} points and its probe's {represented}:" in text
    parts = [f"{one(m['probe_forgetting'])} of {one(m['forgetting'])}" for m in (metrics, second)]
    assert f"({', '.join(parts)})" in text
    first, _, _ = matrices(RESULTS / "text_probe" / "replay_i_s0")
    assert first["forgetting"] < metrics["forgetting"] / 2 * 1.1  # "half as much" as SEQ
    assert (
        f"REPLAY forgets half as much ({one(first['forgetting'])}) and the split is the same: "
        f"{one(first['probe_forgetting'])} in the representation, "
        f"{one(first['head_forgetting'])} in the head."
    ) in text
    replay, _, _ = matrices(RESULTS / "text_probe" / "replay_ii_s0")
    assert (
        f"it forgets {one(replay['forgetting'])} points, its probe "
        f"{one(replay['probe_forgetting'])} and its head {one(replay['head_forgetting'])}"
    ) in text
    pooled = next(r for r in block.group(1).splitlines() if r.startswith("| all |")).split(" | ")
    share = pooled[2 + probing.METRICS.index("probe_share")].replace("-", "−")
    mean, interval = share.split(" ", 1)
    assert f"the representation's share of the forgetting is {mean}% (95% CI {interval})" in text
    assert float(interval.strip("[]").split(", ")[1]) < 10  # "at most a tenth"


PROBING_GRID = ["--orders", "i,ii", "--seeds", "0"]
"""The probing runs' orders and seed, as the results page's commands give them."""


def probing_block(probing, marker: str, strategies: str) -> str:
    """The page's ``<!-- marker -->`` block, checked to be `probing.py --collected` of the
    committed runs of ``strategies``; returns the page's text with line breaks as spaces."""
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    block = re.search(rf"<!-- {marker} -->\n(.*?)<!-- /{marker} -->", page, re.S)
    argv = ["--collected", str(RESULTS), "--strategies", strategies, *PROBING_GRID]
    out = io_of(probing.main, argv)
    assert block and block.group(1).strip() == out[out.index("| strategy") :].strip(), marker
    return " ".join(page.split())


def one(x: float | str) -> str:
    """A number as the prose prints it: one decimal, a true minus."""
    return f"{float(x):.1f}".replace("-", "−")


def test_mbpa_under_the_probe_is_the_committed_probing_runs(load_script):
    """MbPA++'s probing runs: probing.py's table, the split of its forgetting, its matrices
    against the budget runs', and the share over SEQ, REPLAY and MbPA++."""
    import csv
    import json

    probing = load_script("text_classification/probing.py")
    text = probing_block(probing, "probing-mbpa", "mbpa++")
    runs = [matrices(RESULTS / "text_probe" / f"mbpa++_{o}_s0")[0] for o in ("i", "ii")]
    seq = [matrices(RESULTS / "text_probe" / f"seq_{o}_s0")[0] for o in ("i", "ii")]
    took = [round(m["seconds"] / 60) for m in runs]
    assert f"run, {took[0]} and {took[1]} minutes a run;" in text

    def both(key: str, ms=runs) -> tuple[str, str]:
        return one(ms[0][key]), one(ms[1][key])

    f, p, h = both("forgetting"), both("probe_forgetting"), both("head_forgetting")
    assert f"MbPA++ forgets {f[0]} points on order i and {f[1]} on order ii;" in text
    assert f"its probe's part is {p[0]} and {p[1]}, and the rest, {h[0]} and {h[1]}," in text
    sh = both("head_forgetting", seq)
    assert f"where SEQ's head loses {sh[0]} and {sh[1]}." in text
    before = {one(m["probe_before"]) for m in runs}
    (start,) = before  # the same pre-trained encoder on both orders
    after = both("probe_average_accuracy")
    assert (
        f"rises from {start} on the pre-trained encoder to {after[0]} and {after[1]} after" in text
    )

    def matrix(folder: str, order: str) -> list[dict]:
        path = RESULTS / folder / f"mbpa++_{order}_s0" / "accuracy.csv"
        with path.open(encoding="utf-8") as handle:
            return list(csv.DictReader(handle))

    assert matrix("text_probe", "ii") == matrix("text", "ii")
    probed, budget = matrix("text_probe", "i"), matrix("text", "i")
    differ = [
        (a["row"], k, float(a[k]), float(b[k]))
        for a, b in zip(probed, budget)
        for k in a
        if k != "row" and a[k] != b[k]
    ]
    ((row, dataset, now, then),) = differ
    assert (row, dataset) == ("after yahoo", "yahoo")
    assert f"Yahoo after the last task, {now:.1f} against {then:.1f} (one test row of 300)" in text
    assert round(abs(now - then) * 3) == 1  # a test row is 1/3 of a point
    budget_forgetting = json.loads((RESULTS / "text" / "mbpa++_i_s0" / "metrics.json").read_text())[
        "forgetting"
    ]
    assert budget_forgetting == pytest.approx(runs[0]["forgetting"])
    out = io_of(
        probing.main,
        ["--collected", str(RESULTS), "--strategies", "seq,replay,mbpa++", *PROBING_GRID],
    )
    pooled = next(r for r in out.splitlines() if r.startswith("| all |")).split(" | ")
    assert pooled[1] == "6"
    share = pooled[2 + probing.METRICS.index("probe_share")].replace("-", "−")
    mean, interval = share.split(" ", 1)
    assert f"the representation's share of the forgetting is {mean}% (95% CI {interval})." in text


def test_er_under_the_probe_is_the_committed_probing_runs(load_script):
    """`er`'s probing runs: probing.py's table, the split of a forgetting near zero, the probe's
    final averages beside SEQ's and MbPA++'s, and matrices equal to the budget runs'."""
    probing = load_script("text_classification/probing.py")
    text = probing_block(probing, "probing-er", "er")

    def run(name: str, order: str) -> dict:
        return matrices(RESULTS / "text_probe" / f"{name}_{order}_s0")[0]

    er = [run("er", o) for o in ("i", "ii")]
    took = [round(m["seconds"] / 60) for m in er]
    assert f"run, {took[0]} and {took[1]} minutes a run;" in text
    f, p, h = (
        [one(m[k]) for m in er] for k in ("forgetting", "probe_forgetting", "head_forgetting")
    )
    assert er[1]["forgetting"] < 0 < er[0]["forgetting"] < 1
    assert (
        f"`er` forgets {f[0]} points on order i and {f[1]} on order ii (a later dataset lifted an "
        f"earlier one), its probe {p[0]} and {p[1]}, its head {h[0]} and {h[1]}."
    ) in text
    ratio = 100 * er[0]["probe_forgetting"] / er[0]["forgetting"]
    assert f"share, {ratio:.0f}%, is order i's {p[0]} of {f[0]}," in text
    final = {
        n: [one(run(n, o)["probe_average_accuracy"]) for o in ("i", "ii")]
        for n in ("er", "seq", "mbpa++")
    }
    assert (
        f"after the stream {final['er'][0]} and {final['er'][1]}, against SEQ's {final['seq'][0]} "
        f"and {final['seq'][1]} and MbPA++'s {final['mbpa++'][0]} and {final['mbpa++'][1]})"
    ) in text
    for order in ("i", "ii"):
        probed = (RESULTS / "text_probe" / f"er_{order}_s0" / "accuracy.csv").read_text()
        assert probed == (RESULTS / "text" / f"er_{order}_s0" / "accuracy.csv").read_text()
    for name in ("seq", "replay"):  # "as SEQ's and REPLAY's are"
        for order in ("i", "ii"):
            probed = (RESULTS / "text_probe" / f"{name}_{order}_s0" / "accuracy.csv").read_text()
            assert probed == (RESULTS / "text" / f"{name}_{order}_s0" / "accuracy.csv").read_text()


def matrices(run: Path) -> tuple[dict, dict, dict]:
    """A probing run's metrics, and its probing and accuracy matrices by row name."""
    import csv
    import json

    metrics = json.loads((run / "metrics.json").read_text())
    with (run / "probing.csv").open() as handle:
        probe = {row["row"]: row for row in csv.DictReader(handle)}
    with (run / "accuracy.csv").open() as handle:
        model = {row["row"]: row for row in csv.DictReader(handle)}
    return metrics, probe, model


def test_the_what_wins_prose_is_the_paired_report_of_the_committed_runs():
    """The "What wins at a budget" paragraphs: each paired difference stated in prose (er at
    10,000 and at M = 200, RanPAC against NCM) and each run's score, from the committed runs."""
    import json

    page = RESULTS_PAGE.read_text(encoding="utf-8")
    text = " ".join(page.split("### What wins at a budget")[1].split("### The headline")[0].split())

    def paired(a: str, b: str) -> str:  # the budget's runs and the M = 200 ones, as labelled
        return paired_statement(compare(both, a, b, stream="text")[0])

    both = tuple(find_runs([RESULTS / "text", RESULTS / "text_er200"]))
    er200, er10k = "er (memory_size=200)", "er (memory_size=10000)"
    assert paired(er200, "avalanche:replay") in text
    assert paired(er200, er10k) in text

    def value(folder: str, run: str, key: str = "average_accuracy") -> float:
        return json.loads((RESULTS / folder / run / "metrics.json").read_text())[key]

    for seed in (0, 1):  # each order's gap at each seed
        for name, b in (("MbPA++", "mbpa++"), ("REPLAY", "replay")):
            gaps = [
                signed(value("text", f"er_{o}_s{seed}") - value("text", f"{b}_{o}_s{seed}"))
                for o in ORDERS
            ]
            assert f"{name} {', '.join(gaps[:-1])} and {gaps[-1]}" in text, (name, seed)
            assert all(gap.startswith("+") for gap in gaps), "above on every order at both seeds"
    budget = records("text")

    def score(folder: str, run: str) -> str:
        metrics = json.loads((RESULTS / folder / run / "metrics.json").read_text())
        return f"{metrics['average_accuracy']:.1f}"

    def scores_by_seed(folder: str, name: str) -> list[str]:
        return [
            ", ".join(score(folder, f"{name}_{o}_s{seed}") for o in ORDERS[:-1])
            + f" and {score(folder, f'{name}_iv_s{seed}')}"
            for seed in (0, 1)
        ]

    runs = sorted(RESULTS.glob("text/er_*_s[01]"))
    assert len(runs) == 8, "the page says four orders at two seeds"
    er10k_scores = scores_by_seed("text", "er")
    assert f"`er` scores {er10k_scores[0]} at seed 0 and {er10k_scores[1]} at seed 1," in text
    forgot = [
        ", ".join(f"{value('text', f'er_{o}_s{seed}', 'forgetting'):.1f}" for o in ORDERS[:-1])
        + f" and {value('text', f'er_iv_s{seed}', 'forgetting'):.1f}"
        for seed in (0, 1)
    ]
    forgot = [f.replace("-", "−") for f in forgot]
    assert f"forgetting {forgot[0]} at seed 0 and {forgot[1]} at seed 1" in text
    mean = summary("text").loc[("er", "average_accuracy"), "mean"]
    caption = " ".join(README.read_text(encoding="utf-8").split())
    assert (
        f"our `er` with 10,000 memories ({mean:.1f} over the four orders at two seeds, above "
        "MbPA++ and REPLAY" in caption
    )
    figure = pareto_table(find_runs(headline_figure_folders())).set_index("configuration")
    both = figure.front_compute & figure.front_memory
    er10k, er200 = "er (memory_size=10000)", "er (memory_size=200)"
    assert set(figure.index[both]) == {er10k}, "the caption: er at 10,000 is on both fronts"
    assert figure.loc[er10k, "mean"] == mean
    assert figure.loc[er200, "front_memory"] and figure.loc["avalanche:replay", "front_compute"]
    memory = figure.loc[er200]
    assert f"with 200 on the memory front ({memory['mean']:.1f} at {memory.memory_mb:.2f} MB)" in (
        caption
    )
    der = figure.loc["avalanche:der"]
    assert der.front_memory and not der.front_compute
    assert f"as is Avalanche's DER++ ({der['mean']:.1f} at {der.memory_mb:.2f} MB)" in caption
    costs = figure.dropna(subset=["tflops"]).sort_values("tflops")
    assert costs.index[-1] == "mbpa++"  # the most compute
    cheapest = costs[costs.front_compute].index[:4]
    prototypes = [f"{n} (warmup_fraction={w})" for w in ("0.0", "0.375") for n in ("ncm", "ranpac")]
    assert sorted(cheapest) == sorted(prototypes), "the four cheapest points on the front"
    shown = [f"{figure.loc[n, 'mean']:.1f}" for n in prototypes]
    mbpa = figure.loc["mbpa++", "mean"]
    assert (
        f"the cheapest points on the compute front ({shown[0]} and {shown[1]}; {shown[2]} and "
        f"{shown[3]} after SEQ\\*'s first-task warm-up); MbPA++ spends the most compute for "
        f"{mbpa:.1f}"
    ) in caption
    for b in ("mbpa++", "replay"):  # the caption's "with 95% confidence"
        (found,) = compare(budget, "er", b, stream="text")
        assert found.verdict == f"er > {b}"
    for seed in (0, 1):
        ranpac = [
            json.loads((RESULTS / "text" / f"ranpac_{o}_s{seed}" / "metrics.json").read_text())
            for o in ORDERS
        ]

        def listed(values: list) -> str:
            return f"{', '.join(values[:-1])} and {values[-1]}"

        scores = listed([f"{m['average_accuracy']:.1f}" for m in ranpac])
        assert f"**{scores}** at seed {seed}" in text
        forgot = listed([f"{m['forgetting']:.1f}" for m in ranpac])
        assert f"{forgot} at seed {seed}" in text
        ridges = listed([f"10^{round(math.log10(m['strategy']['ridge']))}" for m in ranpac])
        assert f"{ridges} {'on orders i–iv ' if seed == 0 else ''}at seed {seed}" in text
    every = {r.run_dir.name: r.metrics for r in budget if r.strategy == "ranpac"}
    low = min(every, key=lambda name: every[name]["average_accuracy"])
    assert [n for n, m in every.items() if m["strategy"]["ridge"] == 1e6] == [low]
    assert "the one low score, order ii at seed 0, is the one run whose λ is 10^6" in text
    assert low == "ranpac_ii_s0"
    gaps = {
        b: compare(budget, "ranpac", b, stream="text")[0].difference
        for b in ("seq", "seq-star", "ncm", "er")
    }
    assert (
        f"above SEQ by {gaps['seq'].mean:.1f} points and SEQ\\* by {gaps['seq-star'].mean:.1f}, "
        f"above NCM by {gaps['ncm'].mean:.1f}"
    ) in text
    d = gaps["er"]
    assert f"--compare ranpac,er`: {signed(d.mean)} points, {stated_interval(d)}" in text
    primal = RESULTS / "text_ranpac_primal" / "ranpac_i_s0"  # λ searched in the M x M form
    rerun = RESULTS / "text" / "ranpac_i_s0"
    assert (primal / "accuracy.csv").read_text() == (rerun / "accuracy.csv").read_text()
    first = json.loads((primal / "metrics.json").read_text())
    assert (
        f"{first['total_flops'] / 1e12:.1f} TFLOPs and {first['seconds'] / 60:.1f} minutes" in text
    )

    er200_scores = scores_by_seed("text_er200", "er")
    assert f"`er` scores {er200_scores[0]} at seed 0 and {er200_scores[1]} at seed 1" in text
    replay_scores = scores_by_seed("text", "avalanche-replay")
    assert f"Avalanche's Replay's {replay_scores[0]} and {replay_scores[1]}:" in text
    forgot = summary("text_er200").loc[("er", "forgetting")]
    theirs = summary("text").loc[("avalanche:replay", "forgetting")]
    assert (
        f"{forgot['mean']:.1f} [{forgot['low']:.1f}, {forgot['high']:.1f}] against Avalanche's "
        f"{theirs['mean']:.1f} [{theirs['low']:.1f}, {theirs['high']:.1f}]"
    ) in text


def documented_comparisons() -> list[str]:
    """Every ``lifelong report <committed runs> --compare A,B`` the README and the guide show
    (inline or in a code block, over line breaks), whitespace made single."""
    found = []
    for page in (README, *sorted((ROOT / "docs" / "guide").glob("*.md"))):
        text = page.read_text(encoding="utf-8")
        for command in re.findall(r'lifelong\s+report\s[^`]*?--compare (?:"[^"]*"|[^\s`]+)', text):
            command = " ".join(command.split())
            if "results/real_budget" in command and "a,b" not in command:  # not a placeholder
                found.append(command)
    return found


@pytest.mark.parametrize("command", documented_comparisons())
def test_every_documented_comparison_runs_on_the_committed_runs(command, capsys, monkeypatch):
    """A page's ``--compare`` names strategies as `lifelong report` labels them (a strategy run
    at two settings is labelled with the setting, e.g. ``er (memory_size=200)``)."""
    import shlex

    from lifelong.experiment.cli import main

    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0, command
    assert "paired runs" in capsys.readouterr().out


def test_the_fewrel_er_statement_is_the_committed_runs():
    """FewRel's `er` paragraph: each order's pooled accuracy, above every continual learner's on
    that order, and its paired differences as `lifelong report --compare` gives them."""
    import json

    text = " ".join(RESULTS_PAGE.read_text(encoding="utf-8").split())
    pooled: dict[str, dict[str, float]] = {}
    for run in sorted((RESULTS / "fewrel").glob("*_s0")):
        name, order = run.name.rsplit("_", 2)[:2]
        value = json.loads((run / "metrics.json").read_text())["pooled_accuracy"]
        pooled.setdefault(name, {})[order] = value
    er, mtl = pooled.pop("er"), pooled.pop("mtl")
    orders = sorted(er)
    assert orders == ["0", "1", "2", "3", "4"], "the page says all five orders"
    listed = [f"{er[o]:.1f}" for o in orders]
    assert f"it pools {', '.join(listed[:-1])} and {listed[-1]}," in text
    assert all(er[o] > runs[o] for runs in pooled.values() for o in orders)
    under = [o for o in orders if er[o] < mtl[o]]
    assert under == ["3"], "the page says er is under MTL on order 3 only"
    assert f"order 3 ({er['3']:.1f} against {mtl['3']:.1f})" in text

    runs = records("fewrel")
    found = {
        b: compare(runs, "er", b, stream="fewrel", metric="pooled_accuracy")[0]
        for b in ("replay", "mbpa++", "oml-er", "seq", "mtl")
    }

    def gap(b: str) -> str:
        d = found[b].difference
        return f"{signed(d.mean)} [{signed(d.low)}, {signed(d.high)}]"

    d = found["replay"].difference
    assert (
        f"--compare er,replay`: {signed(d.mean)} points, 95% CI [{signed(d.low)}, "
        f"{signed(d.high)}], {found['replay'].verdict}"
    ) in text
    assert f"against MbPA++ {gap('mbpa++')}, OML-ER {gap('oml-er')}, SEQ {gap('seq')}" in text
    d = found["mtl"].difference
    assert found["mtl"].verdict == "not resolved"
    assert (
        f"`--compare er,mtl` {signed(d.mean)} points, 95% CI [{signed(d.low)}, {signed(d.high)}], "
        "not resolved"
    ) in text
    assert f"level with MTL ({signed(d.mean)}, [{signed(d.low)}, {signed(d.high)}])" in text


WARM = {
    "NCM (warm)": "ncm (warmup_fraction=0.375)",
    "NCM": "ncm (warmup_fraction=0.0)",
    "RanPAC (warm)": "ranpac (warmup_fraction=0.375)",
    "RanPAC": "ranpac (warmup_fraction=0.0)",
}
"""The warm-up section's names: the prototypes as `lifelong report` labels them beside the
warmed runs (``results/real_budget/text`` and ``text_warm`` read together)."""


def test_the_warm_up_section_is_the_report_of_the_committed_runs(load_script):
    """The prototypes after SEQ*'s warm-up: warmed_prototypes.py's table at seeds 0 and 1, each
    paired row as `lifelong report --compare` gives it, and the prose's scores and costs."""
    import json

    warmed = load_script("text_classification/warmed_prototypes.py")
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    block = re.search(r"<!-- warm-table -->\n(.*?)<!-- /warm-table -->", page, re.S)
    names = ("ncm", "ranpac", "seq", "seq-star")
    grid = {f"{n}_{o}_s{s}" for n in names for o in ORDERS for s in (0, 1)}
    roots = {"none": RESULTS / "text", "0.375": RESULTS / "text_warm"}
    assert block and block.group(1).strip() == warmed.table(roots, grid).strip()
    committed = {p.name for root in roots.values() for p in root.glob("*_s[01]")}
    assert (
        "every run of the two seeds committed" in " ".join(page.split())
        and {n for n in committed if n.rsplit("_", 2)[0] in names} <= grid
    )
    runs = tuple(find_runs([RESULTS / "text", RESULTS / "text_warm"]))
    (table,) = markdown_tables(RESULTS_PAGE, "| comparison after the warm-up (a − b) |")
    label = {**DISPLAY, **WARM}
    pairs = [[n.strip() for n in row[0].split(" − ")] for row in table[1:]]
    shown = {label[n]: n for pair in pairs for n in pair}  # the page's name of each label
    for row, (a, b) in zip(table[1:], ([label[n] for n in pair] for pair in pairs)):
        (found,) = compare(runs, a, b, "average_accuracy", stream="text")
        d = found.difference
        assert numbers(row[1]) == [f"{v:.1f}" for v in (d.mean, d.low, d.high)], row[0]
        assert int(row[2]) == d.n, row[0]
        verdict = found.verdict
        for name in sorted(shown, key=len, reverse=True):  # the page's names in the verdict
            verdict = verdict.replace(name, shown[name])
        assert row[3] == verdict, f"{row[0]}: {row[3]!r}; the runs: {verdict!r}"
    (cold,) = compare(runs, WARM["NCM (warm)"], WARM["NCM"], "average_accuracy", stream="text")
    text = " ".join(page.split())
    assert cold.difference.n == 4 and "so its pairs are four" in text  # NCM unwarmed: seed 0

    def metrics(folder: str, run: str) -> dict:
        return json.loads((RESULTS / folder / run / "metrics.json").read_text())

    def listed(values: list[float]) -> str:
        shown = [f"{v:.1f}" for v in values]
        return f"{', '.join(shown[:-1])} and {shown[-1]}"

    for seed in (0, 1):  # each seed's warmed runs against the unwarmed ones
        parts = []
        for name, page_name in (("ranpac", "RanPAC"), ("ncm", "NCM")):
            if not (RESULTS / "text_warm" / f"{name}_i_s{seed}").exists():
                continue
            warm = [metrics("text_warm", f"{name}_{o}_s{seed}")["average_accuracy"] for o in ORDERS]
            at = seed if name == "ranpac" else 0  # no seed enters unwarmed NCM
            cold = [metrics("text", f"{name}_{o}_s{at}")["average_accuracy"] for o in ORDERS]
            assert all(w > c for w, c in zip(warm, cold)), "the page: lifts both on every run"
            if len({f"{c:.1f}" for c in cold}) > 1:
                parts.append(f"{page_name} {listed(warm)} against {listed(cold)} unwarmed")
            else:
                parts.append(f"{page_name} {listed(warm)} against {cold[0]:.1f}")
        assert f"at seed {seed}, {', '.join(parts)}" in text, seed
    extra = {
        name: (
            metrics("text_warm", f"{name}_i_s0")["total_flops"],
            metrics("text", f"{name}_i_s0")["total_flops"],
        )
        for name in ("ncm", "ranpac")
    }
    added = {f"{(w - c) / 1e12:.1f}" for w, c in extra.values()}
    assert added == {"3.1"} and "The warm-up adds 3.1 TFLOPs a run" in text
    seq_star = summary_of(roots["none"], "seq-star", grid)
    ncm_warm = summary_of(roots["0.375"], "ncm", grid)
    assert (
        f"SEQ\\*'s trained head scores {seq_star:.1f} over its runs and the class means "
        f"{ncm_warm:.1f}"
    ) in text
    (under,) = compare(runs, WARM["RanPAC (warm)"], "er", "average_accuracy", stream="text")
    share = extra["ranpac"][0] / metrics("text", "er_i_s0")["total_flops"]
    gap = -under.difference.mean  # paired by order and seed
    assert f"under `er` by {gap:.1f} points at {share:.0%} of its compute" in text
    (below,) = compare(runs, WARM["RanPAC (warm)"], "avalanche:replay", stream="text")
    replay = pareto_table(records("text")).set_index("configuration").loc["avalanche:replay"]
    share = extra["ranpac"][0] / 1e12 / replay["tflops"]
    assert below.verdict.endswith("< avalanche:replay")
    assert (
        f"under Avalanche's Replay (by {-below.difference.mean:.1f} points at {share:.0%} of its "
        "compute)"
    ) in text


def summary_of(root: Path, name: str, grid: set[str]) -> float:
    """The mean average accuracy of ``name``'s runs of ``grid`` under ``root``."""
    import json

    values = [
        json.loads((run / "metrics.json").read_text())["average_accuracy"]
        for run in sorted(root.glob(f"{name}_*"))
        if run.name in grid and run.name.rsplit("_", 2)[0] == name
    ]
    return sum(values) / len(values)


FRONT_NAMES = {
    "ncm (warmup_fraction=0.0)": "NCM",
    "ncm (warmup_fraction=0.375)": "NCM after the warm-up",
    "ranpac (warmup_fraction=0.0)": "RanPAC",
    "ranpac (warmup_fraction=0.375)": "RanPAC after the warm-up",
    "avalanche:replay": "Avalanche's Replay",
    "avalanche:der": "Avalanche's DER++",
    "er (memory_size=10000)": "`er` with 10,000 memories",
    "er (memory_size=200)": "`er` with 200 memories",
    "seq-star": "SEQ\\*",
}


def test_the_fronts_on_the_results_page_are_the_headline_figures():
    """The results page lists each Pareto front of the README's figure, point by point."""
    figure = pareto_table(find_runs(headline_figure_folders())).set_index("configuration")
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    block = re.search(r"<!-- fronts -->\n(.*?)<!-- /fronts -->", page, re.S)
    assert block
    text = " ".join(block.group(1).split())
    for front, cost, unit in (
        ("front_compute", "tflops", "TFLOPs"),
        ("front_memory", "memory_mb", "MB"),
    ):
        on = figure[figure[front]].sort_values(cost)
        digits = 1 if unit == "TFLOPs" else 2
        points = [
            f"{FRONT_NAMES[name]} ({row['mean']:.1f} at {row[cost]:.{digits}f} {unit})"
            for name, row in on.iterrows()
        ]
        listed = f"{', '.join(points[:-1])} and {points[-1]}"
        assert listed in text, f"{front}: the page should list {listed!r}"


def test_the_der_and_lwf_paragraph_is_the_committed_runs():
    """Avalanche's DER++ and LwF: each order's score, the pairs in prose, and what each costs
    (rows forwarded, compute and memory), from the committed runs."""
    import json

    text = " ".join(RESULTS_PAGE.read_text(encoding="utf-8").split())

    def metrics(run: str, folder: str = "text") -> dict:
        return json.loads((RESULTS / folder / run / "metrics.json").read_text())

    def listed(values: list[str]) -> str:
        return f"{', '.join(values[:-1])} and {values[-1]}"

    def scores(runs: list[dict]) -> str:
        return listed([f"{m['average_accuracy']:.1f}" for m in runs])

    der = [metrics(f"avalanche-der_{o}_s0") for o in ORDERS]
    der_1 = [metrics(f"avalanche-der_{o}_s1") for o in ORDERS]
    lwf = [metrics(f"avalanche-lwf_{o}_s0") for o in ORDERS]
    lwf_1 = [metrics(f"avalanche-lwf_{o}_s1") for o in ORDERS]
    assert f"scores {scores(der)} at seed 0 and {scores(der_1)} at seed 1:" in text
    assert f"scores {scores(lwf)} at seed 0 and {scores(lwf_1)} at seed 1," in text
    budget = records("text")
    gaps = {
        b: compare(budget, a, b, stream="text")[0]
        for a, b in (("avalanche:der", "avalanche:replay"), ("avalanche:lwf", "seq"))
    }
    gaps["avalanche:naive"] = compare(budget, "avalanche:lwf", "avalanche:naive", stream="text")[0]
    to_replay = gaps["avalanche:replay"].difference
    assert (
        f"level with Avalanche's Replay ({signed(to_replay.mean)} points over the {to_replay.n} "
        "pairs, the table above)"
    ) in text
    to_seq, to_naive = gaps["seq"].difference, gaps["avalanche:naive"].difference
    assert f"level with SEQ ({signed(to_seq.mean)} points over the {to_seq.n} pairs)" in text
    assert f"Avalanche's Naive ({signed(to_naive.mean)} over the {to_naive.n} at seed 0)" in text
    assert to_naive.n == 4 and not any(RESULTS.glob("text/avalanche-naive_*_s1"))
    assert all(g.verdict == "not resolved" for g in gaps.values())
    both = tuple(find_runs([RESULTS / "text", RESULTS / "text_er200"]))
    (found,) = compare(both, "avalanche:der", "er (memory_size=200)", stream="text")
    assert paired_statement(found) in text
    (full,) = compare(budget, "avalanche:der", "er", stream="text")
    assert (
        f"and {-full.difference.mean:.1f} points under `er` with the budget's 10,000 memories "
        f"({full.verdict} over the {full.difference.n} pairs"
    ) in text
    assert full.verdict == "avalanche:der < er"
    replay = metrics("avalanche-replay_i_s1")["cost"]["train"]
    train = der[0]["cost"]["train"]
    assert (
        f"{der[0]['total_flops'] / 1e12:.1f} TFLOPs a run, {train['forward_rows']:,} rows "
        f"forwarded in training against Replay's {replay['forward_rows']:,} (measured at seed 1)"
    ) in text
    assert train["forward_rows"] - train["backward_rows"] == 10_000  # every stream row, once
    logits = der[0]["memory_bytes"] - metrics("avalanche-replay_i_s1")["memory_bytes"]
    assert logits == 200 * 33 * 4, "200 × 33 float32 logits beside Replay's patterns"
    assert f"its buffer holds {der[0]['memory_bytes'] / 1e6:.2f} MB" in text
    lwf_flops = lwf[0]["total_flops"] / 1e12
    seq_tflops = pareto_table(budget).set_index("configuration").loc["seq", "tflops"]
    assert (
        f"{lwf_flops - seq_tflops:.1f} TFLOPs more than SEQ ({lwf_flops:.1f} against "
        f"{seq_tflops:.1f}"
    ) in text
    extra = lwf[0]["cost"]["train"]["forward_rows"] - lwf[0]["cost"]["train"]["backward_rows"]
    assert f"the last four datasets' {extra:,} rows" in text
    assert f"and {lwf[0]['memory_bytes'] / 1e6:.2f} MB (the teacher" in text


def test_the_replay_rate_table_is_the_scripts_report_of_the_committed_runs(load_script):
    """The replay-rate ablation: replay_rate.py's table of the committed runs, row by row, and
    each order's score at each rate as the prose lists them, and the paired gaps to SEQ."""
    import json

    replay_rate = load_script("text_classification/replay_rate.py")
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    table = [
        line
        for line in io_of(
            replay_rate.main, ["--collected", str(RESULTS), "--orders", ",".join(ORDERS)]
        ).splitlines()
        if line.startswith("|")
    ]
    assert len(table) == 2 + 8, "two strategies at four rates"
    # the whole table, row after row (its rows at 10% also stand in the dense-replay table)
    assert "\n".join(table) in page, f"{RESULTS_PAGE.name}: the replay-rate table is not {table}"
    text = " ".join(page.split())

    def score(folder: str, run: str) -> str:
        path = RESULTS / folder / run / "metrics.json"
        return f"{json.loads(path.read_text())['average_accuracy']:.1f}"

    def folder(ratio: str) -> str:  # the budget's own rate is the budget's runs
        return "text" if ratio == "0.1" else f"replay_rate_{ratio}"

    ratios = ("0.025", "0.05", "0.1", "0.2")
    for name, label in (("replay", "REPLAY reads "), ("mbpa++", "MbPA++ ")):
        rows = [" / ".join(score(folder(r), f"{name}_{o}_s0") for o in ORDERS) for r in ratios]
        if name == "replay":
            percents = ("2.5%", "5%", "10%", "20%")
            listed = ", ".join(f"{row} at {p}" for row, p in zip(rows[:-1], percents))
            assert f"{label}{listed} and {rows[-1]} at 20%" in text
        else:
            assert f"{label}{', '.join(rows[:-1])} and {rows[-1]}." in text
    folders = [RESULTS / folder(r) for r in ratios]
    ablation = [r for r in find_runs(folders) if r.seed == 0]  # the ablation's seed

    def against_seq(name: str) -> list[str]:
        gaps = []
        for ratio in ratios:
            (found,) = compare(ablation, f"{name} (replay_ratio={ratio})", "seq", stream="text")
            d = found.difference
            assert d.n == 4 and found.verdict.endswith("> seq"), (name, ratio)
            gaps.append(" ".join(f"{v:+.1f}" for v in (d.mean, d.low, d.high)))
        return [g.replace("-", "−") for g in gaps]

    def shown(gap: str) -> str:
        mean, low, high = gap.split()
        return f"{mean} [{low}, {high}]"

    replay = [shown(g) for g in against_seq("replay")]
    assert (
        f"REPLAY − SEQ is {replay[0]} at 2.5%, {replay[1]} at 5%, {replay[2]} at 10% and "
        f"{replay[3]} at 20%"
    ) in text
    mbpa = [shown(g) for g in against_seq("mbpa++")]
    assert f"MbPA++ − SEQ is {', '.join(mbpa[:-1])} and {mbpa[-1]}." in text

    def step(a: str, b: str, name: str = "mbpa++", other: str | None = None) -> str:
        """The paired gap ``name`` at rate a − ``other or name`` at rate b, as the page shows."""
        a_label, b_label = f"{name} (replay_ratio={a})", f"{other or name} (replay_ratio={b})"
        (found,) = compare(ablation, a_label, b_label, stream="text")
        d = found.difference
        return shown(" ".join(f"{v:+.1f}" for v in (d.mean, d.low, d.high)).replace("-", "−"))

    assert f"(20% − 2.5%: {step('0.2', '0.025', 'replay')};" in text
    assert (
        f"(5% − 2.5% {step('0.05', '0.025')}, 10% − 5% {step('0.1', '0.05')}, 20% − 10% "
        f"{step('0.2', '0.1')}; 10% − 2.5% {step('0.1', '0.025')})"
    ) in text
    assert f"the whole range, 20% − 2.5%, is {step('0.2', '0.025')}:" in text
    margins = [step(r, r, "mbpa++", "replay") for r in ratios]
    assert (
        f"MbPA++'s margin over REPLAY**: {margins[0]} at 2.5%, {margins[1]} at 5%, {margins[2]} "
        f"at 10% and {margins[3]} at 20%"
    ) in text


def test_the_seq_star_paragraph_is_the_committed_runs():
    """SEQ*'s paragraph: each order's score at both seeds, its mean and interval, and its paired
    differences with SEQ and REPLAY."""
    import json

    text = " ".join(RESULTS_PAGE.read_text(encoding="utf-8").split())

    def scores(seed: int) -> str:
        values = [
            json.loads((RESULTS / "text" / f"seq-star_{o}_s{seed}" / "metrics.json").read_text())
            for o in ORDERS
        ]
        return " / ".join(f"{m['average_accuracy']:.1f}" for m in values)

    assert f"seed 0 {scores(0)}, seed 1 (" in text
    assert f"minutes a run at one thread) {scores(1)}, mean " in text
    mean, low, high = expected("text", "seq-star", "average_accuracy")
    seq = expected("text", "seq", "average_accuracy")[0]
    assert f"mean {mean} [{low}, {high}] against SEQ's {seq};" in text

    runs = records("text")
    (over_seq,) = compare(runs, "seq-star", "seq", stream="text")
    d = over_seq.difference
    stated = f"{stated_interval(d)} over the {d.n} pairs, {over_seq.verdict}"
    assert f"SEQ\\* − SEQ = {signed(d.mean)}, {stated}" in text
    (replay,) = compare(runs, "replay", "seq-star", stream="text")
    d = replay.difference
    assert d.n == 8 and replay.verdict == "replay > seq-star"
    assert f"REPLAY − SEQ\\* = {signed(d.mean)}, {stated_interval(d)} over the eight pairs" in text


def test_replay_at_half_and_all_of_the_stream_is_the_scripts_report(load_script):
    """REPLAY at 50% and 100% of the stream: replay_rate.py's table of the committed runs (the
    four orders at seeds 0 and 1), each run's score, and the paired differences the paragraph
    states, each with the verdict the runs give."""
    import json

    replay_rate = load_script("text_classification/replay_rate.py")
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    block = re.search(r"<!-- dense-replay-rate -->\n(.*?)<!-- /dense-replay-rate -->", page, re.S)
    assert block, "the results page carries REPLAY at 50% and 100%"
    out = io_of(
        replay_rate.main,
        ["--collected", str(RESULTS), "--ratios", "0.1,0.5,1.0", "--strategies", "replay"]
        + ["--orders", ",".join(ORDERS), "--seeds", "0,1"],
    )
    assert block.group(1).strip() == out[out.index("| strategy") :].strip()
    text = " ".join(page.split())

    def at(folder: str) -> list[dict]:  # seed 0's four orders, then seed 1's
        return [
            json.loads((RESULTS / folder / f"replay_{o}_s{seed}" / "metrics.json").read_text())
            for seed in (0, 1)
            for o in ORDERS
        ]

    def by_seed(ms: list[dict], key: str = "average_accuracy") -> str:
        shown = [f"{m[key]:.1f}" for m in ms]
        s0, s1 = shown[:4], shown[4:]
        return f"{', '.join(s0[:-1])} and {s0[-1]} at seed 0 and {', '.join(s1[:-1])} and {s1[-1]}"

    half, full, tenth = at("replay_rate_0.5"), at("replay_rate_1"), at("text")
    stated = f"At 50% REPLAY scores {by_seed(half)} at seed 1 (at 10%: {by_seed(tenth)} at seed 1)"
    assert stated in text
    runs = tuple(
        find_runs([RESULTS / "text", RESULTS / "replay_rate_0.5", RESULTS / "replay_rate_1"])
    )

    def gap(a: str, b: str) -> tuple[str, str]:
        (found,) = compare(runs, a, b, stream="text")
        d = found.difference
        assert d.n == 8, (a, b)
        return f"{signed(d.mean)} [{signed(d.low)}, {signed(d.high)}]", found.verdict

    half_label, full_label = "replay (replay_ratio=0.5)", "replay (replay_ratio=1.0)"
    for b in ("replay (replay_ratio=0.1)", "er", "avalanche:replay", "mbpa++"):
        stated, verdict = gap(half_label, b)
        assert f"{stated} ({verdict}" in text, (b, stated, verdict)
    assert f"{half[0]['total_flops'] / 1e12:.1f} TFLOPs a run" in text
    (forwarded,) = {m["cost"]["train"]["forward_rows"] for m in half}  # one schedule, every run
    replayed = forwarded - 10_000  # the stream's 5 x 2,000 rows
    assert f"({forwarded:,} training rows: the stream's 10,000 and {replayed:,} replayed)" in text

    # all of the stream: as many rows replayed as er, in bursts of 160 every 160 examples
    assert f"At 100% it scores {by_seed(full)} at seed 1:" in text
    for b in ("replay (replay_ratio=0.5)", "replay (replay_ratio=0.1)"):
        stated, verdict = gap(full_label, b)
        assert f"{stated} ({verdict}" in text, (b, stated, verdict)
    er_runs = [
        json.loads((RESULTS / "text" / f"er_{o}_s{seed}" / "metrics.json").read_text())
        for seed in (0, 1)
        for o in ORDERS
    ]
    assert all(e["average_accuracy"] > m["average_accuracy"] for e, m in zip(er_runs, full))
    assert f"still under `er` on every run ({by_seed(er_runs)} at seed 1)" in text
    for b in ("er", "avalanche:replay", "mbpa++"):
        stated, verdict = gap(full_label, b)
        assert f"{stated} ({verdict}" in text, (b, stated, verdict)
    (forwarded,) = {m["cost"]["train"]["forward_rows"] for m in full}
    replayed = forwarded - 10_000
    assert (
        f"{full[0]['total_flops'] / 1e12:.1f} TFLOPs a run ({forwarded:,} training rows: the "
        in text
    )
    assert f"the stream's 10,000 and {replayed:,} replayed), what `er`" in text
    er_replayed = {e["cost"]["train"]["forward_rows"] - 10_000 for e in er_runs}
    assert er_replayed == {9_984}, "one memory batch of 16 beside each of 624 stream batches"
    events = math.ceil(replayed / 160)  # one update per event of up to 160 stored rows
    assert f"{events} replay updates a run beside its 625 stream updates" in text
    assert f"updates after the first ({9_984 // 16})" in text
    (found,) = compare(runs, half_label, "replay (replay_ratio=0.1)", stream="text")
    (step,) = compare(runs, full_label, half_label, stream="text")
    steps = f"(10% to 50%: {signed(found.difference.mean)}; 50% to 100%: "
    assert f"{steps}{signed(step.difference.mean)})" in text
    for seed in (0, 1):  # each seed's minutes a run, at 50% and at 100%
        took = [
            [round(m["seconds"] / 60) for m in ms[4 * seed : 4 * seed + 4]] for ms in (half, full)
        ]
        spans = f"{min(took[0])}–{max(took[0])} and {min(took[1])}–{max(took[1])} minutes a run"
        assert spans in text, seed


def io_of(function, argv: list[str]) -> str:
    """What ``function(argv)`` prints."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function(argv)
    return out.getvalue()
