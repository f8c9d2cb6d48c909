"""What the plugin knows about things people pack: a picture, a category, how they scale.

An item is recognised by its words (``"wool socks"`` is socks); anything unknown keeps the
category its list gave it, the fallback picture and its quantity as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

#: How an item's quantity grows with the trip: one per day per person (socks), one per
#: person (a toothbrush), one per day (the dog's food), or one for the whole trip (sun cream).
Per = Literal["day_person", "person", "day", "trip"]

#: The bundled picture for an item nothing here recognises.
FALLBACK_PICTURE = "item.svg"


@dataclass(frozen=True)
class Kind:
    picture: str
    category: str
    per: Per
    #: Word sequences (singular, lower case) that name it; the longest match wins.
    names: tuple[str, ...]


KINDS: tuple[Kind, ...] = (
    Kind("socks.svg", "Clothes", "day_person", ("sock",)),
    Kind("underwear.svg", "Clothes", "day_person", ("underwear", "pant", "knicker", "boxer", "brief", "bra")),
    Kind("shirt.svg", "Clothes", "day_person", ("t-shirt", "tshirt", "tee", "shirt", "top", "blouse")),
    Kind("trousers.svg", "Clothes", "person", ("trouser", "jean", "short", "legging", "skirt", "waterproof trouser")),
    Kind("jacket.svg", "Clothes", "person", ("jacket", "coat", "raincoat", "fleece", "jumper", "sweater", "hoodie",
                                             "cardigan", "waterproof")),
    Kind("hat.svg", "Clothes", "person", ("hat", "cap", "beanie", "scarf", "glove")),
    Kind("swimsuit.svg", "Clothes", "person", ("swimsuit", "swimming costume", "swimwear", "trunk", "bikini")),
    Kind("shirt.svg", "Clothes", "person", ("pyjama", "pajama", "nightie")),
    Kind("boots.svg", "Shoes", "person", ("boot", "shoe", "trainer", "sandal", "flip-flop", "sneaker", "welly",
                                          "wellington")),
    Kind("toothbrush.svg", "Toiletries", "person", ("toothbrush",)),
    Kind("bottle.svg", "Toiletries", "trip", ("toothpaste", "shampoo", "soap", "deodorant", "sun cream",
                                              "suncream", "sunscreen", "sun lotion", "moisturiser", "razor",
                                              "toiletry", "wash bag")),
    Kind("towel.svg", "Toiletries", "person", ("towel",)),
    Kind("first_aid.svg", "Health", "trip", ("first aid", "first-aid", "plaster", "medicine", "medication",
                                             "painkiller", "paracetamol", "ibuprofen", "pill")),
    Kind("spray.svg", "Health", "trip", ("insect repellent", "repellent", "midge spray", "mosquito spray",
                                         "bug spray", "spray", "midge net")),
    Kind("charger.svg", "Electronics", "trip", ("charger", "cable", "adapter", "adaptor", "power bank",
                                                "powerbank", "plug")),
    Kind("camera.svg", "Electronics", "trip", ("camera", "binocular")),
    Kind("torch.svg", "Gear", "trip", ("torch", "head torch", "headtorch", "flashlight", "headlamp", "lantern")),
    Kind("passport.svg", "Documents", "person", ("passport", "id card", "identity card", "visa")),
    Kind("passport.svg", "Documents", "trip", ("ticket", "boarding pass", "booking", "insurance", "wallet",
                                               "driving licence", "driving license", "cash")),
    Kind("umbrella.svg", "Gear", "trip", ("umbrella",)),
    Kind("sunglasses.svg", "Gear", "person", ("sunglass", "sun glass", "glasses")),
    Kind("book.svg", "Leisure", "trip", ("book", "novel", "kindle", "e-reader", "guidebook", "journal",
                                         "notebook")),
    Kind("map.svg", "Gear", "trip", ("map", "compass", "guide")),
    Kind("tent.svg", "Camping", "trip", ("tent", "groundsheet", "tent peg")),
    Kind("sleeping_bag.svg", "Camping", "person", ("sleeping bag", "sleeping mat", "pillow", "roll mat")),
    Kind("backpack.svg", "Gear", "person", ("backpack", "rucksack", "daypack", "day pack", "bag")),
    Kind("bottle.svg", "Food & drink", "person", ("water bottle", "flask", "thermos")),
    Kind("dog.svg", "For the dog", "day", ("dog food", "kibble", "dog treat", "treat")),
    Kind("item.svg", "For the cat", "day", ("cat food",)),
    Kind("item.svg", "For the cat", "trip", ("cat carrier", "litter tray", "litter")),
    Kind("dog.svg", "For the dog", "trip", ("lead", "leash", "harness", "dog bowl", "bowl", "poo bag",
                                            "dog bed", "dog towel", "collar", "dog toy")),
)

_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
_POSSESSIVE = re.compile(r"['’]s\b")


def singular(word: str) -> str:
    """A word's singular, roughly: enough to tell "socks" and "sock" are one thing."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def words_of(name: str) -> list[str]:
    """The lower-case singular words of ``name``, ``"Wool Socks!"`` → ``["wool", "sock"]``."""
    return [singular(w) for w in _WORD.findall(_POSSESSIVE.sub("", name.lower()))]


def _phrases() -> list[tuple[tuple[str, ...], Kind]]:
    out: list[tuple[tuple[str, ...], Kind]] = []
    for kind in KINDS:
        for phrase in kind.names:
            out.append((tuple(words_of(phrase)), kind))
    # The longest phrase first, so "dog towel" is the dog's and "water bottle" is not toiletries.
    out.sort(key=lambda p: -len(p[0]))
    return out


_PHRASES = _phrases()


def kind_of(name: str) -> Kind | None:
    """The kind ``name`` is, when one of its word sequences names a known kind."""
    words = words_of(name)
    for phrase, kind in _PHRASES:
        n = len(phrase)
        if any(tuple(words[i : i + n]) == phrase for i in range(len(words) - n + 1)):
            return kind
    return None


def picture_of(name: str) -> str:
    """The bundled picture for an item named ``name`` (the fallback when nothing fits)."""
    kind = kind_of(name)
    return kind.picture if kind is not None else FALLBACK_PICTURE


#: What a pet needs when no earlier list has a section for it (people's needs come from
#: the lists and notes).
PET_ITEMS: dict[str, tuple[str, ...]] = {
    "dog": ("dog food", "lead", "dog bowl", "poo bags", "dog towel"),
    "cat": ("cat food", "cat carrier", "litter tray"),
}
