"""What a caption says, read with a small lexicon: is it "no change", a camera or lighting
remark, or an object change; which change type, which object, which colours, which place.

The evaluation uses this to score captions against gold labels (``judge.py``): BLEU or CIDEr
reward wording, so two models that name the wrong object in fluent sentences score alike; this
asks whether the sentence names the *right* change. The lexicon is deliberately small and
written out here, so a reader can see exactly what counts:

* **no change**: "no change", "nothing (has) changed", "no difference(s)", "the same (as
  before)", "identical", "has not changed", "nothing is different", "remains the same", ...
* **camera / lighting remarks** (not an object change; a distractor may get one): a sentence
  about the camera, view, angle, zoom, or the light, lighting, brightness, shadows, exposure
  that names no object.
* **change type**, tried in this order (the first that matches wins):

  ========  ==================================================================================
  type      phrasing
  ========  ==================================================================================
  material  "material", "texture", "made of"; became / turned / changed to / is now + a
            material word (metal, metallic, shiny, rubber, matte)
  colour    "colour" / "color"; became / turned / changed to / is now / painted + a colour
            word; "instead of <colour>", "replaced by a <colour>", "where the <colour>"
  move      moved, relocated, shifted, walked / drove (not "away", "off", "out", "in" + place),
            changed (its) location / position / place, a different / new place
  drop      disappeared, removed, gone, missing, no longer, taken away, vanished, has left,
            left from, walked / drove away, pulled out, not in the after image
  add       appeared, added, new, shown / showed up, arrived, parked, walked / pulled in,
            entered, "there is now", "was not there before", "is now standing", "the after image"
  move      (weak cues, after the rest) "is now in / at / on / near", "that was in / at / on"
  ========  ==================================================================================

  Gold types map onto the same five: appear/add -> add, disappear/drop -> drop,
  colour/color -> colour, material/texture -> material, move -> move.
* **object**: the first object noun outside a relation ("the cube *behind the red sphere*"
  names a cube): CLEVR shapes (cube/block, sphere/ball, cylinder) and the surveillance nouns
  (person/pedestrian/man/woman/people, car/sedan, van, truck/pickup, bus, bicycle/bike,
  motorcycle, dog, cat, bird). "vehicle" names any vehicle; "object", "thing", "something",
  "item" name none.
* **colours**: CLEVR's eight and the synthetic benchmark's colour words (grey = gray; silver is
  accepted for grey and grey for silver: a silver car photographs grey).
* **place**: left / right / centre (center, middle) across; top / upper / back / far and
  bottom / lower / front across the height; "centre" fills the axis the sentence leaves open
  ("top centre", "in the centre"). Relations ("left of the cube", "behind the sphere") are not
  places.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TYPES = ("add", "drop", "move", "colour", "material")
# Gold change types of every dataset -> the five above.
GOLD_TYPES = {
    "add": "add",
    "appear": "add",
    "appeared": "add",
    "drop": "drop",
    "disappear": "drop",
    "disappeared": "drop",
    "move": "move",
    "moved": "move",
    "colour": "colour",
    "color": "colour",
    "material": "material",
    "texture": "material",
}

COLOURS = {
    "red": "red",
    "blue": "blue",
    "green": "green",
    "yellow": "yellow",
    "purple": "purple",
    "cyan": "cyan",
    "brown": "brown",
    "gray": "grey",
    "grey": "grey",
    "white": "white",
    "black": "black",
    "silver": "silver",
    "orange": "orange",
    "pink": "pink",
}
# Colour names that count as each other (the photograph of a silver car is grey).
SAME_COLOUR = {frozenset(("grey", "silver"))}
MATERIALS = ("metal", "metallic", "shiny", "rubber", "matte")

# Object nouns -> class. "vehicle" matches any vehicle class; generic nouns match nothing.
NOUNS = {
    **dict.fromkeys(("cube", "cubes", "block", "blocks"), "cube"),
    **dict.fromkeys(("sphere", "spheres", "ball", "balls"), "sphere"),
    **dict.fromkeys(("cylinder", "cylinders"), "cylinder"),
    **dict.fromkeys(
        ("person", "people", "pedestrian", "pedestrians", "man", "men", "woman", "women"),
        "person",
    ),
    **dict.fromkeys(("child", "boy", "girl"), "person"),
    **dict.fromkeys(("car", "cars", "sedan", "suv"), "car"),
    **dict.fromkeys(("van", "vans", "minivan"), "van"),
    **dict.fromkeys(("truck", "trucks", "pickup", "lorry"), "truck"),
    **dict.fromkeys(("bus", "buses"), "bus"),
    **dict.fromkeys(("bicycle", "bicycles", "bike", "bikes"), "bicycle"),
    **dict.fromkeys(("motorcycle", "motorcycles", "motorbike", "scooter"), "motorcycle"),
    "dog": "dog",
    "dogs": "dog",
    "cat": "cat",
    "cats": "cat",
    "bird": "bird",
    "birds": "bird",
    **dict.fromkeys(("vehicle", "vehicles"), "vehicle"),
    **dict.fromkeys(("object", "objects", "thing", "things", "something", "item"), "object"),
}
VEHICLES = frozenset(("car", "van", "truck", "bus", "motorcycle"))
GENERIC = frozenset(("object", "vehicle"))

_C = "|".join(COLOURS)
_M = "|".join(MATERIALS)
_VERB = r"(?:became|become|becomes|turned(?: into)?|changed (?:in)?to|is now|are now|now|painted|repainted)"

NO_CHANGE = re.compile(
    r"\bno (?:visible |notable |apparent )?(?:change|changes|difference|differences)\b"
    r"|\bnothing (?:has |have |is |was )?(?:changed|different|moved|happened)\b"
    r"|\b(?:has|have|had) not changed\b|\bhasn't changed\b|\bdid not change\b|\bunchanged\b"
    r"|\b(?:is|are|seem|seems|look|looks|remain|remains|stayed|stays) (?:exactly )?(?:the )?same\b"
    r"|\bsame as before\b|\bidentical\b|\bnot (?:changed|different)\b"
)
CAMERA = re.compile(
    r"\b(?:camera|viewpoint|view point|point of view|view|angle|perspective|zoom|zoomed|"
    r"panned|tilted)\b"
)
LIGHT = re.compile(
    rf"\b(?:lighting|illumination|brightness|brighter|darker|exposure|shadow|shadows|sun|"
    rf"light(?! (?:{_C})\b)|lights)\b"
)

# (type, pattern) in the order they are tried; see the module docstring.
_TYPE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "material",
        re.compile(rf"\b(?:material|texture|made of)\b|\b{_VERB} (?:a |an )?(?:{_M})\b"),
    ),
    (
        "colour",
        re.compile(
            rf"\bcolou?rs?\b|\b{_VERB} (?:{_C})\b|\binstead of (?:{_C})\b"
            rf"|\breplaced (?:by|with) an? (?:{_C})\b|\bwhere the (?:{_C})\b"
            rf"|\b(?:{_C}) now\b|\band not (?:{_C})\b"
        ),
    ),
    (
        "move",
        re.compile(
            r"\b(?:moved|moves|moving|relocated|shifted|repositioned)\b"
            r"|\b(?:walked|drove|went|rolled)\b(?! (?:away|off|out)\b)(?! in\b(?! the\b))"
            r"|\bchanged (?:its |their )?(?:location|position|place|spot)\b"
            r"|\b(?:different|new|another) (?:location|position|place|spot)\b"
        ),
    ),
    (
        "drop",
        re.compile(
            r"\b(?:disappeared|disappears|removed|gone|missing|vanished|deleted|taken away)\b"
            r"|\bno longer\b|\b(?:has|have|had|just) left\b|\bleft (?:from|the scene)\b"
            r"|\b(?:walked|drove|went|pulled|driven) (?:away|off|out)\b"
            r"|\bnot in the after (?:image|picture)\b"
        ),
    ),
    (
        "add",
        re.compile(
            r"\b(?:appeared|appears|added|new|arrived|entered)\b|\b(?:shown|showed) up\b"
            r"|\b(?:walked|pulled|drove) in\b|\bthere (?:is|are) now\b"
            r"|\bwas not there before\b|\b(?:is|are) now (?:parked|standing|sitting)\b"
            r"|\b(?:in the|the) after (?:image|picture)\b|\bparked\b"
        ),
    ),
    ("move", re.compile(r"\b(?:is|are) now (?:in|at|on|near)\b|\bthat was (?:in|at|on|near)\b")),
)

# Relations name another object ("behind the red sphere"): cut them out before reading the
# object, its colours and its place. A marker starts a relation only when an object noun
# follows within a few words ("near the top" is a place, "near the car" a relation).
_RELATION_MARKERS = (
    ("behind",),
    ("in", "front", "of"),
    ("left", "of"),
    ("right", "of"),
    ("next", "to"),
    ("beside",),
    ("near",),
    ("close", "to"),
    ("below",),
    ("above",),
)
_RELATION_REACH = 7

_COLUMN = {"left": "left", "right": "right"}
_ROW = {
    "top": "top",
    "upper": "top",
    "back": "top",
    "far": "top",
    "background": "top",
    "bottom": "bottom",
    "lower": "bottom",
    "front": "bottom",
    "foreground": "bottom",
}
_CENTRE = frozenset(("centre", "center", "middle", "central"))
_FRAME = frozenset(("image", "picture", "photo", "frame", "scene", "lot", "view"))
# "left" as a verb ("the car has left", "left from the top") is not a place.
_LEFT_VERB_BEFORE = frozenset(("has", "have", "had", "just", "who", "and", "then"))
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class Reading:
    """What one sentence says.

    kind: "change" (an object change), "no_change", "camera", "light" or "empty".
    type: one of TYPES, or None when the sentence says something changed without saying how.
    noun: the object class it names ("cube", "car", "vehicle", "object" = none in particular).
    colours: the colour names it uses for its object (relations cut out), canonical spelling.
    column / row: the place it names: column in {"left", "centre", "right"}, row in
        {"top", "middle", "bottom"}; empty when it names none on that axis.
    """

    kind: str
    type: str | None = None
    noun: str | None = None
    colours: frozenset[str] = field(default_factory=frozenset)
    column: frozenset[str] = field(default_factory=frozenset)
    row: frozenset[str] = field(default_factory=frozenset)


def words(text: str) -> list[str]:
    """Lower-case word tokens (punctuation dropped, apostrophes kept inside words)."""
    return _WORD.findall(text.lower())


def _without_relations(tokens: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tokens):
        cut = None
        for marker in _RELATION_MARKERS:
            if tuple(tokens[i : i + len(marker)]) == marker:
                start = i + len(marker)
                for j in range(start, min(len(tokens), start + _RELATION_REACH)):
                    if tokens[j] in NOUNS:
                        cut = j + 1
                        break
                    if tokens[j] in _ROW or tokens[j] in _COLUMN or tokens[j] in _CENTRE:
                        break
                    if tokens[j] in _FRAME:  # "left of the image" is a place
                        break
                break
        if cut is None:
            out.append(tokens[i])
            i += 1
        else:
            i = cut
    return out


def _place(tokens: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    column = {
        _COLUMN[t]
        for i, t in enumerate(tokens)
        if t in _COLUMN
        and not (
            t == "left"
            and (
                (i and tokens[i - 1] in _LEFT_VERB_BEFORE)
                or tokens[i + 1 : i + 2] in (["from"], ["the"])
            )
        )
    }
    row = {_ROW[t] for t in tokens if t in _ROW}
    if any(t in _CENTRE for t in tokens):
        if row and not column:
            column = {"centre"}
        elif column and not row:
            row = {"middle"}
        elif not row and not column:
            column, row = {"centre"}, {"middle"}
    return frozenset(column), frozenset(row)


def change_type(text: str) -> str | None:
    """The change type a sentence names (see the module docstring), or None."""
    flat = " ".join(words(text))
    for kind, pattern in _TYPE_RULES:
        if pattern.search(flat):
            return kind
    return None


def gold_type(kind: str) -> str | None:
    """A dataset's change type as one of TYPES ("appear" -> "add", "color" -> "colour")."""
    return GOLD_TYPES.get(kind.lower())


def read(sentence: str) -> Reading:
    """Read one sentence (see the module docstring for every word that counts)."""
    tokens = words(sentence)
    if not tokens:
        return Reading("empty")
    flat = " ".join(tokens)
    own = _without_relations(tokens)
    noun = next((NOUNS[t] for t in own if t in NOUNS), None)
    if NO_CHANGE.search(flat) and not re.search(r"\bbut\b|\bexcept\b", flat):
        return Reading("no_change")
    if noun in (None, "object"):  # "the camera moved", "the lighting changed"
        if CAMERA.search(flat):
            return Reading("camera")
        if LIGHT.search(flat):
            return Reading("light")
    column, row = _place(own)
    colours = frozenset(COLOURS[t] for t in own if t in COLOURS)
    return Reading("change", change_type(flat), noun, colours, column, row)


def colour_word(name: str) -> str | None:
    """A colour name in the lexicon's spelling ("gray" -> "grey"), or None if it is not one."""
    return COLOURS.get(name.lower())


def same_colour(a: str, b: str) -> bool:
    return a == b or frozenset((a, b)) in SAME_COLOUR


def noun_matches(said: str | None, gold: str) -> bool:
    """Whether a sentence's noun class names the gold object ("vehicle" names any vehicle)."""
    if said is None or said == "object":
        return False
    if said == "vehicle":
        return gold in VEHICLES or gold == "vehicle"
    return said == gold
