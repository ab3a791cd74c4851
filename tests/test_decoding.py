"""Shared decoding over a model's step function: greedy, beam search with length normalisation,
length limits, suppressed tokens, and correct state reordering inside the beam."""

from __future__ import annotations

import math

import torch

from spotdiff_cli.captioners.decoding import decode, reorder_state
from spotdiff_cli.captioners.vocab import BOS_ID, EOS_ID, PAD_ID

V = 8  # ids 5, 6, 7 are "words"
A, B, C = 5, 6, 7


def table_step(table: dict[tuple[int, ...], dict[int, float]]):
    """A step function from a table: prefix (without <bos>) -> {token: prob}; unknown prefixes
    end the sentence. Returns log-probs (N, V)."""

    def step(tokens: torch.Tensor, state):
        rows = []
        for row in tokens.tolist():
            probs = table.get(tuple(row[1:]), {EOS_ID: 1.0})
            lp = torch.full((V,), -1e9)
            for tok, p in probs.items():
                lp[tok] = math.log(p)
            rows.append(lp)
        return torch.stack(rows), state

    return step


# Greedy takes A (0.6) then is stuck with 0.34 per continuation; B (0.4) then C (0.95) ends with
# total probability 0.4*0.95 = 0.38 > 0.6*0.34 = 0.204: the classic case beam search fixes.
TRAP = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.34, C: 0.33, EOS_ID: 0.33},
    (A, A): {EOS_ID: 1.0},
    (B,): {C: 0.95, EOS_ID: 0.05},
    (B, C): {EOS_ID: 1.0},
}


def test_greedy_follows_the_most_probable_token() -> None:
    hyp = decode(table_step(TRAP), None, 1, beam=1)[0]
    assert hyp.tokens == [A, A] and hyp.finished
    assert math.isclose(hyp.log_prob, math.log(0.6 * 0.34), rel_tol=1e-5)


def test_beam_finds_the_better_sentence_greedy_misses() -> None:
    hyp = decode(table_step(TRAP), None, 1, beam=3, alpha=0.0)[0]
    assert hyp.tokens == [B, C]
    assert math.isclose(hyp.log_prob, math.log(0.4 * 0.95), rel_tol=1e-5)


def test_batch_rows_are_decoded_independently() -> None:
    hyps = decode(table_step(TRAP), None, 3, beam=2, alpha=0.0)
    assert [h.tokens for h in hyps] == [[B, C]] * 3


def test_max_len_cuts_a_sentence_that_never_ends() -> None:
    forever = {}
    prefix: tuple[int, ...] = ()
    for _ in range(40):
        forever[prefix] = {A: 0.9, EOS_ID: 0.1}
        prefix = prefix + (A,)
    greedy = decode(table_step(forever), None, 2, beam=1, max_len=5)
    assert all(len(h.tokens) == 5 and not h.finished for h in greedy)
    beam = decode(table_step(forever), None, 1, beam=3, max_len=5, alpha=1.0)[0]
    assert len(beam.tokens) <= 5


def test_length_normalisation_changes_the_winner() -> None:
    # Short: "A <eos>" = 0.5 * 1.0. Long: "B C C C <eos>" = 0.5 * 0.9^3 * 1.0 (better per token).
    table = {
        (): {A: 0.5, B: 0.5},
        (A,): {EOS_ID: 1.0},
        (B,): {C: 0.9, EOS_ID: 0.1},
        (B, C): {C: 0.9, EOS_ID: 0.1},
        (B, C, C): {C: 0.9, EOS_ID: 0.1},
        (B, C, C, C): {EOS_ID: 1.0},
    }
    raw = decode(table_step(table), None, 1, beam=4, alpha=0.0)[0]
    normalised = decode(table_step(table), None, 1, beam=4, alpha=1.0)[0]
    assert raw.tokens == [A]
    assert normalised.tokens == [B, C, C, C]


def test_pad_and_bos_are_never_produced_and_min_len_holds() -> None:
    table = {(): {PAD_ID: 0.5, BOS_ID: 0.3, EOS_ID: 0.15, A: 0.05}, (A,): {EOS_ID: 1.0}}
    for beam in (1, 3):
        hyp = decode(table_step(table), None, 1, beam=beam, min_len=1)[0]
        assert hyp.tokens == [A]


def test_beam_reorders_the_state_with_the_beams() -> None:
    """The state counts the A's each row has produced so far; the step checks it against
    ``tokens_so_far``, which holds only if beam search moves every state row with its beam."""

    def step(tokens: torch.Tensor, state: torch.Tensor):
        if tokens.shape[1] > 1:  # count the token chosen at the previous step
            state = state + (tokens[:, -1] == A).long()
        assert torch.equal(state, (tokens == A).sum(dim=1)), "state was not reordered with its beam"
        lp = torch.full((tokens.shape[0], V), -1e9)
        lp[:, A], lp[:, B] = math.log(0.45), math.log(0.35)
        lp[:, EOS_ID] = math.log(0.2) if tokens.shape[1] > 3 else -1e9
        return lp, state

    hyps = decode(step, torch.zeros(2, dtype=torch.long), 2, beam=3, max_len=6)
    assert all(len(h.tokens) >= 3 for h in hyps)


def test_reorder_state_handles_nested_structures() -> None:
    state = (
        torch.arange(3),
        [torch.arange(3) * 10],
        {"h": torch.arange(3)[:, None]},
        "config",
        None,
    )
    out = reorder_state(state, torch.tensor([2, 2, 0]))
    assert out[0].tolist() == [2, 2, 0] and out[1][0].tolist() == [20, 20, 0]
    assert out[2]["h"][:, 0].tolist() == [2, 2, 0] and out[3] == "config" and out[4] is None


# --------------------------------------------------------------------------------------------------
# the repetition guard


def _stuck_step(tokens: torch.Tensor, state):
    """A model stuck on A: A 0.7, B 0.2, <eos> 0.1 after every prefix (what "is is is" is)."""
    lp = torch.full((tokens.shape[0], V), -1e9)
    lp[:, A], lp[:, B], lp[:, EOS_ID] = math.log(0.7), math.log(0.2), math.log(0.1)
    return lp, state


def test_without_the_guard_a_stuck_model_repeats_to_max_len() -> None:
    hyp = decode(_stuck_step, None, 1, beam=1, max_len=6)[0]
    assert hyp.tokens == [A] * 6 and not hyp.finished


def test_repetition_guard_stops_is_is_is() -> None:
    for beam in (1, 3):
        hyp = decode(_stuck_step, None, 2, beam=beam, max_len=12, repetition_guard=3)[0]
        # Never the same word twice in a row; "A B" may come back once ("A B A"), but the 3-gram
        # "A B A" ... is refused the second time: after "A B A B" only <eos> is left.
        assert all(x != y for x, y in zip(hyp.tokens, hyp.tokens[1:])), hyp.tokens
        trigrams = [tuple(hyp.tokens[i : i + 3]) for i in range(len(hyp.tokens) - 2)]
        assert len(trigrams) == len(set(trigrams)) and hyp.finished
    assert decode(_stuck_step, None, 1, repetition_guard=3)[0].tokens == [A, B, A, B]
    # n = 1: only the immediate repeat is refused.
    assert decode(_stuck_step, None, 1, max_len=5, repetition_guard=1)[0].tokens == [A, B, A, B, A]


def test_repetition_guard_rules() -> None:
    from spotdiff_cli.captioners.decoding import RepetitionGuard
    from spotdiff_cli.captioners.vocab import SEP_ID

    guard = RepetitionGuard(3)
    assert guard.banned([]) == set()
    assert guard.banned([A]) == {A}
    assert guard.banned([A, B, C, A, B]) == {B, C}  # "A B" was followed by C: no second "A B C"
    # A new sentence after <sep> may say what the last one said ("there is a ... <sep> there is a").
    assert guard.banned([A, B, C, SEP_ID, A, B]) == {B}
    assert EOS_ID not in guard.banned([EOS_ID])
    log_probs = torch.zeros(2, V)
    tokens = torch.tensor([[BOS_ID, A, B, C, A, B], [BOS_ID, C, PAD_ID, PAD_ID, PAD_ID, PAD_ID]])
    out = guard.apply(log_probs, tokens)
    assert torch.isinf(out[0, [B, C]]).all() and torch.isfinite(out[0, [A, EOS_ID]]).all()
    assert torch.isinf(out[1, C]) and int(torch.isinf(out[1]).sum()) == 1
