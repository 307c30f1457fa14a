r"""Question-answering streams over SQuAD-format JSON: SQuAD 1.1, TriviaQA Web/Wikipedia, QuAC.

An `Example` of a QA stream holds the question in ``text``, the context paragraph in
``text_pair``, the gold answers as (answer text, character offset in the context) in
``answers``, ``label`` 0 (unused) and ``uid`` ``"<dataset>/<file name>:<question id>"``. Tasks
have no labels (``labels=()``) and the stream's ``kind`` is ``"qa"``.

Data layout (``DIR`` is the ``data_dir`` given to `qa_stream`)::

    DIR/squad/train-v1.1.json        SQuAD 1.1, as released (rajpurkar.github.io/SQuAD-explorer)
    DIR/squad/dev-v1.1.json
    DIR/triviaqa/web-train.json      TriviaQA reading-comprehension files (triviaqa-rc.tar.gz:
    DIR/triviaqa/web-dev.json        qa/{web,wikipedia}-{train,dev}.json) converted to SQuAD
    DIR/triviaqa/wikipedia-train.json  format by the official converter, one file per split:
    DIR/triviaqa/wikipedia-dev.json
    DIR/quac/train_v0.2.json         QuAC 0.2, as released (quac.ai), in QuAC's own JSON
    DIR/quac/val_v0.2.json

TriviaQA is converted with ``utils/convert_to_squad_format.py`` from the official repository
(github.com/mandarjoshi90/triviaqa), run from its root, e.g.::

    python -m utils.convert_to_squad_format --triviaqa_file qa/web-train.json \
        --squad_file DIR/triviaqa/web-train.json --web_dir evidence/web \
        --wikipedia_dir evidence/wikipedia

and likewise for ``web-dev``, ``wikipedia-train`` and ``wikipedia-dev``. The converter makes one
question per (question, evidence document) pair with id ``<question id>--<document file>``,
keeps the first 800 tokens of the document as the context, and stores the answer as the first
*lower-cased* normalised alias found in the lower-cased context. The loader therefore matches
TriviaQA answers case-insensitively and stores the context's own text of the span. Training
questions whose answer is not in the document are dropped by the converter; development
questions without an answer are kept there and dropped here (they cannot be scored).

QuAC is read in its own format and converted by `convert_quac`: every dialogue turn becomes an
independent question (as de Masson d'Autume et al. 2019 treat it; no dialogue history is
prepended), turns whose dialogue answer is ``CANNOTANSWER`` are dropped, and the
``" CANNOTANSWER"`` token that QuAC appends to every context is removed.

Every other file is validated strictly: an answer must be the exact context slice at its
``answer_start``; the error names the file and the question id and shows what the context
holds there. How questions become model inputs (context windows, answer spans) and how answers
are scored (SQuAD 1.1 exact match and F1) is the QA task kind's business
(`lifelong.tasks.extractive_qa`). The bundled sample is written by ``python -m tools.samplegen qa``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, TypedDict, Unpack

from lifelong.streams.core import (
    DataFormatError,
    Embedder,
    Example,
    OrderedFields,
    Task,
    TaskStream,
    UnknownNameError,
    decode_text,
    load_task,
    read_data,
)
from lifelong.streams.hf_datasets import HubSource, Split, describe_source, open_split

log = logging.getLogger(__name__)

SAMPLE_DIR = Path(__file__).parent / "samples" / "qa"
"""The bundled sample: all four datasets in the real layout, project-written text."""

CANNOTANSWER = "CANNOTANSWER"
"""QuAC's answer text for an unanswerable turn (also appended to every QuAC context)."""


@dataclass(frozen=True)
class QADatasetSpec:
    """Where one QA dataset lives and how its files are read.

    Attributes:
        name: Short name used in task orders and ``tasks=``.
        folder: Directory under the data directory.
        train_file: Training split (the task's train set).
        dev_file: Development split (the task's test set).
        case_folded_answers: Answer texts are lower-cased (TriviaQA's converter); matched
            case-insensitively.
        quac: The files are in QuAC's format and go through `convert_quac`.

    """

    name: str
    folder: str
    train_file: str
    dev_file: str
    case_folded_answers: bool = False
    quac: bool = False


QA_DATASETS: dict[str, QADatasetSpec] = {
    spec.name: spec
    for spec in (
        QADatasetSpec("squad", "squad", "train-v1.1.json", "dev-v1.1.json"),
        QADatasetSpec(
            "trivia_web", "triviaqa", "web-train.json", "web-dev.json", case_folded_answers=True
        ),
        QADatasetSpec(
            "trivia_wiki",
            "triviaqa",
            "wikipedia-train.json",
            "wikipedia-dev.json",
            case_folded_answers=True,
        ),
        QADatasetSpec("quac", "quac", "train_v0.2.json", "val_v0.2.json", quac=True),
    )
}
"""The four QA datasets of de Masson d'Autume et al. (2019)."""

QA_ORDERS: dict[str, tuple[str, ...]] = {
    "i": ("quac", "trivia_web", "trivia_wiki", "squad"),
    "ii": ("squad", "trivia_wiki", "quac", "trivia_web"),
    "iii": ("trivia_web", "trivia_wiki", "squad", "quac"),
    "iv": ("trivia_wiki", "quac", "trivia_web", "squad"),
}
"""The four QA task orders of de Masson d'Autume et al. (2019)."""

# ---------------------------------------------------------------------------------------------
# Reading SQuAD-format files
# ---------------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    """Parse a JSON file, turning every failure into a `DataFormatError` naming the file."""
    if not path.is_file():
        raise DataFormatError(f"{path}: file not found (expected a SQuAD-format JSON file)")
    text = decode_text(path, read_data(path))  # a byte-order mark is dropped
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataFormatError(
            f"{path}: malformed JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:  # nested past the parser's depth: no SQuAD file nests so
        raise DataFormatError(
            f"{path}: malformed JSON: nested too deeply for a SQuAD-format file"
        ) from None


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(
        type(value), type(value).__name__
    )


def _field(obj: Any, key: str, kind: type, where: str) -> Any:
    """``obj[key]``, checked to exist and to have type ``kind`` (bools are not ints)."""
    if not isinstance(obj, dict):
        raise DataFormatError(f"{where}: expected an object, got {_type_name(obj)}")
    if key not in obj:
        raise DataFormatError(f"{where}: missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = {int: "an integer", str: "a string", list: "a list", dict: "an object"}
        raise DataFormatError(
            f"{where}: {key!r} must be {names.get(kind, kind.__name__)}, got {value!r:.60}"
        )
    return value


def _iter_qas(raw: Any, source: str) -> Iterator[tuple[str, dict, list]]:
    """Yield (JSON path, paragraph, its qas list) for every paragraph of a SQuAD-format dict."""
    for i, article in enumerate(_field(raw, "data", list, source)):
        paragraphs = _field(article, "paragraphs", list, f"{source}: data[{i}]")
        for j, paragraph in enumerate(paragraphs):
            where = f"{source}: data[{i}].paragraphs[{j}]"
            _field(paragraph, "context", str, where)
            yield f"data[{i}].paragraphs[{j}]", paragraph, _field(paragraph, "qas", list, where)


def _question_id(qa: Any, where: str) -> str:
    """The id of a question (strings, or integers as some SQuAD-format sets use)."""
    if not isinstance(qa, dict):
        raise DataFormatError(f"{where}: expected an object, got {_type_name(qa)}")
    qid = qa.get("id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or qid == "":
        raise DataFormatError(f"{where}: missing key 'id' (or it is not a non-empty string)")
    return str(qid)


def convert_quac(raw: Mapping[str, Any], *, source: str = "QuAC JSON") -> dict[str, Any]:
    """Turn QuAC's JSON into plain SQuAD form (one independent question per dialogue turn).

    QuAC's JSON already has ``data[].paragraphs[].context`` and ``qas[]``; each turn also has
    ``orig_answer`` (the dialogue's own answer), ``followup`` and ``yesno``, and its ``answers``
    list holds every annotator's answer (one in train, several in val). The conversion:

    - drops a turn whose ``orig_answer`` text is ``CANNOTANSWER`` (without ``orig_answer``: whose
      ``answers`` are all ``CANNOTANSWER``); the count is logged;
    - keeps the other turns as questions with the turn's question text only (no history), the
      ``orig_answer`` first and then the other annotators' answers that are not ``CANNOTANSWER``
      (duplicates removed), offsets unchanged;
    - removes the trailing ``" CANNOTANSWER"`` from each context (it is at the end, so the
      offsets of the kept answers do not move);
    - drops ``followup``, ``yesno`` and the article-level fields.

    Args:
        raw: Parsed QuAC JSON.
        source: Name of the file, for error messages.

    Returns:
        ``{"data": [{"title": ..., "paragraphs": [{"context", "qas"}]}]}`` in SQuAD form.

    Raises:
        DataFormatError: A key is missing or has the wrong type; the message names ``source``
            and the JSON path or turn id.

    """
    data, kept, dropped = [], 0, 0
    for i, article in enumerate(_field(raw, "data", list, source)):
        paragraphs = []
        for j, paragraph in enumerate(_field(article, "paragraphs", list, f"{source}: data[{i}]")):
            where = f"{source}: data[{i}].paragraphs[{j}]"
            context = _field(paragraph, "context", str, where)
            qas = []
            for k, turn in enumerate(_field(paragraph, "qas", list, where)):
                qid = _question_id(turn, f"{where}.qas[{k}]")
                answers = _quac_answers(turn, f"{source}: question {qid!r}")
                if answers is None:
                    dropped += 1
                    continue
                kept += 1
                question = _field(turn, "question", str, f"{source}: question {qid!r}")
                qas.append({"id": qid, "question": question, "answers": answers})
            suffix = " " + CANNOTANSWER
            if context.endswith(suffix):
                context = context[: -len(suffix)]
            paragraphs.append({"context": context, "qas": qas})
        title = article.get("title", "") if isinstance(article, dict) else ""
        data.append({"title": title, "paragraphs": paragraphs})
    log.info(
        "%s: kept %d QuAC turns, dropped %d unanswerable (CANNOTANSWER) turns",
        source,
        kept,
        dropped,
    )
    return {"data": data}


def _quac_answers(turn: dict, where: str) -> list[dict] | None:
    """A turn's answers without ``CANNOTANSWER`` ones, or ``None`` if the turn is unanswerable."""
    answers = _field(turn, "answers", list, where)
    for m, answer in enumerate(answers):
        _field(answer, "text", str, f"{where} answers[{m}]")
    orig = turn.get("orig_answer")
    if orig is not None:
        if _field(turn, "orig_answer", dict, where).get("text") == CANNOTANSWER:
            return None
        _field(orig, "text", str, f"{where} orig_answer")
        answers = [orig, *answers]
    kept: list[dict] = []
    for answer in answers:
        entry = {"text": answer["text"], "answer_start": answer.get("answer_start")}
        if answer["text"] != CANNOTANSWER and entry not in kept:
            kept.append(entry)
    return kept or None


def _match_answer(
    context: str, text: str, start: int, *, case_folded: bool
) -> tuple[str, int] | None:
    """The answer as (context's text of the span, start), or ``None`` if it is not there.

    With ``case_folded`` the answer is compared to the lower-cased context, as TriviaQA's
    converter found it: its offset counts characters of ``context.lower()``, which can differ
    from ``context`` where lower-casing changes a character's length (e.g. "İ").
    """
    end = start + len(text)
    if context[start:end] == text:
        return text, start
    if not case_folded:
        return None
    if context[start:end].lower() == text.lower():
        return context[start:end], start
    if context.lower()[start:end] == text:
        span = _unfold_span(context, start, end)
        if span is not None:
            return context[span[0] : span[1]], span[0]
    return None


def _unfold_span(context: str, start: int, end: int) -> tuple[int, int] | None:
    """Map a span of ``context.lower()`` back to ``context``'s character offsets."""
    bounds: dict[int, int] = {}
    position = 0
    for i, char in enumerate(context):
        bounds.setdefault(position, i)
        position += len(char.lower())
    bounds.setdefault(position, len(context))
    if start in bounds and end in bounds:
        return bounds[start], bounds[end]
    return None


def _parse_answers(
    qa: dict, context: str, where: str, *, case_folded: bool
) -> tuple[tuple[str, int], ...]:
    """Validate a question's answers against its context."""
    answers = []
    # TriviaQA's offsets count characters of the lower-cased context, which can be longer.
    room = len(context.lower()) if case_folded else len(context)
    for m, answer in enumerate(_field(qa, "answers", list, where)):
        at = f"{where} answers[{m}]"
        text = _field(answer, "text", str, at)
        start = _field(answer, "answer_start", int, at)
        if not text:
            raise DataFormatError(f"{at}: empty answer text")
        if not 0 <= start <= room - len(text):
            raise DataFormatError(
                f"{at}: answer_start {start} is out of range for answer {text!r} "
                f"(context has {len(context)} characters)"
            )
        matched = _match_answer(context, text, start, case_folded=case_folded)
        if matched is None:
            held = context[start : start + len(text)]
            raise DataFormatError(
                f"{at}: answer {text!r} does not match the context at answer_start {start}, "
                f"which holds {held!r} there"
            )
        answers.append(matched)
    return tuple(answers)


def load_squad_file(
    path: str | Path, dataset: str, *, training: bool = True, quac: bool | None = None
) -> list[Example]:
    """Read and validate one SQuAD-format JSON file.

    Args:
        path: The JSON file.
        dataset: Dataset name, used in uids (``"<dataset>/<file name>:<question id>"``); for a
            name in `QA_DATASETS` it also selects how the file is read (QuAC conversion,
            TriviaQA's case-folded answers).
        training: Whether this is a training file: every question must then have an answer;
            otherwise questions without one are dropped (and counted in a log line).
        quac: Read the file in QuAC's format (`convert_quac`); default: ``dataset == "quac"``.

    Returns:
        One example per question, in file order.

    Raises:
        DataFormatError: The file is missing or is not valid JSON (line and column given), a
            key is missing or has the wrong type, an answer's ``answer_start`` is out of range
            or the context does not hold the answer text there, a question id repeats, or a
            training question has no answer. The message names the file and the question id
            (the JSON path where there is no id).

    """
    path = Path(path)
    spec = QA_DATASETS.get(dataset)
    if quac is None:
        quac = spec is not None and spec.quac
    raw = _read_json(path)
    if quac:
        raw = convert_quac(raw, source=str(path))
    return squad_examples(raw, str(path), dataset, f"{dataset}/{path.name}", training=training)


def squad_examples(
    raw: Any, source: str, dataset: str, uid_prefix: str, *, training: bool = True
) -> list[Example]:
    """Validate parsed SQuAD-form data (a file's, or rows of a hub dataset) into examples.

    Args:
        raw: ``{"data": [{"paragraphs": [{"context", "qas": [...]}]}]}``.
        source: What ``raw`` came from, the prefix of every error.
        dataset: Dataset name; a name in `QA_DATASETS` with case-folded answers (TriviaQA)
            matches them case-insensitively.
        uid_prefix: Examples' uids are ``"<uid_prefix>:<question id>"``.
        training: As `load_squad_file`.

    Raises:
        DataFormatError: As `load_squad_file`, naming ``source`` and the question id.

    """
    spec = QA_DATASETS.get(dataset)
    case_folded = spec.case_folded_answers if spec else False
    examples: list[Example] = []
    seen: dict[str, str] = {}
    unanswered = 0
    for location, paragraph, qas in _iter_qas(raw, source):
        context = paragraph["context"]
        for k, qa in enumerate(qas):
            qid = _question_id(qa, f"{source}: {location}.qas[{k}]")
            where = f"{source}: question {qid!r}"
            if qid in seen:
                raise DataFormatError(f"{where}: duplicate question id (also at {seen[qid]})")
            seen[qid] = f"{location}.qas[{k}]"
            question = _field(qa, "question", str, where)
            if not question.strip():
                raise DataFormatError(f"{where}: empty question")
            answers = _parse_answers(qa, context, where, case_folded=case_folded)
            if not answers:
                if training:
                    raise DataFormatError(f"{where}: no answers (a training question needs one)")
                unanswered += 1
                continue
            uid = f"{uid_prefix}:{qid}"
            examples.append(Example(question, 0, context, uid, answers=answers))
    if unanswered:
        log.info("%s: dropped %d questions without answers", source, unanswered)
    if not examples:
        raise DataFormatError(f"{source}: no answerable questions")
    return examples


# ---------------------------------------------------------------------------------------------
# Hugging Face datasets (data_source "hf")
# ---------------------------------------------------------------------------------------------

QA_HUB: dict[str, HubSource] = {
    "squad": HubSource(
        "rajpurkar/squad",
        "plain_text",
        {"train": "train", "test": "validation"},
        ("id", "context", "question", "answers"),
    ),
    "trivia_web": HubSource(
        "mandarjoshi/trivia_qa",
        "rc.web",
        {"train": "train", "test": "validation"},
        ("question", "question_id", "entity_pages", "search_results", "answer"),
    ),
    "trivia_wiki": HubSource(
        "mandarjoshi/trivia_qa",
        "rc.wikipedia",
        {"train": "train", "test": "validation"},
        ("question", "question_id", "entity_pages", "search_results", "answer"),
    ),
    "quac": HubSource(
        "allenai/quac",
        "plain_text",
        {"train": "train", "test": "validation"},
        ("dialogue_id", "context", "questions", "turn_ids", "answers", "orig_answers"),
        revision="refs/convert/parquet",  # main holds only a loading script
    ),
}
"""Where each QA dataset is on the Hugging Face hub (`streams.hf_datasets`), from the dataset cards
(2026-11): our test split is the hub's ``validation`` split, as it is the released dev file.
SQuAD rows are SQuAD questions; QuAC rows are dialogues (one question per turn, converted by
`convert_quac` as the JSON files are); TriviaQA rows are raw questions with their evidence
documents, converted by `trivia_paragraphs` as the official converter converts the files."""

TRIVIA_MAX_TOKENS = 800
"""Context length of TriviaQA's SQuAD converter (``utils/convert_to_squad_format.py``:
``max_num_tokens=800``)."""


def read_hf_qa(name: str, split: str, data_dir: str | Path | None) -> list[Example]:
    """Read and validate one split of a QA dataset from Hugging Face ``datasets``.

    Args:
        name: A key of `QA_DATASETS`.
        split: ``"train"`` or ``"test"`` (the hub's validation split).
        data_dir: A directory holding ``<name>/`` (``save_to_disk`` or parquet, see
            `streams.hf_datasets`), or ``None`` for the hub.

    Raises:
        DataFormatError: A missing split or column, or a question that fails the checks of
            `load_squad_file` (naming the dataset, the split and the row or question id).

    """
    opened = open_split(name, split, QA_HUB[name], data_dir)
    training = split == "train"
    if name == "squad":
        raw = {"data": [_squad_row(row, opened.at(i)) for i, row in opened.rows()]}
    elif name == "quac":
        raw = {"data": [_quac_row(row, opened.at(i)) for i, row in opened.rows()]}
        raw = convert_quac(raw, source=opened.where)
    else:
        raw = {"data": [{"paragraphs": trivia_paragraphs(opened, training=training)}]}
    return squad_examples(raw, opened.where, name, f"{name}/{split}", training=training)


def _answer_lists(answers: Any, text_key: str, start_key: str, where: str) -> list[dict]:
    texts = _field(answers, text_key, list, where)
    starts = _field(answers, start_key, list, where)
    if len(texts) != len(starts):
        raise DataFormatError(f"{where}: {len(texts)} answer texts but {len(starts)} answer starts")
    return [{"text": t, "answer_start": a} for t, a in zip(texts, starts)]


def _squad_row(row: dict, where: str) -> dict:
    answers = _answer_lists(row["answers"], "text", "answer_start", f"{where} answers")
    qa = {"id": row["id"], "question": row["question"], "answers": answers}
    return {"title": row.get("title", ""), "paragraphs": [{"context": row["context"], "qas": [qa]}]}


def _quac_row(row: dict, where: str) -> dict:
    # a hub row is one dialogue: per-turn lists, as QuAC's JSON has per-turn objects
    questions = _field(row, "questions", list, where)
    turn_ids = _field(row, "turn_ids", list, where)
    answers = _field(row, "answers", dict, where)
    texts = _field(answers, "texts", list, f"{where} answers")
    starts = _field(answers, "answer_starts", list, f"{where} answers")
    orig = _answer_lists(row["orig_answers"], "texts", "answer_starts", f"{where} orig_answers")
    lengths = {len(questions), len(turn_ids), len(texts), len(starts), len(orig)}
    if len(lengths) != 1:
        raise DataFormatError(
            f"{where}: per-turn lists of different lengths (questions {len(questions)}, "
            f"turn_ids {len(turn_ids)}, answers {len(texts)}/{len(starts)}, orig_answers "
            f"{len(orig)})"
        )
    qas = []
    for k, (turn, question) in enumerate(zip(turn_ids, questions)):
        turn_answers = _answer_lists(
            {"texts": texts[k], "answer_starts": starts[k]},
            "texts",
            "answer_starts",
            f"{where} turn {turn!r}",
        )
        qas.append(
            {"id": turn, "question": question, "answers": turn_answers, "orig_answer": orig[k]}
        )
    title = row.get("wikipedia_page_title", "")
    return {"title": title, "paragraphs": [{"context": row["context"], "qas": qas}]}


def trivia_paragraphs(opened: Split, *, training: bool) -> list[dict]:
    """TriviaQA rows as SQuAD paragraphs, one per (question, evidence document).

    As the official converter (``utils/convert_to_squad_format.py``, mandarjoshi90/triviaqa)
    turns the released files into SQuAD form: each of a question's documents (Wikipedia
    pages, then web search results) becomes a paragraph whose question id is
    ``<question id>--<document file name>``; the context is the document's first 800 tokens;
    the answer is the first of the question's *normalised* aliases (in their order) found in
    the lower-cased context, at that position; a training question whose document holds no
    alias is dropped, a development one is kept without answers (and then dropped by
    `squad_examples`, as it cannot be scored).

    Deviations: tokens here are whitespace-separated words, where the converter uses NLTK's
    word tokenizer and re-joins its tokens with spaces (so its contexts split punctuation off);
    the converter's 80,000-question cap on the Web training set and its shuffle are not
    applied (``train_size`` samples instead). A document repeated for one question is used
    once.
    """
    paragraphs = []
    for i, row in opened.rows():
        where = opened.at(i)
        qid = _field(row, "question_id", str, where)
        question = _field(row, "question", str, where)
        aliases = _field(_field(row, "answer", dict, where), "normalized_aliases", list, where)
        seen: set[str] = set()
        for filename, text in _trivia_documents(row, where):
            if filename in seen:
                continue
            seen.add(filename)
            context = " ".join(text.split()[:TRIVIA_MAX_TOKENS])
            found = _first_alias(context.lower(), aliases)
            if found is None and training:
                continue
            answers = [{"text": found[0], "answer_start": found[1]}] if found else []
            qa = {"id": f"{qid}--{filename}", "question": question, "answers": answers}
            paragraphs.append({"context": context, "qas": [qa]})
    return paragraphs


def _trivia_documents(row: dict, where: str) -> Iterator[tuple[str, str]]:
    documents_of = (("entity_pages", "wiki_context"), ("search_results", "search_context"))
    for column, text_key in documents_of:
        documents = _field(row, column, dict, where)
        names = documents.get("filename") or []
        texts = documents.get(text_key) or []
        if len(names) != len(texts):
            raise DataFormatError(
                f"{where}: {column} has {len(names)} file names but {len(texts)} texts"
            )
        yield from zip(names, texts)


def _first_alias(lowered: str, aliases: Sequence[str]) -> tuple[str, int] | None:
    for alias in aliases:
        if alias and (index := lowered.find(alias)) != -1:
            return alias, index
    return None


# ---------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------


class QASampling(TypedDict, total=False):
    """`load_qa_task`'s sampling options, which `qa_stream` passes on."""

    train_size: int | None
    test_size: int | None
    seed: int
    data_source: str


def load_qa_task(
    name: str,
    data_dir: str | Path | None = None,
    *,
    train_size: int | None = None,
    test_size: int | None = None,
    seed: int = 0,
    data_source: str = "files",
) -> Task:
    """Load one QA dataset as a task: train = its training file, test = its development file.

    Args:
        name: A key of `QA_DATASETS`.
        data_dir: Directory in the layout of the module docstring; the bundled sample if
            ``None``.
        train_size: Training questions to sample (all if ``None``).
        test_size: Test questions to sample (all if ``None``).
        seed: Sampling seed; each dataset and split draws from its own derived seed, so the
            sample of a dataset does not depend on the task order.
        data_source: ``"files"`` or ``"hf"`` (Hugging Face ``datasets``: `read_hf_qa`;
            ``data_dir`` ``None`` = the hub).

    Returns:
        The task, with no labels.

    """
    if name not in QA_DATASETS:
        raise UnknownNameError(
            f"unknown QA dataset {name!r}; expected one of {', '.join(sorted(QA_DATASETS))}"
        )
    spec = QA_DATASETS[name]
    files: dict[str, Path | str]
    if data_source == "hf":
        files = {split: f"{name} {split} split (hf)" for split in ("train", "test")}
        read: Any = lambda _, split: read_hf_qa(name, split, data_dir)  # noqa: E731
    elif data_source == "files":
        folder = Path(data_dir if data_dir is not None else SAMPLE_DIR) / spec.folder
        files = {"train": folder / spec.train_file, "test": folder / spec.dev_file}
        read = lambda path, split: load_squad_file(path, name, training=split == "train")  # noqa: E731
    else:
        raise ValueError(f"data_source must be 'files' or 'hf', got {data_source!r}")
    return load_task(
        name,
        (),
        files,
        read,
        sizes={"train": train_size, "test": test_size},
        seed=seed,
        index=list(QA_DATASETS).index(name),
    )


def qa_stream(
    order: str | None = "i",
    *,
    tasks: Sequence[str] | None = None,
    data_dir: str | Path | None = None,
    **sampling: Unpack[QASampling],
) -> TaskStream:
    """Build a QA stream in a paper order or a chosen order.

    Args:
        order: Paper order ``"i"``..``"iv"`` (ignored when ``tasks`` is given).
        tasks: Dataset names, in training order, e.g. ``["squad", "quac"]``.
        data_dir: Directory of the real files; the bundled sample if ``None``.
        **sampling: Each dataset's sampling, as `load_qa_task`'s keyword arguments
            (``train_size``, ``test_size``, ``seed``, ``data_source``; the same defaults).

    Returns:
        A `TaskStream` of kind ``"qa"`` with an empty label space.

    Raises:
        DataFormatError: A file is missing or malformed.
        ValueError: A size exceeds what a file holds (the message names the file).

    """
    spec = QASpec(order=order, tasks=tuple(tasks) if tasks else None)
    source = describe_source(data_dir, sampling.get("data_source", "files"))
    return spec.load_stream(partial(load_qa_task, data_dir=data_dir, **sampling), source)


@dataclass(frozen=True)
class QASpec(OrderedFields):
    """The QA stream (config ``stream: qa``): SQuAD, TriviaQA Web and Wikipedia, QuAC.

    Sizes count questions per dataset (``None``: all); ``seed`` (the run's) draws them.
    """

    name: ClassVar[str] = "qa"
    kind: ClassVar[str] = "qa"
    order_key: ClassVar[str] = "order"
    headline_metric: ClassVar[str] = "average_accuracy"  # the mean over datasets of their F1
    score_name: ClassVar[str] = "F1"
    datasets: ClassVar[Collection[str]] = QA_DATASETS
    orders: ClassVar[Mapping[str, tuple[str, ...]]] = QA_ORDERS
    family: ClassVar[str] = "QA "
    title: ClassVar[str] = "question answering"

    def build(self, seed: int = 0, embed: Embedder | None = None) -> TaskStream:
        """The stream (``embed`` is unused)."""
        return qa_stream(
            self.order,
            tasks=self.tasks,
            data_dir=self.data_dir,
            train_size=self.train_size,
            test_size=self.test_size,
            seed=seed,
            data_source=self.data_source,
        )
