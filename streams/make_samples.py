"""Write the bundled sample of the five Zhang et al. (2015) text-classification datasets.

The sample is project-written: every row comes from templates filled with per-class slot
lexicons, so no text is copied from the real corpora. The files copy the real layout exactly
(``<folder>/{train,test}.csv``, no header, the 1-indexed label first, every field double-quoted,
newlines inside a field written as a literal backslash-n), so the loaders read the sample and
the real data the same way. Each class has its own vocabulary, so a small model can learn it
from a few hundred rows, and the five star ratings of Yelp and Amazon are graded from furious
to enthusiastic.

Template syntax: ``{slot}`` draws a value from the class's lexicon (the same value every time
the slot recurs in a row); ``{slot#2}`` draws a second, different value; ``{slot.1}`` picks an
item of a tuple value; ``{slot:cap}``, ``{slot:upper}``, ``{slot:lower}`` and ``{slot:title}``
change case. Values may themselves contain slots.

Run ``python -m streams.make_samples`` from the repository root to rewrite the sample; the
output depends only on ``--seed``.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_OUT = Path(__file__).parent / "samples" / "text_classification"
"""Where the sample goes by default (the loaders' ``SAMPLE_DIR``)."""

MAX_WORDS = 60
"""Longest row, in words over all text fields, that the generator keeps."""

NEWLINE_RATE = 0.1
"""Share of rows in which one sentence break becomes a literal backslash-n, as in the real files."""

MAX_ATTEMPTS = 2000
"""Draws per row before giving up on finding a new, short enough row."""

Slots = Mapping[str, tuple]
"""A lexicon: slot name to its values (strings, or tuples of strings read with ``{slot.N}``)."""

# ---------------------------------------------------------------------------------------------
# Template filling
# ---------------------------------------------------------------------------------------------

_SLOT = re.compile(r"\{([a-z_][a-z0-9_]*)(#\d+)?(?:\.(\d+))?(?::(cap|upper|lower|title))?\}")
_SMALL_WORDS = frozenset({"a", "an", "and", "at", "by", "for", "in", "of", "on", "the", "to"})
_SENTENCE_BREAK = re.compile(r"(?<=[a-z0-9)]{3}[.!?]) (?=[A-Z])")
_CLAUSE_BREAK = re.compile(r"(?<=[a-z]{3}[,;]) (?=[a-z])")


def _title_case(text: str) -> str:
    # Headline case; short function words stay lower case (a title never starts with a slot
    # value that begins with one).
    words = text.split(" ")
    return " ".join(w if w in _SMALL_WORDS else w[:1].upper() + w[1:] for w in words)


_CASES: dict[str, Callable[[str], str]] = {
    "cap": lambda s: s[:1].upper() + s[1:],
    "upper": str.upper,
    "lower": str.lower,
    "title": _title_case,
}


class _Filler:
    """Fills the templates of one row, drawing each slot once and reusing it within the row."""

    def __init__(self, slots: Slots, rng: random.Random) -> None:
        self._slots = slots
        self._rng = rng
        self._drawn: dict[str, object] = {}

    def fill(self, template: str) -> str:
        """Replace every slot of ``template`` (recursively)."""
        return _SLOT.sub(self._replace, template)

    def _replace(self, match: re.Match[str]) -> str:
        name, copy, index, case = match.groups()
        value = self._draw(name, name + (copy or ""))
        if index is not None:
            value = value[int(index)]
        text = self.fill(value)
        return _CASES[case](text) if case else text

    def _draw(self, name: str, key: str) -> object:
        if key not in self._drawn:
            pool = self._slots[name]
            used = [v for k, v in self._drawn.items() if k.split("#")[0] == name]
            fresh = [v for v in pool if v not in used] or list(pool)
            self._drawn[key] = self._rng.choice(fresh)
        return self._drawn[key]


# ---------------------------------------------------------------------------------------------
# Dataset descriptions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ClassSpec:
    """One class: row templates (one template per text column) and the lexicon they draw on."""

    rows: tuple[tuple[str, ...], ...]
    slots: Slots


@dataclass(frozen=True)
class _DatasetSpec:
    """One dataset: its folder and its classes in label order (label 1 first)."""

    folder: str
    classes: tuple[_ClassSpec, ...]
    unique_title: bool = False


def _sentences(count: int) -> tuple[tuple[str], ...]:
    """Single-column row templates of ``count`` sentences built from open/body/close pools."""
    shapes = {
        2: ("{open} {body}", "{body} {close}"),
        3: ("{open} {body} {close}", "{open} {body} {body#2}", "{body} {body#2} {close}"),
        4: ("{open} {body} {body#2} {close}",),
    }
    return tuple((t,) for t in shapes[count])


_REVIEW_ROWS = _sentences(2) + _sentences(3) + _sentences(3) + _sentences(4)
"""Two to four sentences, three-sentence reviews most often (as on Yelp)."""

_YAHOO_ROWS = (
    ("{qa.0}", "{content}", "{pre} {qa.1} {post}"),
    ("{qa.0}", "{content}", "{qa.1} {post}"),
    ("{qa.0}", "{content}", "{pre} {qa.1}"),
    ("{qa.0}", "", "{qa.1} {post}"),
)
"""Question content is often empty in the real files; the answer always has text."""


def _yahoo_class(qa: tuple[tuple[str, str], ...], extra: Slots) -> _ClassSpec:
    """A Yahoo topic from its question/answer pairs plus content, pre, post and slot pools."""
    return _ClassSpec(_YAHOO_ROWS, {"qa": qa, **extra})


# ---------------------------------------------------------------------------------------------
# Lexicons (kept in hand-aligned rows, not one value per line)
# ---------------------------------------------------------------------------------------------

# fmt: off

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_PEOPLE: Slots = {
    "person": ("{first} {last}",),
    "first": (
        "James", "Maria", "Thomas", "Elena", "Daniel", "Sofia", "Henry", "Grace", "Lukas",
        "Anna", "Samuel", "Clara", "Oliver", "Nina", "Victor", "Helen", "Marcus", "Ingrid",
        "Patrick", "Laura", "Jonas", "Amelia", "Robert", "Irene", "Hugo", "Margaret", "Felix",
        "Rosa", "Arthur", "Eva",
    ),
    "last": (
        "Harlan", "Whitfield", "Moreau", "Lindqvist", "Okafor", "Brennan", "Castillo",
        "Hartmann", "Novak", "Ashby", "Kowalski", "Fairbanks", "Delacroix", "Sato", "Mercer",
        "Vance", "Albright", "Rinaldi", "Thornton", "Kessler", "Bishop", "Caldwell", "Dunmore",
        "Ferreira", "Galloway", "Holloway", "Jansen", "Keating", "Larkin", "Pemberton",
    ),
}

# ---------------------------------------------------------------------------------------------
# AG News: 1 World, 2 Sports, 3 Business, 4 Sci/Tech (title, description)
# ---------------------------------------------------------------------------------------------

_AG_COMMON: Slots = {"day": _WEEKDAYS, **_PEOPLE}

_AG_WORLD = _ClassSpec(
    rows=(
        (
            "{toll:cap} Killed as {group:title} Attack Police in {place.1}",
            "{place.0:upper} (Reuters) - {group:cap} attacked a police station on {day}, "
            "killing {toll} people, {place.2} officials said.",
        ),
        (
            "{place.2} {leader:title} Vows Crackdown After {event:title}",
            "AP - The {place.2} {leader} vowed on {day} to restore order after {event} left at "
            "least {toll} people dead in the capital.",
        ),
        (
            "{org.1} Urges Ceasefire in {place.1}",
            "{place.0:upper} (AFP) - {org.0:cap} called for an immediate ceasefire between "
            "government troops and {group}, warning of a humanitarian crisis.",
        ),
        (
            "{place.1} Votes Amid Fears of Violence",
            "Reuters - Voters in {place.1} went to the polls on {day} under heavy security, "
            "with {group} threatening to disrupt the election.",
        ),
        (
            "Envoys Seek End to {place.1} Standoff",
            "{place.0:upper} (Reuters) - Diplomats from {org.0} arrived in {place.0} on {day} "
            "to mediate peace talks between the government and {group}.",
        ),
        (
            "Refugees Flee Fighting in {place.1}",
            "AP - Thousands of refugees crossed the border on {day} to escape fighting between "
            "the army and {group} in {place.1}, aid agencies said.",
        ),
        (
            "{place.2} Troops Kill {toll:cap} {group:title}",
            "{place.0:upper} (AFP) - {place.2} troops killed {toll} {group} in a raid near the "
            "border, the {leader}'s office said on {day}.",
        ),
        (
            "{org.1} Rushes Aid to {place.1} After {disaster:title}",
            "{org.0:cap} flew food and medicine to {place.1} on {day} after {disaster} "
            "displaced thousands of families. The government appealed for foreign help.",
        ),
    ),
    slots={
        **_AG_COMMON,
        "place": (
            ("Baghdad", "Iraq", "Iraqi"), ("Kabul", "Afghanistan", "Afghan"),
            ("Jerusalem", "Israel", "Israeli"), ("Tehran", "Iran", "Iranian"),
            ("Khartoum", "Sudan", "Sudanese"), ("Islamabad", "Pakistan", "Pakistani"),
            ("Kiev", "Ukraine", "Ukrainian"), ("Moscow", "Russia", "Russian"),
            ("Beijing", "China", "Chinese"), ("Cairo", "Egypt", "Egyptian"),
            ("Nairobi", "Kenya", "Kenyan"), ("Jakarta", "Indonesia", "Indonesian"),
            ("Beirut", "Lebanon", "Lebanese"), ("Damascus", "Syria", "Syrian"),
            ("Caracas", "Venezuela", "Venezuelan"), ("Port-au-Prince", "Haiti", "Haitian"),
            ("Kathmandu", "Nepal", "Nepali"), ("Colombo", "Sri Lanka", "Sri Lankan"),
            ("Harare", "Zimbabwe", "Zimbabwean"), ("Abidjan", "Ivory Coast", "Ivorian"),
            ("Manila", "the Philippines", "Philippine"), ("Tbilisi", "Georgia", "Georgian"),
        ),
        "leader": (
            "prime minister", "president", "foreign minister", "defense minister",
            "interior minister",
        ),
        "group": ("rebels", "insurgents", "militants", "protesters", "gunmen", "separatists"),
        "event": (
            "a car bombing", "border clashes", "a disputed election", "a hostage crisis",
            "mass street protests", "a suicide attack", "a failed coup attempt",
        ),
        "disaster": (
            "a deadly earthquake", "severe flooding", "a powerful cyclone", "deadly landslides",
        ),
        "org": (
            ("the United Nations", "UN"), ("NATO", "NATO"), ("the European Union", "EU"),
            ("the African Union", "African Union"), ("the Arab League", "Arab League"),
            ("the Red Cross", "Red Cross"),
        ),
        "toll": ("three", "five", "seven", "nine", "12", "15", "18", "21", "27", "34"),
    },
)

_AG_SPORTS = _ClassSpec(
    rows=(
        (
            "{mlb} Top {mlb#2} Behind {last}'s Homer",
            "AP - {person} hit a two-run homer in the eighth inning and the {mlb} beat the "
            "{mlb#2} {b_score} on {day} night.",
        ),
        (
            "{nfl} Rout {nfl#2} as {last} Throws Three TDs",
            "AP - {person} threw three touchdown passes and the {nfl} beat the {nfl#2} "
            "{f_score} on Sunday to stay unbeaten.",
        ),
        (
            "{last} Leads {nba} Past {nba#2}",
            "{person} scored 31 points and grabbed 12 rebounds to lead the {nba} to a "
            "{k_score} win over the {nba#2} on {day}.",
        ),
        (
            "{club} Held to Draw by {club#2}",
            "Reuters - {club} were held to a 1-1 draw by {club#2} on Saturday, ending a "
            "five-match winning run in the league.",
        ),
        (
            "{club} Beat {club#2} to Reach Quarterfinals",
            "Reuters - {person} scored twice as {club} beat {club#2} {s_score} in the "
            "Champions League on {day}.",
        ),
        (
            "{last} Takes Lead at {golf:title}",
            "{person} shot a 6-under-par 66 on {day} to take a two-stroke lead after the "
            "second round of {golf}.",
        ),
        (
            "{last} Cruises Into {tennis:title} Semifinals",
            "AP - {person} beat {first#2} {last#2} in straight sets on {day} to reach the "
            "semifinals of {tennis}.",
        ),
        (
            "{last} Wins Olympic Gold in {olympic:title}",
            "ATHENS (Reuters) - {person} won the gold medal in the {olympic} at the Athens "
            "Olympics on {day}, setting an Olympic record.",
        ),
        (
            "{mlb} Fire Manager After Losing Streak",
            "The {mlb} fired their manager on {day} after a ten-game losing streak knocked "
            "the team out of the playoff race.",
        ),
        (
            "{last} Out for Season With Knee Injury",
            "{nfl} quarterback {person} will miss the rest of the season after tearing a knee "
            "ligament in practice, the team said on {day}.",
        ),
    ),
    slots={
        **_AG_COMMON,
        "mlb": (
            "Red Sox", "Yankees", "Cardinals", "Astros", "Cubs", "Braves", "Dodgers", "Mets",
            "Twins", "Angels", "Giants", "Marlins",
        ),
        "nfl": (
            "Patriots", "Eagles", "Colts", "Steelers", "Jets", "Dolphins", "Broncos", "Ravens",
            "Packers", "Chiefs", "Seahawks", "Bears",
        ),
        "nba": (
            "Lakers", "Pistons", "Spurs", "Heat", "Knicks", "Suns", "Celtics", "Rockets",
            "Kings", "Pacers", "Nets", "Bulls",
        ),
        "club": (
            "Arsenal", "Chelsea", "Liverpool", "Everton", "Newcastle", "Tottenham",
            "Real Madrid", "Barcelona", "Celtic", "Rangers", "Ajax", "Porto",
        ),
        "b_score": ("5-3", "4-2", "7-6", "3-1", "6-4", "2-1", "8-5"),
        "f_score": ("24-17", "31-10", "27-20", "17-13", "38-21", "20-3"),
        "k_score": ("98-91", "102-95", "88-84", "110-99", "95-90"),
        "s_score": ("2-1", "3-0", "1-0", "2-0", "3-2"),
        "golf": ("the Masters", "the PGA Championship", "the British Open", "the Memorial"),
        "tennis": ("the US Open", "Wimbledon", "the Australian Open", "the French Open"),
        "olympic": (
            "200-meter freestyle", "100-meter butterfly", "400-meter hurdles", "marathon",
            "1,500 meters", "decathlon", "pole vault",
        ),
    },
)

_AG_BUSINESS = _ClassSpec(
    rows=(
        (
            "{company} Profit Rises {pct} Percent",
            "{market_city} (Reuters) - {company} said on {day} that quarterly net income rose "
            "{pct} percent to ${million} million, beating Wall Street forecasts.",
        ),
        (
            "{company} Shares Fall on Weak Outlook",
            "Reuters - Shares of {company} fell {pct} percent on {day} after the company cut "
            "its full-year earnings forecast, citing rising costs.",
        ),
        (
            "Stocks {market.0}; {company} Gains",
            "{market_city} (Reuters) - Stocks {market.1} on {day}, and shares of {company} "
            "rose {pct} percent in heavy trading.",
        ),
        (
            "{company} to Cut {jobs} Jobs",
            "AP - {company} plans to eliminate {jobs} jobs in a restructuring aimed at saving "
            "${million} million a year, the company said on {day}.",
        ),
        (
            "{company} Agrees to Buy {company#2}",
            "{market_city} (Reuters) - {company} agreed to buy rival {company#2} for about "
            "${billion} billion in cash and stock, the companies said on {day}.",
        ),
        (
            "Oil Tops ${oil} a Barrel; {company} Slips",
            "Reuters - Crude oil prices rose above ${oil} a barrel on {day} on supply fears, "
            "and shares of {company} slipped as investors worried about fuel costs.",
        ),
        (
            "{company} Sales Beat Estimates",
            "{company} reported a {pct} percent jump in quarterly sales on {day}, helped by "
            "strong demand, and raised its profit outlook for the year.",
        ),
        (
            "Investors Sue {company} Over Accounting",
            "AP - Shareholders sued {company} on {day}, accusing executives of inflating "
            "earnings by ${million} million and misleading investors.",
        ),
    ),
    slots={
        **_AG_COMMON,
        "company": (
            "Norland Energy", "Brightwater Foods", "Kessler Motors", "Halcyon Airlines",
            "Trident Bank", "Meridian Retail", "Crestline Steel", "Orion Pharmaceuticals",
            "Summit Insurance", "Pioneer Chemicals", "Atlas Shipping", "Bluepeak Mining",
            "Sterling Brewing", "Ridgeway Homes", "Granite Financial", "Lakeshore Foods",
            "Vantage Motors", "Redwood Paper", "Northgate Stores", "Castlerock Airlines",
        ),
        "market_city": ("NEW YORK", "LONDON", "TOKYO", "CHICAGO", "FRANKFURT", "TORONTO"),
        "pct": ("4", "6", "8", "11", "13", "17", "22", "29"),
        "oil": ("45", "47", "49", "51", "53", "55"),
        "million": ("120", "245", "310", "480", "615", "890"),
        "billion": ("1.2", "2.5", "3.8", "4.1", "6.7"),
        "jobs": ("500", "900", "1,200", "2,500", "3,000", "4,000"),
        "market": (
            ("Rise as Oil Eases", "rose as oil prices eased"),
            ("Slip on Rate Worries", "slipped on worries about higher interest rates"),
            ("Rally on Jobs Data", "rallied after a stronger-than-expected jobs report"),
            ("Edge Higher as Dollar Steadies", "edged higher as the dollar steadied"),
            ("Climb Before Fed Meeting", "climbed ahead of a Federal Reserve meeting"),
        ),
    },
)

_AG_SCITECH = _ClassSpec(
    rows=(
        (
            "{techco} Unveils New {product:title}",
            "{techco} on {day} unveiled a new {product} that it says is faster and more "
            "secure, stepping up competition with larger software rivals.",
        ),
        (
            "{techco} Patches Flaw in {product:title}",
            "SAN FRANCISCO (Reuters) - {techco} released a patch for a security flaw in its "
            "{product} that could let hackers take control of a computer over the Internet.",
        ),
        (
            "{discovery.0:title} Find {discovery.1}",
            "Reuters - A team of {discovery.0} has found {discovery.2}, according to a study "
            "published on {day} in the journal {journal}.",
        ),
        (
            "{agency.1} {probe:title} Sends Back New Images",
            "AP - {agency.0:cap}'s {probe} beamed back detailed images on {day}, giving "
            "scientists their best look yet at the surface.",
        ),
        (
            "E-Mail Worm Targets {techco} Users",
            "Security experts warned on {day} that a fast-spreading e-mail worm is attacking "
            "computers running {techco} software, stealing passwords and slowing networks.",
        ),
        (
            "{techco} Launches Online Music Service",
            "{techco} launched a digital music store on {day}, letting users download songs "
            "for 99 cents each to their computers and portable players.",
        ),
        (
            "{techco} Bets on Wireless Internet",
            "{techco} said on {day} it will spend ${million} million to build a Wi-Fi network "
            "offering high-speed wireless Internet access to laptop users.",
        ),
    ),
    slots={
        **_AG_COMMON,
        "techco": (
            "Quantix Software", "Netwave", "ByteForge", "Cirrus Systems", "Lumina Labs",
            "Pixelnet", "Datastream", "Corvid Networks", "Helix Computing", "Synapse Mobile",
            "Arcadia Games", "Nimbus Search",
        ),
        "product": (
            "web browser", "search engine", "operating system", "music player", "spam filter",
            "wireless chip", "handheld game console", "instant messaging software",
            "database software", "smartphone", "laptop", "digital camera",
        ),
        "discovery": (
            ("astronomers", "Giant Planet Orbiting Nearby Star",
             "a giant planet orbiting a nearby star"),
            ("planetary scientists", "Signs of Water on Mars",
             "new evidence that liquid water once flowed on Mars"),
            ("geneticists", "Gene Linked to Aging", "a gene that appears to control aging in mice"),
            ("biologists", "New Frog Species in Rainforest",
             "a new species of tree frog in a remote rainforest"),
            ("astronomers", "Most Distant Galaxy Yet", "the most distant galaxy ever observed"),
            ("climate scientists", "Arctic Ice Melting Faster",
             "that Arctic sea ice is melting faster than predicted"),
            ("physicists", "Faster Quantum Computer Design",
             "a way to make quantum computers more stable"),
        ),
        "journal": ("Nature", "Science"),
        "agency": (("NASA", "NASA"), ("the European Space Agency", "ESA")),
        "probe": (
            "Mars rover", "Saturn probe", "comet lander", "lunar orbiter", "solar observatory",
            "space telescope",
        ),
        "million": ("50", "120", "200", "350"),
    },
)

_AG_NEWS = _DatasetSpec(
    "ag_news_csv", (_AG_WORLD, _AG_SPORTS, _AG_BUSINESS, _AG_SCITECH), unique_title=True
)

# ---------------------------------------------------------------------------------------------
# Yelp reviews: star rating 1..5 (text)
# ---------------------------------------------------------------------------------------------

_YELP_COMMON: Slots = {
    "venue": (
        ("this sushi bar", "the spicy tuna roll", "the miso soup"),
        ("this taco shop", "the carnitas tacos", "the chips and salsa"),
        ("this little Thai place", "the pad thai", "the green curry"),
        ("this diner", "the chicken fried steak", "the pancakes"),
        ("this pizza joint", "the pepperoni pie", "the garlic knots"),
        ("this ramen shop", "the tonkotsu ramen", "the pork buns"),
        ("this steakhouse", "the ribeye", "the mashed potatoes"),
        ("this BBQ joint", "the brisket", "the mac and cheese"),
        ("this Indian restaurant", "the chicken tikka masala", "the garlic naan"),
        ("this burger bar", "the bacon burger", "the sweet potato fries"),
        ("this brunch spot", "the eggs Benedict", "the French toast"),
        ("this pho place", "the beef pho", "the spring rolls"),
        ("this Italian restaurant", "the lasagna", "the tiramisu"),
        ("this bakery", "the croissants", "the lemon tart"),
        ("this Greek cafe", "the gyro plate", "the baklava"),
        ("this seafood shack", "the fish and chips", "the clam chowder"),
        ("this dim sum spot", "the shrimp dumplings", "the egg tarts"),
        ("this Korean BBQ place", "the bulgogi", "the kimchi pancake"),
        ("this wing spot", "the buffalo wings", "the onion rings"),
        ("this Cuban cafe", "the Cuban sandwich", "the fried plantains"),
    ),
    "staff": (
        "our server", "the bartender", "the hostess", "the manager", "our waitress",
        "the cashier", "the owner",
    ),
    "companion": (
        "my wife", "my husband", "my boyfriend", "my girlfriend", "my parents",
        "a few coworkers", "two friends", "my sister", "my kids",
    ),
    "occasion": (
        "on a Friday night", "for lunch", "for Sunday brunch", "for a birthday dinner",
        "after work", "on date night", "for a late dinner", "before a show",
    ),
    "city": (
        "Vegas", "Phoenix", "Scottsdale", "Pittsburgh", "Charlotte", "Madison", "Cleveland",
        "Tempe", "Toronto", "Montreal", "Henderson", "Mesa",
    ),
    "wait": ("twenty minutes", "thirty minutes", "forty-five minutes", "almost an hour"),
    "price": ("$35", "$40", "$55", "$70", "$90", "$120"),
}

_YELP_PHRASES: tuple[Slots, ...] = (
    {  # 1 star: furious
        "open": (
            "Worst dining experience I have ever had in {city}.",
            "I came to {venue.0} with {companion} {occasion} and I am still furious.",
            "Absolutely disgusting. Avoid {venue.0} at all costs.",
            "Zero stars if I could. {venue.0:cap} is a total disaster.",
            "Never again. This was a horrible, infuriating night.",
            "I rarely write reviews, but this place was so awful I have to warn everyone.",
        ),
        "body": (
            "We waited {wait} and {staff} was incredibly rude the whole time.",
            "{venue.1:cap} was inedible and smelled rotten.",
            "I found a hair in {venue.2} and {staff} just shrugged.",
            "{companion:cap} got sick that night, probably food poisoning.",
            "The tables were filthy and the bathroom was disgusting.",
            "When we complained, {staff} yelled at us and refused a refund.",
            "They charged us {price} for garbage we sent back.",
            "{venue.1:cap} was raw in the middle and {venue.2} was cold and greasy.",
        ),
        "close": (
            "Never coming back. Zero stars.",
            "Total waste of money. Avoid!",
            "The health department should shut this dump down.",
            "Stay away, this place is a joke.",
            "Absolutely terrible, I am reporting them.",
            "Worst place in {city}, hands down.",
        ),
    },
    {  # 2 stars: disappointed
        "open": (
            "I really wanted to like {venue.0}, but it was a letdown.",
            "Pretty disappointing visit {occasion}.",
            "Came here with {companion} after hearing the hype and left underwhelmed.",
            "Two stars, and honestly that might be generous.",
            "Sadly {venue.0} did not live up to the reviews.",
            "Not great. We expected a lot more.",
        ),
        "body": (
            "{venue.1:cap} was bland and a bit overcooked.",
            "Service was slow and {staff} seemed uninterested.",
            "{venue.2:cap} was lukewarm and overpriced for the portion.",
            "We waited {wait} for food that was mediocre at best.",
            "For {price} we expected better quality.",
            "{venue.1:cap} lacked flavor and the sides were forgettable.",
            "It wasn't awful, just disappointing and not worth the price.",
        ),
        "close": (
            "Probably won't be back.",
            "I wouldn't go out of my way for it.",
            "Not worth it, sadly.",
            "Maybe an off night, but I doubt I'll return.",
            "Disappointed overall.",
            "There are better options in {city}.",
        ),
    },
    {  # 3 stars: mixed
        "open": (
            "{venue.0:cap} is okay, nothing special.",
            "Decent spot but pretty average overall.",
            "A-OK. Came in {occasion} with {companion}.",
            "Mixed feelings about {venue.0}.",
            "Three stars feels about right for this place.",
            "It's fine if you're in the area.",
        ),
        "body": (
            "{venue.1:cap} was decent but {venue.2} was just average.",
            "Service was fine, not great, not bad.",
            "Some dishes were good, others were hit or miss.",
            "Prices are reasonable, though the portions were a little small.",
            "{staff:cap} was friendly enough but kind of forgetful.",
            "The atmosphere is nice, the food is so-so.",
            "We waited {wait}, which was long but manageable.",
        ),
        "close": (
            "Might come back if I'm nearby.",
            "It's okay, nothing memorable.",
            "Average experience overall.",
            "Not bad, not amazing.",
            "I'd give it another try, maybe.",
            "Middle of the road, but fine.",
        ),
    },
    {  # 4 stars: good, minor complaint
        "open": (
            "Really good meal at {venue.0} {occasion}.",
            "Solid spot, and I'd happily return.",
            "Came here with {companion} and we really enjoyed it.",
            "Great food and friendly service, just a couple of small issues.",
            "One of the better places in {city}, almost perfect.",
            "Four stars, would definitely recommend.",
        ),
        "body": (
            "{venue.1:cap} was tasty and well seasoned.",
            "{staff:cap} was friendly and attentive.",
            "{venue.2:cap} was really good, though a little salty.",
            "My only complaint is that it's a bit pricey.",
            "The wait was {wait}, but the food made up for it.",
            "Parking is a pain, but that's a minor issue.",
            "Portions are generous and everything tasted fresh.",
        ),
        "close": (
            "Will be back soon.",
            "Definitely recommend, just go early.",
            "Minor quibbles aside, a very good experience.",
            "Looking forward to my next visit.",
            "Would give 4.5 stars if I could.",
            "Solid choice, we'll return.",
        ),
    },
    {  # 5 stars: enthusiastic
        "open": (
            "Absolutely amazing! {venue.0:cap} is the best in {city}.",
            "Wow, just wow. Perfect meal {occasion}.",
            "This place is a hidden gem and I'm obsessed.",
            "Five stars, no question. We loved everything.",
            "Best meal I've had all year, hands down!",
            "I can't say enough good things about {venue.0}.",
        ),
        "body": (
            "{venue.1:cap} was incredible, perfectly cooked and full of flavor.",
            "{staff:cap} was wonderful and made us feel like family.",
            "{venue.2:cap} is to die for, seriously the best ever.",
            "Everything was flawless from start to finish.",
            "{companion:cap} is still raving about {venue.1}.",
            "Fantastic service, beautiful atmosphere, and fair prices.",
        ),
        "close": (
            "Can't wait to come back!",
            "Highly recommend, a must-try in {city}!",
            "Perfect in every way. Five stars!",
            "Our new favorite spot, we'll be regulars!",
            "Do not miss this place!",
            "Absolutely love it!",
        ),
    },
)

_YELP = _DatasetSpec(
    "yelp_review_full_csv",
    tuple(_ClassSpec(_REVIEW_ROWS, {**_YELP_COMMON, **p}) for p in _YELP_PHRASES),
)

# ---------------------------------------------------------------------------------------------
# Amazon reviews: star rating 1..5 (title, review)
# ---------------------------------------------------------------------------------------------

_AMAZON_ROWS = tuple(("{title}", t) for (t,) in _REVIEW_ROWS)

_AMAZON_COMMON: Slots = {
    "product": (  # (name, main feature, a part)
        ("pair of headphones", "the sound", "the ear pads"),
        ("blender", "the motor", "the lid"),
        ("coffee maker", "the coffee", "the carafe"),
        ("phone case", "the grip", "the buttons"),
        ("vacuum", "the suction", "the filter"),
        ("phone charger", "the charging speed", "the cable"),
        ("backpack", "the storage space", "the zippers"),
        ("toaster", "the toasting", "the lever"),
        ("pair of running shoes", "the cushioning", "the laces"),
        ("knife set", "the sharpness", "the handles"),
        ("bluetooth speaker", "the bass", "the battery"),
        ("desk lamp", "the brightness", "the switch"),
        ("air fryer", "the crispiness", "the basket"),
        ("electric toothbrush", "the cleaning power", "the brush heads"),
        ("water bottle", "the insulation", "the cap"),
        ("gaming mouse", "the tracking", "the scroll wheel"),
        ("yoga mat", "the cushioning", "the surface"),
        ("rice cooker", "the rice", "the inner pot"),
        ("hair dryer", "the airflow", "the cord"),
        ("camping tent", "the waterproofing", "the poles"),
        ("wireless keyboard", "the typing feel", "the keys"),
        ("smart watch", "the battery life", "the strap"),
    ),
    "price": ("$15", "$20", "$25", "$30", "$45", "$60", "$80", "$120"),
}

_AMAZON_PHRASES: tuple[Slots, ...] = (
    {  # 1 star: furious
        "title": (
            "Total junk", "Do not buy", "Broke in a week", "Complete waste of money",
            "Worst purchase ever", "Garbage, returning it", "Defective and useless",
            "Zero stars if I could", "Awful, just awful", "Stay away from this",
        ),
        "open": (
            "I am furious with this {product.0}.",
            "This is the worst {product.0} I have ever bought.",
            "Absolute garbage from the moment I opened the box.",
            "Do not waste your money on this {product.0}.",
            "I regret buying this terrible {product.0}.",
        ),
        "body": (
            "It stopped working completely after two days.",
            "{product.2:cap} snapped the first time I used it.",
            "{product.1:cap} is horrible, nothing like the description.",
            "Customer service ignored my emails and refused a refund.",
            "It arrived broken and smelled like burning plastic.",
            "I want my {price} back for this garbage.",
            "It is a cheap, useless knockoff.",
        ),
        "close": (
            "Avoid at all costs!",
            "Returning it immediately.",
            "Zero stars, total scam.",
            "Worst thing I have ever bought.",
            "Never buying from this brand again.",
        ),
    },
    {  # 2 stars: disappointed
        "title": (
            "Disappointing", "Not as good as I hoped", "Expected better", "Mostly a letdown",
            "Not worth the price", "Poor quality", "Looks nice, works poorly", "Underwhelming",
            "Wouldn't buy again", "Sadly disappointed",
        ),
        "open": (
            "I was really disappointed with this {product.0}.",
            "Sadly this {product.0} did not live up to the reviews.",
            "I wanted to like this {product.0}, but it let me down.",
            "Two stars, and that's being generous.",
        ),
        "body": (
            "{product.1:cap} is much weaker than advertised.",
            "{product.2:cap} started wearing out after a month.",
            "It works, but barely, and not the way I expected.",
            "For {price} I expected better quality.",
            "The instructions were confusing and setup took forever.",
            "It feels flimsy and cheaply made.",
            "It's a step down from my old {product.0}.",
        ),
        "close": (
            "I would not buy it again.",
            "Probably going to return it.",
            "Not recommended.",
            "Look elsewhere.",
            "Disappointed overall.",
        ),
    },
    {  # 3 stars: mixed
        "title": (
            "It's okay", "Average", "Does the job, nothing more", "Mixed feelings",
            "Decent for the price", "Just okay", "Fine but not great", "Middle of the road",
            "Okay product", "Not bad, not great",
        ),
        "open": (
            "This {product.0} is okay, nothing special.",
            "Mixed feelings about this {product.0}.",
            "It's an average {product.0}.",
            "Three stars feels about right.",
        ),
        "body": (
            "{product.1:cap} is decent but not impressive.",
            "{product.2:cap} could be sturdier, but it works.",
            "It does what it says, more or less.",
            "Some things I like, some I don't.",
            "For {price} it's a fair deal, I guess.",
            "It's fine for occasional use.",
            "Nothing wrong with it, nothing great either.",
        ),
        "close": (
            "It's okay overall.",
            "Might upgrade later.",
            "Average, as expected.",
            "Not bad, not great.",
            "It does the job.",
        ),
    },
    {  # 4 stars: good, minor complaint
        "title": (
            "Very good", "Great, with one small issue", "Solid purchase", "Happy with it",
            "Works well", "Good value", "Almost perfect", "Pretty great", "Really good product",
            "Recommended",
        ),
        "open": (
            "Really happy with this {product.0}.",
            "This {product.0} is very good overall.",
            "Solid {product.0} for the money.",
            "Four stars, it's a good buy.",
        ),
        "body": (
            "{product.1:cap} is really good for the price.",
            "My only complaint is {product.2}, which could be sturdier.",
            "It works well and was easy to set up.",
            "I've used it daily for a month with no problems.",
            "There's a minor issue with {product.2}, but otherwise it's great.",
            "Good quality, just slightly smaller than I expected.",
            "Shipping was a little slow, but the product is good.",
        ),
        "close": (
            "I would recommend it.",
            "Would buy again.",
            "Very happy overall.",
            "A good buy.",
            "Solid choice.",
        ),
    },
    {  # 5 stars: enthusiastic
        "title": (
            "Absolutely love it!", "Perfect!", "Best purchase ever", "Exceeded my expectations",
            "Five stars, amazing", "Fantastic quality", "Wow!", "Highly recommend!",
            "Love love love", "Worth every penny",
        ),
        "open": (
            "I absolutely love this {product.0}!",
            "This is the best {product.0} I have ever owned!",
            "Wow, this {product.0} is perfect!",
            "Five stars, hands down!",
        ),
        "body": (
            "{product.1:cap} is amazing and {product.2} feels built to last.",
            "It works perfectly, flawless from day one.",
            "I love it so much I bought another as a gift.",
            "Incredible quality for only {price}.",
            "Everything about it is perfect.",
            "It exceeded every expectation I had.",
            "{product.1:cap} is outstanding, better than brands that cost twice as much.",
        ),
        "close": (
            "Highly recommend to everyone!",
            "Five stars, no question!",
            "Buy it, you won't regret it!",
            "Couldn't be happier!",
            "Absolutely perfect!",
        ),
    },
)

_AMAZON = _DatasetSpec(
    "amazon_review_full_csv",
    tuple(_ClassSpec(_AMAZON_ROWS, {**_AMAZON_COMMON, **p}) for p in _AMAZON_PHRASES),
)

# ---------------------------------------------------------------------------------------------
# DBpedia: 14 ontology classes (title, description)
# ---------------------------------------------------------------------------------------------

_DB_COMMON: Slots = {
    **_PEOPLE,
    "town": (
        "Millbrook", "Cedar Falls", "Fairview", "Ashland", "Riverton", "Clearwater",
        "Brookfield", "Oak Ridge", "Maplewood", "Westfield", "Greenville", "Salem", "Lakewood",
        "Springdale", "Franklin", "Georgetown", "Harrison", "Milford", "Newport", "Bristol",
    ),
    "state": (
        "Ohio", "Iowa", "Oregon", "Texas", "Georgia", "Vermont", "Kentucky", "Michigan",
        "Virginia", "Wisconsin", "Kansas", "Maine", "Colorado", "Tennessee", "Indiana",
        "Missouri",
    ),
    "county": (
        "Warren", "Clinton", "Jefferson", "Madison", "Marion", "Lincoln", "Hamilton", "Jackson",
        "Monroe", "Greene", "Union", "Putnam",
    ),
    "uktown": (
        "Thornbury", "Ashford", "Whitby", "Kendal", "Malton", "Bicester", "Ludlow", "Hexham",
        "Tiverton", "Wetherby", "Louth", "Stroud",
    ),
    "ukcounty": (
        "North Yorkshire", "Devon", "Cumbria", "Shropshire", "Norfolk", "Kent", "Somerset",
        "Dorset", "Lincolnshire", "Northumberland",
    ),
    "city_world": (
        "Toronto", "Sydney", "Munich", "Stockholm", "Singapore", "Dublin", "Zurich", "Osaka",
    ),
    "nat": (
        ("American", "an American"), ("English", "an English"), ("Canadian", "a Canadian"),
        ("Australian", "an Australian"), ("Irish", "an Irish"), ("German", "a German"),
        ("French", "a French"), ("Swedish", "a Swedish"), ("Dutch", "a Dutch"),
        ("Scottish", "a Scottish"), ("Italian", "an Italian"), ("Brazilian", "a Brazilian"),
        ("Japanese", "a Japanese"), ("Polish", "a Polish"),
    ),
    "year_born": (
        "1942", "1951", "1958", "1963", "1967", "1971", "1974", "1979", "1982", "1985", "1988",
        "1990",
    ),
    "year_recent": (
        "1994", "1997", "1999", "2001", "2003", "2005", "2007", "2009", "2011", "2012",
    ),
    "founded": (
        "1887", "1902", "1919", "1934", "1948", "1956", "1969", "1978", "1985", "1994",
    ),
    "birth_old": ("1871", "1880", "1888", "1895", "1902", "1911"),
    "death_old": ("1939", "1948", "1952", "1961", "1967", "1974"),
    "year_built": (
        "1794", "1832", "1851", "1868", "1879", "1886", "1893", "1904", "1912", "1927",
    ),
    "region": (
        "Madagascar", "Costa Rica", "Ecuador", "southern India", "New Guinea", "Queensland",
        "the Andes", "Borneo", "South Africa", "Japan", "Mexico", "southern Brazil",
    ),
    "epithet": (
        "albipuncta", "minor", "borealis", "rufescens", "nigra", "obscura", "mexicana",
        "africana", "lineata", "montana", "smithi", "carolinae", "elegans", "fasciata",
        "punctata", "sinensis", "australis", "vittata", "pallida", "robusta",
    ),
    "nfl": ("Chicago Bears", "Denver Broncos", "Miami Dolphins", "Green Bay Packers"),
    "mlb": ("Boston Red Sox", "Chicago Cubs", "Atlanta Braves", "Seattle Mariners"),
    "label": (
        "Blue Harbor Records", "Northstar Records", "Low Tide Records", "Cobalt Music",
        "Redwood Records", "Lantern Records",
    ),
    "music_genre": (
        "indie rock", "punk rock", "heavy metal", "hip hop", "country", "synth-pop",
        "post-hardcore", "folk rock", "electronic", "alternative rock",
    ),
    "publisher": (
        "Harrow Press", "Penrose Books", "Wren & Quill", "Blackthorn Publishing",
        "Meridian House",
    ),
    "docsubject": (
        "the decline of the fishing industry", "a small-town marching band",
        "street artists in Berlin", "the history of jazz", "climate change in the Arctic",
        "a championship chess player",
    ),
}

_DB_COMPANY = _ClassSpec(
    rows=(
        (
            "{coname}",
            "{coname} is an American {corp.1} company headquartered in {town}, {state}. It was "
            "founded in {founded} by {person}.",
        ),
        (
            "{coname}",
            "{coname} was a British {corp.1} company based in {uktown}. It was acquired by a "
            "larger rival in {year_recent}.",
        ),
        (
            "{coname}",
            "{coname} is a privately held {corp.1} company with headquarters in {city_world} "
            "and offices in {n_countries} countries.",
        ),
        (
            "{coname}",
            "{coname} is a {corp.1} company founded in {founded}. It is listed on the "
            "{exchange} and employs about {employees} people.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "coname": ("{last} {corp.0}",),
        "corp": (
            ("Airlines", "airline"), ("Motors", "automotive"), ("Software", "software"),
            ("Pharmaceuticals", "pharmaceutical"), ("Foods", "food processing"),
            ("Brewing Company", "brewing"), ("Records", "record label"), ("Energy", "energy"),
            ("Publishing", "publishing"), ("Logistics", "logistics"),
            ("Technologies", "technology"), ("Steel", "steel manufacturing"),
            ("Insurance", "insurance"), ("Bank", "banking"),
        ),
        "n_countries": ("12", "20", "35", "48", "60"),
        "exchange": (
            "New York Stock Exchange", "NASDAQ", "London Stock Exchange",
            "Toronto Stock Exchange",
        ),
        "employees": ("800", "1,200", "4,500", "12,000", "27,000"),
    },
)

_DB_SCHOOL = _ClassSpec(
    rows=(
        (
            "{town} High School",
            "{town} High School is a public high school in {town}, {state}, United States. "
            "It serves students in grades 9 through 12.",
        ),
        (
            "{last} College",
            "{last} College is a private liberal arts college in {town}, {state}. It was "
            "founded in {founded} and enrolls about {students} students.",
        ),
        (
            "University of {town}",
            "The University of {town} is a public research university in {town}, {state}. It "
            "was established in {founded} and has about {students} students.",
        ),
        (
            "{saint} School, {uktown}",
            "{saint} School is a Roman Catholic primary school in {uktown}, {ukcounty}, "
            "England. It educates pupils aged four to eleven.",
        ),
        (
            "{last} Academy",
            "{last} Academy is a coeducational secondary school and sixth form with academy "
            "status in {uktown}, {ukcounty}, England.",
        ),
        (
            "{town} Community College",
            "{town} Community College is a public two-year college in {state}, offering "
            "associate degrees and vocational training to about {students} students.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "students": ("900", "1,400", "2,100", "2,800", "3,500", "9,000", "14,500"),
        "saint": (
            "St. Mary's", "St. Joseph's", "Holy Cross", "St. Patrick's", "Sacred Heart",
            "St. Anne's", "Our Lady of Mercy", "St. Francis",
        ),
    },
)

_DB_ARTIST = _ClassSpec(
    rows=(
        (
            "{person}",
            "{person} (born {year_born}) is {nat.1} {artkind} based in {city_world}. {last}'s "
            "work has been exhibited in galleries across Europe and North America.",
        ),
        (
            "{person}",
            "{person} ({birth_old} - {death_old}) was {nat.1} {old_artkind} known for "
            "{known_for}.",
        ),
        (
            "{person}",
            "{person} (born {year_born}) is {nat.1} {music_kind} who has released "
            "{n_albums} studio albums and toured widely.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "artkind": (
            "painter", "sculptor", "photographer", "illustrator", "cartoonist",
            "installation artist", "printmaker", "ceramic artist",
        ),
        "old_artkind": ("painter", "sculptor", "printmaker", "illustrator", "engraver"),
        "known_for": (
            "landscapes of the coast", "portraits of working people",
            "large bronze sculptures", "abstract watercolors", "scenes of rural life",
            "experimental etchings",
        ),
        "music_kind": (
            "singer-songwriter", "rapper", "country singer", "jazz saxophonist",
            "blues guitarist", "folk singer", "pop singer", "jazz pianist",
        ),
        "n_albums": ("three", "four", "five", "six", "eight"),
    },
)

_DB_ATHLETE = _ClassSpec(
    rows=(
        (
            "{person}",
            "{person} (born {day_n} {month} {year_born}) is {nat.1} professional footballer "
            "who plays as a {position} for {club}.",
        ),
        (
            "{person}",
            "{person} (born {year_born}) is {nat.1} former ice hockey {hockey_pos} who played "
            "{games} games in the National Hockey League.",
        ),
        (
            "{person}",
            "{person} is {nat.1} swimmer who competed in the {swim_event} at the "
            "{olympic_year} Summer Olympics.",
        ),
        (
            "{person}",
            "{person} (born {year_born}) is a retired American football running back who "
            "played {seasons} seasons for the {nfl} of the National Football League.",
        ),
        (
            "{person}",
            "{person} is {nat.1} professional tennis player who reached a career-high "
            "singles ranking of world No. {rank}.",
        ),
        (
            "{person}",
            "{person} (born {year_born}) is a former Major League Baseball pitcher who "
            "played for the {mlb} and the {mlb#2}.",
        ),
        (
            "{person}",
            "{person} is {nat.1} long-distance runner who won the {marathon} Marathon in "
            "{year_recent}.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "day_n": ("3", "7", "11", "14", "19", "22", "26", "29"),
        "month": (
            "January", "March", "April", "May", "June", "August", "October", "December",
        ),
        "position": ("defender", "midfielder", "striker", "goalkeeper"),
        "club": (
            "Hamburger SV", "Aston Villa", "Sporting CP", "FC Utrecht", "Celtic", "Lazio",
            "Malmo FF",
        ),
        "hockey_pos": ("defenceman", "centre", "goaltender", "left winger"),
        "games": ("96", "212", "348", "517", "661"),
        "swim_event": (
            "men's 100 metre backstroke", "women's 200 metre freestyle",
            "men's 400 metre individual medley", "women's 100 metre butterfly",
        ),
        "olympic_year": ("1988", "1992", "1996", "2000", "2004", "2008"),
        "seasons": ("three", "five", "seven", "nine"),
        "rank": ("14", "27", "38", "52", "71", "96"),
        "marathon": ("Boston", "Chicago", "Berlin", "London", "Rotterdam", "Honolulu"),
    },
)

_DB_OFFICEHOLDER = _ClassSpec(
    rows=(
        (
            "{person}",
            "{person} ({birth_old} - {death_old}) was an American politician who served as a "
            "member of the {state} House of Representatives.",
        ),
        (
            "{person}",
            "{person} (born {year_born}) is a {party} member of the {state} Senate, "
            "representing the {ordinal} District since {year_recent}.",
        ),
        (
            "{person}",
            "{person} is a British {ukparty} politician who has been the Member of Parliament "
            "for {uktown} since {year_recent}.",
        ),
        (
            "{person}",
            "{person} (born {year_born}) is {nat.1} politician who served as Minister of "
            "{ministry} and later as ambassador to the United Nations.",
        ),
        (
            "{person}",
            "{person} was a lawyer and politician who served as Lieutenant Governor of "
            "{state} under Governor {first#2} {last#2}.",
        ),
        (
            "{person}",
            "{person} ({birth_old} - {death_old}) was an American politician who served two "
            "terms as mayor of {town}, {state}.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "party": ("Democratic", "Republican"),
        "ordinal": ("3rd", "7th", "12th", "18th", "21st", "29th"),
        "ukparty": ("Labour", "Conservative", "Liberal Democrat"),
        "ministry": ("Finance", "Defence", "Health", "Foreign Affairs", "Agriculture"),
    },
)

_DB_TRANSPORT = _ClassSpec(
    rows=(
        (
            "HMS {shipname}",
            "HMS {shipname} was a {shipclass}-class {navaltype} of the Royal Navy, launched in "
            "{war_year} and sold for scrap after the war.",
        ),
        (
            "USS {shipname} ({hull.0}-{hullnum})",
            "USS {shipname} ({hull.0}-{hullnum}) was a {hull.1} of the United States Navy that "
            "served in the Pacific during World War II.",
        ),
        (
            "{maker} {model}",
            "The {maker} {model} is a {vehicle} designed and manufactured by {maker}. It was "
            "introduced in {year_recent}.",
        ),
        (
            "SS {shipname}",
            "SS {shipname} was a passenger steamship built in {year_built} for the {line} "
            "Line, and later used as a troopship.",
        ),
        (
            "{railway.1} Class {locnum}",
            "The {railway.1} Class {locnum} was a class of steam locomotive built for the "
            "{railway.0} in the {decade}.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "shipname": (
            "Valiant", "Resolute", "Harrier", "Kestrel", "Vigilant", "Dauntless", "Intrepid",
            "Swiftsure", "Tenacious", "Blackwater", "Ardent", "Fearless", "Mallard", "Osprey",
            "Sentinel", "Wolverine",
        ),
        "shipclass": ("Tribal", "Hunt", "Battle", "River", "Castle", "Town"),
        "navaltype": ("destroyer", "frigate", "corvette", "minesweeper", "sloop"),
        "war_year": ("1917", "1936", "1940", "1941", "1942", "1943", "1944"),
        "hull": (
            ("DD", "destroyer"), ("DE", "destroyer escort"), ("SS", "submarine"),
            ("AK", "cargo ship"), ("LST", "tank landing ship"),
        ),
        "hullnum": ("112", "247", "338", "419", "503", "576", "614", "702"),
        "maker": (
            "Halvorsen", "Ardent Motor", "Comet Aero", "Lindqvist", "Marlowe", "Peregrine",
            "Vaughan", "Kestrel Aviation", "Norda", "Tallis",
        ),
        "model": ("{letter}{modelnum}",),
        "letter": ("X", "P", "R", "T", "K", "GT", "S"),
        "modelnum": ("10", "24", "40", "220", "350", "500", "700", "1200"),
        "vehicle": (
            "compact car", "mid-size sedan", "light utility aircraft", "two-seat trainer "
            "aircraft", "motorcycle", "pickup truck", "sports car", "regional airliner",
            "diesel locomotive", "city bus",
        ),
        "line": ("Blue Anchor", "Harwich Steam", "Transatlantic", "Union Castle"),
        "railway": (
            ("London and North Eastern Railway", "LNER"), ("Great Western Railway", "GWR"),
            ("Southern Railway", "SR"), ("Canadian Pacific Railway", "CPR"),
            ("Pennsylvania Railroad", "PRR"),
        ),
        "locnum": ("A2", "B12", "K4", "D49", "N15", "G5"),
        "decade": ("1910s", "1920s", "1930s", "1940s"),
    },
)

_DB_BUILDING = _ClassSpec(
    rows=(
        (
            "{last} House",
            "The {last} House is a historic house in {town}, {state}. Built in {year_built}, "
            "it was listed on the National Register of Historic Places in {nrhp_year}.",
        ),
        (
            "{church} ({town}, {state})",
            "{church} is a historic church in {town}, {state}. The {style} building was "
            "completed in {year_built}.",
        ),
        (
            "{last} Building",
            "The {last} Building is a {storeys}-story office building in downtown {city_us}, "
            "completed in {tower_year} in the {style2} style.",
        ),
        (
            "{county} County Courthouse",
            "The {county} County Courthouse is a historic courthouse in {town}, {state}, built "
            "in {year_built} in the {style} style.",
        ),
        (
            "{last} Castle",
            "{last} Castle is a ruined medieval castle near {uktown} in {ukcounty}, England. "
            "It is a Grade I listed building.",
        ),
        (
            "{last} Tower",
            "{last} Tower is a {floors}-storey skyscraper in {city_world}, completed in "
            "{year_recent} and used for offices and apartments.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "nrhp_year": ("1973", "1979", "1982", "1985", "1991", "2004"),
        "church": (
            "St. Paul's Episcopal Church", "Trinity Lutheran Church", "Grace Methodist Church",
            "St. John's Catholic Church", "First Baptist Church", "First Presbyterian Church",
        ),
        "style": (
            "Gothic Revival", "Greek Revival", "Romanesque Revival", "Queen Anne",
            "Italianate", "Colonial Revival",
        ),
        "storeys": ("six", "ten", "twelve", "eighteen", "24"),
        "city_us": (
            "Cleveland", "Denver", "Omaha", "Tulsa", "Richmond", "Spokane", "Dayton", "Houston",
        ),
        "tower_year": ("1911", "1924", "1929", "1931", "1956", "1968"),
        "style2": ("Art Deco", "Chicago School", "Beaux-Arts", "International"),
        "floors": ("32", "41", "48", "55", "63"),
    },
)

_DB_NATURAL = _ClassSpec(
    rows=(
        (
            "{river} River ({ro_country})",
            "The {river} River is a tributary of the {river#2} River in {ro_country}.",
        ),
        (
            "{last} Creek",
            "{last} Creek is a {miles}-mile-long stream in {county} County, {state}. It flows "
            "into the {usriver} River.",
        ),
        (
            "Mount {last}",
            "Mount {last} is a mountain in the {range.0}, in {range.1}. It has an elevation of "
            "{elev} feet.",
        ),
        (
            "{last} Lake",
            "{last} Lake is a freshwater lake in {province}, Canada. It lies within a "
            "provincial park and drains into the {usriver} River.",
        ),
        (
            "{last} Glacier",
            "{last} Glacier is a glacier in Antarctica, flowing {direction} into the "
            "{ice_body}. It was named for a member of the survey expedition.",
        ),
        (
            "{last} Island",
            "{last} Island is a small uninhabited island in {island_loc}. It is a nesting "
            "site for seabirds.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "river": (
            "Bistra", "Valea Rece", "Lotru", "Sebes", "Cerna", "Iara", "Hartibaciu", "Dobra",
            "Geoagiu", "Mara", "Arpas", "Sadu",
        ),
        "ro_country": ("Romania", "Slovakia", "Bulgaria"),
        "miles": ("4.5", "7.2", "11.8", "15.3", "23.1"),
        "usriver": ("Elk", "Clear Fork", "Big Sandy", "Little Blue", "Mad", "Salt", "Pine"),
        "range": (
            ("Cascade Range", "Washington"), ("Rocky Mountains", "Colorado"),
            ("Sierra Nevada", "California"), ("Coast Mountains", "British Columbia"),
            ("Selkirk Mountains", "British Columbia"), ("Brooks Range", "Alaska"),
            ("Wind River Range", "Wyoming"),
        ),
        "elev": ("7,905", "8,412", "9,870", "10,455", "11,230", "12,604"),
        "province": ("Ontario", "Quebec", "Manitoba", "Saskatchewan", "Alberta"),
        "direction": ("north", "east", "south-west", "north-east"),
        "ice_body": ("Ross Ice Shelf", "Weddell Sea", "Amundsen Sea", "Bellingshausen Sea"),
        "island_loc": (
            "the Bering Sea off Alaska", "Lake Superior", "the Bay of Fundy",
            "the Inner Hebrides of Scotland", "the Gulf of Maine",
        ),
    },
)

_DB_VILLAGE = _ClassSpec(
    rows=(
        (
            "{pvillage}",
            "{pvillage} is a village in the administrative district of Gmina {gmina}, within "
            "{pcounty} County, {voiv.0} Voivodeship, in {voiv.1} Poland.",
        ),
        (
            "{pvillage}",
            "{pvillage} is a village in Gmina {gmina}, {voiv.0} Voivodeship, Poland. It lies "
            "approximately {km} kilometres {compass} of the regional capital {voiv.2}.",
        ),
        (
            "{ivillage}",
            "{ivillage} is a village in {irural} Rural District, in the Central District of "
            "{icounty} County, Iran. At the 2006 census, its population was {pop.0}, in "
            "{pop.1} families.",
        ),
        (
            "{invillage}",
            "{invillage} is a village in the {india.0} district of {india.1}, India. At the "
            "2011 census it had a population of {pop.0}.",
        ),
        (
            "{ukvillage}",
            "{ukvillage} is a village and civil parish in {ukcounty}, England. It lies about "
            "{km} miles from the market town of {uktown}.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "pvillage": ("{pl_pre} {pl_base}", "{pl_base}"),
        "pl_pre": ("Nowa", "Stara", "Wola", "Kolonia", "Gorna", "Dolna", "Mala", "Wielka"),
        "pl_base": (
            "Wies", "Lipowa", "Dabrowa", "Kuznia", "Zalesie", "Brzozowka", "Grabowiec",
            "Lipniki", "Olszyny", "Sosnowka", "Kamionka", "Zarzecze", "Piaski", "Borki",
        ),
        "gmina": (
            "Baranow", "Jablonna", "Kock", "Zelechow", "Lipsko", "Skierbieszow", "Wierzbica",
            "Michalow", "Zarnow",
        ),
        "pcounty": (
            "Lubartow", "Garwolin", "Radom", "Zamosc", "Opoczno", "Kutno", "Sokolow",
            "Pultusk", "Bilgoraj",
        ),
        "voiv": (
            ("Masovian", "east-central", "Warsaw"), ("Lublin", "eastern", "Lublin"),
            ("Lodz", "central", "Lodz"), ("Greater Poland", "west-central", "Poznan"),
            ("Subcarpathian", "south-eastern", "Rzeszow"),
            ("Podlaskie", "north-eastern", "Bialystok"), ("Silesian", "southern", "Katowice"),
            ("Pomeranian", "northern", "Gdansk"),
        ),
        "km": ("5", "8", "12", "17", "23", "31", "46"),
        "compass": ("north", "south", "east", "west", "north-east", "south-west"),
        "ivillage": (
            "Deh-e {iname}", "Qaleh-ye {iname}", "Chah-e {iname}", "{iname}abad",
            "Kalateh-ye {iname}",
        ),
        "iname": (
            "Now", "Bala", "Hasan", "Karim", "Mirza", "Sheykh", "Gol", "Shah", "Ali", "Ahmad",
            "Jafar", "Nasr",
        ),
        "irural": ("Howmeh", "Dasht", "Rudbar", "Khaneh", "Kuhestan", "Sarab"),
        "icounty": ("Bam", "Khoy", "Saqqez", "Dehloran", "Sabzevar", "Neyriz"),
        "pop": (
            ("48", "11"), ("112", "26"), ("236", "54"), ("391", "93"), ("527", "121"),
            ("864", "198"), ("1,045", "247"),
        ),
        "invillage": ("{in_base}pur", "{in_base}gaon", "{in_base} Khurd", "{in_base} Kalan"),
        "in_base": ("Ram", "Shiv", "Kishan", "Gopal", "Sultan", "Bhawani", "Dev", "Chandan"),
        "india": (
            ("Ludhiana", "Punjab"), ("Nashik", "Maharashtra"), ("Varanasi", "Uttar Pradesh"),
            ("Gaya", "Bihar"), ("Dharwad", "Karnataka"), ("Jodhpur", "Rajasthan"),
        ),
        "ukvillage": (
            "Little {uk_base}", "Great {uk_base}", "{uk_base} St Mary", "Upper {uk_base}",
            "{uk_base} Green",
        ),
        "uk_base": (
            "Ashton", "Milton", "Sutton", "Thornby", "Kirkham", "Wold", "Bromley", "Haselden",
            "Stanway", "Ford",
        ),
    },
)

_DB_ANIMAL = _ClassSpec(
    rows=(
        (
            "{moth.0} {epithet}",
            "{moth.0} {epithet} is a moth of the family {moth.1}. It is found in {region}. "
            "{moth_extra}",
        ),
        (
            "{snail.0} {epithet}",
            "{snail.0} {epithet} is a species of sea snail, a marine gastropod mollusk in the "
            "family {snail.1}.",
        ),
        (
            "{beetle.0} {epithet}",
            "{beetle.0} {epithet} is a species of beetle in the family {beetle.1}. It was "
            "described by {last} in {birth_old}.",
        ),
        (
            "{frog.0} {epithet}",
            "{frog.0} {epithet} is a species of frog in the family {frog.1}. It is endemic to "
            "{region}, where it lives near streams.",
        ),
        (
            "{bird_adj} {bird.0}",
            "The {bird_adj:lower} {bird.0:lower} ({bird.1} {epithet}) is a species of bird in "
            "the family {bird.2}. It is found in {region}.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "moth": (
            ("Eupithecia", "Geometridae"), ("Idaea", "Geometridae"), ("Scopula", "Geometridae"),
            ("Agrotis", "Noctuidae"), ("Cosmopterix", "Cosmopterigidae"),
            ("Acleris", "Tortricidae"), ("Udea", "Crambidae"), ("Catocala", "Erebidae"),
        ),
        "moth_extra": (
            "",
            "The wingspan is about {wingspan} mm.",
            "The larvae feed on {hostplant}.",
        ),
        "wingspan": ("14", "18", "22", "27", "31"),
        "hostplant": ("oak", "willow", "various grasses", "birch", "pine needles"),
        "snail": (
            ("Conus", "Conidae"), ("Gemmula", "Turridae"), ("Murex", "Muricidae"),
            ("Mitra", "Mitridae"), ("Daphnella", "Raphitomidae"),
            ("Cerithium", "Cerithiidae"),
        ),
        "beetle": (
            ("Carabus", "Carabidae"), ("Oberea", "Cerambycidae"),
            ("Phyllophaga", "Scarabaeidae"), ("Agrilus", "Buprestidae"),
            ("Bembidion", "Carabidae"), ("Otiorhynchus", "Curculionidae"),
        ),
        "frog": (
            ("Pristimantis", "Strabomantidae"), ("Hyla", "Hylidae"), ("Rana", "Ranidae"),
            ("Cophixalus", "Microhylidae"), ("Leptopelis", "Arthroleptidae"),
        ),
        "bird": (
            ("Warbler", "Phylloscopus", "Phylloscopidae"),
            ("Flycatcher", "Myiagra", "Monarchidae"), ("Tanager", "Tangara", "Thraupidae"),
            ("Antbird", "Myrmeciza", "Thamnophilidae"),
            ("Babbler", "Malacocincla", "Pellorneidae"),
            ("Hummingbird", "Amazilia", "Trochilidae"),
        ),
        "bird_adj": (
            "Rufous-throated", "Olive-backed", "Spotted", "Grey-headed", "Yellow-bellied",
            "Black-crowned", "White-browed", "Chestnut-capped",
        ),
    },
)

_DB_PLANT = _ClassSpec(
    rows=(
        (
            "{flower.0} {epithet}",
            "{flower.0} {epithet} is a species of flowering plant in the family {flower.1}. "
            "It is endemic to {region}. {plant_extra}",
        ),
        (
            "{orchid} {epithet}",
            "{orchid} {epithet} is a species of orchid native to {region}. It grows as an "
            "epiphyte on trees in humid forests.",
        ),
        (
            "{tree.0} {epithet}",
            "{tree.0} {epithet} is a species of tree in the family {tree.1}. It is native to "
            "{region}, where it grows in lowland rainforest.",
        ),
        (
            "{herb.0} {epithet}",
            "{herb.0} {epithet} is a perennial herb in the family {herb.1}, found in meadows "
            "and on rocky slopes in {region}.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "flower": (
            ("Eugenia", "Myrtaceae"), ("Psychotria", "Rubiaceae"),
            ("Miconia", "Melastomataceae"), ("Piper", "Piperaceae"),
            ("Solanum", "Solanaceae"), ("Salvia", "Lamiaceae"), ("Astragalus", "Fabaceae"),
            ("Begonia", "Begoniaceae"),
        ),
        "plant_extra": (
            "",
            "Its natural habitat is subtropical or tropical moist montane forests.",
            "It is threatened by habitat loss.",
            "It grows as a shrub up to {height} metres tall.",
        ),
        "height": ("1.5", "2", "3", "4"),
        "orchid": (
            "Dendrobium", "Bulbophyllum", "Epidendrum", "Pleurothallis", "Masdevallia",
            "Stelis",
        ),
        "tree": (
            ("Syzygium", "Myrtaceae"), ("Ficus", "Moraceae"), ("Shorea", "Dipterocarpaceae"),
            ("Quercus", "Fagaceae"), ("Acacia", "Fabaceae"), ("Diospyros", "Ebenaceae"),
        ),
        "herb": (
            ("Carex", "Cyperaceae"), ("Ranunculus", "Ranunculaceae"),
            ("Saxifraga", "Saxifragaceae"), ("Gentiana", "Gentianaceae"),
            ("Silene", "Caryophyllaceae"),
        ),
    },
)

_DB_ALBUM = _ClassSpec(
    rows=(
        (
            "{albumtitle}",
            "{albumtitle} is the {ord_album} studio album by American {music_genre} band "
            "{band}. It was released in {year_recent} on {label}.",
        ),
        (
            "{albumtitle}",
            "{albumtitle} is a live album by {nat.0} singer {person}, recorded in {city_world} "
            "and released in {year_recent}.",
        ),
        (
            "{albumtitle}",
            "{albumtitle} is a compilation album by the {music_genre} group {band}, released "
            "on {label} in {year_recent}. It collects singles and B-sides.",
        ),
        (
            "{albumtitle} (EP)",
            "{albumtitle} is the debut EP by {nat.0} {music_genre} band {band}, released "
            "independently in {year_recent}.",
        ),
        (
            "{albumtitle}",
            "{albumtitle} is the {ord_album} album by {nat.0} rapper {person}. It debuted at "
            "number {chart} on the Billboard 200 album chart.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "albumtitle": ("{al_adj} {al_noun}", "The {al_adj} {al_noun}"),
        "al_adj": (
            "Silver", "Broken", "Electric", "Midnight", "Hollow", "Golden", "Wild", "Quiet",
            "Burning", "Endless", "Neon", "Paper",
        ),
        "al_noun": (
            "Hearts", "Skies", "Roads", "Machines", "Echoes", "Dreams", "Ghosts", "Rivers",
            "Lights", "Summers", "Horizons", "Signals",
        ),
        "band": ("The {band_adj} {band_noun}",),
        "band_adj": (
            "Velvet", "Crimson", "Static", "Iron", "Lonesome", "Cosmic", "Rusty", "Gentle",
        ),
        "band_noun": (
            "Foxes", "Saints", "Anchors", "Hounds", "Tides", "Parade", "Pilots", "Owls",
        ),
        "ord_album": ("debut", "second", "third", "fourth", "fifth", "sixth"),
        "chart": ("3", "8", "12", "24", "41"),
    },
)

_DB_FILM = _ClassSpec(
    rows=(
        (
            "{filmtitle}",
            "{filmtitle} is a {film_year} American {fgenre} film directed by {person} and "
            "starring {first#2} {last#2}.",
        ),
        (
            "{filmtitle}",
            "{filmtitle} is a {year_recent} {nat.0} drama film written and directed by "
            "{person}. It premiered at the {festival} Film Festival.",
        ),
        (
            "{filmtitle} (film)",
            "{filmtitle} is a {year_recent} documentary film about {docsubject}, directed by "
            "{person}.",
        ),
        (
            "{filmtitle}",
            "{filmtitle} is a {year_recent} animated feature film produced by {studio} and "
            "directed by {person}.",
        ),
        (
            "{filmtitle}",
            "{filmtitle} is a {silent_year} American silent {fgenre} film starring {person}. "
            "It is now considered a lost film.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "filmtitle": (
            "The {f_noun} of {f_place}", "{f_adj} {f_noun2}", "Return to {f_place}",
        ),
        "f_noun": ("Secret", "Ghost", "Legend", "Prisoner", "Bride", "King", "Curse", "Siege"),
        "f_place": (
            "Black Creek", "Blue Mountain", "Eagle Pass", "Lost Valley", "Harbor Town",
            "Red Canyon", "Shadow Lake",
        ),
        "f_adj": (
            "Deadly", "Silent", "Dangerous", "Forbidden", "Reckless", "Savage", "Final",
            "Frozen",
        ),
        "f_noun2": (
            "Witness", "Stranger", "Mission", "Passage", "Justice", "Target", "Affair",
            "Inheritance",
        ),
        "fgenre": (
            "comedy", "drama", "horror", "western", "science fiction", "romantic comedy",
            "thriller", "crime", "musical", "war",
        ),
        "film_year": (
            "1938", "1947", "1956", "1964", "1973", "1981", "1988", "1995", "2002", "2008",
        ),
        "silent_year": ("1915", "1919", "1922", "1924", "1926", "1927"),
        "festival": ("Cannes", "Venice", "Berlin", "Toronto", "Sundance"),
        "studio": (
            "Pinewood Animation", "Starlight Pictures", "Golden Reel Studios", "Blue Fox Films",
        ),
    },
)

_DB_WRITTEN = _ClassSpec(
    rows=(
        (
            "{booktitle}",
            "{booktitle} is a {year_recent} novel by {nat.0} author {person}, published by "
            "{publisher}. {book_extra}",
        ),
        (
            "{booktitle}",
            "{booktitle} is a children's picture book written by {person} and illustrated by "
            "{first#2} {last#2}, first published in {year_recent}.",
        ),
        (
            "The {town} {paper}",
            "The {town} {paper} is a weekly newspaper published in {town}, {state}. It was "
            "founded in {founded}.",
        ),
        (
            "{journal}",
            "{journal} is a peer-reviewed academic journal covering {jfield:lower}. It was "
            "established in {founded} and is published by {publisher}.",
        ),
        (
            "{booktitle}",
            "{booktitle} is a collection of poems by {nat.0} poet {person}, published in "
            "{year_recent}.",
        ),
        (
            "{booktitle}",
            "{booktitle} is a {year_recent} non-fiction book by journalist {person} about "
            "{docsubject}.",
        ),
    ),
    slots={
        **_DB_COMMON,
        "booktitle": ("The {b_noun} of {b_noun2}", "The {b_adj} {b_noun}"),
        "b_noun": (
            "Garden", "Keeper", "Daughter", "House", "Winter", "Clockmaker", "Orchard",
            "Lighthouse", "Widow", "Harvest", "Cartographer", "Map",
        ),
        "b_noun2": (
            "Ashes", "Salt", "Stars", "Glass", "Memory", "Rain", "Thorns", "Iron", "Silence",
            "Bones",
        ),
        "b_adj": (
            "Forgotten", "Last", "Hidden", "Lonely", "Painted", "Ninth", "Distant", "Drowned",
            "Gilded", "Invisible",
        ),
        "book_extra": (
            "",
            "It is the first book in a trilogy.",
            "It was later adapted into a television series.",
            "It won a regional fiction prize.",
        ),
        "paper": ("Gazette", "Herald", "Courier", "Tribune", "Chronicle", "Sentinel"),
        "journal": ("Journal of {jfield}", "{jfield} Review", "Annals of {jfield}"),
        "jfield": (
            "Applied Ecology", "Medieval Studies", "Marine Biology", "Urban History",
            "Comparative Linguistics", "Agricultural Economics", "Clinical Nutrition",
            "Polymer Chemistry",
        ),
    },
)

_DBPEDIA = _DatasetSpec(
    "dbpedia_csv",
    (
        _DB_COMPANY, _DB_SCHOOL, _DB_ARTIST, _DB_ATHLETE, _DB_OFFICEHOLDER, _DB_TRANSPORT,
        _DB_BUILDING, _DB_NATURAL, _DB_VILLAGE, _DB_ANIMAL, _DB_PLANT, _DB_ALBUM, _DB_FILM,
        _DB_WRITTEN,
    ),
    unique_title=True,
)

# ---------------------------------------------------------------------------------------------
# Yahoo! Answers: 10 topics (question_title, question_content, best_answer)
# ---------------------------------------------------------------------------------------------

_YAHOO_SOCIETY = _yahoo_class(
    (
        ("Why do people celebrate {holiday}?",
         "{holiday:cap} is an important religious and cultural holiday; families gather to "
         "pray, share meals and honor old traditions."),
        ("What does {religion} teach about the afterlife?",
         "In {religion}, beliefs about the soul vary, but most teachers say that how you live "
         "now shapes what comes next."),
        ("Where does the tradition of {custom} come from?",
         "The custom of {custom} goes back centuries; people believed it brought good luck "
         "and kept evil spirits away."),
        ("Is it rude to {rude} in {culture}?",
         "Customs differ, but in {culture} many people consider it impolite, so follow local "
         "etiquette and watch what others do."),
        ("Do you believe in {belief}?",
         "I do, because my faith and my grandmother's teachings shaped how I see the world; "
         "every culture has its own beliefs about {belief}."),
        ("What is the meaning of the {symbol} symbol?",
         "The {symbol} is an ancient spiritual symbol; in many cultures and religions it "
         "stands for peace, protection or the cycle of life."),
    ),
    {
        "holiday": (
            "Diwali", "Hanukkah", "Easter", "Ramadan", "Chinese New Year", "the Day of the Dead",
            "Passover", "Christmas",
        ),
        "religion": ("Buddhism", "Hinduism", "Islam", "Christianity", "Judaism", "Sikhism"),
        "custom": (
            "throwing rice at weddings", "knocking on wood", "wearing black at funerals",
            "breaking a wishbone", "carving pumpkins", "blowing out birthday candles",
        ),
        "rude": (
            "tip", "point with your finger", "leave food on your plate", "wear shoes indoors",
            "refuse a gift",
        ),
        "culture": ("Japan", "India", "China", "Korea", "Thailand", "Egypt"),
        "belief": ("karma", "fate", "ghosts", "angels", "reincarnation", "miracles"),
        "symbol": ("lotus", "yin yang", "Celtic knot", "evil eye", "ankh"),
        "content": (
            "", "just curious, my friend told me about it.",
            "we were discussing it in my world religions class.",
            "I want to respect other cultures and their traditions.",
            "my neighbors celebrate it and I want to understand.",
        ),
        "pre": ("", "Good question.", "My family has kept this tradition for generations."),
        "post": (
            "", "Hope that helps.", "Your local temple or church can tell you more.",
            "Traditions vary from community to community.",
        ),
    },
)

_YAHOO_SCIENCE = _yahoo_class(
    (
        ("Why is the sky blue?",
         "Sunlight is scattered by molecules in the atmosphere, and shorter blue wavelengths "
         "scatter the most, so the sky looks blue."),
        ("Why does ice float on water?",
         "Water expands when it freezes, so ice is less dense than liquid water and floats."),
        ("How do you find the derivative of x^{power.0}?",
         "Use the power rule: multiply by the exponent and subtract one from it, so the "
         "derivative is {power.0}x^{power.1}."),
        ("What is the area of a circle with radius {radius.0}?",
         "The area is pi times the radius squared, so pi times {radius.0} squared, which is "
         "about {radius.1}."),
        ("How do plants make their own food?",
         "Through photosynthesis: chlorophyll absorbs sunlight and the plant turns carbon "
         "dioxide and water into glucose and oxygen."),
        ("What is a black hole?",
         "A black hole is a region of space where gravity is so strong that not even light can "
         "escape, usually formed when a massive star collapses."),
        ("Is {prime.0} a prime number?",
         "No, {prime.0} is not prime, because it can be divided evenly by {prime.1}."),
        ("How do you solve {eqn.0} for x?",
         "Subtract the constant from both sides, then divide by the coefficient of x, which "
         "gives x = {eqn.1}."),
        ("What is the difference between an atom and a molecule?",
         "An atom is a single particle of an element, while a molecule is two or more atoms "
         "bonded together, like H2O."),
    ),
    {
        "power": (("3", "2"), ("4", "3"), ("5", "4"), ("6", "5")),
        "radius": (
            ("3", "28.27"), ("4", "50.27"), ("5", "78.54"), ("6", "113.1"), ("7", "153.94"),
        ),
        "prime": (("91", "7 and 13"), ("51", "3 and 17"), ("57", "3 and 19"),
                  ("87", "3 and 29"), ("119", "7 and 17")),
        "eqn": (("2x + 6 = 14", "4"), ("3x - 5 = 10", "5"), ("5x + 2 = 27", "5"),
                ("4x - 8 = 20", "7")),
        "content": (
            "", "it's for my homework and I'm stuck.",
            "my chemistry teacher explained it but I didn't get it.",
            "can someone explain it simply?", "I have a physics test tomorrow.",
        ),
        "pre": ("", "Simple answer:", "Basic science here."),
        "post": (
            "", "Any physics or math textbook covers this.",
            "Hope this helps with your homework.", "Ask your teacher to show you the formula.",
        ),
    },
)

_YAHOO_HEALTH = _yahoo_class(
    (
        ("How can I get rid of {ailment} fast?",
         "Rest, drink plenty of fluids and try an over-the-counter remedy; if {ailment} lasts "
         "more than a week, see a doctor."),
        ("Is it bad to sleep only {hours} hours a night?",
         "Yes, most adults need seven to nine hours of sleep; getting only {hours} hurts your "
         "immune system, mood and concentration."),
        ("What is the best way to lose {pounds} pounds?",
         "Eat smaller portions, cut out sugary drinks and exercise at least 30 minutes a day; "
         "losing one or two pounds a week is healthy."),
        ("What causes {condition}?",
         "{condition:cap} can be caused by genetics, stress, diet or hormones, so talk to your "
         "doctor before starting any medication."),
        ("Should I see a doctor about {symptom}?",
         "Yes, {symptom} can be a symptom of an infection or another medical condition, so "
         "get it checked by a doctor soon."),
        ("Are vitamin supplements really necessary?",
         "Most people get enough vitamins from a balanced diet, but a doctor may recommend "
         "supplements like vitamin D or iron."),
        ("How much water should I drink a day?",
         "About eight glasses a day is a good guide, more if you exercise, since dehydration "
         "causes headaches and fatigue."),
    ),
    {
        "ailment": (
            "a sore throat", "a headache", "a cold", "heartburn", "a stuffy nose", "a cough",
            "hiccups",
        ),
        "hours": ("three", "four", "five", "six"),
        "pounds": ("10", "15", "20", "30"),
        "condition": (
            "acne", "migraines", "high blood pressure", "insomnia", "back pain", "dizziness",
        ),
        "symptom": (
            "chest pain", "a lump in my neck", "constant fatigue", "a rash that won't go away",
            "numbness in my hand", "shortness of breath",
        ),
        "content": (
            "", "I've had it for three days now.", "I don't have health insurance right now.",
            "my mom says it's nothing but I'm worried.", "I'm 24 and otherwise healthy.",
        ),
        "pre": ("", "I'm a nurse.", "Not a doctor here."),
        "post": (
            "", "Please see your doctor if symptoms get worse.", "Take care of yourself!",
            "Your pharmacist can also give advice.",
        ),
    },
)

_YAHOO_EDUCATION = _yahoo_class(
    (
        ("What does the word '{word.0}' mean?",
         "'{word.0:cap}' means {word.1}; you can find it in any good dictionary."),
        ("How do I write a good {essay} essay?",
         "Start with a clear thesis, support each paragraph with evidence, and end with a "
         "conclusion that restates your main argument."),
        ("What is a good score on the {test}?",
         "It depends on the college, but scoring well above the national average on the "
         "{test} makes your application much stronger."),
        ("How can I study better for {subject} exams?",
         "Make a study schedule, review your notes every day, use flashcards and take practice "
         "tests instead of cramming the night before."),
        ("Where can I find scholarships for college?",
         "Ask your school counselor and the financial aid office, search free scholarship "
         "websites, and apply to as many as you can."),
        ("Is it 'affect' or 'effect' in my {essay} essay?",
         "'Affect' is usually a verb and 'effect' is usually a noun, so check how the word is "
         "used in the sentence."),
        ("What is the capital of {capital.0}?",
         "The capital of {capital.0} is {capital.1}; an atlas or encyclopedia is a great "
         "reference for facts like this."),
    ),
    {
        "word": (
            ("ubiquitous", "present everywhere"), ("ephemeral", "lasting a very short time"),
            ("pragmatic", "practical rather than idealistic"), ("candid", "honest and direct"),
            ("benevolent", "kind and generous"), ("meticulous", "very careful about details"),
            ("ambiguous", "having more than one meaning"),
        ),
        "essay": (
            "persuasive", "college admission", "argumentative", "compare and contrast",
            "research", "narrative",
        ),
        "test": ("SAT", "ACT", "GRE", "GMAT", "TOEFL", "LSAT"),
        "subject": ("history", "biology", "Spanish", "economics", "geography", "literature"),
        "capital": (
            ("Australia", "Canberra"), ("Canada", "Ottawa"), ("Brazil", "Brasilia"),
            ("Turkey", "Ankara"), ("New Zealand", "Wellington"), ("Nigeria", "Abuja"),
            ("Switzerland", "Bern"),
        ),
        "content": (
            "", "I have a paper due for my English class.",
            "my teacher said to look it up but I can't find it.",
            "applying to colleges this fall.", "need it for a homework assignment.",
        ),
        "pre": ("", "Librarian here.", "Great question."),
        "post": (
            "", "Your school library is a great resource.", "Good luck with your studies!",
            "Check an encyclopedia to be sure.",
        ),
    },
)

_YAHOO_COMPUTERS = _yahoo_class(
    (
        ("Why is my {device} so slow?",
         "It probably has spyware or too many programs at startup; run a virus scan, "
         "uninstall what you don't need and add more RAM."),
        ("How do I get rid of a virus on my {device}?",
         "Update your antivirus software, restart in safe mode and run a full scan, then "
         "delete or quarantine anything it finds."),
        ("How do I set up a wireless router?",
         "Plug the router into your modem, open its setup page in your web browser, and set a "
         "network name and a WPA password."),
        ("Which is better, {browser} or {browser#2}?",
         "I prefer {browser} because it's faster and has better security, but {browser#2} "
         "works fine for most websites."),
        ("How can I recover my {account} password?",
         "Click the 'forgot password' link on the {account} sign-in page and follow the email "
         "instructions to reset it."),
        ("How do I burn MP3 files onto a CD?",
         "Open your CD burning software, choose audio CD, drag the MP3 files in and click "
         "burn; Windows Media Player can do it too."),
        ("Why does my {device} show a blue screen?",
         "A blue screen means Windows hit a serious error, usually a bad driver or failing "
         "RAM; search online for the error code."),
        ("Is {ram} of RAM enough for gaming?",
         "{ram} is the minimum for most new games; upgrading your RAM and graphics card will "
         "make them run much smoother."),
    ),
    {
        "device": ("laptop", "computer", "PC", "desktop", "Dell laptop", "Windows XP computer"),
        "browser": ("Firefox", "Internet Explorer", "Opera", "Safari", "Netscape"),
        "account": ("Yahoo mail", "Hotmail", "MySpace", "AOL", "Gmail", "eBay"),
        "ram": ("256 MB", "512 MB", "1 GB", "2 GB"),
        "content": (
            "", "it keeps freezing and popping up ads.", "I'm not very good with computers.",
            "I have Windows XP with a DSL connection.", "I already tried restarting it twice.",
        ),
        "pre": ("", "I fix computers for a living.", "Easy fix."),
        "post": (
            "", "Also keep your software updated.", "Back up your files first.",
            "Google the error message for more help.",
        ),
    },
)

_YAHOO_SPORTS = _yahoo_class(
    (
        ("Who will win the {league.0} championship this year?",
         "I think the {league.1} will win it all; they have the best defense and a deep "
         "roster, but the playoffs are always unpredictable."),
        ("How do I improve my {skill}?",
         "Practice every day, watch how the pros do it and ask a coach to check your form; in "
         "sports, repetition is everything."),
        ("Who is the greatest {position} of all time?",
         "Hard to pick, but most fans would choose a {position} with several championship "
         "rings and records that still stand."),
        ("What are the basic rules of {sport}?",
         "In {sport}, two teams try to score more points than the other while the referee "
         "calls fouls and penalties."),
        ("When is the next {event}?",
         "The next {event} is a few years away, and tickets usually go on sale about a year "
         "before the games start."),
        ("Is it worth buying season tickets for the {team}?",
         "If you go to more than half the home games, season tickets save money and get you "
         "playoff priority, so for a big fan it's worth it."),
    ),
    {
        "league": (
            ("NBA", "Spurs"), ("NFL", "Patriots"), ("NHL", "Red Wings"),
            ("MLB", "Red Sox"), ("Premier League", "Chelsea"),
        ),
        "skill": (
            "golf swing", "jump shot", "free throws", "tennis serve", "batting average",
            "soccer dribbling", "bench press",
        ),
        "position": ("quarterback", "point guard", "goalkeeper", "pitcher", "boxer"),
        "sport": ("cricket", "rugby", "lacrosse", "field hockey", "water polo"),
        "event": ("World Cup", "Summer Olympics", "Winter Olympics", "Ryder Cup"),
        "team": ("Yankees", "Lakers", "Packers", "Cubs", "Celtics", "Steelers"),
        "content": (
            "", "I play on my high school team.", "me and my buddies have been arguing about this.",
            "I've been a fan since I was a kid.", "just started playing this season.",
        ),
        "pre": ("", "Huge sports fan here.", "Former coach here."),
        "post": (
            "", "Go team!", "Check ESPN for stats and schedules.", "Just my opinion as a fan.",
        ),
    },
)

_YAHOO_BUSINESS = _yahoo_class(
    (
        ("Should I open a {account}?",
         "Yes, a {account} is a smart way to save because your money grows over time; compare "
         "fees and interest rates at a few banks first."),
        ("How can I raise my credit score?",
         "Pay every bill on time, keep your credit card balances low and don't open too many "
         "new accounts; your score will improve in a few months."),
        ("Is it a good time to invest in {asset}?",
         "Nobody can time the market, so invest in {asset} for the long term, diversify and "
         "only invest money you won't need soon."),
        ("How do I start a small {biz} business?",
         "Write a business plan, register your company, open a business bank account and work "
         "out your startup costs and pricing before you launch."),
        ("Can I deduct {expense} on my taxes?",
         "Possibly; business expenses like {expense} are often tax deductible, but keep "
         "receipts and check with an accountant."),
        ("Should I refinance my mortgage?",
         "If rates are at least one point below your current rate and you plan to stay, "
         "refinancing your mortgage can save thousands in interest."),
        ("How much should I save for retirement?",
         "Financial planners suggest saving 10 to 15 percent of your income for retirement, "
         "starting early so the interest compounds."),
    ),
    {
        "account": (
            "Roth IRA", "savings account", "401k", "money market account", "CD",
            "brokerage account",
        ),
        "asset": ("stocks", "real estate", "gold", "mutual funds", "index funds", "bonds"),
        "biz": ("cleaning", "catering", "landscaping", "online", "bakery", "photography"),
        "expense": (
            "my home office", "mileage", "my cell phone", "work clothes",
            "student loan interest",
        ),
        "content": (
            "", "I'm 25 and just got my first real job.", "I have about $5,000 in savings.",
            "my bank keeps sending me offers.", "trying to get my finances in order this year.",
        ),
        "pre": ("", "I'm an accountant.", "I work in banking."),
        "post": (
            "", "Talk to a financial advisor before investing.", "Always read the fine print.",
            "Good luck with your money!",
        ),
    },
)

_YAHOO_ENTERTAINMENT = _yahoo_class(
    (
        ("Who sings the song '{song}'?",
         "That song is by The {band_adj} {band_noun}; it was all over the radio and the music "
         "video is online."),
        ("What is your favorite {genre} band?",
         "Definitely The {band_adj} {band_noun}; their new album rocks and they put on an "
         "amazing concert."),
        ("When does the new season of {show} start?",
         "The network says the new season of {show} premieres this fall; check their website "
         "for the exact date and episode guide."),
        ("Is the {movie} movie worth seeing?",
         "Yes, the acting is great and the special effects are amazing; see it in the theater "
         "rather than waiting for the DVD."),
        ("How do I learn to play {instrument.1}?",
         "Buy a cheap {instrument.0}, learn a few basic chords or scales from online lessons "
         "and practice your favorite songs every day."),
        ("Who do you think will win {contest}?",
         "I'm voting for the singer with the strongest voice; the judges loved the last "
         "performance and the fans are going crazy."),
        ("What are some good songs for a {playlist} playlist?",
         "Try some upbeat pop and classic rock hits plus a few dance tracks; mix old favorites "
         "with new music."),
    ),
    {
        "song": (
            "Summer Rain", "Broken Wings", "Midnight Train", "Paper Hearts", "Neon Lights",
            "Falling Slowly",
        ),
        "band_adj": ("Velvet", "Crimson", "Static", "Lonesome", "Cosmic", "Rusty"),
        "band_noun": ("Foxes", "Saints", "Anchors", "Hounds", "Tides", "Pilots"),
        "genre": ("rock", "punk", "metal", "indie", "country", "emo"),
        "show": (
            "Lost", "American Idol", "Grey's Anatomy", "The Office", "Prison Break", "Heroes",
        ),
        "movie": (
            "new Harry Potter", "new Pirates of the Caribbean", "new Batman", "new James Bond",
            "new Shrek",
        ),
        "instrument": (
            ("guitar", "the guitar"), ("piano", "the piano"), ("drum kit", "the drums"),
            ("bass guitar", "bass"), ("violin", "the violin"),
        ),
        "contest": (
            "American Idol", "the Grammy for best new artist", "the X Factor",
            "Rock Star: Supernova",
        ),
        "playlist": ("road trip", "party", "workout", "wedding"),
        "content": (
            "", "just curious.", "me and my friends were arguing about this.",
            "I'm a huge music and movie fan.", "looking for something new.",
        ),
        "pre": ("", "Huge music fan here.", "Oh, I love this one!"),
        "post": ("", "Rock on!", "Have fun with it!", "Check MTV or their website for more."),
    },
)

_YAHOO_FAMILY = _yahoo_class(
    (
        ("How do I know if my {crush} likes me?",
         "If your {crush} makes eye contact, texts you first and finds excuses to talk to you, "
         "they probably like you back, so just ask them out."),
        ("My {partner} and I fight all the time, what should I do?",
         "Every relationship has arguments, but talk calmly, listen to each other and try "
         "couples counseling if the fighting doesn't stop."),
        ("How do I tell my parents I'm {news}?",
         "Pick a calm moment, be honest and tell them how you feel; parents may be upset at "
         "first, but family love usually wins."),
        ("Should I get back together with my ex {partner}?",
         "If you broke up over cheating or lying, don't go back; a healthy relationship needs "
         "trust and respect."),
        ("How do I get my {kid} to listen to me?",
         "Be consistent with rules, praise good behavior and spend one-on-one time together; "
         "kids listen more when they feel loved."),
        ("How do I deal with my {inlaw}?",
         "Set clear boundaries, stay polite and let your spouse handle their own family; a "
         "united front makes a marriage stronger."),
        ("Is it normal to feel lonely after a breakup with my {partner}?",
         "Totally normal; give yourself time, lean on friends and family, and remember that a "
         "breakup is also a chance to grow."),
    ),
    {
        "crush": ("crush", "best friend", "coworker", "classmate", "neighbor"),
        "partner": ("boyfriend", "girlfriend", "husband", "wife", "fiance"),
        "news": (
            "dropping out of college", "moving out", "dating someone new", "changing my major",
            "getting married",
        ),
        "kid": ("toddler", "teenage son", "teenage daughter", "5 year old", "stepson"),
        "inlaw": ("mother-in-law", "father-in-law", "sister-in-law", "in-laws"),
        "content": (
            "", "we've been together for two years.", "I'm 17 and really confused.",
            "my friends all give me different advice.", "please help, I don't know what to do.",
        ),
        "pre": ("", "Been there, done that.", "Married for 20 years here."),
        "post": ("", "Good luck, sweetie.", "Follow your heart.", "Family comes first."),
    },
)

_YAHOO_POLITICS = _yahoo_class(
    (
        ("Who do you think will win the {election}?",
         "Hard to say, but voters care most about the economy and the war, so whoever wins "
         "those issues will probably win the {election}."),
        ("How does a bill become a law?",
         "A bill must pass both the House and the Senate and then be signed by the president; "
         "Congress can override a veto with a two-thirds vote."),
        ("What is the difference between {parties.0} and {parties.1}?",
         "They disagree on taxes, government spending and social issues; read each party's "
         "platform to see where they stand."),
        ("Should the voting age be lowered to {age}?",
         "Some say people who pay taxes at {age} deserve a vote, others say they are too "
         "young; it would take a change to election law."),
        ("How many {congress.0} are there in Congress?",
         "{congress.1} Your congressman's website explains how it works."),
        ("What does the {agency} do?",
         "The {agency} is a federal government agency; it carries out laws and policies set by "
         "Congress and the president."),
        ("Should {policy} be legal?",
         "It is a hot political debate; both sides lobby Congress, and I think voters should "
         "decide it on a ballot measure."),
        ("Can a {office} run for a third term?",
         "The 22nd Amendment limits the president to two terms, while limits for governors and "
         "mayors depend on each state's laws."),
    ),
    {
        "election": (
            "presidential election", "Senate race", "governor's race", "midterm elections",
            "mayoral election",
        ),
        "parties": (
            ("Democrats", "Republicans"), ("Labour", "the Conservatives"),
            ("liberals", "conservatives"),
        ),
        "age": ("16", "17"),
        "congress": (
            ("senators", "There are 100 senators, two from each state, serving six-year terms."),
            ("representatives",
             "There are 435 voting representatives in the House, divided by state population."),
        ),
        "agency": (
            "FBI", "EPA", "FDA", "Federal Reserve", "Department of Homeland Security", "FCC",
        ),
        "policy": (
            "online gambling", "medical marijuana", "stem cell research", "the death penalty",
        ),
        "office": ("president", "governor", "mayor"),
        "content": (
            "", "we are studying government in civics class.", "the news keeps talking about it.",
            "I'm voting for the first time this year.", "serious answers only please.",
        ),
        "pre": ("", "Political science major here.", "Good civics question."),
        "post": (
            "", "Remember to vote!", "Write to your congressman about it.",
            "Read the Constitution for details.",
        ),
    },
)

_YAHOO = _DatasetSpec(
    "yahoo_answers_csv",
    (
        _YAHOO_SOCIETY, _YAHOO_SCIENCE, _YAHOO_HEALTH, _YAHOO_EDUCATION, _YAHOO_COMPUTERS,
        _YAHOO_SPORTS, _YAHOO_BUSINESS, _YAHOO_ENTERTAINMENT, _YAHOO_FAMILY, _YAHOO_POLITICS,
    ),
)

_DATASETS: tuple[_DatasetSpec, ...] = (_AG_NEWS, _YELP, _AMAZON, _DBPEDIA, _YAHOO)

# fmt: on

# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    """Collapse whitespace (no raw newlines survive) and trim."""
    return " ".join(text.split())


def _normalise(fields: Sequence[str]) -> str:
    """The text a loader sees, lower-cased: what must not repeat within a dataset."""
    return _clean(" ".join(f.replace("\\n", " ") for f in fields)).lower()


def _draw_row(spec: _ClassSpec, rng: random.Random) -> list[str]:
    """Fill one randomly chosen row template of a class."""
    filler = _Filler(spec.slots, rng)
    fields = [_clean(filler.fill(t)) for t in rng.choice(spec.rows)]
    for field in fields:
        if "{" in field or "}" in field:
            raise ValueError(f"malformed slot left in {field!r}")
    return fields


def _add_newline(fields: list[str], rng: random.Random) -> list[str]:
    """Turn one break of the longest field into a literal backslash-n, as the real files do.

    A sentence break is used where the field has one, a clause break (after a comma) otherwise.
    """
    i = max(range(len(fields)), key=lambda j: len(fields[j]))
    spots = list(_SENTENCE_BREAK.finditer(fields[i])) or list(_CLAUSE_BREAK.finditer(fields[i]))
    if not spots:
        return fields
    spot = rng.choice(spots)
    marker = rng.choice(("\\n", "\\n", "\\n\\n"))
    out = list(fields)
    out[i] = fields[i][: spot.start()] + marker + fields[i][spot.end() :]
    return out


def _new_row(
    spec: _DatasetSpec, label: int, rng: random.Random, seen: set[str], titles: set[str]
) -> list[str]:
    """Draw rows of class ``label`` until one is new and short; record and return it."""
    for _ in range(MAX_ATTEMPTS):
        fields = _draw_row(spec.classes[label - 1], rng)
        key = _normalise(fields)
        title = fields[0].lower()
        if key in seen or len(key.split()) > MAX_WORDS:
            continue
        if spec.unique_title and title in titles:
            continue
        seen.add(key)
        titles.add(title)
        if rng.random() < NEWLINE_RATE:
            fields = _add_newline(fields, rng)
        return [str(label), *fields]
    raise RuntimeError(
        f"{spec.folder}: no new row for class {label} after {MAX_ATTEMPTS} draws; "
        "add templates or slot values"
    )


def _split_rows(
    spec: _DatasetSpec, n_rows: int, rng: random.Random, seen: set[str], titles: set[str]
) -> list[list[str]]:
    """Draw ``n_rows`` balanced rows (labels round-robin) and shuffle them."""
    n_classes = len(spec.classes)
    rows = [_new_row(spec, 1 + i % n_classes, rng, seen, titles) for i in range(n_rows)]
    rng.shuffle(rows)
    return rows


def _dataset_rows(
    spec: _DatasetSpec, seed: int, train_rows: int, test_rows: int
) -> dict[str, list[list[str]]]:
    """Both splits of one dataset, from one generator and without repeats across them."""
    rng = random.Random(f"{seed}:{spec.folder}")
    seen: set[str] = set()
    titles: set[str] = set()
    return {
        "train": _split_rows(spec, train_rows, rng, seen, titles),
        "test": _split_rows(spec, test_rows, rng, seen, titles),
    }


def _write_csv(path: Path, rows: Sequence[Sequence[str]]) -> None:
    """Write rows in the Zhang et al. layout, atomically (temp file, then ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def generate(out_dir: Path, *, seed: int = 0, train_rows: int = 300, test_rows: int = 100) -> None:
    """Write the sample of all five datasets under ``out_dir``.

    Each dataset gets ``<folder>/train.csv`` and ``<folder>/test.csv`` with balanced classes,
    no text repeated within a dataset, and rows of at most `MAX_WORDS` words. The output is a
    function of the arguments only: the same call writes byte-identical files.

    Args:
        out_dir: Directory to hold the dataset folders (created if missing).
        seed: Seed of the generators (each dataset derives its own from it).
        train_rows: Rows per training file.
        test_rows: Rows per test file.

    Raises:
        ValueError: A row count is not positive.
        RuntimeError: The templates of a class cannot supply enough distinct rows.

    """
    if train_rows < 1 or test_rows < 1:
        raise ValueError(f"row counts must be positive, got {train_rows} and {test_rows}")
    for spec in _DATASETS:
        splits = _dataset_rows(spec, seed, train_rows, test_rows)
        for split, rows in splits.items():
            _write_csv(Path(out_dir) / spec.folder / f"{split}.csv", rows)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m streams.make_samples [--out DIR] [--seed N]``.

    Args:
        argv: Arguments (``sys.argv[1:]`` if ``None``).

    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--train-rows", type=int, default=300, help="rows per train.csv")
    parser.add_argument("--test-rows", type=int, default=100, help="rows per test.csv")
    args = parser.parse_args(argv)
    generate(args.out, seed=args.seed, train_rows=args.train_rows, test_rows=args.test_rows)
    for spec in _DATASETS:
        print(f"wrote {args.out / spec.folder}/{{train,test}}.csv")


if __name__ == "__main__":
    main()
