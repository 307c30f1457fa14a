"""The bundled QA sample: SQuAD 1.1, TriviaQA Web/Wikipedia and QuAC in their real layouts.

Project-written: templates and lexicons of invented names, so no text is copied from the real
corpora. Each dataset has its own domain and question family, so the tasks differ, and each
answer type (person, year, place, ...) has its own cue words, so a small model can learn them.
The files copy the real formats: SQuAD 1.1 as released, TriviaQA as its converter writes it
(tokenised text with spaces before punctuation, lower-cased answers, ids
"<question id>--<document>", a few dev questions without answers), and QuAC in its own format
(dialogues, "CANNOTANSWER" turns, the token appended to every context). ``streams.qa`` reads
them with the same loader as the real files.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from lifelong.files import atomic_write_text
from lifelong.streams.qa import CANNOTANSWER, QA_DATASETS

SAMPLE_TRAIN_QUESTIONS = 60
"""Answerable questions per training file of the bundled sample."""

SAMPLE_DEV_QUESTIONS = 20
"""Answerable questions per development file of the bundled sample."""

SAMPLE_DEV_UNANSWERED = 2
"""Extra TriviaQA dev questions without an answer (the converter keeps them; the loader drops)."""

MAX_CONTEXT_WORDS = 80

# fmt: off
_FIRST = (
    "Ada", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas",
    "Katya", "Lucas", "Mira", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Stefan", "Tara",
    "Ulrich", "Vera", "Walter", "Xenia", "Yusuf", "Zofia", "Anton", "Beatrix", "Cyril", "Dora",
    "Emil", "Freya", "Gustav", "Helga", "Ivo", "Johanna", "Kasimir", "Linnea", "Matteo", "Nadia",
)
_FEMALE = frozenset((
    "Ada", "Clara", "Elena", "Greta", "Ines", "Katya", "Mira", "Olga", "Quinn", "Rosa", "Tara",
    "Vera", "Xenia", "Zofia", "Beatrix", "Dora", "Freya", "Helga", "Johanna", "Linnea", "Nadia",
))
_LAST = (
    "Albrecht", "Brandvold", "Castellan", "Dunmore", "Eskildsen", "Falkner", "Grieve",
    "Halloran", "Ivers", "Jaskolski", "Kettering", "Lindqvist", "Marchetti", "Norland", "Oakes",
    "Pellegrin", "Quist", "Rasmussen", "Sorell", "Thorne", "Udall", "Varga", "Whitlock",
    "Yardley", "Zeller", "Ashdown", "Blackwood", "Corwin", "Ellery", "Fenwick", "Gallow",
    "Hartigan", "Jessop", "Kilbride", "Lorimer", "Merriweather", "Nyberg", "Ostrander",
    "Pemberton", "Radcliffe",
)
_TOWN_HEAD = (
    "Alder", "Bracken", "Cald", "Dun", "Elms", "Fen", "Glen", "Hal", "Isle", "Kes", "Lark",
    "Marrow", "North", "Ox", "Pine", "Quarr", "Red", "Salt", "Thistle", "Umber", "Vex", "West",
    "Yarrow", "Ash", "Birch", "Cold", "Dove", "Ember", "Fox", "Grey",
)
_TOWN_TAIL = (
    "wick", "moor", "mere", "hollow", "worth", "march", "brook", "bury", "haven", "crest",
    "field", "by", "stead", "ford", "dale", "combe",
)
_NUMBER_WORDS = ("five", "six", "seven", "eight", "nine", "eleven", "twelve")

_SQUAD_KINDS = (
    ("Observatory", "an astronomical observatory"), ("Library", "a public library"),
    ("Conservatory", "a music conservatory"), ("Museum", "a museum of natural history"),
    ("Academy", "an academy of fine arts"), ("Institute", "a research institute"),
    ("Botanical Garden", "a botanical garden"), ("Hospital", "a teaching hospital"),
)
_SQUAD_FEATURES = (
    "collection of antique clocks", "rooftop telescope", "annual lantern parade",
    "archive of rare maps", "glass reading room", "herbarium of alpine plants",
    "summer concert series", "copper dome", "public lectures on geology",
    "garden of medicinal herbs", "spiral staircase", "collection of ship models",
)

_WEB_RIVERS = (
    "Velm", "Orra", "Tassel", "Brimm", "Wend", "Lusk", "Ferro", "Haddle", "Silverrun", "Kell",
    "Marrin", "Oust", "Pennick", "Rook",
)
_WEB_DISHES = (
    "smoked eel pie", "honey oat cakes", "saffron buns", "plum dumplings", "cider stew",
    "pickled herring", "walnut bread", "barley broth", "cheese scones", "apple fritters",
    "mussel soup", "rhubarb tart",
)
_WEB_FESTIVALS = (
    "Lantern", "Kite", "Ribbon", "Bonfire", "Oyster", "Scarecrow", "Boat", "Blossom", "Fiddle",
    "Pumpkin",
)
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)
_WEB_SITES = ("travel", "visitor", "holiday", "day-trip")

_WIKI_ARTS = (
    ("composer", "opera", "performed"), ("painter", "painting", "exhibited"),
    ("novelist", "novel", "published"), ("playwright", "play", "staged"),
    ("poet", "poem cycle", "published"), ("sculptor", "statue", "unveiled"),
)
_WIKI_NATIONS = (
    "Danish", "Portuguese", "Scottish", "Chilean", "Estonian", "Flemish", "Welsh", "Austrian",
    "Norwegian", "Hungarian",
)
_WIKI_ADJECTIVES = (
    "Silent", "Copper", "Winter", "Hollow", "Crimson", "Distant", "Golden", "Broken", "Quiet",
    "Northern",
)
_WIKI_NOUNS = (
    "Harbour", "Orchard", "Lantern", "Meadow", "Tide", "Citadel", "Garden", "Mirror", "Bell",
    "Ferry",
)
_WIKI_SCHOOLS = ("College", "School of Art", "Academy", "Institute")
_WIKI_SPOUSE_JOBS = ("dancer", "physician", "photographer", "violinist", "botanist")
_TRIVIA_PREFIXES = ("tc", "bt", "qf", "sfq", "wh", "qz", "odql")

_QUAC_INSTRUMENTS = ("fiddle", "accordion", "trumpet", "banjo", "cello", "harmonica", "organ")
_QUAC_RELATIVES = ("uncle", "aunt", "grandfather", "grandmother", "older brother", "neighbour")
_QUAC_BANDS = ("Riders", "Ramblers", "Drifters", "Saints", "Lights")
_QUAC_SECTIONS = ("Early life and career", "Career", "Biography", "Musical career")
_QUAC_UNANSWERABLE = (
    "Did {pron} have any children?", "What was {poss} most famous song?",
    "Did {pron} win any awards?", "Who was {poss} manager?", "Did {pron} ever tour abroad?",
)
# fmt: on


class _RedrawError(Exception):
    """A drawn item is ambiguous or too long; draw again."""


class _Names:
    """Draws names that no earlier item of the dataset has used."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def fresh(self, make: Callable[[random.Random], str]) -> str:
        for _ in range(10_000):
            name = make(self.rng)
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("the sample lexicons ran out of fresh names")

    def person(self) -> str:
        return self.fresh(lambda r: f"{r.choice(_FIRST)} {r.choice(_LAST)}")

    def town(self) -> str:
        return self.fresh(lambda r: r.choice(_TOWN_HEAD) + r.choice(_TOWN_TAIL))

    def hex_id(self, bits: int) -> str:
        return self.fresh(lambda r: f"{r.getrandbits(bits):0{bits // 4}x}")


def _pronouns(name: str) -> tuple[str, str, str]:
    """Subject, object and possessive pronouns for an invented person."""
    return ("she", "her", "her") if name.split()[0] in _FEMALE else ("he", "him", "his")


def _indefinite(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


def _span(context: str, text: str) -> dict[str, Any]:
    """The SQuAD answer dict of ``text``, which must occur exactly once in ``context``."""
    start = context.find(text)
    if start < 0 or context.find(text, start + 1) >= 0:
        raise _RedrawError
    return {"text": text, "answer_start": start}


def _folded_span(context: str, text: str) -> dict[str, Any]:
    """An answer as TriviaQA's converter writes it: the lower-cased alias, found lower-cased."""
    alias = text.lower()
    lowered = context.lower()
    start = lowered.find(alias)
    if start < 0 or lowered.find(alias, start + 1) >= 0:
        raise _RedrawError
    return {"text": alias, "answer_start": start}


def _check_length(context: str) -> None:
    if len(context.split()) > MAX_CONTEXT_WORDS:
        raise _RedrawError


def _years(rng: random.Random, n: int, low: int, high: int) -> list[str]:
    return [str(y) for y in rng.sample(range(low, high), n)]


def _squad_article(
    rng: random.Random, names: _Names, n_questions: int, dev: bool
) -> dict[str, Any]:
    """One SQuAD article: an invented institution, one paragraph, up to 3 questions."""
    kind, kind_desc = rng.choice(_SQUAD_KINDS)
    inst = names.fresh(lambda r: f"{r.choice(_LAST)} {kind}")
    founder, director = names.person(), names.person()
    city, city2 = names.town(), names.town()
    year, year2 = sorted(_years(rng, 2, 1690, 1960))
    feature = rng.choice(_SQUAD_FEATURES)
    context = " ".join(
        (
            rng.choice(
                (
                    f"The {inst} is {kind_desc} in {city}.",
                    f"The {inst} is {kind_desc} located in the town of {city}.",
                )
            ),
            rng.choice(
                (
                    f"It was founded by {founder} in {year}, and its first director was "
                    f"{director}.",
                    f"{founder} founded the {inst} in {year}; {director} served as its first "
                    "director.",
                )
            ),
            rng.choice(
                (
                    f"In {year2} the {inst} moved to {city2}, where it still stands.",
                    f"The {inst} moved to {city2} in {year2} after a fire destroyed its first "
                    "building.",
                )
            ),
            rng.choice(("", f"It is run by a board of {rng.choice(_NUMBER_WORDS)} trustees.")),
            rng.choice(
                (
                    f"Today it is best known for its {feature}.",
                    f"Visitors today come mainly for its {feature}.",
                )
            ),
        )
    ).replace("  ", " ")
    _check_length(context)
    surname = {p: p.split()[-1] for p in (founder, director)}
    questions = {
        "founder": (
            ("Who founded the {inst}?", "Who was the founder of the {inst}?"),
            (founder, founder, surname[founder]),
        ),
        "year": (
            ("In what year was the {inst} founded?", "When was the {inst} founded?"),
            (year, year, f"in {year}"),
        ),
        "director": (
            ("Who was the first director of the {inst}?",),
            (director, surname[director], director),
        ),
        "moved": (
            (
                "To which town did the {inst} move in {year2}?",
                "Where did the {inst} move in {year2}?",
            ),
            (city2, city2, city2),
        ),
        "feature": (
            ("What is the {inst} best known for today?",),
            (feature, f"its {feature}", feature),
        ),
    }
    qas = []
    for key in rng.sample(sorted(questions), n_questions):
        templates, golds = questions[key]
        question = rng.choice(templates).format(inst=inst, year2=year2)
        answers = [_span(context, g) for g in (golds if dev else golds[:1])]
        qas.append({"answers": answers, "question": question, "id": names.hex_id(96)})
    title = inst.replace(" ", "_")
    return {"title": title, "paragraphs": [{"context": context, "qas": qas}]}


def _trivia_item(question: str, context: str, answer: dict | None, qid: str, doc: str) -> dict:
    """One converted TriviaQA item, laid out as ``convert_to_squad_format.py`` writes it."""
    qa = {"question": question, "answers": [answer] if answer else [], "id": f"{qid}--{doc}"}
    qa["qid"] = qid
    return {"paragraphs": [{"context": context, "qas": [qa]}]}


def _trivia_qid(rng: random.Random, names: _Names) -> str:
    return names.fresh(lambda r: f"{r.choice(_TRIVIA_PREFIXES)}_{r.randrange(100, 10_000)}")


def _trivia_web_item(rng: random.Random, names: _Names, answerable: bool) -> dict[str, Any]:
    """A travel web page about an invented town and one trivia question about it."""
    town, city = names.town(), names.town()
    river, dish = rng.choice(_WEB_RIVERS), rng.choice(_WEB_DISHES)
    festival, month = rng.choice(_WEB_FESTIVALS), rng.choice(_MONTHS)
    station = f"{rng.choice(_LAST)} Road"
    context = " ".join(
        (
            rng.choice((f"Welcome to {town} !", f"{town} : a complete guide .")),
            f"This {rng.choice(_WEB_SITES)} guide covers everything you need for a weekend visit .",
            rng.choice(
                (
                    f"The town sits on the {river} river , about {rng.randrange(3, 90)} km "
                    f"from {city} .",
                    f"The old town lies where the {river} river bends , an hour from {city} .",
                )
            ),
            f"Most visitors arrive at {station} station , a short walk from the market square .",
            rng.choice(
                (
                    f"Local restaurants are famous for {dish} , and the {festival} festival "
                    f"takes place every {month} .",
                    f"Do not leave without trying {dish} . The {festival} festival fills the "
                    f"streets every {month} .",
                )
            ),
            rng.choice(("Opening times may change , so check before you travel .", "")),
        )
    ).strip()
    _check_length(context)
    questions = (
        (f"On which river does the town of {town} stand?", river),
        (f"Which river flows through {town}?", river),
        (f"Which dish are the restaurants of {town} famous for?", dish),
        (f"In which month is the {festival} festival held in {town}?", month),
        (f"At which station do most visitors to {town} arrive?", f"{station}"),
        (f"Which town on the {river} river holds a {festival} festival every {month}?", town),
    )
    question, gold = rng.choice(questions)
    answer = _folded_span(context, gold)
    if not answerable:
        question, answer = f"Who is the mayor of {town}?", None
    folder = rng.randrange(100)
    doc = names.fresh(lambda r: f"{folder}/{folder}_{r.randrange(10_000, 99_999)}.txt")
    return _trivia_item(question, context, answer, _trivia_qid(rng, names), doc)


def _trivia_wiki_item(rng: random.Random, names: _Names, answerable: bool) -> dict[str, Any]:
    """An encyclopedia article about an invented artist and one trivia question about them."""
    name, spouse = names.person(), names.person()
    town, city = names.town(), names.town()
    profession, worktype, verb = rng.choice(_WIKI_ARTS)
    nation = rng.choice(_WIKI_NATIONS)
    work = f"The {rng.choice(_WIKI_ADJECTIVES)} {rng.choice(_WIKI_NOUNS)}"
    school = f"{rng.choice(_LAST)} {rng.choice(_WIKI_SCHOOLS)}"
    born = rng.randrange(1760, 1900)
    died = born + rng.randrange(45, 90)
    year, year2 = (str(born + y) for y in rng.sample(range(22, 40), 2))
    pron, obj, _ = _pronouns(name)
    context = " ".join(
        (
            f"{name} ( {born} – {died} ) was {_indefinite(nation)} {nation} {profession} .",
            f"Born in {town} , {pron} studied at {school} before settling in {city} .",
            rng.choice(
                (
                    f"{pron.capitalize()} is best remembered for the {worktype} {work} , first "
                    f"{verb} in {year} .",
                    f"The {worktype} {work} , first {verb} in {year} , made {obj} famous .",
                )
            ),
            f"In {year2} {pron} married the {rng.choice(_WIKI_SPOUSE_JOBS)} {spouse} .",
        )
    )
    _check_length(context)
    questions = (
        (f"Which {nation} {profession} created the {worktype} {work}?", name),
        (f"In which town was the {profession} {name} born?", town),
        (f"In which year was the {worktype} {work} first {verb}?", year),
        (f"Whom did {name} marry in {year2}?", spouse),
        (f"At which college did the {profession} {name} study?", school),
        (
            f"Which {profession} settled in {city} and created {_indefinite(worktype)} "
            f"{worktype} called {work}?",
            name,
        ),
    )
    question, gold = rng.choice(questions)
    answer = _folded_span(context, gold)
    if not answerable:
        question, answer = f"Which instrument did {name} play as a child?", None
    doc = name.replace(" ", "_") + ".txt"
    return _trivia_item(question, context, answer, _trivia_qid(rng, names), doc)


def _quac_dialogue(
    rng: random.Random, names: _Names, n_answerable: int, dev: bool
) -> dict[str, Any]:
    """A QuAC dialogue about an invented musician: up to ``n_answerable`` answerable turns."""
    name, band = names.person(), f"The {rng.choice(_WIKI_NOUNS)} {rng.choice(_QUAC_BANDS)}"
    town, city = names.town(), names.town()
    album = f"{rng.choice(_WIKI_ADJECTIVES)} {rng.choice(_MONTHS)}"
    year, year2, year3 = sorted(_years(rng, 3, 1930, 1995))
    pron, _, poss = _pronouns(name)
    instrument, relative = rng.choice(_QUAC_INSTRUMENTS), rng.choice(_QUAC_RELATIVES)
    last = name.split()[-1]
    text = (
        f"{last} was born in {town} in {year}. As a child {pron} sang in a church choir and "
        f"learned the {instrument} from {poss} {relative}. At {rng.randrange(15, 22)} {pron} "
        f"joined the band {band}, and their first record, {album}, sold well across the "
        f"country. In {year2} {pron} left {band} to start a solo career. {pron.capitalize()} "
        f"later opened a music school in {city}, where {pron} taught until {year3}."
    )
    _check_length(text)
    context = f"{text} {CANNOTANSWER}"
    cannot = {"text": CANNOTANSWER, "answer_start": len(context) - len(CANNOTANSWER)}
    turns = (
        ((f"Where was {pron} born?", "Where did {last} grow up?"),
         (f"born in {town} in {year}", town)),
        ((f"What instrument did {pron} learn?",),
         (f"learned the {instrument} from {poss} {relative}", f"the {instrument}")),
        ((f"Which band did {pron} join?", f"Was {pron} in a band?"),
         (f"{pron} joined the band {band}", f"the band {band}")),
        (("What was the band's first record?", "Did they make a record?"),
         (f"their first record, {album}, sold well across the country", album)),
        ((f"When did {pron} leave the band?", f"Why did {pron} leave {band}?"),
         (f"In {year2} {pron} left {band} to start a solo career", f"In {year2}")),
        ((f"What did {pron} do after that?", f"Did {pron} teach music?"),
         (f"later opened a music school in {city}", f"music school in {city}")),
    )  # fmt: skip
    chosen = sorted(rng.sample(range(len(turns)), min(n_answerable, rng.randrange(3, 6))))
    plan: list[tuple[str, list[dict], str]] = []
    for t in chosen:
        templates, (orig, variant) = turns[t]
        question = rng.choice(templates).format(last=last)
        golds = [_span(text, orig), _span(text, variant), rng.choice((_span(text, orig), cannot))]
        plan.append((question, golds, rng.choice(("y", "m", "n"))))
    for _ in range(rng.choice((0, 1, 1, 2))):
        question = rng.choice(_QUAC_UNANSWERABLE).format(pron=pron, poss=poss)
        plan.insert(rng.randrange(len(plan) + 1), (question, [cannot, cannot, cannot], "n"))
    dialogue_id = f"C_{names.hex_id(128)}_{rng.choice((0, 1))}"
    qas = []
    for k, (question, golds, followup) in enumerate(plan):
        qas.append(
            {
                "followup": followup,
                "yesno": "x",
                "question": question,
                "answers": golds if dev else golds[:1],
                "id": f"{dialogue_id}_q#{k}",
                "orig_answer": dict(golds[0]),
            }
        )
    return {
        "paragraphs": [{"context": context, "id": dialogue_id, "qas": qas}],
        "section_title": rng.choice(_QUAC_SECTIONS),
        "background": f"{name} is a {rng.choice(_WIKI_NATIONS)} singer and songwriter.",
        "title": name,
    }


def _draw(make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    for _ in range(1000):
        try:
            return make()
        except _RedrawError:
            continue
    raise RuntimeError("the sample templates keep producing ambiguous items")


def _answerable(item: dict[str, Any]) -> int:
    qas = item["paragraphs"][0]["qas"]
    return sum(1 for qa in qas if qa["answers"] and qa["answers"][0]["text"] != CANNOTANSWER)


def _sample_split(
    dataset: str, rng: random.Random, names: _Names, n_questions: int, dev: bool
) -> dict[str, Any]:
    """The JSON of one sample file with ``n_questions`` answerable questions."""
    items: list[dict[str, Any]] = []
    count = 0
    while count < n_questions:
        left = n_questions - count
        if dataset == "squad":
            item = _draw(partial(_squad_article, rng, names, min(3, left), dev))
        elif dataset == "quac":
            item = _draw(partial(_quac_dialogue, rng, names, left, dev))
        elif dataset == "trivia_web":
            item = _draw(partial(_trivia_web_item, rng, names, True))
        else:
            item = _draw(partial(_trivia_wiki_item, rng, names, True))
        items.append(item)
        count += _answerable(item)
    if dataset == "squad":
        return {"data": items, "version": "1.1"}
    if dataset == "quac":
        return {"data": items}
    if dev:
        make = _trivia_web_item if dataset == "trivia_web" else _trivia_wiki_item
        for _ in range(SAMPLE_DEV_UNANSWERED):
            items.insert(rng.randrange(len(items) + 1), _draw(partial(make, rng, names, False)))
    return {"data": items, "version": 1.0}


def write_qa_sample(
    root: str | Path,
    seed: int = 0,
    *,
    train_questions: int = SAMPLE_TRAIN_QUESTIONS,
    dev_questions: int = SAMPLE_DEV_QUESTIONS,
) -> list[Path]:
    """Write the bundled sample of all four QA datasets under ``root``, in the real layout.

    The output is a function of the arguments only: the same call writes byte-identical files
    (JSON with one-space indentation, UTF-8, a final newline).

    Args:
        root: Directory to hold ``squad/``, ``triviaqa/`` and ``quac/`` (created if missing).
        seed: Seed of the generators (each dataset derives its own).
        train_questions: Answerable questions per training file.
        dev_questions: Answerable questions per development file (the TriviaQA dev files get
            `SAMPLE_DEV_UNANSWERED` more without answers, as the converter leaves them).

    Returns:
        The files written.

    """
    if train_questions < 1 or dev_questions < 1:
        raise ValueError(
            f"question counts must be positive, got {train_questions} and {dev_questions}"
        )
    written = []
    for spec in QA_DATASETS.values():
        rng = random.Random(f"{seed}:{spec.name}")
        names = _Names(rng)
        for file, n, dev in (
            (spec.train_file, train_questions, False),
            (spec.dev_file, dev_questions, True),
        ):
            raw = _sample_split(spec.name, rng, names, n, dev)
            path = Path(root) / spec.folder / file
            atomic_write_text(
                path, json.dumps(raw, indent=1, ensure_ascii=False) + "\n", mode=0o644
            )
            written.append(path)
    return written
