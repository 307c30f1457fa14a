"""The results page's prose says what the committed runs say.

tests/test_results_tables.py checks the page's tables and the "What wins at a budget" prose; this
module checks the paragraphs around them that quote single runs, per-order scores, seed
agreement and paired differences, building each quoted string from the runs under
`results/real_budget/` (their `metrics.json`) or from `lifelong report --compare` on them. A
number typed by hand, or left behind when runs are added, fails here.
"""

from __future__ import annotations

import csv
import json
import re
from functools import cache

from lifelong.experiment.reports.costs import pareto_table
from lifelong.experiment.reports.stats import t_interval
from lifelong.experiment.rundir import find_runs
from lifelong.streams import ORDERS as STREAM_ORDERS
from tests.test_results_tables import (
    ORDERS,
    RESULTS,
    RESULTS_PAGE,
    compare,
    expected,
    records,
    signed,
)

ORDERS_DATASETS = {o: tuple(STREAM_ORDERS[o]) for o in ORDERS}
"""The paper orders' datasets, in task order (`lifelong.streams.ORDERS`)."""

SEED_ONE_NAMES = {
    "SEQ": "seq",
    "SEQ\\*": "seq-star",
    "REPLAY": "replay",
    "MbPA++": "mbpa++",
    "OML-ER": "oml-er",
    "Meta-MbPA": "meta-mbpa",
    "RanPAC": "ranpac",
    "`er`": "er",
    "MTL": "mtl",
    "Avalanche's Replay": "avalanche-replay",
    "Avalanche's DER++": "avalanche-der",
    "Avalanche's LwF": "avalanche-lwf",
}
"""How the per-order paragraph names the strategies it lists at seed 1 (run-folder prefixes)."""


def page() -> str:
    """The results page with its line breaks read as spaces."""
    return " ".join(RESULTS_PAGE.read_text(encoding="utf-8").split())


def between(start: str, end: str) -> str:
    text = page()
    first = text.index(start)
    return text[first : text.index(end, first)]


@cache
def metrics(run: str, folder: str = "text") -> dict:
    return json.loads((RESULTS / folder / run / "metrics.json").read_text(encoding="utf-8"))


def value(prefix: str, order: str, seed: int, key: str = "average_accuracy", folder="text"):
    return metrics(f"{prefix}_{order}_s{seed}", folder)[key]


def one(x: float) -> str:
    """A number as the prose prints it: one decimal, a true minus."""
    return f"{x:.1f}".replace("-", "−")


def by_order(prefix: str, seed: int, key: str = "average_accuracy") -> str:
    """A strategy's four orders, ``i / ii / iii / iv``; a BWT with its sign."""
    shown = signed if key == "bwt" else one
    return " / ".join(shown(value(prefix, o, seed, key)) for o in ORDERS)


def minutes(prefix: str, seed: int, orders=ORDERS) -> list[int]:
    return [round(value(prefix, o, seed, "seconds") / 60) for o in orders]


def pair(a: str, b: str, stream: str = "text", metric: str = "average_accuracy") -> str:
    """``+x, [low, high]``: `lifelong report --compare a,b` on the committed runs."""
    (found,) = compare(records(stream), a, b, metric, stream=stream)
    d = found.difference
    return f"{signed(d.mean)}, [{signed(d.low)}, {signed(d.high)}]"


def verdict(a: str, b: str, stream: str = "text", metric: str = "average_accuracy") -> str:
    (found,) = compare(records(stream), a, b, metric, stream=stream)
    return found.verdict


def check_stated(
    text: str,
    stated: dict[str, tuple[str, str, str]],
    stream: str = "text",
    metric: str = "average_accuracy",
) -> None:
    """Each ``{words before: (a, b, verdict)}``: the prose gives ``pair(a, b)`` after the words
    (closing a bold opened by them) and the report's verdict on a − b is the one named."""
    for before, (a, b, judged) in stated.items():
        shown = pair(a, b, stream, metric) + ("**" if before.endswith("**") else "")
        assert f"{before}{shown}" in text, (before, shown)
        assert verdict(a, b, stream, metric) == judged, (a, b)


def seed_gap(prefix: str) -> float:
    """The largest difference between a strategy's two seeds on one order."""
    return max(abs(value(prefix, o, 1) - value(prefix, o, 0)) for o in ORDERS)


def test_the_per_order_paragraph_lists_every_strategy_run_at_seed_one():
    text = page()
    listed = between("Mean over the runs (the four orders at seed 0; ", " at seed 1 too)")
    names = listed.removeprefix("Mean over the runs (the four orders at seed 0; ")
    shown = {n.strip() for part in names.split(" and ") for n in part.split(",")}
    committed = {p.name.rsplit("_", 2)[0] for p in (RESULTS / "text").glob("*_s1")}
    assert {SEED_ONE_NAMES[n] for n in shown} == committed, (shown, committed)
    assert " at seed 1 too)" in text


def test_the_per_order_scores_are_the_committed_runs():
    """Each order at seed 0 (seed 1), Meta-MbPA's BWT, memory and minutes, Avalanche's rows."""
    text = between("Average accuracy per order, i / ii / iii / iv", "so read them as a rough cost")
    for name in ("SEQ", "REPLAY", "MbPA++", "OML-ER", "MTL", "Meta-MbPA"):
        prefix = SEED_ONE_NAMES[name]
        both = " / ".join(
            f"{one(value(prefix, o, 0))} ({one(value(prefix, o, 1))})" for o in ORDERS
        )
        assert f"{name} {both}" in text, name

    meta, mbpa = "meta-mbpa", "mbpa++"
    for seed in (0, 1):  # leads on ii and iii, trails on i and iv
        ahead = [value(meta, o, seed) > value(mbpa, o, seed) for o in ORDERS]
        assert ahead == [False, True, True, False], seed
    assert f"on order i by only {one(value(mbpa, 'i', 1) - value(meta, 'i', 1))}" in text
    memory = [value(meta, o, 1, "memory_examples") for o in ORDERS]
    held = ", ".join(f"{m:,}" for m in memory[:-1]) + f" and {memory[-1]:,}"
    took = minutes(meta, 1)
    assert (
        f"seed 1's BWT {by_order(meta, 1, 'bwt')} with {held} examples in memory, "
        f"{', '.join(map(str, took[:-1]))} and {took[-1]} minutes a run"
    ) in text
    memory = [value(meta, o, 0, "memory_examples") for o in ORDERS]
    assert (
        f"seed 0's BWT {by_order(meta, 0, 'bwt')} with {min(memory):,}–{max(memory):,} examples"
    ) in text
    took = minutes(meta, 0, ("iii", "iv"))  # the page's headline section says it again
    assert f"Meta-MbPA's seed-0 orders iii and iv, {took[0]} and {took[1]} minutes" in page()
    assert f"orders iii and iv took {took[0]} and {took[1]} minutes" in text

    naive, seq = by_order("avalanche-naive", 0), by_order("seq", 0)
    assert f"Avalanche's Naive {naive} (our SEQ {seq} there: within 2 points on every order" in text
    assert all(abs(value("avalanche-naive", o, 0) - value("seq", o, 0)) < 2 for o in ORDERS)
    assert verdict("avalanche:naive", "seq") == "not resolved"
    assert f"Naive − SEQ {pair('avalanche:naive', 'seq')} over the four, not resolved" in text

    ava = "avalanche-replay"
    took = minutes(ava, 0) + minutes(ava, 1)
    assert f"Avalanche's Replay {by_order(ava, 0)} (BWT {by_order(ava, 0, 'bwt')} with 200" in text
    assert f"{min(took[:4])}–{max(took[:4])} minutes a run" in text
    assert (
        f"{min(took[4:])}–{max(took[4:])} minutes a run, costs measured: {by_order(ava, 1)}, "
        f"BWT {by_order(ava, 1, 'bwt')}, within {seed_gap(ava):.1f} points of seed 0"
    ) in text
    over, under = (pair("avalanche:replay", b).replace(", [", " [") for b in ("replay", "mtl"))
    assert f"{over} over our REPLAY and {under} under MTL" in text

    small = max(seed_gap("seq"), seed_gap("replay"))
    large = max(seed_gap("mbpa++"), seed_gap("oml-er"))
    assert (
        f"agree within {small:.1f} points for SEQ and REPLAY and within {round(large)} for" in text
    )


def test_the_headline_in_full_states_the_committed_runs():
    """ "The headline in full": seed agreement, MbPA++ (top1), and every paired difference."""
    text = between("### The headline in full", "### The papers' orderings, judged")

    six = ("SEQ", "SEQ\\*", "REPLAY", "MbPA++", "OML-ER", "MTL")
    gaps = [seed_gap(SEED_ONE_NAMES[n]) for n in six]
    assert f"within {min(gaps):.1f}–{max(gaps):.1f} points of seed 0 on every order" in text
    meta = [abs(value("meta-mbpa", o, 1) - value("meta-mbpa", o, 0)) for o in ORDERS]
    assert f"{min(meta):.1f}–{max(meta):.1f} points of seed 0 on every order" in text

    top1 = [one(value("mbpa++", o, 0, folder="text_top1")) for o in ORDERS]
    head = [one(value("mbpa++", o, 0)) for o in ORDERS]
    assert f"{', '.join(top1[:-1])} and {top1[-1]} against the head's" in text
    assert f"the head's {', '.join(head[:-1])} and {head[-1]} on those orders" in text
    both = [r for r in find_runs([RESULTS / "text", RESULTS / "text_top1"]) if r.seed == 0]
    scopes = ("mbpa++ (adapt_scope=top1)", "mbpa++ (adapt_scope=head)")
    (found,) = compare(both, *scopes, stream="text")
    d = found.difference
    assert found.verdict == "not resolved"
    assert f"(paired {signed(d.mean)}, [{signed(d.low)}, {signed(d.high)}]: not resolved)" in text
    took = [round(value("mbpa++", o, 0, "seconds", "text_top1") / 60) for o in ORDERS]
    assert f"{min(took)}–{max(took)} minutes a run" in text

    bold = pair("replay", "seq").split(", ", 1)
    assert f"REPLAY − SEQ = **{bold[0]} points, 95% CI {bold[1]}** over the 8 paired runs" in text
    assert f"MbPA++ − SEQ = **{pair('mbpa++', 'seq')}** over the 8 paired runs" in text
    stated = {
        "SEQ\\* too (": ("replay", "seq-star", "replay > seq-star"),
        "MbPA++ − REPLAY (": ("mbpa++", "replay", "not resolved"),
        "OML-ER beats SEQ (": ("oml-er", "seq", "oml-er > seq"),
        "it stays below REPLAY (": ("oml-er", "replay", "oml-er < replay"),
        ") and MbPA++ (": ("oml-er", "mbpa++", "oml-er < mbpa++"),
        "A-GEM is barely above SEQ (": ("agem", "seq", "agem > seq"),
        "A-GEM > REPLAY is reversed here (": ("agem", "replay", "agem < replay"),
        "(MbPA − SEQ ": ("mbpa", "seq", "mbpa > seq"),
        "; MbPA++ − MbPA ": ("mbpa++", "mbpa", "mbpa++ > mbpa"),
        "(MTL − REPLAY ": ("mtl", "replay", "mtl > replay"),
    }
    check_stated(text, stated)
    rand = compare(records("text"), "mbpa++", "mbpa++-rand", stream="text")[0].difference
    assert f"loses {rand.mean:.1f} ([{signed(rand.low)}, {signed(rand.high)}])" in text

    fewrel = {
        "REPLAY − SEQ = **": ("replay", "seq", "replay > seq"),
        "REPLAY − A-GEM = ": ("replay", "agem", "replay > agem"),
        "MTL − REPLAY = ": ("mtl", "replay", "mtl > replay"),
        "beats SEQ (": ("oml-er", "seq", "oml-er > seq"),
        "level with REPLAY (": ("oml-er", "replay", "not resolved"),
        "as Holla et al. find (": ("oml-er", "anml-er", "not resolved"),
        "and level with MTL (": ("er", "mtl", "not resolved"),
    }
    pooled = "pooled_accuracy"
    check_stated(text, fewrel, "fewrel", pooled)

    def cell(name: str, metric: str = pooled) -> str:
        mean, *bounds = expected("fewrel", name, metric)
        return f"{mean} [{', '.join(bounds)}]" if bounds else mean

    assert f"REPLAY reaches {cell('replay')} against SEQ's {cell('seq')}:" in text
    assert f"MTL {cell('mtl')} and MTL − REPLAY" in text
    assert f"OML-ER ({cell('oml-er')}) beats SEQ" in text
    assert f"ANML-ER ({cell('anml-er')}) is level with OML-ER" in text
    assert f"forgets little too ({expected('fewrel', 'anml-er', 'forgetting')[0]})" in text
    assert f"MbPA++ gains little there ({expected('fewrel', 'mbpa++', pooled)[0]})" in text
    assert f"is above them all, {cell('er')}, and level with MTL" in text


RATES = ("0.025", "0.05", "0.1", "0.2")
"""The replay-rate ablation's rates (seed 0, the four orders; 10% is the budget's own runs)."""


def at_rate(prefix: str, order: str, rate: str, key: str = "average_accuracy") -> float:
    return value(prefix, order, 0, key, "text" if rate == "0.1" else f"replay_rate_{rate}")


def margins(rate: str) -> list[float]:
    """MbPA++ − REPLAY on each order at one rate."""
    return [at_rate("mbpa++", o, rate) - at_rate("replay", o, rate) for o in ORDERS]


def rate_means(prefix: str, key: str = "average_accuracy") -> list[float]:
    return [sum(at_rate(prefix, o, r, key) for o in ORDERS) / len(ORDERS) for r in RATES]


def test_the_replay_rate_prose_beyond_its_table_is_the_committed_runs():
    """The ablation's shrinking margin (a paired interval over the orders of the margin at 2.5%
    minus that at 20%), its per-order margins and who leads, as the bullets and the headline
    section state them."""
    text = page()
    shrink = t_interval([a - b for a, b in zip(margins("0.025"), margins("0.2"))])
    assert shrink.low > 0, "the shrinking is resolved, as the page says"
    stated = f"{signed(shrink.mean)} [{signed(shrink.low)}, {signed(shrink.high)}]"
    assert f"REPLAY's gain minus MbPA++'s is {stated} (whether" in text
    assert f"the margin at 2.5% minus the margin at 20% is the {stated} above" in text
    forgetting = rate_means("replay", "forgetting")
    assert f"forgetting {one(forgetting[0])} down to {one(forgetting[-1])})" in text
    first, last = (" / ".join(one(m) for m in margins(r)) for r in ("0.025", "0.2"))
    assert f"(per order {first} at 2.5% and {last} at 20%;" in text
    leads = [{o for o, m in zip(ORDERS, margins(r)) if m < 0} for r in RATES]
    assert leads == [set(), {"ii"}, {"ii"}, {"ii", "iii"}]
    assert "REPLAY leads on order ii from 5% on, and on orders ii and iii at 20%" in text
    two_seeds = pair("mbpa++", "replay").split(",")[0]
    assert f"(+{one(sum(margins('0.025')) / 4)} at 2.5% on seed 0, against the table's" in text
    assert f"against the table's {two_seeds} over two seeds)" in text

    headline = between("### The headline in full", "### The papers' orderings, judged")
    ablation = [
        r
        for r in find_runs([RESULTS / "text", *(RESULTS / f"replay_rate_{r}" for r in RATES[::3])])
        if r.seed == 0
    ]
    gaps = []
    for name in ("replay", "mbpa++"):
        (found,) = compare(ablation, f"{name} (replay_ratio=0.025)", "seq", stream="text")
        d = found.difference
        gaps.append(f"{signed(d.mean)}, [{signed(d.low)}, {signed(d.high)}]")
    assert f"(at 2.5%: {gaps[0]} and {gaps[1]});" in headline
    replay, mbpa = rate_means("replay"), rate_means("mbpa++")
    assert f"REPLAY gains with the rate ({one(replay[0])} to {one(replay[-1])})" in headline
    assert f"MbPA++ moves from {one(mbpa[0])} to {one(mbpa[-1])}," in headline
    assert (
        f"(by {one(shrink.mean)} points from 2.5% to 20%, [{signed(shrink.low)}, "
        f"{signed(shrink.high)}])"
    ) in headline


@cache
def last_row(prefix: str, order: str, seed: int = 0) -> dict[str, float]:
    """A run's accuracy after its last task, by dataset (its ``accuracy.csv``)."""
    path = RESULTS / "text" / f"{prefix}_{order}_s{seed}" / "accuracy.csv"
    with path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {k: float(v) for k, v in rows[-1].items() if k != "row"}


def diagonal(prefix: str, order: str, seed: int = 0) -> dict[str, float]:
    """Each task's accuracy right after training on it, by dataset (the budget's runs)."""
    return dict(zip(ORDERS_DATASETS[order], diagonal_at(prefix, order, "text", seed)))


def diagonal_at(prefix: str, order: str, folder: str, seed: int = 0) -> list[float]:
    """Each task's accuracy right after training on it, in the order's task order."""
    path = RESULTS / folder / f"{prefix}_{order}_s{seed}" / "accuracy.csv"
    with path.open(encoding="utf-8") as handle:
        rows = {row["row"]: row for row in csv.DictReader(handle)}
    return [float(rows[f"after {d}"][d]) for d in ORDERS_DATASETS[order]]


def test_the_central_effects_paragraphs_are_the_committed_runs():
    """REPLAY > SEQ and MbPA++ > SEQ: SEQ's diagonals and BWT, MbPA++'s per-order scores, seed
    spreads, BWT, last rows and minutes."""
    text = between(
        "**The papers' central effect shows on real data:**", "**The replay-rate ablation"
    )
    learnt = {}
    for order in ORDERS:
        for dataset, score in diagonal("seq", order).items():
            learnt.setdefault(dataset, []).append(score)
    ratings = learnt["yelp"] + learnt["amazon"]

    def span(values: list[float]) -> str:
        return f"{round(min(values))}–{round(max(values))}"

    assert (
        f"AG News {span(learnt['ag_news'])}, DBpedia {span(learnt['dbpedia'])}, Yahoo "
        f"{span(learnt['yahoo'])}, Yelp and Amazon {span(ratings)} on 5-star ratings"
    ) in text
    for name, word in (("seq", "(BWT "), ("replay", "keeps about half of it (BWT ")):
        bwt = sum(value(name, o, 0, "bwt") for o in ORDERS) / len(ORDERS)
        assert f"{word}{round(bwt)}".replace("-", "−") in text, name

    def listed(prefix: str, seed: int) -> str:
        return ", ".join(one(value(prefix, o, seed)) for o in ORDERS)

    assert (
        f"seed 0 ({listed('mbpa++', 0)}; REPLAY {listed('replay', 0)}; SEQ {listed('seq', 0)}) "
        f"and seed 1 ({listed('mbpa++', 1)};"
    ) in text
    took = minutes("mbpa++", 1)
    assert f"{min(took)}–{max(took)} minutes a run at one thread" in text
    bold = pair("mbpa++", "seq").split(", ", 1)
    assert f"MbPA++ − SEQ = **{bold[0]} points, 95% CI {bold[1]}** over the 8 paired runs" in text
    assert f"as does MbPA++ > SEQ\\* ({pair('mbpa++', 'seq-star')})" in text
    assert verdict("mbpa++", "seq-star") == "mbpa++ > seq-star"
    assert f"MbPA++ − REPLAY = {pair('mbpa++', 'replay')} over 8 pairs: not resolved" in text
    ahead = sum(value("mbpa++", o, s) > value("replay", o, s) for o in ORDERS for s in (0, 1))
    words = ("no", "one", "two", "three", "four", "five", "six", "seven", "all")
    assert f"it is ahead on {words[ahead]} of the eight runs" in text
    gaps = {o: abs(value("mbpa++", o, 1) - value("mbpa++", o, 0)) for o in ORDERS}
    widest = max(gaps, key=gaps.get)
    assert (
        f"differ by up to {gaps[widest]:.1f} points (order {widest}: "
        f"{one(value('mbpa++', widest, 0))} and {one(value('mbpa++', widest, 1))}), more than "
        f"SEQ's or REPLAY's (up to {seed_gap('seq'):.1f} and {seed_gap('replay'):.1f})"
    ) in text
    mean, low, high = expected("text", "mbpa++", "bwt")
    replay_bwt = expected("text", "replay", "bwt")[0]
    assert f"Its BWT, {mean} [{low}, {high}] against REPLAY's {replay_bwt}," in text.replace(
        "−", "-"
    )

    def held(prefix: str, order: str, *datasets: str) -> list[str]:
        return [one(last_row(prefix, order)[d]) for d in datasets]

    ag, db, ya = held("mbpa++", "i", "ag_news", "dbpedia", "yahoo")
    r_ag, r_ya = held("replay", "i", "ag_news", "yahoo")
    assert f"AG News at {ag} (REPLAY {r_ag}) and DBpedia at {db}" in text
    assert f"learnt to {ya} (REPLAY {r_ya})" in text
    db, ya, ag = held("mbpa++", "ii", "dbpedia", "yahoo", "ag_news")
    assert f"it holds DBpedia {db}, Yahoo {ya}, AG News {ag} where SEQ holds " in text
    seq_held = ", ".join(f"{last_row('seq', 'ii')[d]:.0f}" for d in ("dbpedia", "yahoo", "ag_news"))
    assert f"where SEQ holds {seq_held}, but REPLAY, which keeps DBpedia at " in text
    assert f"keeps DBpedia at {held('replay', 'ii', 'dbpedia')[0]}, is ahead" in text
    assert value("replay", "ii", 0) > value("mbpa++", "ii", 0)
    iv = ("ag_news", "yelp", "amazon", "yahoo", "dbpedia")
    ours, theirs = held("mbpa++", "iv", *iv), held("replay", "iv", *iv)
    assert (
        f"ends with AG News {ours[0]}, Yelp {ours[1]}, Amazon {ours[2]}, Yahoo {ours[3]} and "
        f"DBpedia, the last task, {ours[4]} (REPLAY: {', '.join(theirs)})"
    ) in text
    iii = ("yahoo", "dbpedia", "ag_news")
    ours, theirs = held("mbpa++", "iii", *iii), held("replay", "iii", *iii)
    assert f"Order iii ({one(value('mbpa++', 'iii', 0))};" in text
    assert (
        f"ends with Yahoo at {ours[0]} where REPLAY keeps {theirs[0]}, DBpedia at {ours[1]} "
        f"(REPLAY {theirs[1]}) and the last task, AG News, at {ours[2]} (REPLAY {theirs[2]})"
    ) in text
    took = minutes("mbpa++", 0)
    assert f"took {value('mbpa++', 'i', 0, 'seconds') / 3600:.1f} hours of wall time" in text
    assert f"order ii {took[1]} minutes, mostly alone; order iv {took[3]}, of which" in text
    took = minutes("replay", 0)
    assert f"(REPLAY: {min(took)}–{max(took)})" in text


def seed0_mean(prefix: str, key: str = "average_accuracy", folder: str = "text") -> float:
    return sum(value(prefix, o, 0, key, folder) for o in ORDERS) / len(ORDERS)


def listed(prefix: str, folder: str = "text", seed: int = 0, last: str = ", ") -> str:
    """``a, b, c<last>d``: a strategy's four orders at one seed."""
    shown = [one(value(prefix, o, seed, folder=folder)) for o in ORDERS]
    return ", ".join(shown[:-1]) + last + shown[-1]


def cell(name: str, metric: str = "average_accuracy") -> str:
    """``mean [low, high]`` as `lifelong report` gives it for the committed text runs."""
    mean, *bounds = expected("text", name, metric)
    return f"{mean} [{', '.join(bounds)}]"


def span_minutes(prefix: str, seed: int = 0) -> str:
    """``a–b minutes`` (``a minutes`` if every run took as long) of a strategy's four runs."""
    took = minutes(prefix, seed)
    return f"{min(took)}–{max(took)} minutes" if min(took) < max(took) else f"{took[0]} minutes"


def test_the_oml_er_paragraph_is_the_committed_runs():
    """OML-ER at the papers' outer rate and at the budget's: the outer_lr runs, both seeds."""
    text = between("**OML-ER, all four orders, and why", "**ANML-ER and MTL, all four")
    low_lr = "outer_lr/3e-05"
    assert f"At 3e-5 on all four orders ({listed('oml-er', low_lr)};" in text
    runs = [r for r in find_runs([RESULTS / "text", RESULTS / low_lr]) if r.seed == 0]
    at_low, at_budget = "oml-er (outer_lr=3e-05)", "oml-er (outer_lr=0.0001)"

    def paired(a: str, b: str) -> tuple[str, str]:
        (found,) = compare(runs, a, b, stream="text")
        d = found.difference
        return f"{signed(d.mean)}, [{signed(d.low)}, {signed(d.high)}]", found.verdict

    below_replay, below_mbpa = paired(at_low, "replay"), paired(at_low, "mbpa++")
    assert below_replay[1].endswith("< replay") and below_mbpa[1].endswith("< mbpa++")
    assert all(value("oml-er", o, 0, folder=low_lr) < value("replay", o, 0) for o in ORDERS)
    assert f"*below* REPLAY on every order ({below_replay[0]}:" in text
    assert f"and below MbPA++ ({below_mbpa[0]})" in text
    db = ORDERS_DATASETS["ii"].index("dbpedia")
    learnt = [diagonal_at(p, "ii", f)[db] for p, f in (("oml-er", low_lr), ("replay", "text"))]
    assert (
        f"it learnt DBpedia, the first task, to {learnt[0]:.1f}% (REPLAY {learnt[1]:.1f})" in text
    )
    tried = {lr: diagonal_at("oml-er", "ii", f"outer_lr/{lr}")[db] for lr in ("1e-04", "3e-04")}
    scores = {lr: value("oml-er", "ii", 0, folder=f"outer_lr/{lr}") for lr in ("1e-04", "3e-04")}
    forgot = value("oml-er", "ii", 0, "forgetting", "outer_lr/1e-04")
    assert (
        f"1e-4 learns DBpedia to {tried['1e-04']:.1f} and reaches {scores['1e-04']:.1f} "
        f"(forgetting {forgot:.1f}), 3e-4 {tried['3e-04']:.1f} and {scores['3e-04']:.1f};"
    ) in text
    at_seed0 = t_interval([value("oml-er", o, 0) for o in ORDERS])
    assert f"At 1e-4 on all four orders ({listed('oml-er')}; {span_minutes('oml-er')} a run" in text
    assert f"mean {one(at_seed0.mean)} [{one(at_seed0.low)}, {one(at_seed0.high)}]" in text
    gain = paired(at_budget, at_low)
    order_ii = value("oml-er", "ii", 0) - value("oml-er", "ii", 0, folder=low_lr)
    assert f"{gain[0].replace(', [', ' [')} over 3e-5 paired" in text
    assert gain[1] == "not resolved" and f"+{order_ii:.1f} on order ii)" in text
    assert f"forgetting {seed0_mean('oml-er', 'forgetting'):.1f}. On seed 0's" in text
    for b, shown in (("seq", "holds** ("), ("replay", "OML-ER > REPLAY ("), ("mbpa++", "MbPA++ (")):
        assert f"{shown}{paired(at_budget, b)[0]})" in text, b
    assert paired(at_budget, "seq")[1].endswith("> seq")
    assert {paired(at_budget, b)[1] for b in ("replay", "mbpa++")} == {"not resolved"}
    others = [
        diagonal_at("oml-er", o, "text")[ORDERS_DATASETS[o].index(d)]
        for o in ("i", "iii", "iv")
        for d in ("dbpedia", "yahoo")
    ]
    assert f"still learnt to only {round(min(others))}–{round(max(others))}% when trained" in text
    i = [
        diagonal_at("oml-er", "i", "text")[ORDERS_DATASETS["i"].index(d)]
        for d in ("dbpedia", "yahoo")
    ]
    assert f"(order i: DBpedia {i[0]:.1f}, Yahoo {i[1]:.1f} right after their tasks)" in text
    assert f"(2026-11-28: {listed('oml-er', seed=1)}; {minutes('oml-er', 1)[0]} minutes" in text
    assert f"within {seed_gap('oml-er'):.1f} points of the first on every order" in text


def flat(a: str, b: str, stream: str = "text", metric: str = "average_accuracy") -> str:
    """``+x [low, high]``: a paired difference as the prose writes it without a comma."""
    return pair(a, b, stream, metric).replace(", [", " [")


def test_the_anml_er_and_mtl_paragraph_is_the_committed_runs():
    text = between("**ANML-ER and MTL, all four orders", "**EWC, all four orders")
    assert f"scores {listed('anml-er', last=' and ')}, mean {cell('anml-er')}:" in text
    assert f"(OML-ER − ANML-ER {pair('oml-er', 'anml-er')} over the four orders" in text
    assert verdict("oml-er", "anml-er") == "oml-er > anml-er"
    fewrel = flat("oml-er", "anml-er", "fewrel", "pooled_accuracy")
    assert f"on FewRel the two are level, {fewrel})" in text
    assert f"It forgets almost nothing ({expected('text', 'anml-er', 'forgetting')[0]})" in text
    late = {
        d: [diagonal_at("anml-er", o, "text")[ORDERS_DATASETS[o].index(d)] for o in ("iii", "iv")]
        for d in ("dbpedia", "yahoo")
    }
    assert (
        f"(DBpedia {late['dbpedia'][0]:.1f} and {late['dbpedia'][1]:.1f} right after its task on "
        f"orders iii and iv, Yahoo {late['yahoo'][0]:.1f} and {late['yahoo'][1]:.1f})"
    ) in text
    assert f"Against REPLAY it is **reversed** ({pair('anml-er', 'replay')});" in text
    assert verdict("anml-er", "replay") == "anml-er < replay"
    assert f"against SEQ ({pair('anml-er', 'seq')}), A-GEM and MbPA++ not resolved" in text
    assert {verdict("anml-er", b) for b in ("seq", "agem", "mbpa++")} == {"not resolved"}
    assert f"scores {listed('mtl', last=' and ')} at seed 0 ({span_minutes('mtl')} a run)" in text
    assert f"and {listed('mtl', seed=1)} at seed 1 (2026-11-28, {span_minutes('mtl', 1)}" in text
    mtl = [value("mtl", o, s) for o in ORDERS for s in (0, 1)]
    assert f"runs agree within {max(mtl) - min(mtl):.1f} points" in text
    over = {b: flat("mtl", b) for b in ("mbpa++", "replay", "oml-er", "seq", "anml-er", "agem")}
    assert all(verdict("mtl", b) == f"mtl > {b}" for b in over)
    assert (
        f"over 8 pairs MTL − MbPA++ {over['mbpa++']}, MTL − REPLAY {over['replay']}, MTL − OML-ER "
        f"{over['oml-er']}, MTL − SEQ {over['seq']}; over the 4 of seed 0 MTL − ANML-ER "
        f"{over['anml-er']}, MTL − A-GEM {over['agem']}."
    ) in text


def test_the_ewc_mbpa_and_mbpa_rand_paragraphs_are_the_committed_runs():
    text = between("**EWC, all four orders", "**MbPA++-rand, all four orders")
    assert f"(2026-11-28, {span_minutes('ewc')} a run at one thread" in text
    assert f"{listed('ewc', last=' and ')}, mean {cell('ewc')}. It is SEQ plus a little" in text
    assert f"EWC − SEQ = {pair('ewc', 'seq')} over the four orders" in text
    assert verdict("ewc", "seq") == "ewc > seq" and verdict("replay", "ewc") == "replay > ewc"
    assert f"REPLAY − EWC = {pair('replay', 'ewc')}." in text
    seq_forgets = expected("text", "seq", "forgetting")[0]
    ewc_forgets = expected("text", "ewc", "forgetting")[0]
    assert f"(forgetting {ewc_forgets} against SEQ's {seq_forgets})" in text

    assert f"**MbPA, all four orders (2026-11-28, {span_minutes('mbpa')} a run" in text
    assert f"{listed('mbpa', last=' and ')}, mean {cell('mbpa')}, against MbPA++'s " in text
    assert f"MbPA++'s {listed('mbpa++')} and REPLAY's {listed('replay')} on the same" in text
    assert f"MbPA++ − MbPA = **{pair('mbpa++', 'mbpa')}**:" in text
    assert all(value("mbpa++", o, 0) > value("mbpa", o, 0) for o in ORDERS)
    assert f"MbPA − SEQ = {pair('mbpa', 'seq')}: local adaptation" in text
    mbpa_forgets = expected("text", "mbpa", "forgetting")[0]
    assert f"(forgetting {mbpa_forgets} against SEQ's {seq_forgets}; order i" in text
    ends = {p: last_row(p, "i") for p in ("mbpa", "mbpa++")}
    assert (
        f"AG News {one(ends['mbpa']['ag_news'])} and DBpedia {one(ends['mbpa']['dbpedia'])}, "
        f"MbPA++ {one(ends['mbpa++']['ag_news'])} and {one(ends['mbpa++']['dbpedia'])})"
    ) in text
    assert verdict("mbpa", "replay") == "not resolved"
    assert f"MbPA − REPLAY = {pair('mbpa', 'replay')}, not resolved" in text
    ii = last_row("mbpa", "ii")
    best = max(ORDERS, key=lambda o: value("replay", o, 0))
    worst = min(ORDERS, key=lambda o: value("mbpa", o, 0))
    assert best == worst == "ii"
    assert f"at its best ({one(value('replay', 'ii', 0))}), MbPA is at its worst" in text
    ratings = sorted(round(ii[d]) for d in ("yelp", "amazon"))
    assert (
        f"at its worst ({one(value('mbpa', 'ii', 0))}, DBpedia and Yahoo down to "
        f"{round(ii['dbpedia'])} and {round(ii['yahoo'])} after the last two tasks, the rating "
        f"tasks at {ratings[0]}–{ratings[1]})"
    ) in text

    text = between("**MbPA++-rand, all four orders", "The papers' orderings do not")
    rand = "mbpa++-rand"
    assert f"(2026-11-28, {span_minutes(rand)} a run at one thread beside a second" in text
    assert f"{listed(rand, last=' and ')}, mean {cell(rand)}. It trains exactly" in text
    forgets = [seed0_mean(p, "forgetting") for p in (rand, "mbpa++")]
    assert f"as little as MbPA++ ({forgets[0]:.1f} against {forgets[1]:.1f})" in text
    assert f"MbPA++ − MbPA++-rand = **{pair('mbpa++', rand)}** over the" in text
    ends = {p: last_row(p, "i") for p in (rand, "mbpa++")}
    assert (
        f"DBpedia reads {one(ends[rand]['dbpedia'])} against MbPA++'s "
        f"{one(ends['mbpa++']['dbpedia'])} and Yahoo {one(ends[rand]['yahoo'])} against "
        f"{one(ends['mbpa++']['yahoo'])}"
    ) in text
    assert f"above SEQ ({pair(rand, 'seq')}) and A-GEM ({pair(rand, 'agem')});" in text
    assert (
        f"against REPLAY ({pair(rand, 'replay')}) and MbPA ({pair(rand, 'mbpa')}) it is not" in text
    )
    assert {verdict(rand, b) for b in ("replay", "mbpa")} == {"not resolved"}


def test_the_maml_er_paragraph_is_the_committed_runs():
    text = between("**MAML-ER, all four orders", "**MbPA++ adapting the top layer")
    assert f"(2026-11-28, {span_minutes('maml-er')} a run at one thread" in text
    assert f"{listed('maml-er', last=' and ')}, mean {cell('maml-er')}, against OML-ER's " in text
    assert f"OML-ER's {listed('oml-er', last=' and ')} on the same orders" in text
    assert f"MAML-ER − OML-ER = {pair('maml-er', 'oml-er')}: not resolved" in text
    assert verdict("maml-er", "oml-er") == "not resolved"
    assert all(abs(value("maml-er", o, 0) - value("oml-er", o, 0)) < 1.5 for o in ORDERS)
    assert f"forgets as little ({expected('text', 'maml-er', 'forgetting')[0]})" in text
    names = {"yahoo": "Yahoo", "yelp": "Yelp", "ag_news": "AG News", "dbpedia": "DBpedia"}
    lasts = [
        f"{diagonal_at('maml-er', o, 'text')[-1]:.1f} ({names[ORDERS_DATASETS[o][-1]]}, "
        + ("order i" if o == "i" else o)
        + ")"
        for o in ORDERS
    ]
    assert f"{', '.join(lasts[:-1])} and {lasts[-1]} right after its training" in text
    assert f"Against ANML-ER it is {pair('maml-er', 'anml-er')}; against REPLAY " in text
    assert f"against REPLAY {pair('maml-er', 'replay')}, not resolved" in text
    assert verdict("maml-er", "replay") == "not resolved"


def test_the_top1_reading_is_the_committed_runs():
    """MbPA++ adapting the top layer: per-order scores, gaps, last rows and minutes."""
    text = between("Four orders, one seed each, so a reading", "**The papers' orderings, every")
    top, head = "text_top1", "text"
    assert f"top1 reads {listed('mbpa++', top, last=' and ')} against head's " in text
    assert f"head's {listed('mbpa++', head, last=' and ')}, ahead" in text
    gaps = [value("mbpa++", o, 0, folder=top) - value("mbpa++", o, 0) for o in ORDERS]
    assert all(g > 0 for g in gaps[:3]) and gaps[3] < 0
    assert (
        f"ahead on the first three by {min(gaps[:3]):.1f} to {max(gaps[:3]):.1f} points and "
        f"{-gaps[3]:.1f} behind on order iv"
    ) in text
    three = [
        r for r in find_runs([RESULTS / "text", RESULTS / top]) if r.seed == 0 and r.order != "iv"
    ]
    (found,) = compare(three, "mbpa++ (adapt_scope=top1)", "mbpa++ (adapt_scope=head)")
    d = found.difference
    assert f"(it was [{d.low:.1f}, {d.high:+.1f}] over orders i to iii)" in text

    def ends(order: str) -> tuple[dict, dict]:
        rows = []
        for folder in (top, head):
            path = RESULTS / folder / f"mbpa++_{order}_s0" / "accuracy.csv"
            with path.open(encoding="utf-8") as handle:
                row = list(csv.DictReader(handle))[-1]
            rows.append({k: float(v) for k, v in row.items() if k != "row"})
        return rows[0], rows[1]

    def side(order: str, *datasets: str, sep: str = " / ") -> list[str]:
        a, b = ends(order)
        return [f"{a[d]:.1f}{sep}{b[d]:.1f}" for d in datasets]

    a, b = ends("i")
    widest = max(abs(a[d] - b[d]) for d in a)
    assert f"within {widest:.1f} points on every dataset (Yelp" in text
    yelp, *rest = side("i", "yelp", "ag_news", "dbpedia", "amazon", "yahoo")
    assert (
        f"(Yelp {yelp.replace(' / ', ' against ')}, AG News {rest[0]}, DBpedia {rest[1]}, "
        f"Amazon {rest[2]}, Yahoo {rest[3]});"
    ) in text
    db, ya = side("ii", "dbpedia", "yahoo")
    assert f"(DBpedia {db.replace(' / ', ' against ')}, Yahoo {ya}) and reads within 2" in text
    a, b = ends("ii")
    assert all(abs(a[d] - b[d]) <= 2 + 1e-9 for d in ("ag_news", "amazon", "yelp"))
    db, ye, ya, am, ag = side("iii", "dbpedia", "yelp", "yahoo", "amazon", "ag_news")
    assert (
        f"(DBpedia {db.replace(' / ', ' against ')}, Yelp {ye}, Yahoo {ya}, Amazon {am}) and "
        f"learns AG News, the last, less ({ag.replace(' / ', ' against ')})"
    ) in text
    ag, ye, am, ya, db = side("iv", "ag_news", "yelp", "amazon", "yahoo", "dbpedia")
    assert (
        f"News, Yelp and Amazon ({ag}, {ye}, {am}), less of Yahoo ({ya}), and again learns the "
        f"last task, DBpedia, less ({db.replace(' / ', ' against ')})"
    ) in text
    took = [round(value("mbpa++", o, 0, "seconds", top) / 60) for o in ORDERS]
    assert f"Each run took {', '.join(map(str, took[:-1]))} and {took[-1]} minutes" in text
    assert f"Head's seed-1 runs took {span_minutes('mbpa++', 1)} at one thread" in text


def test_the_text_agem_paragraphs_are_the_committed_runs():
    text = between("**A-GEM and OML-ER, order i (one run each", "As Holla's `cls_agem.py`")
    assert f"A-GEM ({one(value('agem', 'i', 0))}) is SEQ ({one(value('seq', 'i', 0))})" in text
    learnt = dict(zip(ORDERS_DATASETS["i"], diagonal_at("agem", "i", "text")))
    assert (
        f"(AG News {one(learnt['ag_news'])}, DBpedia {one(learnt['dbpedia'])}, Yahoo "
        f"{one(learnt['yahoo'])} right after training)"
    ) in text
    end = last_row("agem", "i")
    earlier = ", ".join(one(end[d]) for d in ORDERS_DATASETS["i"][:-1])
    assert f"(after Yahoo the earlier four score {earlier}):" in text
    counts = metrics("agem_i_s0")["strategy"]
    assert f"its {counts['projections']} projections over {counts['replays']} events" in text
    low_lr = "outer_lr/3e-05"
    assert f"OML-ER ({one(value('oml-er', 'i', 0, folder=low_lr))}, at the papers'" in text
    assert f"its BWT, {signed(value('oml-er', 'i', 0, 'bwt', low_lr))}, was not" in text
    learnt = dict(zip(ORDERS_DATASETS["i"], diagonal_at("oml-er", "i", low_lr)))
    assert (
        f"(DBpedia {one(learnt['dbpedia'])} right after training on it, Yahoo "
        f"{one(learnt['yahoo'])}; AG News {one(learnt['ag_news'])})"
    ) in text
    path = RESULTS / low_lr / "oml-er_i_s0" / "accuracy.csv"
    with path.open(encoding="utf-8") as handle:
        final = list(csv.DictReader(handle))[-1]
    assert f"(AG News {float(final['ag_news']):.1f} at the end)" in text

    assert f"**A-GEM, all four orders (2026-11-27 and 28):** {listed('agem', last=' and ')}" in text
    assert (
        f"against SEQ's {listed('seq', last=' and ')}: A-GEM − SEQ = {pair('agem', 'seq')}" in text
    )
    iv_agem, iv_seq = last_row("agem", "iv"), last_row("seq", "iv")
    assert (
        f"it keeps Yahoo at {one(iv_agem['yahoo'])} where SEQ keeps {one(iv_seq['yahoo'])}" in text
    )
    assert f"is **reversed** here ({pair('agem', 'replay')});" in text
    assert f"MbPA++ > A-GEM holds ({pair('mbpa++', 'agem')})." in text
    took = minutes("agem", 0)
    assert f"Order iv ran in {took[3]} minutes" in text
    assert f"orders i–iii's {min(took[:3])}–{max(took[:3])} count time" in text


FEWREL_ORDERS = ("0", "1", "2", "3", "4")
"""FewRel's five cluster orders (seed 0)."""


def pooled(prefix: str) -> list[float]:
    return [value(prefix, o, 0, "pooled_accuracy", "fewrel") for o in FEWREL_ORDERS]


def pooled_list(prefix: str, last: str = ", ") -> str:
    shown = [one(v) for v in pooled(prefix)]
    return ", ".join(shown[:-1]) + last + shown[-1]


def fewrel_cell(name: str, metric: str = "pooled_accuracy") -> str:
    mean, *bounds = expected("fewrel", name, metric)
    return f"{mean} [{', '.join(bounds)}]" if bounds else mean


def fewrel_diagonal_mean(prefix: str) -> float:
    """The mean of every FewRel run's diagonal (each cluster right after its training)."""
    values = []
    for order in FEWREL_ORDERS:
        path = RESULTS / "fewrel" / f"{prefix}_{order}_s0" / "accuracy.csv"
        with path.open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        names = [k for k in rows[0] if k != "row"]
        values += [float(rows[1 + i][n]) for i, n in enumerate(names)]  # rows[0] is "before"
    return sum(values) / len(values)


def test_the_fewrel_paragraphs_are_the_committed_runs():
    """Real FewRel: each strategy's pooled accuracy per order, paired differences, forgetting,
    diagonals and A-GEM's projections."""
    text = between("Pooled accuracy per order 0–4: SEQ", "**What local adaptation does on each")
    fr, pa = "fewrel", "pooled_accuracy"

    def fpair(a: str, b: str) -> str:
        return flat(a, b, fr, pa)

    forgets = {n: expected(fr, n, "forgetting")[0] for n in ("seq", "replay", "agem", "oml-er")}
    assert f"SEQ {pooled_list('seq')}; REPLAY {pooled_list('replay')}." in text
    bold = pair("replay", "seq", fr, pa).split(", ", 1)
    assert f"**REPLAY − SEQ = {bold[0]} points, 95% CI {bold[1]}** over the 5" in text
    gains = [a - b for a, b in zip(pooled("replay"), pooled("seq"))]
    assert all(g > 0 for g in gains)
    assert f"positive on each ({', '.join(signed(g) for g in gains)})" in text

    assert f"A-GEM (pooled {pooled_list('agem')} over orders 0–4)" in text
    assert f"A-GEM − SEQ = {pair('agem', 'seq', fr, pa)} over the 5 paired orders" in text
    assert verdict("agem", "seq", fr, pa) == "not resolved"
    assert f'REPLAY − A-GEM = **{pair("replay", "agem", fr, pa)}**, "holds"' in text
    assert (
        f"Its forgetting ({forgets['agem']}) is SEQ's ({forgets['seq']}), not REPLAY's "
        f"({forgets['replay']})"
    ) in text
    counts = [metrics(f"agem_{o}_s0", fr)["strategy"] for o in FEWREL_ORDERS]
    assert {c["replays"] for c in counts} == {25}
    projected = [c["projections"] for c in counts]
    assert projected == [14, 14, 15, 14, 14]
    assert "25 of the stream's 400 updates, and it projected 14 of them (15 on order 2;" in text

    assert f"pooled accuracy {pooled_list('mtl', ' and ')} against REPLAY's " in text
    assert f"against REPLAY's {pooled_list('replay', ' and ')} on the same orders" in text
    mtl = {b: pair("mtl", b, fr, pa) for b in ("replay", "agem", "seq", "mbpa++", "oml-er")}
    assert (
        f"MTL − REPLAY **{mtl['replay']}**, MTL − A-GEM {fpair('mtl', 'agem')}, MTL − SEQ " in text
    )
    assert f'MTL − SEQ {fpair("mtl", "seq")}, all "holds"' in text
    mtl_metrics = [metrics(f"mtl_{o}_s0", fr) for o in FEWREL_ORDERS]
    forgot = sum(m["forgetting"] for m in mtl_metrics) / 5
    transfer = sum(m["fwt"] for m in mtl_metrics) / 5
    assert f"barely forgot ({forgot:.1f}, against REPLAY's {forgets['replay']})" in text
    assert f"transferred forward ({transfer:.1f})" in text

    assert f"pooled accuracy {pooled_list('mbpa++', ' and ')} against" in text
    assert (
        f"REPLAY's {pooled_list('replay', ' and ')} and SEQ's {pooled_list('seq', ' and ')} on"
        in text
    )
    assert pooled("mbpa++")[2] == pooled("seq")[2], "order 2's two equal scores"
    assert f"happen to score {round(pooled('seq')[2] * 4)} of the 400 test" in text
    mb = [a - b for a, b in zip(pooled("mbpa++"), pooled("seq"))]
    assert sum(m > 0 for m in mb) == 4 and sum(abs(m) < 1e-9 for m in mb) == 1
    assert f"MbPA++ − SEQ {fpair('mbpa++', 'seq')} (positive on four orders, level on one;" in text
    against = f"MbPA++ − REPLAY {fpair('mbpa++', 'replay')}, MbPA++ − A-GEM "
    assert f"{against}{fpair('mbpa++', 'agem')}: all" in text
    assert {verdict("mbpa++", b, fr, pa) for b in ("seq", "replay", "agem")} == {"not resolved"}
    assert f"MTL − MbPA++ {fpair('mtl', 'mbpa++')}." in text
    text_forgets = seed0_mean("mbpa++", "forgetting")
    assert (
        f"Its forgetting ({expected(fr, 'mbpa++', 'forgetting')[0]}) is close to REPLAY's "
        f"({forgets['replay']}), not the small forgetting it shows on text ({text_forgets:.1f})"
    ) in text

    assert (
        f"pooled accuracy {pooled_list('oml-er', ' and ')}, mean **{fewrel_cell('oml-er')}**"
        in text
    )
    assert (
        f"SEQ **{fpair('oml-er', 'seq')}** and OML-ER − A-GEM **{fpair('oml-er', 'agem')}**" in text
    )
    assert f'OML-ER − REPLAY {fpair("oml-er", "replay")}, "not resolved"' in text
    assert f'MTL − OML-ER {fpair("mtl", "oml-er")}, "holds"; OML-ER − MbPA++ ' in text
    assert f"OML-ER − MbPA++ {fpair('oml-er', 'mbpa++')}." in text
    bwt = {n: expected(fr, n, "bwt")[0].replace("-", "−") for n in ("oml-er", "replay", "anml-er")}
    assert (
        f"(forgetting {forgets['oml-er']} against REPLAY's {forgets['replay']}, BWT "
        f"{bwt['oml-er']} against {bwt['replay']})"
    ) in text
    diag = {n: fewrel_diagonal_mean(n) for n in ("oml-er", "replay", "seq", "anml-er")}
    assert (
        f"{diag['oml-er']:.1f} on average against REPLAY's {diag['replay']:.1f} and SEQ's "
        f"{diag['seq']:.1f})"
    ) in text
    held = {metrics(f"oml-er_{o}_s0", fr)["memory_examples"] for o in FEWREL_ORDERS}
    assert held == {1588} and "holds 1,588 of the 1,600 sentences" in text

    assert (
        f"pooled accuracy {pooled_list('anml-er', ' and ')}, mean {fewrel_cell('anml-er')}." in text
    )
    anml_forgets = expected(fr, "anml-er", "forgetting")[0]
    assert (
        f"low forgetting ({anml_forgets} against OML-ER's {forgets['oml-er']} and REPLAY's "
        f"{forgets['replay']}, BWT {bwt['anml-er']})"
    ) in text
    assert (
        f"(mean diagonal {diag['anml-er']:.1f}, OML-ER {diag['oml-er']:.1f}, REPLAY "
        f"{diag['replay']:.1f})"
    ) in text
    assert f'OML-ER − ANML-ER {fpair("oml-er", "anml-er")} ("no difference found"' in text
    assert f'MTL − ANML-ER **{fpair("mtl", "anml-er")}**, "holds"' in text
    assert (
        f"ANML-ER − REPLAY {fpair('anml-er', 'replay')}, ANML-ER − A-GEM "
        f"{fpair('anml-er', 'agem')} and ANML-ER − SEQ {fpair('anml-er', 'seq')}, all"
    ) in text
    gaps = {
        b: [signed(a - c) for a, c in zip(pooled("anml-er"), pooled(b))] for b in ("seq", "agem")
    }
    seq, agem = (f"{', '.join(g[:-1])} and {g[-1]}" for g in gaps.values())
    assert f"against SEQ it is {seq} on orders 0–4, against A-GEM {agem}, ahead" in text


def probe_rows(name: str) -> dict[str, dict[str, float]]:
    """`results/adaptation_probe/<name>`'s table: task -> column -> value."""
    path = RESULTS.parent / "adaptation_probe" / name
    lines = [s for s in path.read_text(encoding="utf-8").splitlines() if s.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        task, *cells = (c.strip() for c in line.strip("|").split("|"))
        rows[task] = {h: float(c) for h, c in zip(header[1:], cells) if c}
    return rows


def test_the_adaptation_probe_is_the_committed_probe_tables():
    """The table and prose of "What local adaptation does on each stream" read the committed
    output of `experiments/adaptation_probe.py` (its pooled rows, and the text run's datasets)."""
    text = between("**What local adaptation does on each stream**", "**The campaign is complete**")
    fewrel, words = probe_rows("fewrel_order0.md"), probe_rows("text_order_i.md")
    columns = ("no adaptation", "as run (head)", "oracle: own label", "oracle: own task")
    for label, rows, chance in (
        ("FewRel order 0 (pooled)", fewrel, " (chance 1.3%)"),
        ("text order i (average)", words, ""),
    ):
        p = rows["pooled"]
        cells = [f"{p[c]:.1f}" for c in columns]
        same, task = p["neighbours: same label"], p["same task"]
        assert f"| {label} | {' | '.join(cells)} | {same:.1f}%{chance} | {task:.1f}% |" in (
            RESULTS_PAGE.read_text(encoding="utf-8")
        ), label
    t, f = words["pooled"], fewrel["pooled"]
    assert f"adds **{t['as run (head)'] - t['no adaptation']:.1f} points** although five" in text
    assert 1 - t["neighbours: same label"] / 100 > 0.8, "five of six neighbours: another label"
    names = {"yelp": "Yelp", "ag_news": "AG News", "dbpedia": "DBpedia", "amazon": "Amazon"}
    gains = ", ".join(
        f"{names[d]} {words[d]['no adaptation']:.1f} → {words[d]['as run (head)']:.1f}"
        for d in names
    )
    assert f"it gains on every earlier dataset ({gains}) and loses on the last (Yahoo " in text
    y = words["yahoo"]
    assert f"(Yahoo {y['no adaptation']:.1f} → {y['as run (head)']:.1f})" in text
    assert f"neighbours from the right dataset ({t['same task']:.1f}%) carry that" in text
    assert f"On FewRel it adds **{f['as run (head)'] - f['no adaptation']:.1f}**:" in text
    assert f"(the own-label oracle's {f['oracle: own label']:.1f}, an upper bound" in text
    assert f"the answer), {f['neighbours: same label']:.1f}% of them" in text
    over_run = f["oracle: own task"] - f["as run (head)"]
    own_label = f["oracle: own label"] - f["as run (head)"]
    assert (
        f"labels unread, give {f['oracle: own task']:.1f}, {over_run:.1f} points over the nearest "
        f"neighbours, against {own_label:.1f} for its own relation's"
    ) in text
    assert (
        f"labels unread, give {t['oracle: own task']:.1f}, as much as the nearest neighbours "
        f"({t['as run (head)']:.1f}) and {t['oracle: own task'] - t['no adaptation']:.1f} over no"
    ) in text
    ag, yelp = words["ag_news"], words["yelp"]
    assert (
        f"(AG News {ag['no adaptation']:.1f} → {ag['oracle: own task']:.1f}, Yelp "
        f"{yelp['no adaptation']:.1f} → {yelp['oracle: own task']:.1f})"
    ) in text
    assert (
        f"On FewRel they give {f['oracle: own task']:.1f}, "
        f"{f['oracle: own task'] - f['no adaptation']:.1f} over none, against "
        f"{f['oracle: own label'] - f['no adaptation']:.1f} for neighbours" in text
    )
    campaign = value("mbpa++", "0", 0, "pooled_accuracy", "fewrel")
    assert f["as run (head)"] == round(campaign, 1)
    assert f"reproduces its {campaign:.1f} as run" in text
    assert t["as run (head)"] == round(value("mbpa++", "i", 0), 1), "the text run's own score"


def test_the_orderings_judged_prose_is_the_committed_runs():
    """ "The papers' orderings, judged" and the claims table's preface: Meta-MbPA's scores, its
    8-pair leads and what the seed-0 pairs alone said."""
    text = between("### The papers' orderings, judged", "## The demo")
    assert (
        f"seed 0 on the four orders ({by_order('meta-mbpa', 0)}; MbPA++ {by_order('mbpa++', 0)} "
        f"there) and at seed 1 ({by_order('meta-mbpa', 1)}; MbPA++ {by_order('mbpa++', 1)})"
    ) in text
    assert f"(OML-ER {flat('oml-er', 'replay').split()[0]} over 8 pairs," in text
    assert f"ANML-ER {flat('anml-er', 'replay').split()[0]} over 4)" in text
    leads = sum(value("meta-mbpa", o, s) > value("mbpa++", o, s) for o in ORDERS for s in (0, 1))
    assert leads == 4
    assert f"({pair('meta-mbpa', 'mbpa++')}, 8 pairs: it leads on four" in text
    for b in ("oml-er", "replay"):
        assert verdict("meta-mbpa", b) == f"meta-mbpa > {b}"
    assert (
        f"leads OML-ER ({pair('meta-mbpa', 'oml-er')}) and REPLAY ({pair('meta-mbpa', 'replay')})"
    ) in text
    seed0 = [r for r in records("text") if r.seed == 0]
    alone = []
    for b in ("oml-er", "replay"):
        (found,) = compare(seed0, "meta-mbpa", b, stream="text")
        assert found.verdict == "not resolved"
        d = found.difference
        alone.append(f"{signed(d.mean)}, [{signed(d.low)}, {signed(d.high)}]")
    assert f"neither lead was resolved ({alone[0]}; {alone[1]}):" in text
    preface = between("**The papers' orderings, every claim**", "| the papers' claim |")
    assert (
        f"its leads over OML-ER, {alone[0].replace(', [', ' [')}, and REPLAY, "
        f"{alone[1].replace(', [', ' [')}, were not resolved" in preface
    )


def test_the_seq_star_orders_and_the_half_rate_costs_are_the_committed_runs():
    """SEQ*'s order i and ii readings, and what the 50% paragraph compares REPLAY with."""
    text = between("**SEQ\\*, all four orders at two seeds", "**Why SEQ\\* stays low here")
    star, seq = "seq-star", "seq"
    assert round(value(star, "i", 0), 1) == round(value(seq, "i", 0), 1)
    assert f"Order i: {one(value(star, 'i', 0))}, the same as SEQ on that order." in text
    learnt = dict(zip(ORDERS_DATASETS["i"], diagonal_at(star, "i", "text")))
    assert (
        f"(AG News {one(learnt['ag_news'])} with the encoder frozen after the warm-up on Yelp, "
        f"DBpedia {one(learnt['dbpedia'])}, Yahoo {one(learnt['yahoo'])})"
    ) in text
    end = last_row(star, "i")
    earlier = [one(end[d]) for d in ORDERS_DATASETS["i"][:-1]]
    assert (
        f"after Yahoo the earlier four score {', '.join(earlier[:-1])} and {earlier[-1]}," in text
    )
    ii = last_row(star, "ii")
    assert (
        f"Order ii (warm-up on DBpedia): {one(value(star, 'ii', 0))} against SEQ's "
        f"{one(value(seq, 'ii', 0))}, keeping DBpedia at {one(ii['dbpedia'])} and AG News at "
        f"{one(ii['ag_news'])} where SEQ keeps nothing but the two rating tasks"
    ) in text
    kept = {d for d, v in last_row(seq, "ii").items() if v > 0}
    assert kept == {"yelp", "amazon"}

    text = between("At 50% REPLAY scores", "**SEQ\\*, all four orders at two seeds")
    assert f"(at 10%: {listed('replay', last=' and ')} at seed 0 and" in text
    budget = pareto_table(records("text")).set_index("configuration")  # derived for REPLAY's
    assert f"TFLOPs a run against {budget.loc['replay', 'tflops']:.1f} (" in text
    er = metrics("er_i_s0")
    replayed = er["cost"]["train"]["forward_rows"] - 10_000
    assert f"which replays {replayed:,} rows a run, one memory batch beside" in text
    assert f"every stream batch, for {er['total_flops'] / 1e12:.1f} TFLOPs, and under" in text


def test_the_campaign_paragraph_is_the_committed_runs():
    """What the first campaign ran: the five-seed pairing of Avalanche's Naive with SEQ, and
    each group's minutes a run (seed 0, or both seeds for Meta-MbPA)."""
    text = between("**The campaign is complete**", "### What wins at a budget")
    pairing = records("avalanche_pair")
    (found,) = compare(pairing, "avalanche:naive", "seq", stream="text")
    d = found.difference
    assert d.n == 5 and found.verdict == "not resolved"
    assert (
        f"(Naive − SEQ {signed(d.mean)}, 95% CI [{signed(d.low)}, {signed(d.high)}], the same"
        in (text)
    )
    meta = minutes("meta-mbpa", 0) + minutes("meta-mbpa", 1)
    assert f"four orders ({min(meta)}–{max(meta)} minutes a run at one thread" in text
    groups = [minutes(p, 0) for p in ("avalanche-naive", "avalanche-replay", "avalanche-ewc")]
    shown = ", ".join(f"{min(g)}–{max(g)}" for g in groups[:2]) + f" and {min(groups[2])}–"
    assert f"all four orders ({shown}{max(groups[2])} minutes a run)" in text
    top = [round(value("mbpa++", o, 0, "seconds", "text_top1") / 60) for o in ORDERS]
    assert f"last line; {min(top)}–{max(top)} minutes a run at one thread, above" in text


def test_the_dense_replay_costs_and_seed_zero_readings_are_the_committed_runs():
    """`er`'s rows, compute and bytes, the minutes, and what seed 0 alone said at M = 200."""
    text = between("**Dense replay**, `er` (Chaudhry", "are what differ; `make test-avalanche`")
    er = [metrics(f"er_{o}_s{s}") for o in ORDERS for s in (0, 1)]
    (rows,) = {m["cost"]["train"]["forward_rows"] for m in er}
    ava = metrics("avalanche-replay_i_s1")["cost"]["train"]["forward_rows"]  # costs measured
    assert f"{rows / 10_000:.1f}x SEQ's training rows" in text
    assert f"second experience: {ava / 10_000:.1f}x)" in text
    took = [round(m["seconds"] / 60) for m in er]
    assert f"one other run for most of each, {min(took)}–{max(took)} minutes a run)" in text
    costs = pareto_table(records("text")).set_index("configuration")
    tflops = {n: costs.loc[n, "tflops"] for n in ("er", "replay", "mbpa++")}
    assert (
        f"It spends {tflops['er']:.1f} TFLOPs a run ({rows:,} training rows: the stream's 10,000 "
        f"and {rows - 10_000:,} replayed; {tflops['er'] / tflops['replay']:.1f}x REPLAY's "
        f"{tflops['replay']:.1f}, under MbPA++'s {tflops['mbpa++']:.1f}) and holds "
        f"{costs.loc['er', 'memory_mb']:.2f} MB."
    ) in text
    assert tflops["er"] < tflops["mbpa++"]

    small = [metrics(f"er_{o}_s{s}", "text_er200") for o in ORDERS for s in (0, 1)]
    took = [round(m["seconds"] / 60) for m in small]  # orders by seed: i s0, i s1, ii s0, ...
    first, rest = took[0:3:2], took[1:2] + took[3:]
    assert len(set(first)) == 1, "seed 0's orders i and ii took as long"
    assert f"beside the test suite, {first[0]} minutes a run;" in text
    assert f"at one thread each, {min(rest)}–{max(rest)} minutes a run)" in text
    kb = [m["memory_bytes"] / 1000 for m in small]
    ava_kb = {metrics(f"avalanche-replay_{o}_s1")["memory_bytes"] / 1000 for o in ORDERS}
    assert f"`er`'s memory is {round(min(kb))}–{round(max(kb))} KB" in text
    assert f"against Avalanche's {round(max(ava_kb))} KB (int64 patterns" in text
    both = [r for r in find_runs([RESULTS / "text", RESULTS / "text_er200"]) if r.seed == 0]
    seed0 = []
    for b in ("avalanche:replay", "er (memory_size=10000)"):
        (found,) = compare(both, "er (memory_size=200)", b, stream="text")
        d = found.difference
        assert found.verdict == "not resolved", b
        seed0.append(f"{signed(d.mean)} [{signed(d.low)}, {signed(d.high)}]")
    assert f"(over seed 0's four pairs alone it was {seed0[0]})" in text
    assert f"at seed 0 the two were level, {seed0[1]} over its 4 pairs" in text
    under = [value("er", o, 1, folder="text_er200") < value("er", o, 1) for o in ORDERS]
    assert all(under), "at seed 1 the 200 are under on every order"


def test_the_prototype_and_front_notes_are_the_committed_runs():
    """The memory-front note, NCM's and RanPAC's costs and minutes, and DER++/LwF's minutes."""
    text = between("### What wins at a budget", "**After SEQ\\*'s warm-up.**")
    figure = pareto_table(find_runs([RESULTS / "text", RESULTS / "text_er200"]))
    figure = figure.set_index("configuration")
    mb = figure["memory_mb"]
    assert f"200 ({mb['avalanche:replay']:.2f} MB, int64 patterns padded to 64)" in text
    assert f"NCM's class sums ({mb['ncm']:.2f} MB)" in text
    top = figure["tflops"].idxmax()
    assert top == "mbpa++"
    assert (
        f"MbPA++ spends the most compute of all ({figure.loc[top, 'tflops']:.1f} TFLOPs, an upper "
        f"bound: its test-time neighbour passes) for {figure.loc[top, 'mean']:.1f}."
    ) in text
    ncm = [value("ncm", o, 0) for o in ORDERS]
    assert len({round(v, 1) for v in ncm}) == 1
    assert f"scores {ncm[0]:.1f} in every order" in text
    forgets = [expected("text", n, "forgetting")[0] for n in ("seq", "ncm")]
    assert f"(SEQ forgets {forgets[0]} points, NCM {forgets[1]}:" in text
    budget = pareto_table(records("text")).set_index("configuration")
    assert budget.loc["ncm", "tflops"] < budget.loc["seq", "tflops"] / 2 * 1.1, "half SEQ's"
    ranpac = budget.loc["ranpac"]
    seq_tflops = budget.loc["seq", "tflops"]
    took = minutes("ranpac", 0) + minutes("ranpac", 1)
    assert f"one other run, {min(took)}–{max(took)} minutes a run)" in text
    assert (
        f"{ranpac['tflops']:.1f} TFLOPs (the encoder's forward passes, the projection, the Gram "
        f"updates and the per-task ridge solves; {ranpac['tflops'] / seq_tflops:.2f}x SEQ's "
        f"{seq_tflops:.1f})"
    ) in text
    assert f"any strategy here, {ranpac['memory_mb']:.0f} MB (the 10,000" in text
    assert budget["memory_mb"].idxmax() == "ranpac"

    text = between("**Avalanche's DER++ and LwF**", "**Where the forgetting is**")
    der, lwf = minutes("avalanche-der", 0), minutes("avalanche-lwf", 0)
    assert f"one thread beside one other run, {min(der)}–{max(der)} and {min(lwf)}–{max(lwf)}" in (
        text
    )
    der, lwf = minutes("avalanche-der", 1), minutes("avalanche-lwf", 1)
    assert (
        f"DER++ and LwF at seed 1, 2026-12-04, {min(der)}–{max(der)} and {min(lwf)}–{max(lwf)} "
        "minutes a run likewise"
    ) in text


def test_the_warm_up_costs_are_the_committed_runs():
    text = between("**After SEQ\\*'s warm-up.**", "**Dense replay**")
    both = pareto_table(find_runs([RESULTS / "text", RESULTS / "text_warm"]))
    tflops = both.set_index("configuration")["tflops"]
    pairs = [
        (f"{n} (warmup_fraction=0.375)", f"{n} (warmup_fraction=0.0)") for n in ("ncm", "ranpac")
    ]
    shown = [f"{tflops[w]:.1f}" for w, _ in pairs] + [f"{tflops[c]:.1f}" for _, c in pairs]
    assert f"({shown[0]} against {shown[2]} for NCM, {shown[1]} against {shown[3]} for RanPAC)" in (
        text
    )

    def span(name: str, seed: int) -> str:  # the minutes of a warmed strategy's runs
        took = [round(value(name, o, seed, "seconds", "text_warm") / 60) for o in ORDERS]
        return f"{min(took)}" if min(took) == max(took) else f"{min(took)}–{max(took)}"

    assert (
        f"{span('ncm', 0)} minutes an NCM run and {span('ranpac', 0)} a RanPAC run, and NCM and "
        f"RanPAC at seed 1, 2026-12-04, {span('ncm', 1)} and {span('ranpac', 1)} minutes a run "
        "likewise"
    ) in text


BENCHMARKS_PAGE = RESULTS_PAGE.parent / "benchmarks.md"


def bench_row(section: str, label: str) -> list[str]:
    """The cells after ``label`` in the first table row of the benchmarks page's ``section``
    (its heading's words) that starts with ``label``."""
    text = BENCHMARKS_PAGE.read_text(encoding="utf-8")
    body = text[text.index(f"## {section}") :]
    row = next(line for line in body.splitlines() if line.startswith(f"| {label} |"))
    return [c.strip() for c in row.strip("|").split("|")[1:]]


def test_the_budget_protocol_is_its_config_and_quotes_the_benchmarks_page():
    """The protocol's sizes are real_budget.yaml's; the costs that ruled out the paper's scopes
    are the benchmarks page's measured rates, worked through the budget's row counts."""
    import re

    import yaml

    config = yaml.safe_load(
        (RESULTS.parents[1] / "experiments/text_classification/real_budget.yaml").read_text()
    )["run"]
    stream = config["stream"]
    every = config["strategy"]["options"]["replay"]["replay_every"]
    text = between("**The budget protocol**", "`experiments/fewrel/real_budget.yaml`")
    assert (
        f"{stream['train_size']:,} training and {stream['test_size']} test rows per dataset, "
        f"{config['task']['max_length']} tokens"
    ) in text
    assert f"replay events per task ({stream['train_size'] / every} here" in text
    assert f"every {every} examples instead of every 10,000" in text

    seq, whole, head = (
        float(bench_row("Benchmark: Meta-MbPA's training step", label)[0])
        for label in (
            "SEQ",
            "Meta-MbPA, `meta_scope: all` (the paper)",
            "Meta-MbPA, `meta_scope: head`",
        )
    )
    examples = 5 * stream["train_size"] * 1.1  # the stream and 10% meta-replay
    assert (
        f"measured {whole:.1f} s a training example here, about {round(whole * examples / 3600)} "
        f"hours of training a run, against {head:.2f} s for the head step"
    ) in text
    assert f"and {seq:.2f} s for SEQ" in text

    test_rows = 5 * stream["test_size"]
    adaptations = 5 * test_rows  # every test row after each of the five tasks
    head_rate, top1_rate = (
        float(bench_row("Benchmark: local adaptation", f"fast, `{s}`")[0]) for s in ("head", "top1")
    )
    top1_hours = adaptations / top1_rate / 3600
    assert f"adapts each of the {test_rows:,} test rows, {adaptations:,} adaptations a run" in text
    assert (
        f"is about {round(adaptations / head_rate / 60)} minutes for `head` and {top1_hours:.1f} "
        f"hours for `top1` ({head_rate} and {top1_rate} examples a second on 2 threads)"
    ) in text
    bench = BENCHMARKS_PAGE.read_text(encoding="utf-8")
    (cls_only,) = re.findall(r"the top1 step \*\*([\d.]+)x\*\* faster", bench)
    assert f"({float(cls_only):.1f}x per `top1` step on MiniLM" in text
    estimate = top1_hours / float(cls_only)
    took = [round(value("mbpa++", o, 0, "seconds", "text_top1") / 60) for o in ORDERS]
    assert (
        f"`top1` should take about {estimate:.1f} hours a run ({top1_hours:.1f} / {cls_only}) "
        f"and took {min(took)}–{max(took)} minutes at one thread"
    ) in text


def test_ncm_at_seed_one_repeats_seed_zero_and_the_page_says_so():
    """No seed enters unwarmed NCM: its committed seed-1 runs are seed 0's matrices byte for byte,
    kept apart from the tables (`results/real_budget/ncm_seed1/`) so no order counts twice."""
    import yaml

    text = between("The campaign of this section is complete", "### The headline in full")
    folder = RESULTS / "ncm_seed1"
    for order in ORDERS:
        run = folder / f"ncm_{order}_s1"
        assert yaml.safe_load((run / "config.yaml").read_text())["training"]["seed"] == 1
        seed0 = RESULTS / "text" / f"ncm_{order}_s0" / "accuracy.csv"
        assert (run / "accuracy.csv").read_bytes() == seed0.read_bytes(), order
    assert not any((RESULTS / "text").glob("ncm_*_s1"))  # the tables count each order once
    took = [round(value("ncm", o, 1, "seconds", "ncm_seed1") / 60) for o in ORDERS]
    assert f"(`results/real_budget/ncm_seed1/`, 2026-12-04, {min(took)}–{max(took)} minutes" in text
    assert "its four accuracy matrices are seed 0's byte for byte" in text


WHY_2000_ROWS = {
    "seq_amazon-yahoo_rows1000_len128_lr3e-5": "SEQ learnt Yahoo after Amazon to {}% at 3e-5",
    "seq_yahoo_rows1000_len128_lr3e-5": "where Yahoo alone reaches {}%",
    "seq_amazon-yahoo_rows1000_len128_lr1e-4": "and to {}% at 1e-4 (chance among its ten classes)",
    "seq_amazon-yahoo_rows2000_len64_lr3e-5": "tokens and 3e-5, to {}%",
    "seq_yahoo_rows2000_len64_lr3e-5": "about what Yahoo alone reaches ({}%)",
}
"""The runs behind "Why 2,000 rows" (results/real_budget/why_2000_rows/) and what the budget
paragraph says each gave: Yahoo's accuracy after it trained."""


def test_why_2000_rows_is_the_committed_runs():
    import yaml

    text = between("**The budget protocol**", "Meta-MbPA's meta step")
    header = (RESULTS.parents[1] / "experiments/text_classification/real_budget.yaml").read_text(
        encoding="utf-8"
    )
    header = " ".join(line.lstrip("# ") for line in header.splitlines() if line.startswith("#"))
    folder = RESULTS / "why_2000_rows"
    assert {p.name for p in folder.iterdir()} == set(WHY_2000_ROWS)
    for name, stated in WHY_2000_ROWS.items():
        config = yaml.safe_load((folder / name / "config.yaml").read_text())
        rows, length, lr = re.fullmatch(r".*_rows(\d+)_len(\d+)_lr(.+)", name).groups()
        assert config["stream"]["train_size"] == int(rows) and config["stream"]["test_size"] == 300
        assert config["task"]["max_length"] == int(length)
        assert config["training"]["lr"] == float(lr) and config["training"]["seed"] == 0
        tasks = ["yahoo"] if name.startswith("seq_yahoo_") else ["amazon", "yahoo"]
        assert config["stream"]["tasks"] == tasks
        with open(folder / name / "accuracy.csv", encoding="utf-8") as handle:
            last = list(csv.DictReader(handle))[-1]
        assert last["row"] == "after yahoo"
        yahoo = f"{float(last['yahoo']):.1f}"
        assert stated.format(yahoo) in text, name
        assert f"{yahoo}%" in header, name  # real_budget.yaml's header says the same
