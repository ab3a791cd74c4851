"""``idc-pcl``: IDC-PCL (Yao et al., "Image Difference Captioning with Pre-training and Contrastive
Learning", AAAI 2022; ``papers/idc-pcl-pretraining-slides.txt``) on this project's data.

The network (the slides' "Model Architecture"), for a pair (I₁, I₂) and a caption w:

1. **Single-image encoder** (shared by both images) and **pair-image encoder** (the "image
   difference encoder"): :class:`~spotdiff_cli.captioners.pair_vit.PairViT` over the
   cached backbone grid: ``single_layers`` transformer layers per image, then each image's tokens
   tagged and ``pair_layers`` joint layers; each image's class token is its [IMG1] / [IMG2].
2. **Cross-modal transformer** (``cross_modal.py``): one BERT-shaped stream over the pair's
   2(n + 1) tokens and ``[CLS] w₁ … w_T``; from scratch (``bert: ''``) or a local BERT
   (``bert: PATH``).

Pre-training objectives (the named losses a recipe's stage weighs):

- ``mlm``: 15 % of the words (``mlm_prob``) are masked (80 % [MASK], 10 % a random word, 10 %
  kept) and predicted from the pair and the other words (joint attention).
- ``mvcl`` (masked visual contrastive learning): 15 % of the cells of one image per row
  (``mvcl_prob``; which image at random, the slides' "(img1, img2, description) or (img1, img2,
  description)") are zeroed; the stream's output at each masked cell must pick out that cell's
  original feature (positive) among the original features of every cell of the batch
  (negatives), InfoNCE at ``temperature``. When both are weighed, MLM and MVCL share one joint
  pass (each masked side conditioned on the other's unmasked part).
- ``fda`` (fine-grained difference aligning): the pair's embedding (a projection of the mean of
  [IMG1] and [IMG2]) and the caption's (the stream's [CLS] over the words alone) are aligned by
  InfoNCE in both directions over the batch, and pair -> text also against ``fda_negatives``
  hard negatives per caption, rewritten from it (``rewrites.py``: replace, confuse, retrieve;
  exact on our benchmarks because their gold annotations say what changed). Rows with the same
  caption or pair are not each other's negatives.

Not in the paper (issue 24), as duda's and clip4idc's: ``direction``, a linear head on [IMG1] and
[IMG2] that tells an arrival from a departure (``direction_weight``), whose answer every word's
embedding adds when captioning (``direction_to_speaker``; the known direction in its place in
training with ``direction_teacher``).

Fine-tuning and inference (``caption``): the same stream under the uni-directional (seq2seq)
mask; each word is predicted by the MLM head from the position before it (the shifted form of
UniLM's masked seq2seq objective: every position is a target at every step, which a CPU budget
needs), greedy decoding word by word.

What is not here: the paper's cross-task data expansion (general captions and fine-grained
classification data, with L_con / L_mtc / L_cls): we have no such data for our benchmarks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import UsageError
from ..direction import check_direction_settings, direction_cross_entropy, taught
from ..learned import Batch, Generated, GradientCaptioner, run_decoder
from ..pair_vit import PairViT
from ..vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID, UNK_ID, Vocabulary
from .cross_modal import CrossModalTransformer, load_bert
from .rewrites import RewriteBank, rewrite_bank

LOSSES = ("caption", "mlm", "mvcl", "fda", "direction")
_SPECIAL_IDS = (PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID)


class IDCPCLCaptioner(GradientCaptioner):
    """``idc-pcl`` (module docstring). Config: see ``idc_pcl/__init__.py``'s defaults."""

    name: ClassVar[str] = "idc-pcl"
    stage_options: ClassVar[tuple[str, ...]] = ("fda_data", "fda_negatives")

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        c = self.config
        dropout = float(c["dropout"])
        if str(c["bert"]).strip():
            self.cross = load_bert(str(c["bert"]), vocab, dropout)
        else:
            width = int(c["cross_width"])
            self.cross = CrossModalTransformer(
                len(vocab),
                width,
                int(c["cross_layers"]),
                int(c["cross_heads"]),
                4 * width,
                int(c["text_max_len"]),
                dropout,
            )
        d = self.cross.width
        h, w = (int(v) for v in c["grid"])
        self.cells = h * w
        self.vision = PairViT(
            "grid",
            int(c["channels"]),
            self.cells,
            int(c["width"]),
            int(c["heads"]),
            int(c["single_layers"]),
            int(c["pair_layers"]),
            d,
            dropout=dropout,
        )
        self.mvcl_head = nn.Linear(d, d)  # the stream's masked-cell state -> the contrast space
        self.mvcl_target = nn.Sequential(
            nn.LayerNorm(int(c["channels"])), nn.Linear(int(c["channels"]), d)
        )
        self.fda_pair = nn.Linear(d, d)
        self.fda_text = nn.Linear(d, d)
        # Arrival vs departure from the pair's [IMG1] and [IMG2] tokens (direction_loss), and
        # its answer added to every word's embedding when captioning (word_extra); only when
        # asked, so checkpoints without them load as saved.
        self.direction_head = nn.Linear(2 * d, 2) if float(c.get("direction_weight", 0)) else None
        self.direction_in = nn.Linear(2, d, bias=False) if c.get("direction_to_speaker") else None
        check_direction_settings(self.direction_head is not None, self.direction_in is not None)
        self.active: set[str] | None = None  # the stage's objectives; None = caption only
        self.fda_bank: RewriteBank | None = None
        self.fda_negatives = 3

    # -- stages -----------------------------------------------------------------------------
    def set_training_stage(
        self, name: str, objectives: dict[str, float], options: dict[str, Any]
    ) -> None:
        """A recipe stage begins: its objectives pick the losses computed in training; its
        options ``fda_data`` (the benchmark folder whose gold annotations FDA rewrites from)
        and ``fda_negatives`` (hard negatives per caption, default 3)."""
        unknown = [k for k in objectives if k not in LOSSES]
        if unknown:
            raise UsageError(
                f"stage '{name}': idc-pcl has no loss '{unknown[0]}' (losses: {', '.join(LOSSES)})"
            )
        bad = [k for k in options if k not in self.stage_options]
        if bad:
            raise UsageError(
                f"stage '{name}': idc-pcl has no model option '{bad[0]}' (options: "
                f"{', '.join(self.stage_options)})"
            )
        if "direction" in objectives and self.direction_head is None:
            raise UsageError(
                f"stage '{name}': the 'direction' objective needs the model setting "
                "direction_weight > 0 (it builds the head the objective trains)"
            )
        self.active = {k for k, v in objectives.items() if float(v) > 0} or None
        self.fda_negatives = int(options.get("fda_negatives", 3))
        if self.fda_negatives < 0:
            raise UsageError(f"stage '{name}': fda_negatives must be 0 or more")
        if self.active and "fda" in self.active and self.fda_negatives > 0:
            if not options.get("fda_data"):
                raise UsageError(
                    f"stage '{name}': the fda objective needs fda_data, the folder of the benchmark "
                    "whose gold annotations the hard negatives are rewritten from (or "
                    "fda_negatives: 0 for in-batch negatives only)"
                )
            self.fda_bank = rewrite_bank(str(options["fda_data"]), "train")

    def _wants(self, loss: str) -> bool:
        if not self.training or self.active is None:
            return loss == "caption"
        return loss in self.active

    # -- encoders ---------------------------------------------------------------------------
    def visual(self, before: Tensor, after: Tensor) -> Tensor:
        """(B, C, h, w) grids -> the pair's tokens (B, 2(n + 1), width); 0 and n + 1 are
        [IMG1] and [IMG2]."""
        return self.vision(before.float(), after.float())

    def direction_features(self, visual: Tensor) -> Tensor:
        """(B, 2(n + 1), D) pair tokens -> (B, 2D): [IMG1] then [IMG2]. Which image holds the
        object is the answer, so the two sides stay apart (clip4idc's head on the mean of both
        said "departure" for every held-out real pair)."""
        return torch.cat([visual[:, 0], visual[:, self.cells + 1]], dim=-1)

    def direction_loss(self, visual: Tensor, direction: Tensor) -> Tensor:
        """Cross-entropy of arrival (1) vs departure (0) over the pairs whose ``direction``
        (B,) is known (>= 0); 0 when none is."""
        assert self.direction_head is not None
        head = self.direction_head
        return direction_cross_entropy(
            direction, lambda known: head(self.direction_features(visual[known])), visual
        )

    def word_extra(self, visual: Tensor, known: Tensor | None = None) -> Tensor | None:
        """What every word's embedding adds (B, D): the direction head's (P(departure),
        P(arrival)) through W_d when ``direction_to_speaker``, else None. ``known`` (B,): the
        direction the data says (>= 0) replaces the answer (``direction_teacher``)."""
        if self.direction_in is None or self.direction_head is None:
            return None
        probs = torch.softmax(self.direction_head(self.direction_features(visual)), dim=-1)
        return self.direction_in(taught(probs, known))

    def rows(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """(pair index (N,), word ids (N, T)) of every valid caption of the batch, cut to the
        stream's positions."""
        pair, sent = torch.nonzero(batch["sentence_valid"], as_tuple=True)
        ids = batch["tokens"][pair, sent][:, : self.cross.positions]
        return pair, ids

    # -- losses -----------------------------------------------------------------------------
    def caption_loss(
        self, visual: Tensor, pair: Tensor, ids: Tensor, extra: Tensor | None = None
    ) -> tuple[Tensor, int]:
        """Fine-tuning: (summed NLL of every target word, target count), seq2seq mask;
        ``extra`` (B, D): :meth:`word_extra` of the batch's pairs."""
        row_extra = None if extra is None else extra[pair]
        _, words = self.cross(visual[pair], ids[:, :-1], "seq2seq", row_extra)
        logp = torch.log_softmax(self.cross.word_logits(words).float(), dim=-1)
        targets = ids[:, 1:]
        keep = targets != PAD_ID
        token_logp = logp.gather(2, targets[..., None]).squeeze(-1) * keep
        return -token_logp.sum(), int(keep.sum())

    def mask_words(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """BERT's masking: (masked ids, which positions are targets (N, T) bool); at least one
        target per row that has a word."""
        words = torch.ones_like(ids, dtype=torch.bool)
        for special in _SPECIAL_IDS:
            words &= ids != special
        chosen = (torch.rand(ids.shape, device=ids.device) < float(self.config["mlm_prob"])) & words
        # A row with words but no target gets one, so every caption teaches something.
        empty = ~chosen.any(1) & words.any(1)
        if empty.any():
            pick = torch.multinomial(words[empty].float(), 1).squeeze(1)
            chosen[empty.nonzero(as_tuple=True)[0], pick] = True
        roll = torch.rand(ids.shape, device=ids.device)
        masked = ids.clone()
        masked[chosen & (roll < 0.8)] = self.cross.mask_id
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        low = len(_SPECIAL_IDS)
        masked[swap] = torch.randint(
            low, max(low + 1, self.cross.vocab_size), (int(swap.sum()),), device=ids.device
        )
        return masked, chosen

    def mask_cells(
        self, before: Tensor, after: Tensor, pair: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """MVCL's masking for rows of ``pair``: (before (N, C, h, w), after, masked (N, 2, n)
        bool): ``mvcl_prob`` of the cells of one image per row zeroed (at least one)."""
        n = self.cells
        b, a = before[pair].float().clone(), after[pair].float().clone()
        rows = len(pair)
        side = torch.randint(0, 2, (rows,), device=b.device)
        chosen = torch.rand((rows, n), device=b.device) < float(self.config["mvcl_prob"])
        none = ~chosen.any(1)
        if none.any():
            chosen[none, torch.randint(0, n, (int(none.sum()),), device=b.device)] = True
        masked = torch.zeros((rows, 2, n), dtype=torch.bool, device=b.device)
        masked[torch.arange(rows), side] = chosen
        shape = b.shape
        b = b.flatten(2).masked_fill(masked[:, 0, None, :], 0.0).view(shape)
        a = a.flatten(2).masked_fill(masked[:, 1, None, :], 0.0).view(shape)
        return b, a, masked

    def mvcl_loss(self, states: Tensor, masked: Tensor, pair: Tensor, batch: Batch) -> Tensor:
        """InfoNCE of each masked cell's state (N, 2(n+1), D) against the original features of
        every cell of the batch's pairs (its own the positive)."""
        n = self.cells
        before, after = batch["before"].float(), batch["after"].float()
        cells = torch.stack([before.flatten(2), after.flatten(2)], dim=1)  # (B, 2, C, n)
        originals = cells.transpose(2, 3).reshape(-1, cells.shape[2])  # (B * 2n, C)
        keys = F.normalize(self.mvcl_target(originals), dim=-1)
        row, side, cell = masked.nonzero(as_tuple=True)
        token = side * (n + 1) + 1 + cell  # the cell's place in the visual tokens
        queries = F.normalize(self.mvcl_head(states[row, token]), dim=-1)
        target = pair[row] * 2 * n + side * n + cell
        logits = queries @ keys.T / float(self.config["temperature"])
        return F.cross_entropy(logits, target)

    def pair_embedding(self, visual: Tensor) -> Tensor:
        """FDA's pair side: (B, 2(n+1), D) -> (B, D), L2-normalised."""
        pooled = 0.5 * (visual[:, 0] + visual[:, self.cells + 1])
        return F.normalize(self.fda_pair(pooled), dim=-1)

    def text_embedding(self, ids: Tensor) -> Tensor:
        """FDA's caption side: the [CLS] state over the words alone (N, T) -> (N, D)."""
        _, words = self.cross(None, ids, "text")
        return F.normalize(self.fda_text(words[:, 0]), dim=-1)

    def hard_negatives(self, batch: Batch, pair: Tensor, ids: Tensor) -> list[list[str]]:
        """``fda_negatives`` rewrites of each row's caption (empty lists without a bank)."""
        if self.fda_bank is None or self.fda_negatives <= 0:
            return [[] for _ in range(len(pair))]
        pair_ids = list(batch.get("pair_ids") or [])
        # Seeded from torch's generator, so a run's seed fixes its negatives too.
        rng = random.Random(int(torch.randint(0, 2**31 - 1, (1,)).item()))
        out = []
        for p, row in zip(pair.tolist(), ids, strict=True):
            text = self.vocab.decode(row.tolist())
            pid = str(pair_ids[p]) if p < len(pair_ids) else ""
            out.append(self.fda_bank.negatives(pid, text, self.fda_negatives, rng))
        return out

    def encode_texts(self, texts: list[str], like: Tensor) -> Tensor:
        """Sentences -> padded word ids (N, T) on ``like``'s device."""
        limit = self.cross.positions
        rows = [self.vocab.encode(t)[:limit] for t in texts]
        width = max(len(r) for r in rows)
        out = torch.full((len(rows), width), PAD_ID, dtype=torch.long, device=like.device)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return out

    def fda_loss(self, visual: Tensor, pair: Tensor, ids: Tensor, batch: Batch) -> Tensor | None:
        """Pair -> text over the batch's captions plus each row's hard negatives, and text ->
        pair over the batch's pairs (None with fewer than two distinct captions)."""
        if len(pair) < 2:
            return None
        v = self.pair_embedding(visual)[pair]  # (N, D)
        t = self.text_embedding(ids)  # (N, D)
        same = (pair[:, None] == pair[None, :]) | (ids[:, None, :] == ids[None, :, :]).all(-1)
        same.fill_diagonal_(False)
        tau = float(self.config["temperature"])
        p2t = (v @ t.T / tau).masked_fill(same, float("-inf"))
        t2p = (t @ v.T / tau).masked_fill(same, float("-inf"))
        negatives = self.hard_negatives(batch, pair, ids)
        flat = [s for row in negatives for s in row]
        if flat:
            hard = self.text_embedding(self.encode_texts(flat, ids))  # (M, D)
            owner = torch.tensor(
                [i for i, row in enumerate(negatives) for _ in row], device=ids.device
            )
            scores = v @ hard.T / tau  # (N, M): only a row's own rewrites count for it
            scores = scores.masked_fill(
                owner[None, :] != torch.arange(len(pair), device=ids.device)[:, None], float("-inf")
            )
            p2t = torch.cat([p2t, scores], dim=1)
        target = torch.arange(len(pair), device=ids.device)
        return F.cross_entropy(p2t, target) + F.cross_entropy(t2p, target)

    def masked_losses(
        self, visual: Tensor | None, pair: Tensor, ids: Tensor, batch: Batch
    ) -> dict[str, Tensor]:
        """``mlm`` and / or ``mvcl`` of the stage, from one joint pass over the masked words
        and the masked pair (each side conditioned on the other's unmasked part)."""
        out: dict[str, Tensor] = {}
        words, targets = self.mask_words(ids) if self._wants("mlm") else (ids, None)
        masked = None
        if self._wants("mvcl"):
            before, after, masked = self.mask_cells(batch["before"], batch["after"], pair)
            seen = self.visual(before, after)
        else:
            assert visual is not None  # loss() computes it whenever MVCL is not weighed
            seen = visual[pair]
        states, word_states = self.cross(seen, words, "joint")
        if targets is not None:
            logits = self.cross.word_logits(word_states[targets]).float()
            out["mlm"] = F.cross_entropy(logits, ids[targets])
        if masked is not None:
            out["mvcl"] = self.mvcl_loss(states, masked, pair, batch)
        return out

    def loss(self, batch: Batch) -> dict[str, Any]:
        """The losses of the stage (``caption`` only in evaluation); ``loss`` is their sum
        (``direction`` times ``direction_weight``), ``nll`` / ``n_tokens`` the caption's."""
        batch = self._prepare(batch)
        pair, ids = self.rows(batch)
        losses: dict[str, Tensor] = {}
        nll = batch["before"].new_zeros((), dtype=torch.float)
        n_tokens = 0
        weights: dict[str, float] = {}
        wants_direction = self.direction_head is not None and self._wants("direction")
        # The unmasked pair, unless MVCL's masked one is all the stage reads.
        unmasked = self._wants("caption") or self._wants("fda") or not self._wants("mvcl")
        visual = None
        if wants_direction or (len(pair) and unmasked):
            visual = self.visual(batch["before"], batch["after"])
        if wants_direction:
            losses["direction"] = self.direction_loss(visual, batch["direction"])
            weights["direction"] = float(self.config["direction_weight"])
        if len(pair):
            if self._wants("caption"):
                teacher = self.training and bool(self.config.get("direction_teacher"))
                known = batch["direction"] if teacher else None
                extra = self.word_extra(visual, None if known is None else known.to(visual.device))
                nll, n_tokens = self.caption_loss(visual, pair, ids, extra)
                losses["caption"] = nll / max(1, n_tokens)
            if self._wants("mlm") or self._wants("mvcl"):
                losses.update(self.masked_losses(visual, pair, ids, batch))
            if self._wants("fda"):
                fda = self.fda_loss(visual, pair, ids, batch)
                if fda is not None:
                    losses["fda"] = fda
        zero = self.cross.head_bias.sum() * 0
        for name in (self.active or ()) if self.training else ():
            losses.setdefault(name, zero)  # a batch without captions still reports each one
        total = sum(weights.get(k, 1.0) * v for k, v in losses.items()) if losses else zero
        return {"loss": total, "nll": nll.detach(), "n_tokens": n_tokens, "losses": losses}

    # -- inference --------------------------------------------------------------------------
    def decode_step(
        self, tokens: Tensor, states: tuple[Tensor, ...]
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        """The step of ``captioners/decoding.py``: words so far (N, t) -> log p of the next
        (N, V). The state is the pair's per-layer states (``visual_states``): under the seq2seq
        mask they never read the words, so they are computed once per pair, not per step; with
        ``direction_to_speaker`` the words' extra input (:meth:`word_extra`) follows them."""
        if self.direction_in is not None:
            *layers, extra = states
            words = self.cross.words_given(tuple(layers), tokens, extra)
        else:
            words = self.cross.words_given(states, tokens)
        return torch.log_softmax(self.cross.word_logits(words[:, -1]).float(), dim=-1), states

    def _generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int,
        max_len: int,
        num_sentences: Sequence[int] | None,
    ) -> list[list[Generated]]:
        visual = self.visual(batch["before"], batch["after"])
        states = self.cross.visual_states(visual)
        extra = self.word_extra(visual)
        if extra is not None:
            states = (*states, extra)
        ids = run_decoder(
            self.decode_step,
            states,
            visual.shape[0],
            beam,
            min(max_len, self.cross.positions - 1),
            self.device,
            self.repetition_guard,
        )
        return [[Generated(self.vocab.decode(row))] for row in ids]


__all__ = ["LOSSES", "IDCPCLCaptioner"]
