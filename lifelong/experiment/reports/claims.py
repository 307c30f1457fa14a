"""The papers' claimed orderings of strategies, judged on our runs with paired intervals.

The source papers order the strategies by average accuracy on text classification (de Masson
d'Autume et al. 2019, Table 1; Wang et al. 2020, Table 1; Holla et al. 2020, Table 1) and by the
accuracy on the pooled test set on FewRel (Holla et al. 2020, Table 2; `headline_metric`) as

* text: MTL > Meta-MbPA > OML-ER ≈ ANML-ER > MbPA++ > A-GEM > REPLAY > SEQ
* FewRel: MTL > OML-ER ≈ ANML-ER > REPLAY > A-GEM > SEQ

Every pair the chain orders is a claim ``a > b`` (a chain orders all its pairs, not only
neighbours); strategies joined by ≈ are claimed equal. On text the MbPA++ paper's ablations add
three claims outside the chain (`ABLATIONS`). `judge` compares each pair on the shared
orders × seeds (`lifelong.experiment.reports.stats.compare`) and says, for ``a > b``:
``holds`` (the 95% interval of a − b excludes zero above it), ``reversed`` (excludes zero below
it), ``not resolved`` (includes zero) or ``not run``; for ``a ≈ b``: ``no difference found``
(the interval includes zero; that is not evidence of equality, only of no detected difference)
or ``differ``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lifelong.experiment.reports.stats import Comparison, Method, compare, headline_metric
from lifelong.experiment.rundir import RunRecord

CHAINS: dict[str, tuple[tuple[str, ...], ...]] = {
    "text": (
        ("mtl",),
        ("meta-mbpa",),
        ("oml-er", "anml-er"),
        ("mbpa++",),
        ("agem",),
        ("replay",),
        ("seq",),
    ),  # fmt: skip
    "fewrel": (("mtl",), ("oml-er", "anml-er"), ("replay",), ("agem",), ("seq",)),
}
"""Per stream, the papers' chain, best first; a tuple holds strategies claimed equal."""

ABLATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "text": (("mbpa++", "mbpa"), ("mbpa++", "mbpa++-rand"), ("mbpa", "seq")),
}
"""Per stream, further ``a > b`` claims: de Masson d'Autume et al. (2019, Table 1 and its
discussion) find MbPA++ above MbPA (local adaptation needs the sparse replay too) and far above
MbPA++ with random retrieval (retrieving relevant memories matters), and MbPA above the plain
encoder-decoder (local adaptation alone already mitigates forgetting)."""


@dataclass(frozen=True)
class Claim:
    """One claimed relation: ``a > b`` or ``a ≈ b``."""

    a: str
    b: str
    relation: str  # ">" or "≈"

    def __str__(self) -> str:
        return f"{self.a} {self.relation} {self.b}"


def claims(stream: str) -> list[Claim]:
    """Every pair the stream's chain orders (or equates), best first, then its `ABLATIONS`.

    Raises:
        KeyError: A stream without a claimed chain.

    """
    chain = CHAINS[stream]
    out = []
    for i, group in enumerate(chain):
        out += [Claim(a, b, "≈") for j, a in enumerate(group) for b in group[j + 1 :]]
        for a in group:
            out += [Claim(a, b, ">") for later in chain[i + 1 :] for b in later]
    return out + [Claim(a, b, ">") for a, b in ABLATIONS.get(stream, ())]


@dataclass(frozen=True)
class Judgement:
    """A claim, what our runs say of it, and the comparison behind it (None if not run)."""

    claim: Claim
    verdict: str
    comparison: Comparison | None


def verdict(claim: Claim, comparison: Comparison | None) -> str:
    """The verdict words of the module docstring for one claim."""
    if comparison is None or comparison.difference.n == 0:
        return "not run"
    d = comparison.difference
    if math.isnan(d.low):
        return "not resolved"  # one pair: no interval
    if claim.relation == "≈":
        return "no difference found" if d.low <= 0 <= d.high else "differ"
    if d.low > 0:
        return "holds"
    return "reversed" if d.high < 0 else "not resolved"


def judge(
    records: Sequence[RunRecord],
    stream: str,
    metric: str | None = None,
    *,
    method: Method = "t",
) -> list[Judgement]:
    """Judge every claim of ``stream`` on ``records`` (see the module docstring).

    ``metric`` defaults to the stream's own (`headline_metric`: FewRel's pooled accuracy).
    """
    metric = metric or headline_metric(stream)
    ran = {r.strategy for r in records if r.stream == stream}
    out = []
    for claim in claims(stream):
        found = None
        if {claim.a, claim.b} <= ran:
            found = next(iter(compare(records, claim.a, claim.b, metric, method=method,
                                      stream=stream)), None)  # fmt: skip
        out.append(Judgement(claim, verdict(claim, found), found))
    return out


def claims_markdown(judgements: Sequence[Judgement], stream: str, metric: str | None = None) -> str:
    """One row per claim: a − b, its 95% interval, the paired runs, the verdict.

    The header names ``metric`` (the stream's own, `headline_metric`, by default).
    """
    lines = [
        f"| claim ({stream}, {metric or headline_metric(stream)}) | a − b | 95% CI | paired runs "
        "| verdict |",
        "|---|---:|---|---:|---|",
    ]
    for j in judgements:
        if j.comparison is None or j.comparison.difference.n == 0:
            lines.append(f"| {j.claim} | | | 0 | {j.verdict} |")
            continue
        d = j.comparison.difference
        ci = "–" if math.isnan(d.low) else f"[{d.low:+.1f}, {d.high:+.1f}]"
        lines.append(f"| {j.claim} | {d.mean:+.1f} | {ci} | {d.n} | {j.verdict} |")
    return "\n".join(lines) + "\n"


__all__ = [
    "ABLATIONS",
    "CHAINS",
    "Claim",
    "Judgement",
    "claims",
    "claims_markdown",
    "judge",
    "verdict",
]
