"""``duda``: Dual Dynamic Attention (Park, Darrell & Rohrbach, "Robust Change Captioning", ICCV
2019), the primary network of ``papers/duda-aux-composed-retrieval-2021.txt`` (§3).

Three parts, on the cached, frozen backbone grids the Spot-the-diff models get (``before``,
``after``: (B, C, h, w)):

1. **Dual attention** (:class:`DualAttention`). With X_diff = X_aft − X_bef, one small conv net
   (shared by both sides) maps [X_bef; X_diff] and [X_aft; X_diff] to one attention map each,
   ``a = σ(conv2(ReLU(norm(conv1(·)))))``, and pools ``l_bef = Σ a_bef ⊙ X_bef``,
   ``l_aft = Σ a_aft ⊙ X_aft``. The maps are sigmoid gates in (0, 1) per cell (the paper's
   choice, not a softmax): a distractor pair can switch both off, a change lights up its cells
   in the image where it is visible, which is what lets DUDA tell a moved camera from a moved
   object.
2. **Dynamic speaker** (:class:`DynamicSpeaker`). The three features ``l_bef``,
   ``l_diff = l_aft − l_bef`` and ``l_aft`` are fused once (``v = ReLU(W [l_bef; l_diff; l_aft])``).
   Per word, an *attention LSTM* reads ``[v; h_cap(t−1)]`` and chooses a soft weighting
   ``α_t = softmax(W_α h_att(t))`` over the three features; the *caption LSTM* reads
   ``[E w(t−1); Σ_i α_t,i l_i]`` and predicts the next word. So "the red car is gone" can look at
   the before image for "red car" and at the difference for "gone".
3. **Loss**: the caption cross-entropy per target token, plus the two regularisers the authors'
   released training script adds (``train.py`` of Seth-Park/RobustChangeCaptioning): an L1
   penalty on the attention maps, ``attention_l1 × (Σ a_bef + Σ a_aft) / 2`` averaged over pairs
   (2.5e-3 there: sparse maps that pick the changed cells), and an entropy term on the dynamic
   weights, ``− entropy_weight × H(α)`` summed over a sentence's words and averaged over
   sentences (a flag defaulting to 0 there: off by default here too). Both are implemented and
   reported by name in ``loss(batch)["losses"]`` (``attention_l1``, ``negative_entropy``).

Values the papers leave open, and what is chosen here (defaults = the released code's
``configs/config.py`` and ``configs/dynamic/dynamic.yaml`` where it has one):

- coordinates: two channels (x, y in [−1, 1], ``linspace`` over the grid) are appended to every
  cell before anything else, as the released code's ``AddSpatialInfo`` does; ``coordinates:
  false`` leaves them out. Words such as "bottom left" need them.
- pooling: the paper sums over the grid; here the sum is divided by the number of cells, so the
  pooled vectors keep one cell's scale on a 7 × 7 or a 14 × 14 grid (a constant factor the next
  linear layer absorbs). The L1 penalty is on the unscaled sum, as in the released code.
- attention net: a 1 × 1 conv to ``attention_size`` (128), GroupNorm (32 groups, fewer when the
  size does not divide), dropout ``attention_dropout`` (0.5), ReLU, a 1 × 1 conv to one channel.
- speaker: word embeddings ``embed_size`` (300) with ReLU and dropout as released, fused feature
  ``fusion_size`` (512), both LSTMs ``hidden_size`` (512), dropout ``dropout`` (0.5) on the
  embeddings, the fused feature and before the output layer; states start at zero.
- the released code's change-type classifier (``fc1``) gets no loss in its training script and is
  left out; scheduled sampling is off there by default and is not implemented.
- decoding: greedy (§4 of the DUDA paper), beam as an option, and the shared repetition guard
  (``repetition_guard: 3``), which covers the released decoder's "never the word just written"
  constraint.

DUDA writes one sentence per pair (CLEVR-Change has one per pair). On Spot-the-diff-style data
every gold sentence of a pair is a training target of its own, as for ``capt``; under the
multi-sentence protocol it writes that one sentence.

Batches follow ``docs/training-interfaces.md`` (``before``/``after`` (B, C, h, w), ``tokens``
(B, S, T), ``sentence_valid`` (B, S)); cluster masks are not used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from ..direction import check_direction_settings, direction_cross_entropy, taught
from ..learned import PAD, Batch, Generated, GradientCaptioner, run_decoder
from ..vocab import Vocabulary

SpeakerState = tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]
"""(h_att, c_att, h_cap, c_cap (N, H); the three features l_bef, l_diff, l_aft already multiplied
by the caption LSTM's input weights (N, 3, 4H); the fused v multiplied by the attention LSTM's
input weights, biases included (N, 4H)). Every tensor has the decoded rows N first, so beam
search reorders it with ``index_select``."""


def lstm_cell(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """The LSTM update from pre-activations ``gates`` (N, 4H) in ``nn.LSTMCell``'s order
    (input, forget, cell, output) and the cell state c (N, H) -> (h, c)."""
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def with_coordinates(grid: Tensor) -> Tensor:
    """(B, C, h, w) -> (B, C + 2, h, w): x and y of each cell, in [−1, 1], appended."""
    b, _, h, w = grid.shape
    ys = torch.linspace(-1.0, 1.0, h, device=grid.device, dtype=grid.dtype)
    xs = torch.linspace(-1.0, 1.0, w, device=grid.device, dtype=grid.dtype)
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")
    coords = torch.stack([xx, yy])[None].expand(b, 2, h, w)
    return torch.cat([grid, coords], dim=1)


class Attended(NamedTuple):
    """What :class:`DualAttention` computes for B pairs.

    l_bef, l_aft: (B, D) attended features (D = C, + 2 with coordinates);
    att_bef, att_aft: (B, h, w) attention maps, each cell in (0, 1).
    """

    l_bef: Tensor
    l_aft: Tensor
    att_bef: Tensor
    att_aft: Tensor


class DualAttention(nn.Module):
    """Where the change is, in each image: a_side = σ(conv2(ReLU(norm(conv1([X_side; X_diff]))))).

    Args:
        channels: D, the channels of a grid cell (with the coordinates when they are added).
        attention_size: width of the hidden 1 × 1 conv.
        dropout: after the normalisation (the released code's 0.5).
    """

    def __init__(self, channels: int, attention_size: int, dropout: float) -> None:
        super().__init__()
        groups = math.gcd(32, attention_size)
        self.embed = nn.Sequential(
            nn.Conv2d(2 * channels, attention_size, kernel_size=1),
            nn.GroupNorm(groups, attention_size),
            nn.Dropout(dropout),
            nn.ReLU(),
        )
        self.score = nn.Conv2d(attention_size, 1, kernel_size=1)

    def gate(self, side: Tensor, diff: Tensor) -> Tensor:
        """side, diff: (B, D, h, w) -> attention map (B, h, w) in (0, 1)."""
        return torch.sigmoid(self.score(self.embed(torch.cat([side, diff], dim=1)))).squeeze(1)

    def forward(self, before: Tensor, after: Tensor) -> Attended:
        """before, after: (B, D, h, w) -> :class:`Attended`."""
        diff = after - before
        att_bef = self.gate(before, diff)
        att_aft = self.gate(after, diff)
        # Σ a ⊙ X over the grid, divided by the cell count (module docstring: pooling).
        l_bef = (before * att_bef[:, None]).mean(dim=(2, 3))
        l_aft = (after * att_aft[:, None]).mean(dim=(2, 3))
        return Attended(l_bef, l_aft, att_bef, att_aft)


class DynamicSpeaker(nn.Module):
    """Attention LSTM choosing among (l_bef, l_diff, l_aft) per word, then a caption LSTM.

    Args:
        vocab_size: output classes (the vocabulary, specials included).
        feature_size: D of l_bef / l_aft.
        embed_size, fusion_size, hidden_size: word embedding, fused feature v, both LSTM states.
        dropout: on word embeddings, v and the caption LSTM's output.
    """

    def __init__(
        self,
        vocab_size: int,
        feature_size: int,
        embed_size: int,
        fusion_size: int,
        hidden_size: int,
        dropout: float,
        direction_size: int = 0,
    ) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=PAD)
        self.fuse = nn.Linear(3 * feature_size, fusion_size)
        self.att_lstm = nn.LSTMCell(fusion_size + hidden_size, hidden_size)
        self.choose = nn.Linear(hidden_size, 3)
        self.cap_lstm = nn.LSTMCell(embed_size + feature_size, hidden_size)
        self.out = nn.Linear(hidden_size, vocab_size)
        self.drop = nn.Dropout(dropout)
        # The caption LSTM's weights for a per-pair input read at every word (the direction
        # head's answer, DUDACaptioner); none unless asked, so older checkpoints load as saved.
        self.direction_in = (
            nn.Linear(direction_size, 4 * hidden_size, bias=False) if direction_size else None
        )

    def start(self, l_bef: Tensor, l_aft: Tensor, direction: Tensor | None = None) -> SpeakerState:
        """The state before the first word. l_bef, l_aft: (N, D) of each decoded row's pair;
        direction: (N, direction_size) an extra input of the caption LSTM at every word (only
        with ``direction_size``).

        Both LSTMs' inputs are linear in what stays fixed over a sentence: the attention LSTM
        reads [v; h_cap] and the caption LSTM reads [E w; Σ_i α_i l_i], whose weight times
        Σ_i α_i l_i is Σ_i α_i (W l_i). So W v and the three W l_i are computed here once, and a
        step only mixes three vectors: the same function as ``nn.LSTMCell`` on the concatenated
        input (``tests/test_duda.py`` checks it), at a fraction of the cost per word. The
        direction's part W_d d is added to each of the three W l_i: the α of a step sum to 1,
        so every step reads it once, as an LSTM reading [E w; Σ_i α_i l_i; d] would.
        """
        e = self.embed.embedding_dim
        features = torch.stack([l_bef, l_aft - l_bef, l_aft], dim=1)  # (N, 3, D)
        fused = self.drop(self.fused(features))  # (N, E)
        att_in = self.att_lstm.weight_ih[:, : fused.shape[-1]]
        att_fixed = fused @ att_in.T + self.att_lstm.bias_ih + self.att_lstm.bias_hh
        cap_features = features @ self.cap_lstm.weight_ih[:, e:].T  # (N, 3, 4H)
        if (direction is None) != (self.direction_in is None):
            raise ValueError("direction is given exactly when the speaker has direction_size")
        if self.direction_in is not None:
            cap_features = cap_features + self.direction_in(direction)[:, None]
        zeros = l_bef.new_zeros(l_bef.shape[0], self.hidden_size)
        return (zeros, zeros, zeros, zeros, cap_features, att_fixed)

    def fused(self, features: Tensor) -> Tensor:
        """v = ReLU(W [l_bef; l_diff; l_aft]) before dropout. features: (N, 3, D) -> (N, E)."""
        return torch.relu(self.fuse(features.flatten(1)))

    def step(self, words: Tensor, state: SpeakerState) -> tuple[Tensor, SpeakerState, Tensor]:
        """One word. words: (N,) int64 -> (log_probs (N, V), next state, weights α (N, 3))."""
        h_att, c_att, h_cap, c_cap, cap_features, att_fixed = state
        att, cap = self.att_lstm, self.cap_lstm
        # Attention LSTM on [v; h_cap(t-1)]: v's part is in att_fixed.
        e_v = att.weight_ih.shape[1] - self.hidden_size
        gates = att_fixed + h_cap @ att.weight_ih[:, e_v:].T + h_att @ att.weight_hh.T
        h_att, c_att = lstm_cell(gates, c_att)
        weights = torch.softmax(self.choose(h_att), dim=-1)  # α over (l_bef, l_diff, l_aft)
        # Caption LSTM on [E w(t-1); Σ_i α_i l_i]: the features' part is Σ_i α_i (W l_i).
        word = self.drop(torch.relu(self.embed(words)))
        e = self.embed.embedding_dim
        gates = (
            torch.bmm(weights[:, None], cap_features).squeeze(1)
            + word @ cap.weight_ih[:, :e].T
            + h_cap @ cap.weight_hh.T
            + cap.bias_ih
            + cap.bias_hh
        )
        h_cap, c_cap = lstm_cell(gates, c_cap)
        logits = self.out(self.drop(h_cap))
        return (
            torch.log_softmax(logits, dim=-1),
            (h_att, c_att, h_cap, c_cap, cap_features, att_fixed),
            weights,
        )

    def decode_step(self, tokens: Tensor, state: SpeakerState) -> tuple[Tensor, SpeakerState]:
        """The step function of ``captioners/decoding.py``: the LSTMs read only the last token."""
        log_probs, state, _ = self.step(tokens[:, -1], state)
        return log_probs, state

    def distributions(self, tokens: Tensor, state: SpeakerState) -> tuple[Tensor, Tensor]:
        """Teacher forcing, every step's whole distribution. tokens: (N, T) ``<bos> ... <eos>
        <pad>...`` -> (log p over the vocabulary at each step (N, T-1, V), weights α (N, T-1, 3)).
        Step t reads token t and predicts token t + 1 (DUDA+AUX eq. 3's P is its exp)."""
        logp, weights = [], []
        for t in range(tokens.shape[1] - 1):
            log_probs, state, alpha = self.step(tokens[:, t], state)
            logp.append(log_probs)
            weights.append(alpha)
        if not logp:
            n = tokens.shape[0]
            return (
                tokens.new_zeros((n, 0, self.out.out_features), dtype=torch.float),
                tokens.new_zeros((n, 0, 3), dtype=torch.float),
            )
        return torch.stack(logp, dim=1), torch.stack(weights, dim=1)

    def score(self, tokens: Tensor, state: SpeakerState) -> tuple[Tensor, Tensor, Tensor]:
        """Teacher forcing. tokens: (N, T) ``<bos> ... <eos> <pad>...`` -> (log p of each target
        token (N, T-1), 0 at padding; target mask (N, T-1) bool; weights α (N, T-1, 3))."""
        log_probs, weights = self.distributions(tokens, state)
        targets = tokens[:, 1:]
        target_mask = targets != PAD
        token_logp = log_probs.gather(2, targets[..., None]).squeeze(2)
        return token_logp * target_mask, target_mask, weights


class CaptionTerms(NamedTuple):
    """The parts of DUDA's loss for N gold sentences (:meth:`DUDACaptioner.caption_terms`).

    log_probs: (N, T-1, V) each step's distribution; target_mask: (N, T-1) real target tokens;
    nll: summed NLL of the targets; n_tokens: their count; caption: nll / n_tokens;
    attention_l1: Σ over cells of both maps, mean over the maps and the attended rows;
    entropy: H(α) per word summed over a sentence, mean over the sentences.
    """

    log_probs: Tensor
    target_mask: Tensor
    nll: Tensor
    n_tokens: int
    caption: Tensor
    attention_l1: Tensor
    entropy: Tensor


class DUDACaptioner(GradientCaptioner):
    """``duda``: dual attention + dynamic speaker (module docstring).

    Config: ``channels``, ``grid`` ([h, w]), ``backbone``, ``input_size``, ``coordinates``,
    ``attention_size``, ``attention_dropout``, ``embed_size``, ``fusion_size``, ``hidden_size``,
    ``dropout``, ``attention_l1``, ``entropy_weight``, ``repetition_guard``; not in the paper
    (issue 24, off by default): ``direction_weight`` (a head on v trained to tell an arrival from
    a departure, :meth:`direction_loss`) and ``direction_to_speaker`` (its answer an input of
    the caption LSTM at every word, :meth:`start_speaker`).
    """

    name: ClassVar[str] = "duda"

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        c = self.config
        feature_size = int(c["channels"]) + (2 if c["coordinates"] else 0)
        self.attention = DualAttention(
            feature_size, int(c["attention_size"]), float(c["attention_dropout"])
        )
        self.speaker = DynamicSpeaker(
            self.vocab_size,
            feature_size,
            int(c["embed_size"]),
            int(c["fusion_size"]),
            int(c["hidden_size"]),
            float(c["dropout"]),
            direction_size=2 if c.get("direction_to_speaker") else 0,
        )
        # arrival vs departure read linearly off v (DUDACaptioner.direction_loss); only when asked,
        # so checkpoints without it load as they were saved
        self.direction_head = (
            nn.Linear(int(c["fusion_size"]), 2) if float(c.get("direction_weight", 0)) else None
        )
        check_direction_settings(
            self.direction_head is not None, bool(c.get("direction_to_speaker"))
        )

    def grids(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """(before, after) (B, D, h, w) of a prepared batch as the model reads them: float, with
        the coordinate channels when the config asks for them."""
        before, after = batch["before"].float(), batch["after"].float()
        if self.config["coordinates"]:
            before, after = with_coordinates(before), with_coordinates(after)
        return before, after

    def attend(self, batch: Batch) -> Attended:
        """The dual attention of the batch's pairs (a prepared batch: tensors on this device)."""
        return self.attention(*self.grids(batch))

    def _targets(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """(pair index (N,), tokens (N, T)) of every gold sentence in the batch."""
        pair, sent = torch.nonzero(batch["sentence_valid"], as_tuple=True)
        return pair, batch["tokens"][pair, sent]

    def direction_logits(self, attended: Attended) -> Tensor:
        """(B, 2) departure / arrival logits of the direction head, from the fused feature v the
        speaker's attention LSTM reads (without its dropout). Only with direction_weight > 0."""
        features = torch.stack(
            [attended.l_bef, attended.l_aft - attended.l_bef, attended.l_aft], dim=1
        )
        return self.direction_head(self.speaker.fused(features))

    def start_speaker(
        self, attended: Attended, rows: Tensor | None = None, known: Tensor | None = None
    ) -> SpeakerState:
        """The speaker's state before the first word of each of ``rows`` (all when None) of
        ``attended``, handed the direction head's probabilities when the config says so.
        ``known``: per row, the direction the data says (>= 0) or -1: where it is said, the
        speaker reads it one-hot instead of the head's answer (``direction_teacher``)."""
        if rows is not None:
            attended = Attended(*(part[rows] for part in attended))
        direction = None
        if self.speaker.direction_in is not None:
            direction = taught(torch.softmax(self.direction_logits(attended), dim=-1), known)
        return self.speaker.start(attended.l_bef, attended.l_aft, direction)

    def taught_direction(self, batch: Batch, rows: Tensor) -> Tensor | None:
        """The known direction of each sentence's pair (``rows`` (N,) into the batch) when the
        speaker is taught with it (training with ``direction_teacher``), else None."""
        if not (self.training and self.config.get("direction_teacher")):
            return None
        return batch["direction"].to(rows.device)[rows]

    def caption_terms(
        self, attended: Attended, rows: Tensor, tokens: Tensor, known: Tensor | None = None
    ) -> CaptionTerms:
        """DUDA's loss parts (:class:`CaptionTerms`) for gold sentences ``tokens`` (N, T), sentence
        i spoken about row ``rows[i]`` of ``attended`` (``known``: see :meth:`start_speaker`)."""
        state = self.start_speaker(attended, rows, known)
        log_probs, weights = self.speaker.distributions(tokens, state)
        targets = tokens[:, 1:]
        target_mask = targets != PAD
        token_logp = log_probs.gather(2, targets[..., None]).squeeze(2) * target_mask
        nll = -token_logp.sum()
        n_tokens = int(target_mask.sum())
        # L1 of the maps: Σ over cells, mean over the two maps and the pairs (released train.py).
        l1 = (attended.att_bef.flatten(1).sum(1) + attended.att_aft.flatten(1).sum(1)).mean() / 2
        # Entropy of α per word (padding excluded), summed over a sentence, mean over sentences.
        entropy = -(weights * torch.log(weights.clamp_min(1e-12))).sum(-1)
        entropy = (entropy * target_mask).sum() / max(1, tokens.shape[0])
        return CaptionTerms(
            log_probs, target_mask, nll, n_tokens, nll / max(1, n_tokens), l1, entropy
        )

    def loss(self, batch: Batch) -> dict[str, Any]:
        """Caption NLL per target token + attention_l1 × L1 − entropy_weight × H (module
        docstring), + direction_weight × the direction loss when set; ``nll`` is the caption
        NLL alone (perplexity)."""
        batch = self._prepare(batch)
        rows, tokens = self._targets(batch)
        attended = self.attend(batch)
        others = {}
        if self.direction_head is not None:
            weight = float(self.config["direction_weight"])
            others["direction"] = (weight, self.direction_loss(attended, batch["direction"]))
        terms = self.caption_terms(attended, rows, tokens, self.taught_direction(batch, rows))
        return self.loss_output(terms, **others)

    def direction_loss(self, attended: Attended, direction: Tensor) -> Tensor:
        """Cross-entropy of arrival (1) vs departure (0) from the fused feature v the speaker's
        attention LSTM reads (without its dropout), over the pairs whose ``direction`` (B,) is
        known (>= 0); 0 when none is. Why: a linear probe on the gated grids tells the two apart
        on real frames (docs/results.md) while the speaker, trained on captions alone, reads
        every real arrival as a departure; this asks v itself to carry the difference."""
        return direction_cross_entropy(
            direction,
            lambda known: self.direction_logits(Attended(*(part[known] for part in attended))),
            attended.l_bef,
        )

    def loss_output(
        self, terms: CaptionTerms, caption_weight: float = 1.0, **others: tuple[float, Tensor]
    ) -> dict[str, Any]:
        """``loss``'s dict from :class:`CaptionTerms`: ``loss`` = caption_weight × caption +
        Σ weight × other (``others``: name -> (weight, scalar loss), duda-aux's ``aux``) +
        attention_l1 × L1 − entropy_weight × H; every part named in ``losses``."""
        loss = (
            caption_weight * terms.caption
            + sum(weight * value for weight, value in others.values())
            + float(self.config["attention_l1"]) * terms.attention_l1
            - float(self.config["entropy_weight"]) * terms.entropy
        )
        return {
            "loss": loss,
            "nll": terms.nll.detach(),
            "n_tokens": terms.n_tokens,
            # The named objectives a recipe's `objectives` may weight (train/recipes.py).
            "losses": {
                "caption": terms.caption,
                **{name: value for name, (_, value) in others.items()},
                "attention_l1": terms.attention_l1,
                "negative_entropy": -terms.entropy,
            },
        }

    def speaker_weights(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """(α (N, T-1, 3), target mask (N, T-1)) of the dynamic speaker over every gold sentence
        of the batch, teacher-forced in eval mode: which of (l_bef, l_diff, l_aft) each word used."""
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                batch = self._prepare(batch)
                attended = self.attend(batch)
                rows, tokens = self._targets(batch)
                state = self.start_speaker(attended, rows)
                _, mask, weights = self.speaker.score(tokens, state)
        finally:
            self.train(was_training)
        return weights, mask

    def _generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int,
        max_len: int,
        num_sentences: Sequence[int] | None,
    ) -> list[list[Generated]]:
        attended = self.attend(batch)
        state = self.start_speaker(attended)
        n = attended.l_bef.shape[0]
        ids = run_decoder(
            self.speaker.decode_step, state, n, beam, max_len, self.device, self.repetition_guard
        )
        return [[Generated(self.vocab.decode(row))] for row in ids]
