"""The word vocabulary shared by every learned captioner (docs/training-interfaces.md).

Built from the training split only (so validation and test words the model never saw become
``<unk>``, as in the paper's setup), with a frequency threshold from the recipe: Spot-the-diff
Table 1 counts 1000 word types with >= 5 occurrences covering 97 % of tokens, so ``min_count: 5``
is the paper-scale value.

Tokenisation is the Spot-the-diff one: lower-case, punctuation stripped, split on whitespace.
Specials come first, in a fixed order every model relies on: ``<pad>``=0, ``<bos>``=1,
``<eos>``=2, ``<unk>``=3, ``<sep>``=4 (``<sep>`` joins the sentences of a multi-sentence target).
Pure Python: no torch import, so checkpoints' vocabularies can be read anywhere.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ModelError

PAD, BOS, EOS, UNK, SEP = "<pad>", "<bos>", "<eos>", "<unk>", "<sep>"
SPECIALS: tuple[str, ...] = (PAD, BOS, EOS, UNK, SEP)
PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID = range(len(SPECIALS))

# Spot-the-diff's preprocessing removes punctuation outright (no token for "."). Apostrophes are
# dropped inside words ("car's" -> "cars", what annotators mostly typed anyway); any other
# punctuation separates words ("left,right" -> "left right").
_APOSTROPHES = re.compile(r"['\u2019`]")
_PUNCT = re.compile(r"[^\w\s]|_")


def tokenize(text: str) -> list[str]:
    """Spot-the-diff tokenisation: lower-case, strip punctuation, split on whitespace.

    >>> tokenize("The red car, parked left, is GONE.")
    ['the', 'red', 'car', 'parked', 'left', 'is', 'gone']
    """
    return _PUNCT.sub(" ", _APOSTROPHES.sub("", text.lower())).split()


class Vocabulary:
    """Word <-> id mapping with the five specials first.

    ``encode`` adds ``<bos>``/``<eos>``; ``decode`` stops at ``<eos>`` and drops specials (except
    that ``<sep>`` may be kept as a sentence break with ``keep_sep=True``).
    """

    def __init__(
        self, words: Sequence[str], counts: dict[str, int] | None = None, min_count: int = 1
    ) -> None:
        words = list(words)
        if tuple(words[: len(SPECIALS)]) != SPECIALS:
            raise ModelError(
                f"a vocabulary must start with the specials {', '.join(SPECIALS)} in that order; "
                f"got {', '.join(words[:5])}"
            )
        if len(set(words)) != len(words):
            dupes = sorted({w for w in words if words.count(w) > 1})
            raise ModelError(f"a vocabulary lists these words twice: {', '.join(dupes[:5])}")
        self.words: list[str] = words
        self.index: dict[str, int] = {w: i for i, w in enumerate(words)}
        self.counts: dict[str, int] = dict(counts or {})
        self.min_count = min_count

    # -- building ---------------------------------------------------------------------------------

    @classmethod
    def build(cls, sentences: Iterable[str], min_count: int = 5) -> Vocabulary:
        """Every word seen at least ``min_count`` times in ``sentences`` (the training split),
        most frequent first, ties alphabetical so the same data always gives the same ids."""
        if min_count < 1:
            raise ModelError(f"min_count must be at least 1, got {min_count}")
        counts = Counter(w for s in sentences for w in tokenize(s))
        kept = sorted(
            (w for w, c in counts.items() if c >= min_count and w not in SPECIALS),
            key=lambda w: (-counts[w], w),
        )
        return cls([*SPECIALS, *kept], {w: counts[w] for w in kept}, min_count)

    # -- using ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    pad_id, bos_id, eos_id, unk_id, sep_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID

    def encode(self, text: str, max_len: int | None = None) -> list[int]:
        """``<bos> w1 .. wn <eos>`` as ids; unknown words are ``<unk>``. ``max_len`` caps the
        number of words (the specials come on top), so a long sentence still ends in ``<eos>``."""
        words = tokenize(text)
        if max_len is not None:
            words = words[:max_len]
        return [BOS_ID, *(self.index.get(w, UNK_ID) for w in words), EOS_ID]

    def encode_many(self, sentences: Sequence[str], max_len: int | None = None) -> list[int]:
        """A whole description: ``<bos> s1 <sep> s2 ... <eos>`` (the capt-multi / nn-multi target).
        Empty sentences are skipped; ``max_len`` caps the total number of words and separators."""
        body: list[int] = []
        for sentence in (s for s in sentences if tokenize(s)):
            if body:
                body.append(SEP_ID)
            body.extend(self.index.get(w, UNK_ID) for w in tokenize(sentence))
        if max_len is not None:
            body = body[:max_len]
        while body and body[-1] == SEP_ID:  # a cut right after a separator would end on it
            body.pop()
        return [BOS_ID, *body, EOS_ID]

    def decode(self, ids: Iterable[int], keep_sep: bool = False) -> str:
        """Words up to the first ``<eos>``; specials dropped (``<sep>`` kept as the literal
        token when ``keep_sep``, so a caller can split sentences)."""
        out: list[str] = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i == SEP_ID and keep_sep:
                out.append(SEP)
            elif i >= len(SPECIALS) and i < len(self.words):
                out.append(self.words[i])
        return " ".join(out)

    def decode_sentences(self, ids: Iterable[int]) -> list[str]:
        """A multi-sentence output split at ``<sep>``: one string per non-empty sentence."""
        text = self.decode(ids, keep_sep=True)
        return [s.strip() for s in text.split(SEP) if s.strip()]

    # -- storing (plain types only: checkpoints load with weights_only=True) -------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "words": list(self.words),
            "counts": [int(self.counts.get(w, 0)) for w in self.words],
            "min_count": int(self.min_count),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocabulary:
        if not isinstance(data, dict) or "words" not in data:
            raise ModelError(
                "a stored vocabulary must be a dict with 'words' (is the checkpoint from spotdiff?)"
            )
        words = [str(w) for w in data["words"]]
        counts = data.get("counts") or [0] * len(words)
        return cls(
            words,
            {w: int(c) for w, c in zip(words, counts) if int(c)},
            int(data.get("min_count", 1)),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.words == other.words

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} words, min_count={self.min_count})"
