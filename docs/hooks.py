"""MkDocs hook: README.md becomes the home page and the guide's sections its pages, at build time.

README.md (the front door) is the home page (``index.md``) as it is. The guide lives in
``docs/guide/*.md``, in the order of `GUIDE`, each file one or more ``## `` sections; every
section becomes a page of its own (``<slug>.md``, the slug of the heading), listed in the
navigation before the pages ``mkdocs.yml`` names (the API reference). On the way each section's
headings move up one level (``## X`` is the page's title, ``### Y`` its sections), and links are
rewritten so that strict mode checks only what the site itself holds:

* ``[text](#anchor)``: to the page that now holds that heading (``page.md#anchor``);
* ``[text](docs/guide/file.md#anchor)`` (from the README) or ``[text](file.md#anchor)`` (between
  guide files), written so that they also work on GitHub: to the page holding the anchor, or the
  file's first page;
* ``[text](path)`` to any other repository file (not a page of the site): plain text, the path
  as code;
* absolute links (``https://...``, ``mailto:``) are left alone.

Nothing is written to ``docs/``: the pages are generated files, rebuilt on every build
(``mkdocs serve`` watches README.md and the guide, see ``mkdocs.yml``).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from markdown.extensions.toc import slugify
from mkdocs.structure.files import File

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
# [text](target) or [text](target "title"); text may hold code spans but no nested brackets.
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...
# A list that may start right under a paragraph line (CommonMark: a bullet, or "1."); Python-
# Markdown needs a blank line there, or the list is run into the paragraph.
_LIST_START = re.compile(r"^(?:[-*+]|1[.)])\s")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


GUIDE = (
    "results",
    "running",
    "experiments",
    "failure-behaviour",
    "devices",
    "tasks-and-memory",
    "library",
    "write-your-own-strategy",
    "write-your-own-encoder",
    "metrics",
    "costs",
    "encoders",
    "ecosystem",
    "benchmarks",
    "protocol",
    "layout",
    "development",
)
"""The guide's files (``docs/guide/<name>.md``) in navigation order."""


@dataclass
class _Page:
    src_uri: str
    title: str
    lines: list[str]
    source: str = "README.md"  # the repository file it comes from


_pages: list[_Page] = []


def _readme(config) -> Path:
    return Path(config.config_file_path).parent / "README.md"


def _outside_fences(lines: list[str]):
    """Yield (index, line, in_code) for every line, tracking fenced code blocks."""
    fence: str | None = None
    for i, line in enumerate(lines):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            yield i, line, True
        elif fence is not None:
            closing = line.strip()
            if len(closing) >= len(fence) and closing == fence[0] * len(closing):
                fence = None
            yield i, line, True
        else:
            yield i, line, False


def _split(text: str, source: str) -> list[_Page]:
    """The ``## `` sections of a guide file, one page each (text before the first: an error)."""
    pages: list[_Page] = []
    for i, line, in_code in _outside_fences(text.splitlines()):
        if not in_code and line.startswith("## "):
            title = _HEADING.match(line).group(2)
            pages.append(_Page(f"{slugify(title, '-')}.md", title, [], source))
        elif not pages:
            if line.strip():
                raise ValueError(f"{source}:{i + 1}: text before the first '## ' heading")
            continue
        pages[-1].lines.append(line)
    return pages


def _sources(root: Path) -> list[_Page]:
    """The home page (README.md whole) and every guide file's pages, in `GUIDE` order."""
    pages = [_Page("index.md", "Home", (root / "README.md").read_text("utf-8").splitlines())]
    listed = {f"{name}.md" for name in GUIDE}
    files = (root / "docs" / "guide").glob("*.md")
    unlisted = sorted(p.name for p in files if p.name not in listed)
    if unlisted:
        raise ValueError(f"docs/guide/ holds {', '.join(unlisted)}, which GUIDE does not list")
    for name in GUIDE:
        source = f"docs/guide/{name}.md"
        pages += _split((root / source).read_text(encoding="utf-8"), source)
    return pages


def _anchors(pages: list[_Page]) -> dict[str, str]:
    """Every heading's slug -> the page that holds it (first one wins on duplicates)."""
    where: dict[str, str] = {}
    for page in pages:
        for _, line, in_code in _outside_fences(page.lines):
            match = None if in_code else _HEADING.match(line)
            if match:
                where.setdefault(slugify(match.group(2), "-"), page.src_uri)
    return where


def _rewrite_links(line: str, page: _Page, anchors: dict[str, str], first: dict[str, str]) -> str:
    def to_anchor(bang: str, text: str, anchor: str) -> str:
        home = anchors.get(anchor)
        if home is None or home == page.src_uri:
            return f"{bang}[{text}](#{anchor})"  # same page (or unknown: strict mode reports it)
        if home == f"{anchor}.md":  # the page's own title: link the page
            return f"{bang}[{text}]({home})"
        return f"{bang}[{text}]({home}#{anchor})"

    def link(match: re.Match) -> str:
        bang, text, target = match.groups()
        if not target or _EXTERNAL.match(target):
            return match.group(0)
        if target.startswith("#"):
            return to_anchor(bang, text, target[1:])
        path, _, anchor = target.partition("#")
        # relative to the file the page comes from, as GitHub reads it
        where = posixpath.normpath(posixpath.join(posixpath.dirname(page.source), path))
        if where in first:  # a guide file: the page holding the anchor, or its first page
            return to_anchor(bang, text, anchor) if anchor else f"{bang}[{text}]({first[where]})"
        # A repository file, not a page of the site: keep the words, show the path as code.
        if text.strip("`") in (path, where):
            return f"`{where}`"
        return f"{text} (`{where}`)"

    # Links written inside code spans are code, not links: leave them alone.
    spans = [span.span() for span in _CODE_SPAN.finditer(line)]
    out, last = [], 0
    for match in _LINK.finditer(line):
        if any(start <= match.start() < end for start, end in spans):
            continue
        out.append(line[last : match.start()])
        out.append(link(match))
        last = match.end()
    out.append(line[last:])
    return "".join(out)


def _render(page: _Page, anchors: dict[str, str], first: dict[str, str]) -> str:
    lines = list(page.lines)
    previous = ""
    for i, line, in_code in _outside_fences(page.lines):
        if in_code:
            previous = line
            continue
        if page.src_uri != "index.md" and re.match(r"^#{2,6}\s", line):
            line = line[1:]  # ## Title -> # Title, ### Section -> ## Section
        line = _rewrite_links(line, page, anchors, first)
        if _LIST_START.match(line) and _is_paragraph(previous):
            line = "\n" + line
        lines[i] = line
        previous = page.lines[i]
    return "\n".join(lines) + "\n"


def _is_paragraph(line: str) -> bool:
    """A line of running text (not blank, a list item, its continuation, a table or a heading)."""
    return bool(line.strip()) and not (
        line[0].isspace() or _LIST_ITEM.match(line) or line.startswith(("|", "#", ">"))
    )


def on_config(config):
    """Read README.md and the guide, and put their pages in the navigation, before the API."""
    global _pages
    _pages = _sources(_readme(config).parent)
    guide = [{page.title: page.src_uri} for page in _pages[1:]]
    config.nav = [{"Home": "index.md"}, {"Guide": guide}, *(config.nav or [])]
    return config


def on_files(files, config):
    """Add the pages as generated files (README.md and the guide's files are not docs files)."""
    anchors = _anchors(_pages)
    first: dict[str, str] = {}
    for page in _pages[1:]:
        first.setdefault(page.source, page.src_uri)
    for page in _pages:
        if files.get_file_from_path(page.src_uri) is not None:
            raise ValueError(f"docs/{page.src_uri} would hide the section it comes from")
        content = _render(page, anchors, first)
        files.append(File.generated(config, page.src_uri, content=content))
    return files
