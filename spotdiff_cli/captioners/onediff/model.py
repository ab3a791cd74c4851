"""``onediff``: OneDiff (Hu et al. 2024, ``papers/onediff-2024.txt``) on this project's data.

The network (§4.1, Fig. 4), for a pair (before, after):

1. **Siamese image encoder**, the same frozen encoder for both images, read at three depths.
   Default: the cached efficientnet-lite0 maps at stride 8 (40 × 28 × 28 at 224 px, average-pooled
   to ``level_pool`` cells a side), stride 16 (112 × 14 × 14) and its final grid (1280 × 7 × 7),
   standing for CLIP's layers 8, 16 and 24 (of 24); the feature cache must hold the two lower
   levels (``feature_levels: [8, 16]`` in the recipe). ``vision: PATH``: a local CLIP vision
   model (``vision.py``): layers L/3, 2L/3, L for the VDM and L - 1 for the projector, as §5.1.
2. **Visual Delta Module** (``vdm.py``): ``delta_tokens`` learnable tokens through ``vdm_layers``
   layers of self-attention, with cross-attention to both images' tokens in every other layer,
   lowest level first. ``vdm: false`` leaves it out (Table 2's "VDM ×" rows).
3. **Projector**: "a two-layer multilayer perceptron (MLP) projector" (§5.1) maps each image's
   final tokens to the LM's width; a learned embedding per image says which one a token belongs
   to (the paper concatenates the two images' tokens; our LM has no image placeholders). The
   delta tokens get their own two-layer MLP: their width is the VDM's, not the encoder's.
4. **Causal LM** (``lm.py``): the visual tokens [before; after; delta] are prefixed to the word
   embeddings (``inputs_embeds``) and the loss is the cross-entropy of the caption tokens only.
   Default: a GPT-2-shaped model trained here from scratch; ``lm: PATH``: a local HF causal LM.

Training (§4.2) is two stages, as recipes (``training/onediff-*.yaml``):

- Stage I, **Coupled Sample Training** (a stage with ``model_options: {cst_ratio: r, cst_data:
  DIR}``): in each training batch a share r of the rows becomes a pseudo pair of two images of
  different scenes whose target is the first image's description, then the second's (``cst.py``
  says where single-image descriptions come from here). The paper freezes the encoder and the LM
  in this stage and trains the VDM and the projector; the encoder is frozen here too (cached
  features), but the default LM starts from random weights, so the default recipes train it in
  both stages (a recipe with a pretrained ``lm`` freezes ``lm.*`` in stage I).
- Stage II, instruction tuning on difference captions: every parameter trains (§5.1 "full
  fine-tuning"); the task prompt of a multi-task mixture is left out (one task here).

Decoding: greedy (beam as an option) through the shared ``captioners/decoding.py``, each step
re-reading the prefix and the words so far (no key/value cache: a stateless step makes beam
reordering free; sentences are short). One sentence per pair, as the other families; on
multi-sentence data every gold sentence is a target of its own, as for ``duda``.

Batches follow ``docs/training-interfaces.md`` plus the multi-level maps ``before_s8``,
``after_s8``, ``before_s16``, ``after_s16`` of a feature cache made with levels; with ``vision``
they carry images (``before_images``/``after_images`` (B, 3, S, S) uint8) instead.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from ...errors import ModelError, UsageError
from ..learned import PAD, Batch, Generated, GradientCaptioner, run_decoder
from ..pair_vit import clip_image_side
from ..vocab import Vocabulary
from .cst import Descriptions, scene_descriptions, scene_of
from .lm import ScratchLM, build_lm
from .vdm import VisualDeltaModule, grid_tokens
from .vision import ClipLevels

Level = tuple[Tensor, tuple[int, int]]
"""One level of one image: tokens (B, N, C) and the (h, w) grid they came from."""


class Side(NamedTuple):
    """What the encoder gives for one image of each pair: the projector's tokens (B, N, C) and
    the VDM's levels, lowest first."""

    tokens: Tensor
    levels: list[Level]


def mlp(width_in: int, width_out: int) -> nn.Sequential:
    """§5.1's two-layer MLP projector (LLaVA-1.5's: Linear, GELU, Linear)."""
    return nn.Sequential(
        nn.LayerNorm(width_in),
        nn.Linear(width_in, width_out),
        nn.GELU(),
        nn.Linear(width_out, width_out),
    )


def pick_rows(sides: tuple[Side, Side], sources: Sequence[tuple[int, int]]) -> Side:
    """A new Side whose row k is image ``sources[k] = (row, 0 for before / 1 for after)``."""
    b = sides[0].tokens.shape[0]
    index = torch.tensor([row + b * side for row, side in sources], device=sides[0].tokens.device)
    tokens = torch.cat([sides[0].tokens, sides[1].tokens]).index_select(0, index)
    levels = [
        (torch.cat([lb, la]).index_select(0, index), hw)
        for (lb, hw), (la, _) in zip(sides[0].levels, sides[1].levels)
    ]
    return Side(tokens, levels)


class OneDiffCaptioner(GradientCaptioner):
    """``onediff``: siamese encoder + Visual Delta Module + projector + causal LM (module
    docstring). Config: see ``onediff/__init__.py``'s defaults."""

    name: ClassVar[str] = "onediff"
    stage_options: ClassVar[tuple[str, ...]] = ("cst_ratio", "cst_data", "cst_objects")

    def __init__(self, config: dict[str, Any], vocab: Vocabulary) -> None:
        super().__init__(config, vocab)
        c = self.config
        # A plain attribute, not a submodule: the frozen CLIP tower stays out of checkpoints.
        self.clip = ClipLevels(str(c["vision"])) if str(c["vision"]).strip() else None
        if self.clip is not None:
            final = self.clip.width
            level_channels = [self.clip.width] * 3
        else:
            final = int(c["channels"])
            level_channels = [int(v) for v in c["level_channels"]] + [final]
        self.lm = build_lm(c, vocab)
        width = self.lm.width
        self.projector = mlp(final, width)
        self.image_embed = nn.Parameter(torch.randn(2, width) * 0.02)
        self.vdm = (
            VisualDeltaModule(
                level_channels,
                int(c["vdm_width"]),
                int(c["delta_tokens"]),
                int(c["vdm_layers"]),
                int(c["vdm_heads"]),
                float(c["dropout"]),
            )
            if c["vdm"]
            else None
        )
        self.delta_projector = mlp(int(c["vdm_width"]), width) if c["vdm"] else None
        # Coupled Sample Training, set per stage (set_training_stage).
        self.cst_ratio = 0.0
        self.cst_bank: Descriptions = {}
        self.cst_source = ""

    @classmethod
    def image_side(cls, model_config: dict[str, Any]) -> int | None:
        """The side of the images this model reads with ``vision: PATH`` (the CLIP folder's
        input size), else None (it reads backbone grids): ``spotdiff train`` then loads images."""
        return clip_image_side(model_config, "onediff")

    # -- inputs -----------------------------------------------------------------------------
    def _prepare(self, batch: Batch) -> Batch:
        if self.clip is None:
            missing = [
                f"{side}_s{int(s)}"
                for s in self.config["levels"]
                for side in ("before", "after")
                if f"{side}_s{int(s)}" not in batch
            ]
            if missing:
                levels = ", ".join(str(int(s)) for s in self.config["levels"])
                raise ModelError(
                    f"'onediff' reads multi-level features and the batch lacks {missing[0]}: "
                    f"train with feature_levels: [{levels}] (its recipes do), or prepare the data "
                    f"with `spotdiff data prepare DIR` {' '.join(f'--level {s}' for s in self.config['levels'])}"
                )
            for stride, channels in zip(self.config["levels"], self.config["level_channels"]):
                got = int(batch[f"before_s{int(stride)}"].shape[1])
                if got != int(channels):
                    raise ModelError(
                        f"'onediff' was built for {channels} channels at stride {stride} but the "
                        f"batch has {got}: set level_channels for the backbone the cache was made with"
                    )
            return super()._prepare(batch)
        if self.config.get("change_gate"):
            raise ModelError(
                f"'{self.name}' with vision: PATH reads pixels, and change_gate gates cached grid "
                "features: leave change_gate out of a recipe that names vision: PATH"
            )
        if "before_images" not in batch:
            raise ModelError(
                "'onediff' with vision: PATH reads images (before_images / after_images, "
                f"(B, 3, {self.clip.image_size}, {self.clip.image_size}) uint8), not cached "
                "backbone features (`spotdiff train` loads images for it)"
            )
        device = self.device
        return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch.items()}

    def encode(self, batch: Batch) -> tuple[Side, Side]:
        """The siamese encoder's output for both images of every pair of a prepared batch."""
        if self.clip is not None:
            self.clip.to(self.device)
            sides = []
            for name in ("before_images", "after_images"):
                tokens, levels = self.clip(batch[name])
                hw = (self.clip.side, self.clip.side)
                sides.append(Side(tokens, [(level, hw) for level in levels]))
            return sides[0], sides[1]
        pool = int(self.config["level_pool"])
        out = []
        for side in ("before", "after"):
            final, final_hw = grid_tokens(batch[side].float())
            levels = [
                grid_tokens(batch[f"{side}_s{int(s)}"].float(), pool) for s in self.config["levels"]
            ]
            out.append(Side(final, [*levels, (final, final_hw)]))
        return out[0], out[1]

    def prefix(self, before: Side, after: Side) -> Tensor:
        """The visual tokens the LM reads first: (B, P, D) = [before (N); after (N); delta (Q)]."""
        parts = [
            self.projector(before.tokens) + self.image_embed[0],
            self.projector(after.tokens) + self.image_embed[1],
        ]
        if self.vdm is not None and self.delta_projector is not None:
            parts.append(self.delta_projector(self.vdm(before.levels, after.levels)))
        return torch.cat(parts, dim=1)

    # -- Coupled Sample Training ----------------------------------------------------------------
    def set_training_stage(
        self, name: str, objectives: dict[str, float], options: dict[str, Any]
    ) -> None:
        """A recipe stage's ``model_options``: ``cst_ratio`` (share of a batch's rows made coupled
        samples; 0 = none), ``cst_data`` (the benchmark folder, or its name in the user cache,
        whose scene annotations give the single-image descriptions), ``cst_objects`` (objects
        named per image, default 3)."""
        unknown = [k for k in options if k not in self.stage_options]
        if unknown:
            raise UsageError(
                f"stage '{name}': onediff has no model option '{unknown[0]}' (options: "
                f"{', '.join(self.stage_options)})"
            )
        ratio = float(options.get("cst_ratio", 0.0))
        if not 0.0 <= ratio <= 1.0:
            raise UsageError(f"stage '{name}': cst_ratio must be between 0 and 1, got {ratio}")
        self.cst_ratio = ratio
        if ratio > 0:
            if not options.get("cst_data"):
                raise UsageError(
                    f"stage '{name}': cst_ratio > 0 needs cst_data, the folder of the benchmark "
                    "whose scene annotations describe each image"
                )
            self.cst_bank = scene_descriptions(
                str(options["cst_data"]), "train", int(options.get("cst_objects", 3))
            )
            self.cst_source = str(options["cst_data"])

    def couple(
        self, batch: Batch
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]], dict[int, list[str]]]:
        """Which image each row's before and after become, and the rows made coupled samples
        with their targets. A ``cst_ratio`` share of the rows, drawn at random, each takes an
        image of its own pair and one of another scene's pair, both with a description; its
        target is the two descriptions in that order (§4.2: "concatenated captions")."""
        ids = list(batch.get("pair_ids") or [])
        b = len(ids)
        before = [(r, 0) for r in range(b)]
        after = [(r, 1) for r in range(b)]
        coupled: dict[int, list[str]] = {}
        if not self.training or self.cst_ratio <= 0 or b < 2:
            return before, after, coupled
        unknown = [pid for pid in ids if str(pid) not in self.cst_bank]
        if len(unknown) > b // 2:  # the descriptions of another benchmark: stop, do not mislabel
            raise UsageError(
                f"cst_data {self.cst_source} does not describe the pairs this run trains on "
                f"(pair '{unknown[0]}' is not in it): give the folder of the run's --data"
            )
        described = [
            [side for side in (0, 1) if self.cst_bank.get(str(pid), ((), ()))[side]] for pid in ids
        ]
        count = int(round(self.cst_ratio * b))
        for row in torch.randperm(b)[:count].tolist():
            partners = [
                j for j in range(b) if described[j] and scene_of(ids[j]) != scene_of(ids[row])
            ]
            if not described[row] or not partners:
                continue
            side_x = random.choice(described[row])
            j = random.choice(partners)
            side_y = random.choice(described[j])
            before[row], after[row] = (row, side_x), (j, side_y)
            desc = self.cst_bank[str(ids[row])][side_x] + self.cst_bank[str(ids[j])][side_y]
            coupled[row] = list(desc)
        return before, after, coupled

    # -- loss -----------------------------------------------------------------------------------
    def targets(self, batch: Batch, skip: set[int]) -> tuple[list[int], list[Tensor], list[Tensor]]:
        """(row per target, token sequences, target masks) of every gold sentence of the rows
        not in ``skip``, in the LM's ids."""
        pair, sent = torch.nonzero(batch["sentence_valid"], as_tuple=True)
        keep = [k for k, p in enumerate(pair.tolist()) if p not in skip]
        rows = [int(pair[k]) for k in keep]
        if not keep:
            return [], [], []
        tokens = batch["tokens"][pair[keep], sent[keep]]
        if isinstance(self.lm, ScratchLM):
            return rows, list(tokens), list(tokens[:, 1:] != PAD)
        texts = [[self.vocab.decode(row.tolist())] for row in tokens]
        ids, mask = self.lm.sequences(texts, int(tokens.shape[1]))
        return rows, list(ids), list(mask)

    def sequence_nll(self, prefix: Tensor, seqs: Tensor, mask: Tensor) -> Tensor:
        """Summed NLL of each row's target tokens (N,), given its prefix (N, P, D), sequences
        (N, T) starting with the start token and the target mask (N, T - 1)."""
        embeds = torch.cat([prefix, self.lm.embed(seqs[:, :-1])], dim=1)
        logits = self.lm.logits(embeds)[:, prefix.shape[1] :]
        logp = torch.log_softmax(logits.float(), dim=-1)
        token = logp.gather(2, seqs[:, 1:, None]).squeeze(2)
        return -(token * mask).sum(dim=1)

    def loss(self, batch: Batch) -> dict[str, Any]:
        """Caption cross-entropy per target token over the batch's difference captions and, in a
        CST stage, its coupled samples; ``losses`` names the two parts (``caption``, ``cst``)."""
        batch = self._prepare(batch)
        before, after = self.encode(batch)
        src_b, src_a, coupled = self.couple(batch)
        if coupled:
            before, after = pick_rows((before, after), src_b), pick_rows((before, after), src_a)
        prefix = self.prefix(before, after)
        rows, seqs, masks = self.targets(batch, set(coupled))
        n_idc = len(rows)
        if coupled:
            cst_rows = sorted(coupled)
            ids, mask = self.lm.sequences(
                [coupled[r] for r in cst_rows], int(self.config["cst_max_len"])
            )
            rows += cst_rows
            seqs += list(ids.to(prefix.device))
            masks += list(mask.to(prefix.device))
        if not rows:
            zero = prefix.sum() * 0
            return {"loss": zero, "nll": zero.detach(), "n_tokens": 0, "losses": {"caption": zero}}
        seq = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
        mask = nn.utils.rnn.pad_sequence(masks, batch_first=True, padding_value=False)
        index = torch.tensor(rows, device=prefix.device)
        nll = self.sequence_nll(prefix.index_select(0, index), seq, mask)
        counts = mask.sum(dim=1)
        total_tokens = int(counts.sum())
        loss = nll.sum() / max(1, total_tokens)
        losses = {"caption": nll[:n_idc].sum() / counts[:n_idc].sum().clamp_min(1)}
        if coupled:
            losses["cst"] = nll[n_idc:].sum() / counts[n_idc:].sum().clamp_min(1)
        return {
            "loss": loss,
            "nll": nll.sum().detach(),
            "n_tokens": total_tokens,
            "losses": losses,
        }

    def folder_parts(self) -> dict[str, str]:
        """What the checkpoint may leave out when it did not train: a local LM's weights come
        back from its folder (``captioners/checkpoint.py``)."""
        if isinstance(self.lm, ScratchLM):
            return {}
        return {"lm.model.": str(self.config["lm"])}

    # -- inference ------------------------------------------------------------------------------
    def decode_step(self, tokens: Tensor, prefix: Tensor) -> tuple[Tensor, Tensor]:
        """The step function of ``captioners/decoding.py``: tokens so far (N, t) in decoding ids,
        state = the visual prefix (N, P, D) -> log p of the next token (N, V)."""
        embeds = torch.cat([prefix, self.lm.embed(self.lm.from_decoding(tokens))], dim=1)
        logits = self.lm.to_decoding(self.lm.logits(embeds)[:, -1])
        return torch.log_softmax(logits.float(), dim=-1), prefix

    def _generate(
        self,
        batch: Batch,
        max_sentences: int,
        beam: int,
        max_len: int,
        num_sentences: Sequence[int] | None,
    ) -> list[list[Generated]]:
        prefix = self.prefix(*self.encode(batch))
        ids = run_decoder(
            self.decode_step,
            prefix,
            prefix.shape[0],
            beam,
            max_len,
            self.device,
            self.repetition_guard,
        )
        return [[Generated(self.lm.text(row))] for row in ids]

    def analysis_batch(self, analysis: Any) -> Batch:
        """The one-pair batch of an analysed pair: the backbone's final grid and the lower
        levels (or, with ``vision``, the images at the CLIP input size), computed once."""
        cached = self._analysis_cache
        if cached is not None and cached[0] is analysis:
            return cached[1]
        from ..features import backbone_features, cluster_tensors, get_backbone, resize_for_backbone

        images = [analysis.pair.before.pixels, analysis.pair.after.pixels]
        device = str(self.device)
        if self.clip is not None:
            side = (self.clip.image_size, self.clip.image_size)
            stacked = [
                torch.from_numpy(
                    np.ascontiguousarray(resize_for_backbone(im, side).transpose(2, 0, 1))
                )
                for im in images
            ]
            # "before" too: GradientCaptioner.log_likelihood reads the batch's device from it.
            inputs = {
                "before_images": stacked[0][None],
                "after_images": stacked[1][None],
                "before": stacked[0][None],
            }
        else:
            backbone = self.finetuned_backbone or get_backbone(
                self.config.get("backbone", "efficientnet_lite0"), device
            )
            size = int(self.config.get("input_size", 0))
            maps = backbone_features(
                images,
                backbone,
                device,
                (size, size) if size else None,
                levels=[int(s) for s in self.config["levels"]],
            )
            inputs = {}
            for name, value in maps.items():
                key = "" if name == "grid" else f"_{name}"
                inputs[f"before{key}"], inputs[f"after{key}"] = value[:1], value[1:]
        # The clusters on the final grid (the change gate reads them; collate's shapes).
        grid = (int(self.config["grid"][0]), int(self.config["grid"][1]))
        batch = {
            **inputs,
            **cluster_tensors(analysis, grid),
            "tokens": torch.full((1, 1, 2), PAD, dtype=torch.long),
            "sentence_valid": torch.zeros((1, 1), dtype=torch.bool),
            "pair_ids": [analysis.pair.before.source],
        }
        self._analysis_cache = (analysis, batch)
        return batch
