"""Griffe extension: an options dataclass's field comments become the fields' docstrings.

The project documents the fields of every `lifelong.options.option_group` class (the
strategies' ``Options``, the shared option groups, ``RunConfig``) with comments, not docstrings:

    replay_every: PositiveInt = 10_000  # R_I: new stream examples between two replays
    # what the head reads: BERT's pooler output or the raw [CLS] state
    pooling: Literal["auto", "pooler", "cls"] = "auto"

This extension reads them back so that the API reference shows every option with its type,
default and meaning. A field's text is its trailing comment, continued by the comment lines
right below it when the next field has a trailing comment of its own; a field without a
trailing comment takes the comment lines right above it. Only the docs build uses this
(``mkdocs.yml``); the code is untouched.
"""

from __future__ import annotations

import html
import io
import re
import tokenize

import griffe

_CODE_SPAN = re.compile(r"(`+).+?\1")


def _is_option_group(cls: griffe.Class) -> bool:
    return any(
        str(decorator.value).split(".")[-1] == "option_group" for decorator in cls.decorators
    )


def _trailing_comment(line: str) -> str | None:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):  # a line of a multi-line statement
        tokens = []
    for token in tokens:
        if token.type == tokenize.COMMENT:
            return token.string
    return None


def _comment_text(comment: str) -> str:
    return comment.strip().lstrip("#").strip()


def _markdown(text: str) -> str:
    """Plain comment text as Markdown: code spans kept, everything else shown literally."""
    out, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_escape(text[last : span.start()]))
        out.append(span.group(0))
        last = span.end()
    out.append(_escape(text[last:]))
    return "".join(out)


def _escape(text: str) -> str:
    text = html.escape(text, quote=False)
    return re.sub(r"([\\*_\[\]])", r"\\\1", text)


class OptionComments(griffe.Extension):
    """Give the fields of ``@option_group`` classes their comments as docstrings."""

    def on_class_members(self, *, node, cls: griffe.Class, agent, **kwargs) -> None:
        """Read the comments of the fields of ``cls`` once its members are loaded."""
        if not _is_option_group(cls) or cls.filepath is None:
            return
        lines = cls.lines_collection[cls.filepath]  # the whole file; line n is lines[n - 1]
        fields = sorted(
            (
                member
                for member in cls.members.values()
                if member.is_attribute and not member.is_alias and member.lineno is not None
            ),
            key=lambda member: member.lineno,
        )
        docs: dict[str, list[str]] = {field.name: [] for field in fields}
        previous = None
        for field in fields:
            above = []
            row = field.lineno - 1
            while row >= 1 and lines[row - 1].strip().startswith("#"):
                above.insert(0, _comment_text(lines[row - 1]))
                row -= 1
            trailing = _trailing_comment(lines[(field.endlineno or field.lineno) - 1])
            if trailing is not None:
                docs[field.name].append(_comment_text(trailing))
                if previous is not None and above:
                    docs[previous.name].extend(above)  # continues the previous field's comment
            else:
                docs[field.name] = above + docs[field.name]
            previous = field
        for field in fields:
            text = " ".join(part for part in docs[field.name] if part)
            if text and field.docstring is None:
                field.docstring = griffe.Docstring(
                    _markdown(text), lineno=field.lineno, endlineno=field.endlineno, parent=field
                )
