"""MkDocs hook: the README's sections become the site's guide pages, at build time.

README.md stays the single source. Its text before the first ``## `` heading becomes the home
page (``index.md``) and every ``## `` section becomes a page of its own (``<slug>.md``, the slug
of the heading), listed in the navigation in README order before the pages ``mkdocs.yml`` names
(the API reference). On the way each section's headings move up one level (``## X`` is the
page's title, ``### Y`` its sections), and links are rewritten so that strict mode checks only
what the site itself holds:

* ``[text](#anchor)``: to the page that now holds that heading (``page.md#anchor``);
* ``[text](path)`` to a repository file (not a page of the site): plain text, the path as code;
* absolute links (``https://...``, ``mailto:``) are left alone.

Nothing is written to ``docs/``: the pages are generated files, rebuilt from README.md on
every build (``mkdocs serve`` watches README.md, see ``mkdocs.yml``).
"""

from __future__ import annotations

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


@dataclass
class _Page:
    src_uri: str
    title: str
    lines: list[str]


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


def _split(text: str) -> list[_Page]:
    lines = text.splitlines()
    pages = [_Page("index.md", "Home", [])]
    for _, line, in_code in _outside_fences(lines):
        if not in_code and line.startswith("## "):
            title = _HEADING.match(line).group(2)
            pages.append(_Page(f"{slugify(title, '-')}.md", title, []))
        pages[-1].lines.append(line)
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


def _rewrite_links(line: str, page: _Page, anchors: dict[str, str]) -> str:
    def link(match: re.Match) -> str:
        bang, text, target = match.groups()
        if not target or _EXTERNAL.match(target):
            return match.group(0)
        if target.startswith("#"):
            home = anchors.get(target[1:])
            if home is None or home == page.src_uri:
                return match.group(0)  # same page (or unknown: strict mode reports it)
            if home == f"{target[1:]}.md":  # the page's own title: link the page
                return f"{bang}[{text}]({home})"
            return f"{bang}[{text}]({home}{target})"
        # A repository file, not a page of the site: keep the words, show the path as code.
        path = target.split("#", 1)[0]
        if text.strip("`") == path:
            return f"`{path}`"
        return f"{text} (`{path}`)"

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


def _render(page: _Page, anchors: dict[str, str]) -> str:
    lines = list(page.lines)
    previous = ""
    for i, line, in_code in _outside_fences(page.lines):
        if in_code:
            previous = line
            continue
        if page.src_uri != "index.md" and re.match(r"^#{2,6}\s", line):
            line = line[1:]  # ## Title -> # Title, ### Section -> ## Section
        line = _rewrite_links(line, page, anchors)
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
    """Split README.md and put its pages in the navigation, before the API reference."""
    global _pages
    _pages = _split(_readme(config).read_text(encoding="utf-8"))
    guide = [{page.title: page.src_uri} for page in _pages[1:]]
    config.nav = [{"Home": "index.md"}, {"Guide": guide}, *(config.nav or [])]
    return config


def on_files(files, config):
    """Add the README's pages as generated files (README.md itself is not a docs file)."""
    anchors = _anchors(_pages)
    for page in _pages:
        if files.get_file_from_path(page.src_uri) is not None:
            raise ValueError(f"docs/{page.src_uri} would hide the README section it comes from")
        files.append(File.generated(config, page.src_uri, content=_render(page, anchors)))
    return files
