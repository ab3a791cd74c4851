"""``duda-aux``: DUDA trained with a composed-query retrieval auxiliary task (Hosseinzadeh & Wang,
"Image Change Captioning by Learning from an Auxiliary Task", CVPR 2021;
``papers/duda-aux-composed-retrieval-2021.txt``).

The primary network f(A, B; θ_P) is ``duda`` unchanged (``model.py``: dual attention + dynamic
speaker, reused by subclassing). The auxiliary network θ_A = {θ_G, θ_K} (:class:`RetrievalHead`)
is a modified TIRG (Vo et al., CVPR 2019) that, given the before image A and a caption, should
pick the after image B among candidates S. Symbols as in the paper:

* eq. 3: P = f(A, B; θ_P), (|Ĉ|, |V|): the speaker's softmax at every step. Here the steps are
  teacher-forced on the gold sentence (what ``loss`` computes anyway): step t reads gold word t
  and predicts word t + 1, so P's rows line up with the gold words w^1 … w^n.
* eq. 4 / 5: E_Ĉ = P × W_emb, (|Ĉ|, d_e), the *soft* word embeddings; W_emb (|V| × d_e) is the
  auxiliary network's own embedding matrix (the paper: "the word embedding matrix for the
  auxiliary network"). Because E_Ĉ is a product with P, the auxiliary loss back-propagates through
  P into the speaker (its output layer, LSTMs, word embeddings) and the dual attention: the
  point of the paper.
* k(A, E; θ_K): TIRG composition of the image feature φ_A and the text feature φ_E (an LSTM over
  the rows of E, its state at the last word, as TIRG's text model):
  ``k = a_0 σ(W_g [φ_A; φ_E]) ⊙ φ_A + a_1 W_r [φ_A; φ_E]`` (gated residual, a = (1, 10) learned,
  TIRG's initial values), then TIRG's normalisation (L2, times a learned scale, initially 4).
* g(I; θ_G): the same image encoder as φ (TIRG shares it between the query image and the
  targets) and the same normalisation. ⟨k, g⟩ is then a plain dot product, as eq. 6 writes it.
* eq. 6: L_aux = (1/β) Σ_i −log softmax_j ⟨k(A_i, E_i), g(B_j)⟩ at j = i, over the batch's after
  images B_1 … B_β (cross-entropy with target i).
* eq. 7–10 (Auxiliary → Primary): R = k(A, E_C) with E_C the gold caption embedded by W_emb;
  ω = Softmax(S̃ · R) over the candidates' g(I_j); B̂ = Σ_j ω_j Ĩ_j; (A, B̂) goes through the
  primary network and L_pri (eq. 11) is its caption NLL, so L_pri trains θ_A through ω.
* eq. 13: candidates S. ``easy``: the batch's after images (n = β: B_i and β − 1 others).
  ``hard`` (from epoch ξ): S = {I_j}_{j=1}^{n−2} ∪ {A, B}: the row's own before image A joins
  and one randomly chosen other after image leaves, so n stays β. A is the hard negative the
  paper defines: it differs from B only by the change the caption names.
* eq. 14: L = (1 − γ) L_pri + γ L_aux. The recipes weigh the named losses through ``objectives``
  (``caption``: 1 − γ, ``aux``: γ, plus DUDA's ``attention_l1``); ``loss`` on its own returns
  the same sum with the config's ``gamma``. Not in the paper: with DUDA's ``direction_weight``
  set, its direction objective (``DUDACaptioner.direction_loss``, on the real (A, B) of every
  batch, in both directions) is added as ``direction``, and ``direction_to_speaker`` hands the
  head's answer to the speaker as in ``duda``.

The curriculum (eq. 13's switch at ξ) is a recipe with two stages whose ``model_options`` set
``candidates: easy`` then ``candidates: hard`` (:meth:`DUDAAuxCaptioner.set_training_stage`);
the easy-only ablation (Table 4, first row) is one stage of ``easy``.

Values the paper leaves open, and what is chosen here:

- **γ** (eq. 14): not given. 0.3: the primary loss keeps most of the weight (it is the task;
  the other is auxiliary), and γ L_aux (≈ γ log β at the start) stays of the order of the
  per-token caption NLL instead of swamping it.
- **which batches run which direction**: §4.2 "we alternate between the two stages from one
  batch to another": even training steps run Primary → Auxiliary, odd ones Auxiliary → Primary
  (``alternate: false`` runs only the first). Evaluation (validation perplexity) always runs the
  first on the real (A, B). The step counter is not checkpointed: a resumed run may start on the
  other direction.
- **L_aux in the Auxiliary → Primary direction**: the paper names none there; here it is eq. 6's
  cross-entropy of ω itself (the gold caption's retrieval: −log ω_B), which is how TIRG is trained
  and keeps both named losses defined on every batch.
- **B̂ fed to the primary network** (eq. 10): Σ ω_j Ĩ_j lives in the retrieval space (d_r) and
  the primary network reads backbone grids (C × h × w), which the paper does not reconcile. The
  same weights ω are applied to the candidates' grids: B̂ = Σ_j ω_j X_j (N, C, h, w), the
  candidate set's soft selection in the space DUDA reads; gradients reach θ_A through ω.
- **P's length**: the gold sentence's words (steps up to, not including, the one predicting
  ``<eos>``), so Ĉ and C have the same length and one text encoder reads both.
- **candidate count n**: β, the batch (eq. 6 sums over the batch). With ``sampler: contrastive``
  every batch has one example per pair; with the shuffle sampler another row of the *same* pair
  is masked out (its after image is the target, not a negative). Rows with identical captions
  (two "no change" distractors) are *not* masked: the query holds A_i, so B_j of another pair is
  still a wrong answer. In evaluation mode the hard set drops no random candidate (n = β + 1),
  so a validation loss is a deterministic function of the batch.
- **hard set on distractor pairs**: the paper adds A for every pair; on a CLEVR-Change
  distractor ("no change", B = A from another viewpoint) A is therefore a negative too. Kept as
  the paper writes it.
- **image encoder** (TIRG: a ResNet-17, pooled): the frozen backbone grid DUDA reads (with its
  coordinate channels), a 1 × 1 conv to d_r, ReLU, mean over the cells, a linear layer. The
  coordinates let a pooled feature still say where something is ("the cube on the left").
- **sizes**: d_e = ``aux_embed_size`` 512 and d_r = ``aux_size`` 512 (TIRG's embedding and LSTM
  sizes), dropout ``aux_dropout`` 0.1 before the text feature's linear layer (TIRG's).
- **normalisation in the composition**: TIRG's BatchNorm1d is a LayerNorm here, so a query does
  not depend on the rest of its batch (evaluation scores one pair at a time; the contrastive
  sampler's last batch of an epoch can hold one row).

Retrieval R@1 (``captioners/retrieval.py``): :meth:`DUDAAuxCaptioner.validation_scores` reports
``R@1`` and ``R@1-hard`` on the validation split (gold captions as queries), and
:meth:`DUDAAuxCaptioner.retrieval_embeddings` is what ``spotdiff eval`` collects per pair.

Batches follow ``docs/training-interfaces.md`` (``before``/``after``, ``tokens``,
``sentence_valid``, ``pair_ids``); each gold sentence is a query of its own (Spot-the-diff-style
data has several per pair; CLEVR-Change one per example).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import ModelError
from ...types import Analysis
from ..learned import EOS, PAD, Batch
from ..retrieval import recall_at_1
from ..vocab import Vocabulary
from .model import DUDACaptioner

CANDIDATE_SETS = ("easy", "hard")
STAGE_OPTIONS = ("candidates",)


class ImageEncoder(nn.Module):
    """φ (shared by θ_K's query image and θ_G's targets): grid (N, D, h, w) -> (N, d_r).

    A 1 × 1 conv per cell, ReLU, mean over the cells, a linear layer (module docstring)."""

    def __init__(self, channels: int, size: int) -> None:
        super().__init__()
        self.cells = nn.Conv2d(channels, size, kernel_size=1)
        self.out = nn.Linear(size, size)

    def forward(self, grid: Tensor) -> Tensor:
        return self.out(torch.relu(self.cells(grid)).mean(dim=(2, 3)))


class TextEncoder(nn.Module):
    """TIRG's text model: an LSTM over word embeddings (hard or soft), its output at the last
    word, dropout and a linear layer. words: (N, T, d_e), lengths: (N,) >= 1 -> (N, d_r)."""

    def __init__(self, embed_size: int, size: int, dropout: float) -> None:
        super().__init__()
        self.lstm = nn.LSTM(embed_size, size, batch_first=True)
        self.out = nn.Sequential(nn.Dropout(dropout), nn.Linear(size, size))

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        states, _ = self.lstm(words)  # causal: padding after a sentence cannot reach its state
        rows = torch.arange(words.shape[0], device=words.device)
        return self.out(states[rows, lengths - 1])


class TIRG(nn.Module):
    """The gated residual composition of an image and a text feature (Vo et al. 2019, eq. 2-4):
    ``a_0 σ(f_gate([φ_x; φ_t])) ⊙ φ_x + a_1 f_res([φ_x; φ_t])``. image, text: (N, d) -> (N, d)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.gate = nn.Sequential(nn.LayerNorm(2 * size), nn.ReLU(), nn.Linear(2 * size, size))
        self.residual = nn.Sequential(
            nn.LayerNorm(2 * size),
            nn.ReLU(),
            nn.Linear(2 * size, 2 * size),
            nn.ReLU(),
            nn.Linear(2 * size, size),
        )
        # TIRG's released initial weights: the residual starts ten times the gated image.
        self.a = nn.Parameter(torch.tensor([1.0, 10.0]))

    def forward(self, image: Tensor, text: Tensor) -> Tensor:
        both = torch.cat([image, text], dim=-1)
        gated = torch.sigmoid(self.gate(both)) * image
        return self.a[0] * gated + self.a[1] * self.residual(both)


class RetrievalHead(nn.Module):
    """The auxiliary network θ_A = {θ_G, θ_K}: W_emb, φ (images), the text LSTM, TIRG, and the
    normalisation both k and g end with (module docstring)."""

    def __init__(
        self,
        vocab_size: int,
        channels: int,
        embed_size: int,
        size: int,
        dropout: float,
        scale: float,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)  # W_emb, |V| x d_e
        self.image = ImageEncoder(channels, size)
        self.text = TextEncoder(embed_size, size, dropout)
        self.compose = TIRG(size)
        self.scale = nn.Parameter(torch.tensor(float(scale)))

    def normalise(self, x: Tensor) -> Tensor:
        """TIRG's NormalizationLayer: scale × x / ‖x‖. (N, d) -> (N, d)."""
        return self.scale * F.normalize(x, dim=-1)

    def soft_embed(self, probs: Tensor) -> Tensor:
        """Eq. 4: E = P × W_emb. probs: (N, T, |V|) -> (N, T, d_e)."""
        return probs @ self.embed.weight

    def target(self, image: Tensor) -> Tensor:
        """Eq. 8: g(I) from φ(I) (N, d_r) -> (N, d_r)."""
        return self.normalise(image)

    def query(self, image: Tensor, words: Tensor, lengths: Tensor) -> Tensor:
        """Eq. 7: k(A, E) from φ(A) (N, d_r), E (N, T, d_e) and lengths (N,) -> (N, d_r)."""
        return self.normalise(self.compose(image, self.text(words, lengths)))


def word_lengths(tokens: Tensor) -> Tensor:
    """tokens (N, T) ``<bos> w1 … wn <eos> <pad>…`` -> n (N,), at least 1 (the text LSTM's last
    step; an empty sentence reads its ``<eos>`` position)."""
    targets = tokens[:, 1:]
    return ((targets != PAD) & (targets != EOS)).sum(dim=1).clamp_min(1)


def soft_selection(omega: Tensor, after: Tensor, before: Tensor | None) -> Tensor:
    """Eq. 10 over the grids the primary network reads (module docstring): B̂ = Σ_j ω_j X_j.

    omega: (N, n) weights over the candidates, the β after grids ``after`` (β, D, h, w) first,
    then (hard set) each query's own before grid ``before`` (N, D, h, w) -> (N, D, h, w)."""
    selected = torch.einsum("nj,jdhw->ndhw", omega[:, : after.shape[0]], after)
    if before is not None and omega.shape[1] > after.shape[0]:
        selected = selected + omega[:, -1, None, None, None] * before
    return selected


class DUDAAuxCaptioner(DUDACaptioner):
    """``duda-aux``: ``duda`` plus the composed-query retrieval auxiliary task (module docstring).

    Config: DUDA's keys, and ``gamma``, ``aux_embed_size``, ``aux_size``, ``aux_dropout``,
    ``aux_scale``, ``candidates`` (the set when no stage says: ``easy`` or ``hard``),
    ``alternate``.
    """

    name: ClassVar[str] = "duda-aux"
    # Numbers validation_scores adds to a validation record (a recipe's val_metric may pick one).
    validation_metrics: ClassVar[tuple[str, ...]] = ("R@1", "R@1-hard")

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        c = self.config
        if c["candidates"] not in CANDIDATE_SETS:
            raise ModelError(
                f"'{self.name}' setting 'candidates' is {c['candidates']!r}; expected one of "
                f"{', '.join(CANDIDATE_SETS)}"
            )
        if not 0.0 <= float(c["gamma"]) <= 1.0:
            raise ModelError(f"'{self.name}' setting 'gamma' must be in [0, 1] (eq. 14)")
        channels = int(c["channels"]) + (2 if c["coordinates"] else 0)
        self.retrieval = RetrievalHead(
            self.vocab_size,
            channels,
            int(c["aux_embed_size"]),
            int(c["aux_size"]),
            float(c["aux_dropout"]),
            float(c["aux_scale"]),
        )
        self.candidates = str(c["candidates"])
        self._steps = 0  # training steps taken: their parity picks the direction (§4.2)

    # -- the curriculum -------------------------------------------------------------------
    def set_training_stage(
        self, name: str, objectives: dict[str, float], options: dict[str, Any]
    ) -> None:
        """A recipe stage begins: ``options["candidates"]`` is eq. 13's set for it (``easy``
        before ξ, ``hard`` from ξ on); a stage that does not say uses the config's."""
        unknown = [k for k in options if k not in STAGE_OPTIONS]
        if unknown:
            raise ModelError(
                f"stage '{name}': '{self.name}' has no stage option '{unknown[0]}' "
                f"(options: {', '.join(STAGE_OPTIONS)})"
            )
        candidates = str(options.get("candidates", self.config["candidates"]))
        if candidates not in CANDIDATE_SETS:
            raise ModelError(
                f"stage '{name}': candidates is {candidates!r}; expected one of "
                f"{', '.join(CANDIDATE_SETS)}"
            )
        self.candidates = candidates

    # -- the auxiliary network ------------------------------------------------------------
    def compose(self, image: Tensor, tokens: Tensor, probs: Tensor | None = None) -> Tensor:
        """Queries k(A, E) (N, d_r) for sentences ``tokens`` (N, T) about before images with
        features φ(A) ``image`` (N, d_r). ``probs`` (N, T-1, |V|): the speaker's distributions
        P, whose soft embeddings (eq. 4) replace the gold words'; None: the gold words (eq. 7)."""
        head = self.retrieval
        words = head.soft_embed(probs) if probs is not None else head.embed(tokens[:, 1:])
        return head.query(image, words, word_lengths(tokens))

    def candidate_logits(
        self, queries: Tensor, after: Tensor, before: Tensor, rows: Tensor, pair_ids: list[str]
    ) -> Tensor:
        """S̃ · R for every query: (N, β) over the batch's after images, + 1 column for the
        row's own before image A when the set is ``hard`` (eq. 13).

        queries: (N, d_r); after, before: (β, d_r) g(B_j), g(A_j); rows: (N,) the batch row of
        each query, its target's column. Columns that may not compete are −inf: another row of
        the same pair, and (hard, training) one random other after image so that n stays β."""
        logits = queries @ after.T  # (N, β)
        index = {p: i for i, p in enumerate(pair_ids)}
        pair = torch.tensor([index[p] for p in pair_ids], device=logits.device)
        same = pair[rows][:, None] == pair[None, :]
        same[torch.arange(len(rows), device=logits.device), rows] = False
        logits = logits.masked_fill(same, float("-inf"))
        if self.candidates != "hard":
            return logits
        if self.training:
            # S = {I_j}_{j=1}^{n-2} ∪ {A, B}: one of the n - 1 others leaves for A.
            negative = torch.isfinite(logits)
            negative[torch.arange(len(rows), device=logits.device), rows] = False
            pick = torch.rand(logits.shape, device=logits.device).masked_fill(~negative, -1.0)
            drop = pick.argmax(dim=1)
            has = negative.any(dim=1)
            logits = logits.clone()
            logits[has.nonzero(as_tuple=True)[0], drop[has]] = float("-inf")
        own_before = (queries * before[rows]).sum(-1, keepdim=True)  # ⟨k(A_i, ·), g(A_i)⟩
        return torch.cat([logits, own_before], dim=1)

    # -- the loss -------------------------------------------------------------------------
    def loss(self, batch: Batch) -> dict[str, Any]:
        """Eq. 14 on one batch, in the direction this step's parity picks (module docstring);
        ``losses`` names ``caption`` (L_pri), ``aux`` (L_aux), ``attention_l1`` and
        ``negative_entropy``; ``nll`` / ``n_tokens`` are L_pri's (perplexity)."""
        batch = self._prepare(batch)
        rows, tokens = self._targets(batch)
        backward = self.training and bool(self.config["alternate"]) and self._steps % 2 == 1
        if self.training:
            self._steps += 1
        before, after = self.grids(batch)
        head = self.retrieval
        phi_before, phi_after = head.image(before), head.image(after)  # φ(A_j), φ(B_j): (β, d_r)
        g_after, g_before = head.target(phi_after), head.target(phi_before)
        pair_ids = list(batch.get("pair_ids") or [f"row{i}" for i in range(before.shape[0])])
        if not backward:
            # Primary -> Auxiliary: P = f(A, B) (eq. 3), E = P W_emb (eq. 4-5), eq. 6.
            attended = self.attention(before, after)
            terms = self.caption_terms(attended, rows, tokens, self.taught_direction(batch, rows))
            probs = terms.log_probs.exp()
            queries = self.compose(phi_before[rows], tokens, probs)
            logits = self.candidate_logits(queries, g_after, g_before, rows, pair_ids)
        else:
            # Auxiliary -> Primary: R = k(A, E_C) (eq. 7), ω (eq. 9), B̂ (eq. 10) over the grids.
            queries = self.compose(phi_before[rows], tokens)
            logits = self.candidate_logits(queries, g_after, g_before, rows, pair_ids)
            omega = torch.softmax(logits, dim=1)  # (N, n); −inf columns get 0
            selected = soft_selection(omega, after, before[rows])
            own = torch.arange(len(rows), device=rows.device)
            # the sentence is about (A_i, B_i): its direction is the pair's
            taught = self.taught_direction(batch, rows)
            terms = self.caption_terms(self.attention(before[rows], selected), own, tokens, taught)
        aux = F.cross_entropy(logits.float(), rows)  # eq. 6: −log softmax at the row's own B
        gamma = float(self.config["gamma"])  # eq. 14: (1 - γ) L_pri + γ L_aux
        others = {"aux": (gamma, aux)}
        if self.direction_head is not None:  # not in eq. 14: DUDA's direction objective
            real = attended if not backward else self.attention(before, after)
            weight = float(self.config["direction_weight"])
            others["direction"] = (weight, self.direction_loss(real, batch["direction"]))
        return self.loss_output(terms, 1.0 - gamma, **others)

    # -- retrieval R@1 --------------------------------------------------------------------
    def _embeddings(self, batch: Batch, tokens: Tensor, rows: Tensor) -> tuple[Tensor, ...]:
        """(queries k(A, E_C) (N, d_r) for gold ``tokens`` (N, T) of pairs ``rows``, g(B) and
        g(A) of every pair of the prepared ``batch`` (β, d_r))."""
        before, after = self.grids(batch)
        head = self.retrieval
        phi_before = head.image(before)
        queries = self.compose(phi_before[rows], tokens)
        return queries, head.target(head.image(after)), head.target(phi_before)

    def validation_scores(self, batches: list[Batch]) -> dict[str, float]:
        """R@1 of the gold captions' composed queries among every validation after image
        (``R@1``), and with each query's before image added (``R@1-hard``): eq. 13's sets over
        the whole split (``captioners/retrieval.py``)."""
        queries, pair_of, after, before = [], [], [], []
        offset = 0
        for raw in batches:
            batch = self._prepare(raw)
            rows, tokens = self._targets(batch)
            q, a, b = self._embeddings(batch, tokens, rows)
            queries.append(q)
            pair_of.append(rows + offset)
            after.append(a)
            before.append(b)
            offset += a.shape[0]
        if not queries:
            return {}
        recall = recall_at_1(
            torch.cat(queries), torch.cat(pair_of), torch.cat(after), torch.cat(before)
        )
        return {"R@1": round(recall.easy, 6), "R@1-hard": round(recall.hard, 6)}

    def retrieval_embeddings(
        self, analysis: Analysis, sentences: list[str]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """For an analysed pair (its ``analysis_batch``) and captions of it: (queries k(A, E_C)
        (len(sentences), d_r), g(B) (d_r,), g(A) (d_r,)), on the CPU. What ``spotdiff eval``
        gathers over a split for :func:`~spotdiff_cli.captioners.retrieval.recall_at_1`."""
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                batch = self._prepare(self.analysis_batch(analysis))
                ids = [self.vocab.encode(s) for s in sentences] or [self.vocab.encode("")]
                width = max(len(i) for i in ids)
                tokens = torch.full((len(ids), width), PAD, dtype=torch.long, device=self.device)
                for i, row in enumerate(ids):
                    tokens[i, : len(row)] = torch.tensor(row, device=self.device)
                rows = torch.zeros(len(ids), dtype=torch.long, device=self.device)
                queries, after, before = self._embeddings(batch, tokens, rows)
        finally:
            self.train(was_training)
        return queries[: len(sentences)].cpu(), after[0].cpu(), before[0].cpu()


__all__ = [
    "CANDIDATE_SETS",
    "DUDAAuxCaptioner",
    "ImageEncoder",
    "RetrievalHead",
    "TIRG",
    "TextEncoder",
    "soft_selection",
    "word_lengths",
]
