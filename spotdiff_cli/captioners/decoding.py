"""Decoding shared by every learned captioner: greedy and beam search over a step function.

A model hands over a *step function* and its initial decoder state; decoding owns everything
else (the loop, length limits, which tokens may never be produced, beam bookkeeping)::

    step(tokens_so_far: LongTensor (N, t), state) -> (log_probs: FloatTensor (N, V), state)

``tokens_so_far`` starts as ``<bos>`` (N, 1) and grows by one column per step, so a transformer
can re-read the whole prefix while an LSTM just looks at the last column and its state. ``state``
is whatever the model needs between steps: a tensor, or a (nested) tuple / list / dict of tensors
whose first dimension is N, or None. Beam search reorders it along that dimension after every step
(``reorder_state``), so a model never writes beam code.

Greedy is what Spot-the-diff decodes with (§3.3: "we simply use greedy decoding"); beam search is
an option (``--beam``), with length normalisation so it does not favour short sentences.
Strategy objects in the manner of whisper's ``TokenDecoder``: ``GreedyDecoder``, ``BeamDecoder``;
``decode(...)`` picks one. Rules on what may come next are small filters in the manner of
whisper's ``LogitFilter``: :class:`RepetitionGuard` (``repetition_guard=n``) stops the loops a
model trained on other pictures falls into on real frames ("is is is bottom ... bottom").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID

StepFn = Callable[[torch.Tensor, Any], tuple[torch.Tensor, Any]]

# Never generated: <pad> and <bos> (they cannot appear inside a sentence). <unk> stays allowed by
# default because a model that has only ever seen rare words as <unk> is being honest.
DEFAULT_SUPPRESS: tuple[int, ...] = (PAD_ID, BOS_ID)


@dataclass(frozen=True)
class Hypothesis:
    """One decoded sequence: ``tokens`` without ``<bos>``/``<eos>``; ``log_prob`` is the summed
    log-probability including the ``<eos>`` step (when it ended); ``score`` the length-normalised
    value beam search ranked it by (= log_prob for greedy); ``finished`` is False when it was cut
    at ``max_len``."""

    tokens: list[int]
    log_prob: float
    score: float
    finished: bool


def reorder_state(state: Any, index: torch.Tensor) -> Any:
    """Select rows ``index`` (LongTensor (M,)) along dim 0 of every tensor in ``state``."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index.to(state.device))
    if isinstance(state, tuple):
        return tuple(reorder_state(s, index) for s in state)
    if isinstance(state, list):
        return [reorder_state(s, index) for s in state]
    if isinstance(state, dict):
        return {k: reorder_state(v, index) for k, v in state.items()}
    # Plain Python values (ints, strings, config) are shared by every row: leave them.
    return state


def length_penalty(length: int, alpha: float) -> float:
    """Divisor for a summed log-probability: ``length ** alpha`` (alpha 0 = raw sum, 1 = mean per
    token). Counted tokens include ``<eos>``, so an empty sentence still has length 1."""
    return max(1, length) ** alpha


class RepetitionGuard:
    """Forbid repetition inside one sentence: the word just written, and (``ngram`` >= 2) any word
    that would complete an ``ngram``-gram the sentence already holds.

    A "sentence" starts after ``<bos>`` or the last ``<sep>`` (a multi-sentence description may
    repeat "there is a" in its next sentence). ``<eos>`` is never forbidden, so a row can always
    end. ``ngram`` = 3 (the default models use) blocks "is is" and "in the bottom in the bottom"
    while leaving the templated phrasing of real captions alone (a sentence rarely repeats three
    words in a row); 1 forbids only the immediate repeat.
    """

    def __init__(self, ngram: int = 3) -> None:
        if ngram < 1:
            raise ValueError(
                f"the repetition guard needs an n-gram size of at least 1, got {ngram}"
            )
        self.ngram = ngram

    def banned(self, prefix: Sequence[int]) -> set[int]:
        """Word ids that may not follow ``prefix`` (the row's ids after ``<bos>``, no padding)."""
        start = max((i + 1 for i, t in enumerate(prefix) if t == SEP_ID), default=0)
        sentence = list(prefix[start:])
        if not sentence:
            return set()
        out = {sentence[-1]}
        n = self.ngram
        if n >= 2 and len(sentence) >= n - 1:
            tail = tuple(sentence[len(sentence) - n + 1 :])
            for i in range(len(sentence) - n + 1):
                if tuple(sentence[i : i + n - 1]) == tail:
                    out.add(sentence[i + n - 1])
        out.discard(EOS_ID)
        return out

    def apply(self, log_probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """log_probs: (N, V) of the next token; tokens: (N, t) so far, starting with ``<bos>``.
        Returns log_probs with the banned ids of each row at -inf (a copy when any is banned)."""
        rows: list[int] = []
        cols: list[int] = []
        for row, ids in enumerate(tokens[:, 1:].tolist()):
            ids = [i for i in ids if i != PAD_ID]
            for token in self.banned(ids):
                rows.append(row)
                cols.append(token)
        if rows:
            log_probs = log_probs.clone()
            log_probs[rows, cols] = -math.inf
        return log_probs


def _guard(ngram: int) -> RepetitionGuard | None:
    return RepetitionGuard(ngram) if ngram > 0 else None


def _suppress(
    log_probs: torch.Tensor, suppress: Sequence[int], min_len_reached: bool
) -> torch.Tensor:
    log_probs = log_probs.float().clone()
    if suppress:
        log_probs[:, list(suppress)] = -math.inf
    if not min_len_reached:
        log_probs[:, EOS_ID] = -math.inf
    return log_probs


class GreedyDecoder:
    """The most probable token at every step (Spot-the-diff §3.3)."""

    def __init__(
        self,
        max_len: int = 25,
        min_len: int = 1,
        suppress: Sequence[int] = DEFAULT_SUPPRESS,
        repetition_guard: int = 0,
    ) -> None:
        self.max_len, self.min_len, self.suppress = max_len, min_len, tuple(suppress)
        self.guard = _guard(repetition_guard)

    @torch.no_grad()
    def decode(
        self, step: StepFn, state: Any, batch_size: int, device: torch.device | str = "cpu"
    ) -> list[Hypothesis]:
        """Decode ``batch_size`` sequences; at most ``max_len`` tokens before ``<eos>``."""
        tokens = torch.full((batch_size, 1), BOS_ID, dtype=torch.long, device=device)
        total = torch.zeros(batch_size, device=device)
        done = torch.zeros(batch_size, dtype=torch.bool, device=device)
        lengths = torch.zeros(batch_size, dtype=torch.long, device=device)  # tokens incl. <eos>
        for t in range(self.max_len):
            log_probs, state = step(tokens, state)
            log_probs = _suppress(log_probs, self.suppress, t >= self.min_len)
            if self.guard is not None:
                log_probs = self.guard.apply(log_probs, tokens)
            best_lp, best = log_probs.max(dim=-1)
            best = torch.where(done, torch.full_like(best, PAD_ID), best)
            total = total + torch.where(done, torch.zeros_like(best_lp), best_lp)
            lengths = lengths + (~done).long()
            done = done | (best == EOS_ID)
            tokens = torch.cat([tokens, best[:, None]], dim=1)
            if bool(done.all()):
                break
        out = []
        for row in range(batch_size):
            seq = [int(i) for i in tokens[row, 1:].tolist()]
            finished = EOS_ID in seq
            seq = seq[: seq.index(EOS_ID)] if finished else [i for i in seq if i != PAD_ID]
            lp = float(total[row])
            out.append(Hypothesis(seq, lp, lp, finished))
        return out


class BeamDecoder:
    """Beam search with length normalisation: a finished hypothesis is ranked by
    ``log_prob / length ** alpha``. The ``beam`` best finished hypotheses are kept per item; an item
    is done when it has ``beam`` of them and its best live beam, normalised at the next length,
    cannot beat the worst kept one (exact for alpha = 0, where scores only fall; the usual heuristic
    otherwise). At ``max_len`` every live beam is closed with ``<eos>``."""

    def __init__(
        self,
        beam: int = 3,
        max_len: int = 25,
        alpha: float = 1.0,
        min_len: int = 1,
        suppress: Sequence[int] = DEFAULT_SUPPRESS,
        repetition_guard: int = 0,
    ) -> None:
        if beam < 1:
            raise ValueError(f"beam size must be at least 1, got {beam}")
        self.beam, self.max_len, self.alpha, self.min_len = beam, max_len, alpha, min_len
        self.suppress = tuple(suppress)
        self.guard = _guard(repetition_guard)

    @torch.no_grad()
    def decode(
        self, step: StepFn, state: Any, batch_size: int, device: torch.device | str = "cpu"
    ) -> list[Hypothesis]:
        """``state`` is for ``batch_size`` rows; it is expanded to ``batch_size * beam`` rows here
        (row ``b * beam + j`` is beam j of item b)."""
        k = self.beam
        rows = torch.arange(batch_size, device=device).repeat_interleave(k)
        state = reorder_state(state, rows)
        tokens = torch.full((batch_size * k, 1), BOS_ID, dtype=torch.long, device=device)
        # Only beam 0 is live at the start; the others would be copies of it.
        scores = torch.full((batch_size, k), -math.inf, device=device)
        scores[:, 0] = 0.0
        finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
        done = [False] * batch_size
        for t in range(self.max_len + 1):
            log_probs, state = step(tokens, state)
            log_probs = _suppress(log_probs, self.suppress, t >= self.min_len)
            if self.guard is not None:
                log_probs = self.guard.apply(log_probs, tokens)
            if t == self.max_len:
                # Out of room: close every live beam with <eos> where it can, else as unfinished.
                for b in range(batch_size):
                    if done[b]:
                        continue
                    for j in range(k):
                        total = float(scores[b, j])
                        if math.isinf(total):
                            continue
                        seq = [int(i) for i in tokens[b * k + j, 1:].tolist()]
                        eos_lp = float(log_probs[b * k + j, EOS_ID])
                        if math.isfinite(eos_lp):
                            self._keep(finished[b], self._hyp(seq, total + eos_lp, True))
                        else:
                            self._keep(finished[b], self._hyp(seq, total, False))
                break
            vocab = log_probs.shape[-1]
            candidates = (scores.view(-1, 1) + log_probs).view(batch_size, k * vocab)
            # 2k candidates: enough to keep k live ones even if k of them end in <eos>.
            top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=-1)
            next_rows, next_tokens, next_scores = [], [], []
            for b in range(batch_size):
                live = 0
                for cand_score, cand in zip(top_scores[b].tolist(), top_index[b].tolist()):
                    if math.isinf(cand_score):
                        break
                    j, token = divmod(cand, vocab)
                    if token == EOS_ID:
                        if not done[b]:
                            seq = [int(i) for i in tokens[b * k + j, 1:].tolist()]
                            self._keep(finished[b], self._hyp(seq, cand_score, True))
                        continue
                    next_rows.append(b * k + j)
                    next_tokens.append(token)
                    next_scores.append(cand_score)
                    live += 1
                    if live == k:
                        break
                while live < k:  # fewer than k live candidates: pad with dead beams
                    next_rows.append(b * k)
                    next_tokens.append(PAD_ID)
                    next_scores.append(-math.inf)
                    live += 1
            index = torch.tensor(next_rows, dtype=torch.long, device=device)
            tokens = torch.cat(
                [
                    tokens.index_select(0, index),
                    torch.tensor(next_tokens, dtype=torch.long, device=device)[:, None],
                ],
                dim=1,
            )
            scores = torch.tensor(next_scores, device=device).view(batch_size, k)
            state = reorder_state(state, index)
            for b in range(batch_size):
                if not done[b] and len(finished[b]) >= k:
                    best_live = float(scores[b].max())
                    worst_kept = min(h.score for h in finished[b])
                    done[b] = best_live / length_penalty(t + 2, self.alpha) <= worst_kept
            if all(done):
                break
        return [
            max(f, key=lambda h: h.score) if f else Hypothesis([], 0.0, 0.0, False)
            for f in finished
        ]

    def _keep(self, kept: list[Hypothesis], hyp: Hypothesis) -> None:
        """Add ``hyp`` to an item's finished list, keeping the ``beam`` best by score."""
        kept.append(hyp)
        if len(kept) > self.beam:
            kept.remove(min(kept, key=lambda h: h.score))

    def _hyp(self, seq: list[int], log_prob: float, ended: bool) -> Hypothesis:
        return Hypothesis(
            seq, log_prob, log_prob / length_penalty(len(seq) + int(ended), self.alpha), ended
        )


def decode(
    step: StepFn,
    state: Any,
    batch_size: int,
    *,
    beam: int = 1,
    max_len: int = 25,
    alpha: float = 1.0,
    min_len: int = 1,
    suppress: Sequence[int] = DEFAULT_SUPPRESS,
    repetition_guard: int = 0,
    device: torch.device | str = "cpu",
) -> list[Hypothesis]:
    """Greedy (``beam == 1``) or beam search; one ``Hypothesis`` per batch row.

    Args:
        step: ``(tokens (N, t) long, state) -> (log_probs (N, V), state)``.
        state: the decoder state for ``batch_size`` rows (see module docstring).
        max_len: most tokens before ``<eos>`` (Spot-the-diff sentences: 10.96 words on average,
            5 % longer than 20; 25 leaves room).
        alpha: beam length normalisation exponent (0 = none, 1 = mean log-prob per token).
        min_len: ``<eos>`` is forbidden before this many tokens (1: no empty sentences).
        suppress: token ids never produced (default ``<pad>``, ``<bos>``).
        repetition_guard: 0 = off; n >= 1 = :class:`RepetitionGuard` (n): never the same word
            twice in a row, and no n-gram twice within a sentence.
    """
    if beam <= 1:
        return GreedyDecoder(max_len, min_len, suppress, repetition_guard).decode(
            step, state, batch_size, device
        )
    return BeamDecoder(beam, max_len, alpha, min_len, suppress, repetition_guard).decode(
        step, state, batch_size, device
    )
