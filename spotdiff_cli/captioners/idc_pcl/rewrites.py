"""FDA's hard negatives: a difference caption rewritten so that it is wrong in one detail
(``papers/idc-pcl-pretraining-slides.txt``, "Fine-grained Difference Aligning": "construct hard
negative samples by rewriting the original difference caption in three ways: Retrieve, Replace,
Confuse").

The paper rewrites free-form bird descriptions with heuristics. Our two generated benchmarks know,
for every pair, what changed (their gold annotations), so the three rewrites can be *exact*: a
rewrite is a negative because the annotation says so, not because it looks different.

- **replace**: one attribute word of the caption (a colour, size, material, shape or object kind)
  becomes another value of the same attribute, preferring the attribute the change is about
  ("the big red cylinder turned *yellow*" -> "... turned *green*"). The gold facts say which words
  name which value; the new value is one no fact of the pair has.
- **confuse**: the same object, the wrong change: a training caption of another change type,
  its object's words replaced by this pair's object ("the small yellow rubber sphere has
  disappeared" -> "the small yellow rubber sphere changed its color"). A "no change" caption is
  confused with a change caption, and a change caption with "no change" when nothing else fits.
- **retrieve**: the training caption most like this one (word overlap) among those whose facts
  differ (another object or another change type).

Every rewrite is checked against the pair's own reference captions: none of them is ever a
negative. On the rendered CLEVR set (one change per pair, every caption naming the object by its
attributes) this makes every rewrite false for its pair. On the 2-D synthetic set (several changes,
captions that sometimes name only the kind) a replacement takes a value that no change of the pair
has, so it is false for every change of that kind; that is as exact as its captions allow.

Pure Python over the dataset files (``gold.json`` + ``change_captions.json`` of the rendered set;
``annotations/<split>.json`` + ``<split>_gold.json`` of the synthetic one); no torch.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import DataError
from ..local_files import resolve_root
from ..vocab import tokenize

# The rendered CLEVR-Change set's captions name one value by several words (its templates').
CLEVR_SURFACES: dict[tuple[str, str], tuple[str, ...]] = {
    ("size", "small"): ("small", "tiny"),
    ("size", "large"): ("large", "big"),
    ("material", "metal"): ("metal", "metallic", "shiny"),
    ("material", "rubber"): ("rubber", "matte"),
    ("shape", "cube"): ("cube", "block"),
    ("shape", "sphere"): ("sphere", "ball"),
    ("shape", "cylinder"): ("cylinder",),
}
NO_CHANGE = "none"  # the change type of a distractor pair's captions
REWRITES = ("replace", "confuse", "retrieve")


@dataclass(frozen=True)
class Fact:
    """What one caption says changed: its change ``kind`` (the benchmark's type name, or
    :data:`NO_CHANGE`), the object's attributes and the values after the change, each a tuple of
    (attribute, canonical value)."""

    kind: str
    attrs: tuple[tuple[str, str], ...] = ()
    new: tuple[tuple[str, str], ...] = ()

    def value(self, attribute: str) -> str | None:
        return dict(self.attrs).get(attribute)


@dataclass
class Lexicon:
    """Attribute words: surface word -> (attribute, canonical value), and back."""

    word: dict[str, tuple[str, str]] = field(default_factory=dict)
    surfaces: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    def add(self, attribute: str, value: str, surfaces: tuple[str, ...] = ()) -> None:
        key = (attribute, value)
        forms = surfaces or self.surfaces.get(key) or (value,)
        self.surfaces[key] = tuple(dict.fromkeys((*self.surfaces.get(key, ()), *forms)))
        for form in self.surfaces[key]:
            self.word.setdefault(form, key)

    def values(self, attribute: str) -> list[str]:
        return sorted(v for a, v in self.surfaces if a == attribute)


@dataclass
class RewriteBank:
    """The facts and captions of one split, and the three rewrites of a caption.

    ``facts``: pair id -> the facts of its captions; ``references``: pair id -> its captions
    (tokenised, space-joined); ``corpus``: (caption, fact, pair id) of every caption."""

    lexicon: Lexicon
    facts: dict[str, tuple[Fact, ...]]
    references: dict[str, set[str]]
    corpus: list[tuple[str, Fact, str]]
    _nearest: dict[tuple[str, str], list[str]] = field(default_factory=dict, repr=False)

    def fact_of(self, pair_id: str, sentence: str) -> Fact:
        """The fact a caption of ``pair_id`` states: of the pair's facts, the one whose
        attribute values it names most often (a pair without facts states no change)."""
        facts = self.facts.get(str(pair_id)) or (Fact(NO_CHANGE),)
        named = [self.lexicon.word[w] for w in tokenize(sentence) if w in self.lexicon.word]
        return max(facts, key=lambda f: sum(pair in f.attrs for pair in named))

    def is_reference(self, pair_id: str, sentence: str) -> bool:
        return " ".join(tokenize(sentence)) in self.references.get(str(pair_id), set())

    # -- the three rewrites -------------------------------------------------------------------
    def replace(self, pair_id: str, sentence: str, rng: random.Random) -> str | None:
        """One attribute word swapped for another value of its attribute that no fact of the
        pair has (the changed attribute first); None if the caption names no attribute."""
        words = tokenize(sentence)
        fact = self.fact_of(pair_id, sentence)
        facts = self.facts.get(str(pair_id), ())
        slots = [i for i, w in enumerate(words) if w in self.lexicon.word]
        # The word of the new value first ("turned *yellow*"), then any word of the changed
        # attribute, then the rest at random.
        changed = {a for a, _ in fact.new}
        preferred = [i for i in slots if self.lexicon.word[words[i]] in fact.new] + [
            i for i in slots if self.lexicon.word[words[i]][0] in changed
        ]
        for i in (preferred or []) + rng.sample(slots, len(slots)):
            attribute, value = self.lexicon.word[words[i]]
            taken = {value} | {v for f in facts for a, v in (*f.attrs, *f.new) if a == attribute}
            choices = [v for v in self.lexicon.values(attribute) if v not in taken]
            if not choices:
                continue
            new_value = rng.choice(choices)
            out = [*words]
            out[i] = rng.choice(self.lexicon.surfaces[(attribute, new_value)])
            text = " ".join(out)
            if not self.is_reference(pair_id, text):
                return text
        return None

    def confuse(self, pair_id: str, sentence: str, rng: random.Random) -> str | None:
        """A caption of another change type about this caption's object (module docstring)."""
        fact = self.fact_of(pair_id, sentence)
        others = [(s, f) for s, f, _ in self.corpus if f.kind != fact.kind]
        if fact.kind != NO_CHANGE:
            # Prefer a template that can carry this object (it names the same attributes).
            carry = [(s, f) for s, f in others if f.kind != NO_CHANGE and f.attrs]
            others = carry or others
        for _ in range(8):
            if not others:
                return None
            template, template_fact = rng.choice(others)
            text = self._transplant(template, template_fact, fact, rng)
            if not self.is_reference(pair_id, text):
                return text
        return None

    def _transplant(self, template: str, source: Fact, target: Fact, rng: random.Random) -> str:
        """``template`` (about ``source``'s object) with the object's words naming ``target``'s
        object instead; a colour or material the change turns to stays different from the
        object's own."""
        words = tokenize(template)
        if target.kind == NO_CHANGE:
            return " ".join(words)
        seen: set[str] = set()
        for i, w in enumerate(words):
            key = self.lexicon.word.get(w)
            if key is None:
                continue
            attribute, value = key
            if attribute not in seen and source.value(attribute) == value:
                seen.add(attribute)  # the object's word: the first of its attribute
                mine = target.value(attribute)
                if mine is not None:
                    words[i] = rng.choice(self.lexicon.surfaces[(attribute, mine)])
            elif attribute in dict(source.new) and target.value(attribute) is not None:
                choices = [
                    v for v in self.lexicon.values(attribute) if v != target.value(attribute)
                ]
                if choices and self.lexicon.word.get(words[i], ("", ""))[1] == target.value(
                    attribute
                ):
                    words[i] = rng.choice(self.lexicon.surfaces[(attribute, rng.choice(choices))])
        return " ".join(words)

    def retrieve(self, pair_id: str, sentence: str, rng: random.Random) -> str | None:
        """The most word-overlapping training caption whose fact differs from this one's (ties
        broken at random)."""
        key = (str(pair_id), sentence)
        if key not in self._nearest:  # a scan of the corpus; each caption recurs every epoch
            self._nearest[key] = self._scan(pair_id, sentence)
        candidates = [t for t in self._nearest[key] if not self.is_reference(pair_id, t)]
        return rng.choice(candidates) if candidates else None

    def _scan(self, pair_id: str, sentence: str) -> list[str]:
        """The training captions of a different fact with the highest word overlap."""
        fact = self.fact_of(pair_id, sentence)
        mine = set(tokenize(sentence))
        best: list[str] = []
        best_score = -1.0
        for text, other, owner in self.corpus:
            if other == fact or owner == str(pair_id):
                continue
            words = set(text.split())
            score = len(mine & words) / max(1, len(mine | words))
            if score > best_score:
                best, best_score = [text], score
            elif score == best_score:
                best.append(text)
        return best

    def negatives(self, pair_id: str, sentence: str, count: int, rng: random.Random) -> list[str]:
        """Up to ``count`` distinct hard negatives of a caption, the rewrites taken in turn
        (replace, confuse, retrieve, replace, ...)."""
        out: list[str] = []
        for attempt in range(3 * count):
            kind = REWRITES[attempt % len(REWRITES)]
            text = getattr(self, kind)(pair_id, sentence, rng)
            if text and text not in out:
                out.append(text)
            if len(out) == count:
                break
        return out


# -- the benchmarks' files -----------------------------------------------------------------------
def _clevr_bank(root: Path, split: str) -> RewriteBank:
    gold = json.loads((root / "gold.json").read_text(encoding="utf-8"))
    changes = json.loads((root / "change_captions.json").read_text(encoding="utf-8"))
    still = json.loads((root / "no_change_captions.json").read_text(encoding="utf-8"))
    lexicon = Lexicon()
    for (attribute, value), surfaces in CLEVR_SURFACES.items():
        lexicon.add(attribute, value, surfaces)
    for record in gold.values():
        for attribute, value in (*record.get("object", {}).items(), *record.get("new", {}).items()):
            if isinstance(value, str):
                lexicon.add(attribute, value)
    facts: dict[str, tuple[Fact, ...]] = {}
    references: dict[str, set[str]] = {}
    corpus: list[tuple[str, Fact, str]] = []
    for name, record in gold.items():
        if record.get("split") != split:
            continue
        n = str(int(record.get("index", 0)))
        obj = tuple((a, v) for a, v in record.get("object", {}).items() if isinstance(v, str))
        new = tuple((a, v) for a, v in record.get("new", {}).items() if isinstance(v, str))
        for pair_id, fact, captions in (
            (n, Fact(str(record["type"]), obj, new), changes.get(name, [])),
            (f"{n}_nc", Fact(NO_CHANGE), still.get(name, [])),
        ):
            facts[pair_id] = (fact,)
            texts = [" ".join(tokenize(c)) for c in captions]
            references[pair_id] = set(texts)
            corpus.extend((t, fact, pair_id) for t in texts)
    return RewriteBank(lexicon, facts, references, corpus)


def _synth_bank(root: Path, split: str) -> RewriteBank:
    notes = root / "annotations"
    gold = json.loads((notes / f"{split}_gold.json").read_text(encoding="utf-8"))
    captions = {
        str(r["img_id"]): list(r.get("sentences") or [])
        for r in json.loads((notes / f"{split}.json").read_text(encoding="utf-8"))
    }
    lexicon = Lexicon()
    facts: dict[str, tuple[Fact, ...]] = {}
    references: dict[str, set[str]] = {}
    corpus: list[tuple[str, Fact, str]] = []
    for record in gold:
        pair_id = str(record["img_id"])
        pair_facts = []
        texts = [" ".join(tokenize(s)) for s in captions.get(pair_id, [])]
        for change in record.get("changes") or []:
            attrs = tuple(
                (a, str(change[k]))
                for a, k in (("colour", "colour"), ("kind", "kind"))
                if change.get(k)
            )
            new = (("colour", str(change["new_colour"])),) if change.get("new_colour") else ()
            for attribute, value in (*attrs, *new):
                lexicon.add(attribute, value)
            fact = Fact(str(change.get("type")), attrs, new)
            pair_facts.append(fact)
            index = change.get("sentence")
            if isinstance(index, int) and 0 <= index < len(texts):
                corpus.append((texts[index], fact, pair_id))
        if not pair_facts:
            corpus.extend((t, Fact(NO_CHANGE), pair_id) for t in texts)
        facts[pair_id] = tuple(pair_facts) or (Fact(NO_CHANGE),)
        references[pair_id] = set(texts)
    return RewriteBank(lexicon, facts, references, corpus)


def rewrite_bank(root: str | Path, split: str = "train") -> RewriteBank:
    """The rewrite bank of ``split`` of the benchmark at ``root`` (a folder, or a benchmark's
    name in the user cache)."""
    folder = resolve_root(str(root), "fda_data")
    if (folder / "gold.json").is_file() and (folder / "change_captions.json").is_file():
        return _clevr_bank(folder, split)
    if (folder / "annotations" / f"{split}_gold.json").is_file():
        return _synth_bank(folder, split)
    raise DataError(
        f"{folder}: FDA's hard negatives are rewritten from gold annotations (gold.json of the "
        "rendered set, or annotations/<split>_gold.json of the synthetic benchmark), which this "
        "dataset lacks; pre-train idc-pcl on it without the fda objective"
    )


__all__ = ["NO_CHANGE", "REWRITES", "Fact", "Lexicon", "RewriteBank", "rewrite_bank"]
