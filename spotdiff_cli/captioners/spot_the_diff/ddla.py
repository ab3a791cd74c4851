"""``ddla`` and ``ddla-uniform``: Difference Description with Latent Alignment (Spot-the-diff §3.2-3.3).

Each sentence S_i of a description has a latent alignment z_i ∈ {1..K} over the difference
clusters (eq. 1)::

    P(S_1..S_T | X) = Π_i Σ_k P(z_i = k | X; w) · P(S_i | z_i = k, X; θ)

- prior: P(z = k | X) ∝ exp(wᵀ g(k)), g = the four cluster features (box length, width, area,
  active pixels; ``cluster_feats``). ``ddla-uniform`` fixes it uniform over the valid clusters.
- decoder: LSTM initialised from the pooled image features independently of z, attention
  multiplied by the projected cluster mask C_z (``cluster_masks``).
- learning (§3.3): the alignments are independent, so each sentence is marginalised separately:
  log Σ_k exp(log P(z=k|X) + log P(S|z=k,X)). The K decoder passes per sentence run as one batch:
  every (pair, sentence, cluster) triple with a real sentence and a real cluster is a row; the
  per-row sentence log-likelihoods are scattered into a (B, S, K) table that is -inf elsewhere.
- alignment read-out (§5): argmax_k P(z=k|X) P(S|z=k,X).

Decoding goes beyond the paper where §5 names its limits:

- single sentence (§3.3; ``max_sentences == 1``): argmax of the prior, then greedy. ddla-uniform
  has no prior to take the argmax of; §4 samples z "randomly from the uniform distribution":
  ``selection: paper`` (the default; seeded per pair, so outputs are reproducible), or
  ``selection: largest``, the largest box (the rule this project used before the option, and
  what older checkpoints keep).
- multi-sentence: the paper takes the gold number of sentences T and the top-T clusters by prior.
  Here T is the gold count when the caller passes ``num_sentences``, else predicted by a small
  *count head* (pooled features + prior statistics -> 1..``max_count``), trained jointly with a
  cross-entropy on the gold count (weight ``count_weight``; it never enters ``nll``). Clusters are
  taken in prior order (ddla-uniform: decreasing box area, §4's heuristic) with non-maximum suppression: a cluster
  whose grid mask overlaps (soft IoU > ``nms_iou``) an already chosen one is skipped, since §5
  notes that sentences report non-overlapping differences. Sentences identical to an earlier one
  are dropped.
- a pair without clusters (a "no change" pair) gets one pseudo-cluster covering the whole grid,
  so its sentences still have a likelihood; it is never reported as a cluster.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from ..learned import PAD, Batch, Generated, GradientCaptioner, run_decoder
from ..vocab import Vocabulary
from .common import (
    DecoderState,
    build_decoder,
    build_direction,
    build_encoder,
    safe_masks,
    soft_iou,
)

# Pair statistics the count head sees besides the pooled features (see _count_inputs).
_N_COUNT_STATS = 4


class ClusterView:
    """The batch's clusters, made safe for the model.

    masks: (B, K, L) grid masks, all-zero rows replaced by ones (see ``safe_masks``);
    valid: (B, K) bool, with slot 0 switched on for pairs that have no cluster (pseudo-cluster);
    feats: (B, K, 4) g(z); pseudo: (B,) bool, True where slot 0 is that pseudo-cluster.
    """

    def __init__(self, batch: Batch) -> None:
        masks = batch["cluster_masks"].flatten(2).float()
        valid = batch["cluster_valid"].bool()
        feats = batch["cluster_feats"].float()
        self.pseudo = ~valid.any(dim=1)
        if bool(self.pseudo.any()):
            valid = valid.clone()
            masks = masks.clone()
            feats = feats.clone()
            valid[self.pseudo, 0] = True
            masks[self.pseudo, 0] = 1.0
            feats[self.pseudo, 0] = 0.0
        self.masks = safe_masks(masks) * valid[..., None]
        self.valid = valid
        self.feats = feats


class AlignmentScores(NamedTuple):
    """What :meth:`DDLACaptioner.alignment_scores` computes for a batch.

    scores: (B, S, K) log P(z=k|X) + log P(S_s|z=k,X), -inf where sentence s or cluster k is padding;
    sentence_valid: (B, S) bool; n_tokens: (B, S) target tokens per sentence (0 for padding);
    pooled: (B, F) pooled pair features; clusters: the batch's :class:`ClusterView`;
    log_prior: (B, K) log P(z=k|X).
    """

    scores: Tensor
    sentence_valid: Tensor
    n_tokens: Tensor
    pooled: Tensor
    clusters: ClusterView
    log_prior: Tensor


class DDLACaptioner(GradientCaptioner):
    """``ddla``: latent cluster alignment per sentence with a learned log-linear prior (§3.2).

    Config: ``channels``, ``grid`` ([h, w]), ``feature_size``, ``embed_size``, ``hidden_size``,
    ``attention_size``, ``dropout``, ``backbone``, ``max_count`` (largest predicted sentence
    count), ``count_weight`` (weight of the count head's loss), ``nms_iou`` (overlap above which
    a second cluster is not described).
    """

    name: ClassVar[str] = "ddla"
    uniform_prior: ClassVar[bool] = False
    takes_sentence_count: ClassVar[bool] = True

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        c = self.config
        feature_size = int(c["feature_size"])
        self.encoder = build_encoder(c)
        self.decoder = build_decoder(c, self.vocab_size)
        self.direction = build_direction(c, self.decoder)
        # wᵀ g(z) (§3.2 "Alignment prior"); a bias would cancel in the normalisation. Zero start:
        # training begins from the uniform prior and learns which clusters are salient.
        self.prior: nn.Linear | None = None
        if not self.uniform_prior:
            self.prior = nn.Linear(4, 1, bias=False)
            nn.init.zeros_(self.prior.weight)
        count_hidden = max(8, int(c["hidden_size"]) // 4)
        self.count_head = nn.Sequential(
            nn.Linear(feature_size + _N_COUNT_STATS, count_hidden),
            nn.ReLU(),
            nn.Linear(count_hidden, int(c["max_count"])),
        )

    # -- model pieces -----------------------------------------------------------------------
    def log_prior(self, clusters: ClusterView) -> Tensor:
        """log P(z = k | X): (B, K), -inf at invalid clusters (they never get probability)."""
        if self.prior is None:
            logits = torch.zeros_like(clusters.feats[..., 0])
        else:
            logits = self.prior(clusters.feats).squeeze(-1)
        return torch.log_softmax(logits.masked_fill(~clusters.valid, float("-inf")), dim=-1)

    def start_rows(
        self, feats: Tensor, pooled: Tensor, clusters: ClusterView, pair: Tensor, cluster: Tensor
    ) -> DecoderState:
        """Decoder state for rows (pair[i], cluster[i]): image-initialised, attention over C_z.

        feats: (B, L, F), pooled: (B, F) from the encoder; pair, cluster: (N,) int64. With
        ``direction_to_speaker`` the direction head's answer is an input of every word.
        """
        words = None if self.direction is None else self.direction.words(pooled)
        return self.decoder.start(
            feats[pair],
            pooled[pair],
            clusters.masks[pair, cluster],
            None if words is None else words[pair],
        )

    def alignment_scores(self, batch: Batch) -> AlignmentScores:
        """log P(z=k|X) + log P(S_s|z=k,X) for every pair, sentence and cluster (see
        :class:`AlignmentScores`); gradients flow through it (``loss``)."""
        clusters = ClusterView(batch)
        feats, pooled = self.encoder(batch["before"], batch["after"])
        log_prior = self.log_prior(clusters)
        tokens, sent_valid = batch["tokens"], batch["sentence_valid"].bool()
        # Fold K into the batch (§3.3: "backpropagation through the decoder K times for each
        # sentence"): one decoder row per real (sentence, cluster) combination.
        b, s, k = torch.nonzero(sent_valid[:, :, None] & clusters.valid[:, None, :], as_tuple=True)
        token_logp, _ = self.decoder.score(
            tokens[b, s], self.start_rows(feats, pooled, clusters, b, k)
        )
        row_scores = token_logp.sum(dim=1) + log_prior[b, k]
        scores = torch.full(
            tokens.shape[:2] + log_prior.shape[1:], float("-inf"), device=row_scores.device
        )
        scores = scores.index_put((b, s, k), row_scores)
        n_tokens = (tokens[:, :, 1:] != PAD).sum(dim=-1) * sent_valid
        return AlignmentScores(scores, sent_valid, n_tokens, pooled, clusters, log_prior)

    def _count_inputs(self, pooled: Tensor, clusters: ClusterView, log_prior: Tensor) -> Tensor:
        """(B, F + 4): pooled features and, detached, log1p(#real clusters), the top prior
        probability, the prior's entropy and the share of the grid the clusters cover."""
        prior = log_prior.exp()
        n_real = (clusters.valid & ~clusters.pseudo[:, None]).sum(dim=1).float()
        entropy = -(prior * log_prior.masked_fill(~clusters.valid, 0.0)).sum(dim=1)
        union = (clusters.masks * (~clusters.pseudo)[:, None, None]).amax(dim=1).mean(dim=1)
        stats = torch.stack(
            [torch.log1p(n_real), prior.amax(dim=1), entropy, union], dim=1
        ).detach()
        return torch.cat([pooled, stats], dim=1)

    # -- the contract ---------------------------------------------------------------------
    def loss(self, batch: Batch) -> dict[str, Any]:
        """Negative marginal log-likelihood (§3.3) per target token, plus ``count_weight`` × the
        count head's cross-entropy. ``nll`` is the marginal NLL alone (perplexity as in Table 4)."""
        batch = self._prepare(batch)
        aligned = self.alignment_scores(batch)
        scores, sent_valid = aligned.scores, aligned.sentence_valid
        # Only real sentences: each has at least one finite entry (a real or pseudo cluster), so
        # logsumexp and its gradient stay finite.
        marginal = torch.logsumexp(scores[sent_valid], dim=-1)
        nll = -marginal.sum()
        n_tokens = int(aligned.n_tokens.sum())
        loss = nll / max(1, n_tokens)
        weight = float(self.config["count_weight"])
        count_loss = torch.zeros((), device=loss.device)
        n_sent = sent_valid.sum(dim=1)
        has = n_sent > 0
        if weight > 0 and bool(has.any()):
            logits = self.count_head(
                self._count_inputs(aligned.pooled, aligned.clusters, aligned.log_prior)
            )
            target = (n_sent.clamp(1, int(self.config["max_count"])) - 1)[has]
            count_loss = nn.functional.cross_entropy(logits[has], target)
            loss = loss + weight * count_loss
        losses = {"caption": nll / max(1, n_tokens), "count": count_loss}
        if self.direction is not None:
            losses["direction"] = self.direction.loss(aligned.pooled, batch["direction"])
            loss = loss + float(self.config["direction_weight"]) * losses["direction"]
        return {
            "loss": loss,
            "nll": nll.detach(),
            "n_tokens": n_tokens,
            "count_loss": count_loss.detach(),
            # The named objectives a recipe's `objectives` may weight (train/recipes.py); the
            # default "loss" above is caption + count_weight x count (+ direction_weight x
            # direction).
            "losses": losses,
        }

    def align(self, batch: Batch) -> Tensor:
        """(B, S) int64: argmax_k P(z=k|X) P(S|z=k,X) per gold sentence (§5), -1 for padded
        sentences and for pairs without clusters."""
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                aligned = self.alignment_scores(self._prepare(batch))
        finally:
            self.train(was_training)
        best = aligned.scores.argmax(dim=-1)
        unknown = ~aligned.sentence_valid | aligned.clusters.pseudo[:, None]
        return best.masked_fill(unknown, -1)

    def select_clusters(
        self, batch: Batch, max_sentences: int, num_sentences: Sequence[int] | None = None
    ) -> list[list[int]]:
        """The clusters to describe per pair, in output order (see the module docstring).

        Returns batch cluster indices; a pair without clusters gets [0] (its pseudo-cluster).
        """
        batch = self._prepare(batch)
        was_training = self.training
        self.eval()  # the count head reads the encoder: no dropout at inference
        try:
            with torch.no_grad():
                clusters = ClusterView(batch)
                log_prior = self.log_prior(clusters)
                _, pooled = self.encoder(batch["before"], batch["after"])
                counts = self._sentence_counts(
                    pooled, clusters, log_prior, max_sentences, num_sentences
                )
                return self._select(batch, clusters, log_prior, counts, max_sentences == 1)
        finally:
            self.train(was_training)

    def _sentence_counts(
        self,
        pooled: Tensor,
        clusters: ClusterView,
        log_prior: Tensor,
        max_sentences: int,
        num_sentences: Sequence[int] | None,
    ) -> list[int]:
        """Sentences to write per pair: the given count, 1 for single-sentence decoding, else the
        count head's prediction; never more than ``max_sentences``."""
        n = clusters.valid.shape[0]
        if num_sentences is not None:
            return [max(1, min(max_sentences, int(t))) for t in num_sentences]
        if max_sentences == 1:
            return [1] * n
        predicted = (
            self.count_head(self._count_inputs(pooled, clusters, log_prior)).argmax(dim=1) + 1
        )
        return [min(max_sentences, int(t)) for t in predicted]

    def _order(
        self, batch: Batch, clusters: ClusterView, log_prior: Tensor, b: int, single: bool
    ) -> list[int]:
        """Pair ``b``'s valid clusters in the order they are offered for description.

        ddla: by the learned prior. ddla-uniform, whose prior is flat, by its ``selection``:
        ``paper`` (§4: "for single sentence generation, we sample z_j randomly from the uniform
        distribution"; "for the multi-sentence generation setting ... order the clusters as per
        the decreasing area of the bounding box"): a seeded random cluster when ``single``
        (generation asked for one sentence at most), else largest box first, whatever the count;
        ``largest``: largest box first always (the rule of checkpoints made before the option).
        """
        valid = [k for k in range(clusters.valid.shape[1]) if bool(clusters.valid[b, k])]
        if not self.uniform_prior:
            rank = torch.argsort(log_prior[b], descending=True, stable=True).tolist()
            return [k for k in rank if k in valid]
        if self.selection == "paper" and single:
            self.selection_rng(batch, b).shuffle(valid)
            return valid
        # g(z)[2] is the box area feature, monotone in the area.
        area = clusters.feats[b, :, 2]
        return sorted(valid, key=lambda k: -float(area[k]))

    def _select(
        self,
        batch: Batch,
        clusters: ClusterView,
        log_prior: Tensor,
        counts: list[int],
        single: bool = False,
    ) -> list[list[int]]:
        threshold = float(self.config["nms_iou"])
        chosen_all = []
        for b, want in enumerate(counts):
            chosen: list[int] = []
            for k in self._order(batch, clusters, log_prior, b, single):
                if len(chosen) >= want:
                    break
                overlaps = (
                    soft_iou(clusters.masks[b, k][None], clusters.masks[b, chosen])
                    if chosen
                    else None
                )
                if overlaps is not None and bool((overlaps > threshold).any()):
                    continue  # non-maximum suppression: this change is already being described
                chosen.append(k)
            chosen_all.append(chosen)
        return chosen_all

    def _generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int,
        max_len: int,
        num_sentences: Sequence[int] | None,
    ) -> list[list[Generated]]:
        clusters = ClusterView(batch)
        feats, pooled = self.encoder(batch["before"], batch["after"])
        log_prior = self.log_prior(clusters)
        counts = self._sentence_counts(pooled, clusters, log_prior, max_sentences, num_sentences)
        chosen = self._select(batch, clusters, log_prior, counts, max_sentences == 1)
        rows = [(b, k) for b, ks in enumerate(chosen) for k in ks]
        device = feats.device
        pair = torch.tensor([r[0] for r in rows], dtype=torch.long, device=device)
        cluster = torch.tensor([r[1] for r in rows], dtype=torch.long, device=device)
        state = self.start_rows(feats, pooled, clusters, pair, cluster)
        ids = run_decoder(
            self.decoder.decode_step, state, len(rows), beam, max_len, device, self.repetition_guard
        )
        out: list[list[Generated]] = [[] for _ in chosen]
        for (b, k), row in zip(rows, ids):
            text = self.vocab.decode(row)
            if not text or any(g.text == text for g in out[b]):
                continue  # an empty or repeated sentence adds nothing to the description
            pseudo = bool(clusters.pseudo[b])
            out[b].append(Generated(text, () if pseudo else (k,), math.exp(float(log_prior[b, k]))))
        return out


class UniformDDLACaptioner(DDLACaptioner):
    """``ddla-uniform``: DDLA with a fixed uniform prior over the valid clusters (§4); which
    cluster it describes is its ``selection`` (``paper``: seeded random for one sentence, the
    largest boxes for several; ``largest``: the largest box first always)."""

    name: ClassVar[str] = "ddla-uniform"
    uniform_prior: ClassVar[bool] = True
    selections: ClassVar[tuple[str, ...]] = ("paper", "largest")
    legacy_selection: ClassVar[str] = "largest"

    @property
    def single_sentence_differs(self) -> bool:
        """Under the paper's rule, the one-sentence description is not the first sentence of the
        multi-sentence one (a random cluster vs the largest): evaluation decodes it apart."""
        return self.selection == "paper"
