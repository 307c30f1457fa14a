"""The results page's "Why SEQ* stays low here" is the committed output of seq_star_probe.py.

`experiments/text_classification/seq_star_probe.py` wrote `results/seq_star_probe/*.md` (its README
says with which options); the page's table pivots `four_orders.md` by order and adds the mean, and
its prose quotes averages, ranges and diagonal cells of both files. A number typed by hand or
left behind by a rerun fails here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from lifelong.streams import ORDERS

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "results" / "seq_star_probe"
REAL_BUDGET = ROOT / "results" / "real_budget" / "text"
RESULTS_PAGE = ROOT / "docs" / "guide" / "results.md"
PROTOCOL_PAGE = ROOT / "docs" / "guide" / "protocol.md"
TEXT_ORDERS = ("i", "ii", "iii", "iv")

# the page's row label -> the script's classifier label
ROWS = {
    "nearest class mean (no training dynamics)": "nearest class mean (no training dynamics)",
    "SEQ\\* as run (cosine × 16, batch 16, one pass, P, FixC)": (
        "SEQ* as run (scale 16, batch 16, 1 pass)"
    ),
    "the reference's recipe (unscaled cosine, batch 4, 5 epochs)": (
        "reference recipe (scale 1, batch 4, 5 epochs)"
    ),
    "as run, 5 epochs": "as run, 5 epochs",
    "as run without P": "as run, no P (seen classes only in the loss)",
    "as run without FixC": "as run, no FixC (old rows train)",
    "as run, scale 1": "as run, scale 1",
    "as run, scale 32": "as run, scale 32",
}
NCM, AS_RUN, REFERENCE = (ROWS[k] for k in list(ROWS)[:3])


@cache
def committed(name: str) -> dict[tuple[str, str], dict]:
    """``{(order, classifier): {"average": float, "last": [...], "diagonal": [...]}}`` of a file."""
    rows = {}
    for line in (PROBE / name).read_text(encoding="utf-8").splitlines()[2:]:
        order, classifier, average, last, diagonal = (c.strip() for c in line.strip("|").split("|"))
        rows[order, classifier] = {
            "average": float(average),
            "last": [float(x) for x in last.split(" / ")],
            "diagonal": [float(x) for x in diagonal.split(" / ")],
        }
    return rows


def page_text() -> str:
    return " ".join(RESULTS_PAGE.read_text(encoding="utf-8").split())


def section() -> str:
    text = page_text()
    start = text.index("**Why SEQ\\* stays low here")
    return text[start : text.index("**A-GEM and OML-ER", start)]


def page_table() -> dict[str, list[str]]:
    lines = RESULTS_PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith("| classifier on frozen MiniLM"))
    table = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        label, *cells = (c.strip() for c in line.strip("|").split("|"))
        table[label] = cells
    return table


def mean_of(classifier: str) -> float:
    four = committed("four_orders.md")
    return sum(four[o, classifier]["average"] for o in TEXT_ORDERS) / len(TEXT_ORDERS)


def test_the_table_is_the_committed_four_orders_by_order_with_their_mean():
    table = page_table()
    assert set(table) == set(ROWS), "one row per classifier the script compares"
    four = committed("four_orders.md")
    for label, classifier in ROWS.items():
        *by_order, mean = table[label]
        assert by_order == [f"{four[o, classifier]['average']:.1f}" for o in TEXT_ORDERS], label
        # the mean of the four shown averages, to the shown digit
        assert abs(float(mean) - mean_of(classifier)) <= 0.05 + 1e-9, (label, mean)


def diagonal_of(name: str, order: str, classifier: str, dataset: str) -> float:
    return committed(name)[order, classifier]["diagonal"][ORDERS[order].index(dataset)]


def test_the_prose_quotes_the_committed_tables():
    text = section()
    shown = {label: float(cells[-1]) for label, cells in page_table().items()}
    ncm, as_run, reference = (shown[k] for k in list(ROWS)[:3])
    assert f"reproduces it ({as_run:.1f};" in text
    real = [  # the committed SEQ* runs at the seed the probe section was written against
        json.loads((REAL_BUDGET / f"seq-star_{o}_s0" / "metrics.json").read_text())
        for o in TEXT_ORDERS
    ]
    real_mean = sum(m["average_accuracy"] for m in real) / len(real)
    assert f"keep dropout on, {real_mean:.1f} at seed 0)" in text
    assert (
        f"class means on the same features reach {ncm:.1f}, so about {round(ncm - as_run)}" in text
    )
    assert f"(5 epochs: {shown['as run, 5 epochs']:.1f})" in text
    either = (shown["as run without P"] + shown["as run without FixC"]) / 2
    assert f"(without either: about {either:.1f})" in text
    assert f"no better here ({reference:.1f})" in text
    dbpedia, yahoo = (
        diagonal_of("four_orders.md", "i", REFERENCE, d) for d in ("dbpedia", "yahoo")
    )
    assert f"(DBpedia {dbpedia:.1f} and Yahoo {yahoo:.1f} right after training on order i)" in text

    def span(values: list[float], unit: str = "") -> str:
        return f"{min(values):.1f}{unit}–{max(values):.1f}{unit}"

    topic3 = committed("topic3_order_i.md")
    three = "i, ag_news+dbpedia+yahoo"
    shuffles = [f"i, classes in 4 tasks (shuffle {k})" for k in range(3)]
    as_run3, ncm3 = topic3[three, AS_RUN]["average"], topic3[three, NCM]["average"]
    assert f"replay reaches {as_run3:.1f} and class means {ncm3:.1f}" in text
    grouped = [topic3[s, AS_RUN]["average"] for s in shuffles]
    assert f"gives {min(grouped):.1f}–{max(grouped):.1f} (three shuffles;" in text
    ref3 = topic3[three, REFERENCE]["average"]
    ref_grouped = [topic3[s, REFERENCE]["average"] for s in shuffles]
    assert f"from it, {ref3:.1f} to {span(ref_grouped)})" in text

    def whole_span(dataset: str) -> str:  # class means right after training, over the orders
        values = [diagonal_of("four_orders.md", o, NCM, dataset) for o in TEXT_ORDERS]
        return f"{round(min(values))}–{round(max(values))}%"

    assert f"(class means right after training: Yelp {whole_span('yelp')}," in text
    assert f"Amazon {whole_span('amazon')})" in text


def test_the_protocol_page_quotes_the_same_diagonals():
    """protocol.md's SEQ* row: the reference's and our scaled head right after DBpedia and Yahoo."""
    text = " ".join(PROTOCOL_PAGE.read_text(encoding="utf-8").split())
    name = "four_orders.md"
    ref = [diagonal_of(name, "i", REFERENCE, d) for d in ("dbpedia", "yahoo")]
    ours = [diagonal_of(name, "i", AS_RUN, d) for d in ("dbpedia", "yahoo")]
    assert (
        f"DBpedia {ref[0]:.1f} and Yahoo {ref[1]:.1f} right after training them, order i; "
        f"scaled: {ours[0]:.1f} and {ours[1]:.1f})"
    ) in text
