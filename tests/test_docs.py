"""The README is a front door; the guide (docs/guide/) holds the rest, one page per section."""

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.conftest import headline_figure_folders

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs")


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves its annotations through it
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
    text = "\n".join(lines)
    figure = "docs/figures/real_budget_pareto.png"  # the headline figure, drawn by lifelong report
    assert f"]({figure})" in text and (ROOT / figure).stat().st_size > 10_000
    assert "plots/pareto_text.png" in text  # the command that redraws it
    assert "make demo" in text and "make test" in text
    for name in hooks().GUIDE:  # every guide page is linked from it
        assert f"(docs/guide/{name}.md" in text, name


def test_the_headline_figure_is_the_pareto_view_of_the_committed_runs():
    """The figure's PNG keeps a digest of the table it drew; the committed runs must give it,
    so a run added (or a cost derived differently) without redrawing the figure fails here."""
    from lifelong.experiment.reports.costs import figure_digest, pareto_table, table_digest
    from lifelong.experiment.rundir import find_runs

    folders = headline_figure_folders()
    assert [f.name for f in folders] == ["text", "text_er200", "text_warm"]
    table = pareto_table(find_runs(folders))
    drawn = figure_digest(ROOT / "docs" / "figures" / "real_budget_pareto.png")
    assert drawn == table_digest(table[table.stream == "text"]), (
        "docs/figures/real_budget_pareto.png is not the committed runs' Pareto view: redraw it "
        "with the README's command"
    )


def test_every_guide_section_is_a_page_with_a_unique_address():
    pages = hooks()._sources(ROOT)
    assert pages[0].src_uri == "index.md" and pages[0].source == "README.md"
    addresses = [page.src_uri for page in pages]
    assert len(addresses) == len(set(addresses))
    titles = {page.title for page in pages[1:]}
    for title in ("Failure behaviour", "Write your own strategy", "Layout", "Metrics",
                  "Memory-augmented encoders", "Benchmark: episodic-memory search"):  # fmt: skip
        assert title in titles


def test_a_guide_file_missing_from_the_navigation_is_an_error(tmp_path):
    module = hooks()
    (tmp_path / "docs" / "guide").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# x\n", encoding="utf-8")
    for name in module.GUIDE:
        (tmp_path / "docs" / "guide" / f"{name}.md").write_text(f"## {name}\n", encoding="utf-8")
    (tmp_path / "docs" / "guide" / "stray.md").write_text("## Stray\n", encoding="utf-8")
    with pytest.raises(ValueError, match="stray.md, which GUIDE does not list"):
        module._sources(tmp_path)


def test_links_to_the_guide_reach_the_page_that_holds_the_section():
    module = hooks()
    pages = module._sources(ROOT)
    anchors = module._anchors(pages)
    first = {}
    for page in pages[1:]:
        first.setdefault(page.source, page.src_uri)
    home = pages[0]
    line = "[a](docs/guide/running.md#running) [b](docs/guide/results.md) [c](lifelong/cli.py)"
    out = module._rewrite_links(line, home, anchors, first)
    assert "[a](running.md)" in out
    assert "[b](findings-on-real-data-cpu-budget-in-progress.md)" in out
    assert "c (`lifelong/cli.py`)" in out
    ecosystem = next(p for p in pages if p.source == "docs/guide/ecosystem.md")
    out = module._rewrite_links("[f](failure-behaviour.md#failure-behaviour)", ecosystem, anchors,
                                first)  # fmt: skip
    assert out == "[f](failure-behaviour.md)"


def test_no_link_text_runs_over_a_line_break():
    """The site's hook rewrites links line by line: a link whose text is split over two lines
    stays ``docs/guide/...`` on the site and breaks the strict build (`make docs`)."""
    import re

    split = re.compile(r"\[[^\]\n`]*\n[^\]`]*\]\(")
    for page in (ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))):
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        found = [m.group(0).replace("\n", " ") for m in split.finditer(text)]
        assert not found, f"{page.name}: link text over a line break: {found}"
