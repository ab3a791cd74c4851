"""BERT's uncased WordPiece tokenizer, as ``tokenizers``' ``BertNormalizer`` +
``BertPreTokenizer`` + ``WordPiece`` configure it for all-MiniLM-L6-v2, in plain Python.

The steps (Devlin et al.'s ``tokenization.py``, which the Rust tokenizer reproduces): drop
control characters and turn any whitespace into a space; put spaces around CJK ideographs;
lower-case and strip accents (NFD, then drop combining marks); split on whitespace and around
every punctuation character; then cut each word greedily into the longest pieces found in the
vocabulary (``##`` marks a piece inside a word). A word with no cut, or longer than 100
characters, becomes ``[UNK]``. ``tests/test_embed.py`` checks the ids against ``tokenizers``
where it is installed.
"""

from __future__ import annotations

import unicodedata

MAX_WORD_CHARS = 100


def _is_control(char: str) -> bool:
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # BERT counts every non-letter, non-digit ASCII symbol as punctuation ($, ^, `...), which
    # Unicode files under S*, not P*.
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def basic_words(text: str) -> list[str]:
    """The normalised words and punctuation marks of ``text``, before WordPiece."""
    out = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD or _is_control(char):
            continue
        if _is_whitespace(char):
            out.append(" ")
        elif _is_cjk(code):
            out.append(f" {char} ")
        else:
            out.append(char)
    text = unicodedata.normalize("NFD", "".join(out).lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    words: list[str] = []
    for chunk in text.split():
        current = ""
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append(current)
                    current = ""
                words.append(char)
            else:
                current += char
        if current:
            words.append(current)
    return words


class WordPiece:
    """Text -> token ids of a BERT vocabulary (one piece per line, id = line number)."""

    def __init__(self, vocab: list[str], max_tokens: int = 256) -> None:
        self.ids = {piece: i for i, piece in enumerate(vocab)}
        self.unk = self.ids["[UNK]"]
        self.cls = self.ids["[CLS]"]
        self.sep = self.ids["[SEP]"]
        # all-MiniLM-L6-v2 was trained on at most 128 word pieces; sentence-transformers cuts
        # at 256. An event's sentence is a few dozen.
        self.max_tokens = max_tokens

    def word_ids(self, word: str) -> list[int]:
        """Greedy longest-match-first pieces of one word."""
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.ids.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk]  # one unknown piece makes the whole word unknown, as BERT
            pieces.append(found)
            start = end
        return pieces

    def encode(self, text: str) -> list[int]:
        """``[CLS] pieces... [SEP]``, cut to ``max_tokens`` in all."""
        ids = [i for word in basic_words(text) for i in self.word_ids(word)]
        return [self.cls, *ids[: self.max_tokens - 2], self.sep]
