"""Vocabulary: Spot-the-diff tokenisation, specials in the contract's order, the training-split
frequency threshold, and round trips a checkpoint relies on."""

from __future__ import annotations

import pytest

from spotdiff_cli.captioners.vocab import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SEP_ID,
    SPECIALS,
    UNK_ID,
    Vocabulary,
    tokenize,
)
from spotdiff_cli.errors import ModelError

TRAIN = [
    "The red car is gone.",
    "the red car has left the parking lot",
    "A person, in blue, appeared near the car!",
    "the red truck moved",
]


def test_tokenize_lowercases_and_strips_punctuation() -> None:
    assert tokenize("The RED car, near the van's door, is GONE.") == [
        "the",
        "red",
        "car",
        "near",
        "the",
        "vans",
        "door",
        "is",
        "gone",
    ]
    assert tokenize("  \t") == []


def test_specials_have_the_contract_ids() -> None:
    vocab = Vocabulary.build(TRAIN, min_count=1)
    assert vocab.words[:5] == list(SPECIALS) == ["<pad>", "<bos>", "<eos>", "<unk>", "<sep>"]
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID) == (0, 1, 2, 3, 4)


def test_min_count_keeps_frequent_words_and_maps_rare_ones_to_unk() -> None:
    vocab = Vocabulary.build(TRAIN, min_count=2)
    assert "red" in vocab and "car" in vocab and "the" in vocab
    assert "truck" not in vocab and "person" not in vocab
    ids = vocab.encode("the red truck")
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and ids[3] == UNK_ID
    # Most frequent first: "the" (6 times) gets the first id after the specials.
    assert vocab.words[5] == "the"


def test_same_sentences_give_the_same_ids() -> None:
    assert Vocabulary.build(TRAIN, 1).words == Vocabulary.build(list(TRAIN), 1).words


def test_encode_decode_round_trip_and_max_len() -> None:
    vocab = Vocabulary.build(TRAIN, min_count=1)
    assert vocab.decode(vocab.encode("The red car is gone.")) == "the red car is gone"
    capped = vocab.encode("the red car has left the parking lot", max_len=3)
    assert len(capped) == 5 and capped[-1] == EOS_ID
    # decode stops at <eos> and drops specials
    assert vocab.decode([BOS_ID, vocab.index["red"], EOS_ID, vocab.index["car"]]) == "red"
    assert vocab.decode([PAD_ID, vocab.index["car"], UNK_ID]) == "car"


def test_multi_sentence_targets_use_sep() -> None:
    vocab = Vocabulary.build(TRAIN, min_count=1)
    ids = vocab.encode_many(["the red car is gone", "", "the red truck moved"])
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and ids.count(SEP_ID) == 1
    assert vocab.decode_sentences(ids[1:]) == ["the red car is gone", "the red truck moved"]
    # cutting right after a separator never leaves a dangling <sep>
    assert vocab.encode_many(["red car", "red truck"], max_len=3)[-2] != SEP_ID


def test_to_dict_from_dict_round_trip_and_bad_input() -> None:
    vocab = Vocabulary.build(TRAIN, min_count=1)
    again = Vocabulary.from_dict(vocab.to_dict())
    assert again == vocab and again.counts == vocab.counts and again.min_count == 1
    with pytest.raises(ModelError, match="specials"):
        Vocabulary(["a", "b"])
    with pytest.raises(ModelError, match="words"):
        Vocabulary.from_dict({"tokens": []})
