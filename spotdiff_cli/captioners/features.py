"""What a learned model reads: pixels and clusters turned into the batch of
docs/training-interfaces.md, written once for inference, training and the preprocessing cache.

This module owns:

* backbone preprocessing (:func:`resize_for_backbone`, :func:`normalise_for_backbone`) and the
  grids it feeds (:func:`backbone_grids`, :func:`with_grids`, :func:`get_backbone`);
* the projection of cluster masks onto the feature grid (:func:`project_masks`, §3.2) and the
  normalised prior features g(z) (:func:`normalise_prior_features`), and the gate that lets a
  model see the after grid only where they lie (:func:`gate_by_clusters`);
* one pair's inputs (:class:`PairInputs`) and their collation into a batch (:func:`collate`);
* the one-pair batch of an analysed pair (:func:`batch_from_analysis`), what ``describe()`` uses.

``data/cache.py`` computes the cached grids with :func:`backbone_grids`, ``train/batches.py``
builds training batches with :func:`collate`, and the Spot-the-diff models call
:func:`batch_from_analysis` at inference: one code path, so a model sees at inference exactly
what it saw in training. Nothing here imports ``spotdiff_cli.train``; torch is imported inside
the functions that need it, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from ..errors import DataError, ModelError
from .batch import Batch
from .vocab import PAD_ID, Vocabulary, tokenize

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..types import Analysis
    from .backbones import BackboneInfo

Backbone = tuple[Any, "BackboneInfo"]
"""``(module, BackboneInfo)`` as ``backbones.create_backbone`` returns it."""

# What :func:`resize_for_backbone` + :func:`normalise_for_backbone` do, in words. It is part of
# the feature cache's settings (data/cache.py): changing the preprocessing must change this text,
# so that cached grids made the old way are rebuilt rather than silently mixed with new ones.
PREPROCESSING = "cv2.INTER_AREA, RGB/255, (x - mean) / std"


# --------------------------------------------------------------------------------------------------
# backbone preprocessing


def resize_for_backbone(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(H, W, 3) uint8 RGB -> (h, w, 3) uint8 at the backbone's input ``size`` = (h, w).

    Area interpolation: it averages the pixels a downscaled cell covers, so fine texture does not
    alias into the features (the images are usually larger than the 224 px input).
    """
    height, width = size
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)


def normalise_for_backbone(images: torch.Tensor, info: BackboneInfo) -> torch.Tensor:
    """(N, 3, h, w) uint8 RGB -> (N, 3, h, w) float32 ``(x / 255 - mean) / std``, the
    normalisation of the backbone's pretrained config (``info.mean``/``info.std``), on the
    tensor's device. Differentiable after the cast, so fine-tuning uses it too."""
    import torch

    x = images.float().div(255)
    mean = torch.tensor(info.mean, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(info.std, device=x.device).view(1, 3, 1, 1)
    return (x - mean) / std


@functools.lru_cache(maxsize=4)
def get_backbone(
    name: str = "efficientnet_lite0", device: str = "cpu", weights: str | None = None
) -> Backbone:
    """``create_backbone(name)`` once per process and device: describe() is called per pair."""
    from .backbones import create_backbone

    module, info = create_backbone(name, weights=weights)
    return module.to(device).eval(), info


def backbone_grids(
    images: Sequence[np.ndarray],
    backbone: Backbone,
    device: Any = "cpu",
    size: tuple[int, int] | None = None,
) -> torch.Tensor:
    """(N, C, h, w) float32 grids of N (H, W, 3) uint8 RGB images, without gradients.

    Each image is resized to ``size`` (default: the backbone's ``info.input_size``) and
    normalised as above; ``device`` is where the backbone module lives.
    """
    return backbone_features(images, backbone, device, size)["grid"]


def level_key(stride: int) -> str:
    """The name of a multi-level feature grid of ``stride``: ``s8``, ``s16``, ``s32``."""
    return f"s{int(stride)}"


def backbone_features(
    images: Sequence[np.ndarray],
    backbone: Backbone,
    device: Any = "cpu",
    size: tuple[int, int] | None = None,
    levels: Sequence[int] = (),
) -> dict[str, torch.Tensor]:
    """The final grid and, for each stride in ``levels``, the backbone's feature map at that
    stride, of N (H, W, 3) uint8 RGB images, without gradients, in one forward pass.

    Returns ``{"grid": (N, C, h, w)}`` (what :func:`backbone_grids` gives) plus, per stride s,
    ``{"s<s>": (N, C_s, H/s, W/s)}`` float32: the output of the last backbone stage at that stride
    (timm's ``feature_info``; for efficientnet_lite0 at 224 px: s8 40 x 28 x 28, s16 112 x 14 x 14,
    s32 320 x 7 x 7). The multi-level features later families read (OneDiff's visual delta module).
    """
    import torch

    from ..errors import ModelError

    module, info = backbone
    height, width = size or info.input_size
    batch = np.stack([resize_for_backbone(image, (height, width)) for image in images])
    x = normalise_for_backbone(torch.from_numpy(batch).to(device).permute(0, 3, 1, 2), info)
    with torch.inference_mode():
        if not levels:
            return {"grid": module(x).float()}
        stages = [int(f["reduction"]) for f in module.feature_info]
        missing = [s for s in levels if int(s) not in stages]
        if missing:
            raise ModelError(
                f"backbone '{info.name}' has no feature stage at stride {missing[0]} "
                f"(strides: {', '.join(map(str, stages))})"
            )
        final, maps = module.forward_intermediates(x, indices=[stages.index(s) for s in levels])
    out = {"grid": final.float()}
    for stride, grid in zip(levels, maps):
        if grid.shape[-2:] != (-(-height // stride), -(-width // stride)):
            raise ModelError(
                f"backbone '{info.name}' gives a {tuple(grid.shape[-2:])} map where stride "
                f"{stride} was asked for at {height}x{width} (resnet101 is cut after layer3 here: "
                "strides 8 and 16 only)"
            )
        out[level_key(stride)] = grid.float()
    return out


def with_grids(batch: Batch, backbone: Backbone) -> Batch:
    """A fine-tuning batch (``before_images``/``after_images`` (B, 3, H, W) uint8) with
    ``before``/``after`` (B, C, h, w) grids computed by ``backbone`` *with* gradients, so the
    backbone trains in the step. A batch that already has grids is returned unchanged."""
    import torch

    if "before_images" not in batch:
        return batch
    module, info = backbone
    images = torch.cat([batch["before_images"], batch["after_images"]])
    before, after = module(normalise_for_backbone(images, info)).float().chunk(2)
    out = {k: v for k, v in batch.items() if k not in ("before_images", "after_images")}
    return {**out, "before": before, "after": after}


# --------------------------------------------------------------------------------------------------
# clusters on the grid


def project_masks(masks: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """Cluster masks at image resolution -> soft masks on the feature grid.

    Spot-the-diff §3.2: "we project binary mask C_z from the input image dimensionality (224*224)
    to the dimensionality of the visual features (14*14). To achieve this, we use pyramid reduce
    downsampling on a smoothed version of cluster mask C_z. [...] This projection is multiplied
    to attention weights."

    So: Gaussian smoothing (sigma = half the grid stride, which spreads a cluster over the cells
    whose receptive field it touches), then repeated 2x pyramid reductions (``cv2.pyrDown``:
    Gaussian 5x5 + decimation, the operation of scikit-image's ``pyramid_reduce`` the authors'
    code used), then one area resize to the exact grid (224 -> 7 is not a power of two). Each
    non-empty mask is scaled so its peak cell is 1: attention weights are renormalised after the
    multiplication anyway, and a small cluster would otherwise project to values near 0 that an
    epsilon in the model could swamp.

    Args:
        masks: (K, H, W) bool (or 0/1) cluster masks; K may be 0.
        grid: (h, w) of the backbone's feature grid, e.g. (7, 7) for efficientnet_lite0 at 224 px.

    Returns:
        (K, h, w) float32 in [0, 1]; an empty mask stays all-zero, a non-empty one peaks at 1.
    """
    masks = np.asarray(masks)
    if masks.ndim != 3:
        raise ValueError(f"masks must be (K, H, W), got shape {masks.shape}")
    gh, gw = int(grid[0]), int(grid[1])
    k, height, width = masks.shape
    out = np.zeros((k, gh, gw), np.float32)
    if k == 0:
        return out
    # Stride of the grid in image pixels; sigma = stride / 2 reaches about one cell either side.
    sigma = 0.5 * max(height / gh, width / gw)
    for i in range(k):
        m = masks[i].astype(np.float32)
        if not m.any():
            continue
        if sigma > 0.5:
            m = cv2.GaussianBlur(m, (0, 0), sigma)
        # Pyramid reduce while the image is at least twice the grid on both sides.
        while m.shape[0] >= 2 * gh and m.shape[1] >= 2 * gw and min(m.shape) >= 2:
            m = cv2.pyrDown(m)
        if m.shape != (gh, gw):
            interp = cv2.INTER_AREA if m.shape[0] >= gh and m.shape[1] >= gw else cv2.INTER_LINEAR
            m = cv2.resize(m, (gw, gh), interpolation=interp)
        peak = float(m.max())
        if peak > 0:
            out[i] = np.clip(m / peak, 0.0, 1.0)
    return out


GATES = ("after", "focus")


def gate_by_clusters(batch: Batch, mode: str = "after") -> Batch:
    """The batch seen through the union ``m`` of the pair's cluster masks on each grid:

    - ``after``: every after grid becomes ``before + m ⊙ (after − before)``: outside what the
      analysis found changed, the model sees the before features twice;
    - ``focus``: both grids become ``m ⊙ grid``: the model sees the changed places only, and a
      pair where the analysis found nothing is two empty grids.

    Why: a learned model's only evidence that a pair differs is its two grids, and on the
    rendered 3-D benchmark a moved camera changes every cell of a 7 x 7 grid as much as an
    arriving object does: a logistic regression on the cell differences of 680 training pairs
    tells changed pairs from camera-only distractors 0.70 / 0.63 (recall / specificity) on the
    test split, the analysis' clusters 0.93 / 0.90 (docs/results.md, issue 24). The analysis
    aligns the camera first and is the change detector of every other path of the tool; gated,
    a pair where it found nothing has identical grids, and the model's words go to what changed.
    The Spot-the-diff models use the same masks inside their attention instead (CAPT-MASKED, DDLA).

    batch: with ``before``/``after`` (B, C, h, w), optionally ``before_s<k>``/``after_s<k>``
    (B, C_k, h_k, w_k), ``cluster_masks`` (B, K, h, w) in [0, 1] (:func:`project_masks`) and
    ``cluster_valid`` (B, K) bool. A level of another size gets the union resized bilinearly.
    """
    import torch
    import torch.nn.functional as F

    masks = batch["cluster_masks"] * batch["cluster_valid"][..., None, None].to(
        batch["cluster_masks"].dtype
    )
    union = (
        masks.amax(1, keepdim=True)
        if masks.shape[1]
        else masks.new_zeros((masks.shape[0], 1, *masks.shape[2:]))
    )  # (B, 1, h, w)
    if mode not in GATES:
        raise ModelError(f'change_gate must be one of {", ".join(GATES)} or "" (off), got {mode!r}')
    out = dict(batch)
    for key in batch:
        if not (key == "after" or key.startswith("after_s")):
            continue
        after = batch[key].float()
        before_key = "before" + key[len("after") :]
        before = batch[before_key].float()
        gate = union.to(after.device)
        if gate.shape[-2:] != after.shape[-2:]:
            gate = F.interpolate(gate, size=after.shape[-2:], mode="bilinear", align_corners=False)
        gate = gate.clamp(0.0, 1.0)
        if mode == "after":
            out[key] = torch.lerp(before, after, gate)
        else:
            out[key], out[before_key] = after * gate, before * gate
    return out  # type: ignore[return-value]


def normalise_prior_features(features: np.ndarray, height: int, width: int) -> np.ndarray:
    """g(z) = (box length, box width, box area, active pixels) in pixels -> fractions of the image
    side / area, then log1p(100 x): the prior P(z|X) ∝ exp(wᵀg(z)) (§3.2) is log-linear, so the
    features should span a few units rather than 0..50000 pixels.

    features: (K, 4) float; returns (K, 4) float32.
    """
    features = np.asarray(features, np.float32).reshape(-1, 4)
    scale = np.array([height, width, height * width, height * width], np.float32)
    return np.log1p(100.0 * features / scale).astype(np.float32)


# --------------------------------------------------------------------------------------------------
# one pair's inputs, and a batch of them


@dataclass(frozen=True)
class PairInputs:
    """One pair's model inputs, before collation.

    before, after: (C, h, w) float16/32 backbone grids, or, when fine-tuning the backbone,
    (3, H, W) uint8 RGB images at its input size (collate names them before_images/after_images).
    masks: (K, h, w) float32 cluster masks projected to the grid size. feats: (K, 4) float32
    normalised prior features g(z). cluster_ids: (K,) analysis ids. annotations: sentences per
    annotator. gold: per annotator, per sentence, the gold cluster index (or -1); empty when unknown.
    levels: multi-level backbone maps by name (``s8``, ``s16``, ``s32``): (before, after), each
    (C_s, h_s, w_s); empty unless the feature cache was made with levels. change_types: the
    dataset's kinds of change ("appear", "drop", ...), empty where it does not say.
    """

    id: str
    before: np.ndarray
    after: np.ndarray
    masks: np.ndarray
    feats: np.ndarray
    cluster_ids: tuple[int, ...]
    annotations: tuple[tuple[str, ...], ...]
    gold: tuple[tuple[int, ...], ...] = ()
    levels: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    change_types: tuple[str, ...] = ()

    @property
    def references(self) -> list[str]:
        return [s for a in self.annotations for s in a if s.strip()]

    @property
    def descriptions(self) -> list[str]:
        return [
            " ".join(s for s in a if s.strip())
            for a in self.annotations
            if any(s.strip() for s in a)
        ]


def caption_key(sentences: Sequence[str]) -> str:
    """A caption's identity (the contrastive sampler's rule, ``train/sampler.py``): its words,
    lower-case, punctuation and spacing ignored (:func:`~.vocab.tokenize`)."""
    return " ".join(w for s in sentences for w in tokenize(s))


def caption_groups(captions: Sequence[Sequence[str]]) -> list[int]:
    """For a batch's captions (each a list of sentences), a group id per row: rows with the same
    :func:`caption_key` share an id. A loss that uses the other rows of a batch as negatives masks
    the pairs ``groups[i] == groups[j], i != j``."""
    ids: dict[str, int] = {}
    return [ids.setdefault(caption_key(c), len(ids)) for c in captions]


def collate(
    items: Sequence[tuple[PairInputs, int | None]],
    vocab: Vocabulary,
    max_len: int = 25,
    max_description_len: int = 80,
) -> Batch:
    """Stack ``(pair, annotation index or None)`` items into a batch (docs/training-interfaces.md).

    ``None`` = no gold text (inference): ``tokens`` is all ``<pad>`` and ``sentence_valid`` False.
    """
    import torch

    if not items:
        raise DataError("cannot build an empty batch")
    b = len(items)
    pairs = [p for p, _ in items]
    k = max(1, max(len(p.cluster_ids) for p in pairs))
    images = pairs[0].before.dtype == np.uint8  # fine-tuning: images, not cached grids
    c, h, w = pairs[0].before.shape
    if images:
        h, w = pairs[0].masks.shape[-2:]
    masks = torch.zeros(b, k, h, w)
    valid = torch.zeros(b, k, dtype=torch.bool)
    feats = torch.zeros(b, k, 4)
    sentences: list[list[str]] = []
    golds: list[tuple[int, ...]] = []
    for i, (pair, ann) in enumerate(items):
        n = len(pair.cluster_ids)
        if n:
            masks[i, :n] = torch.from_numpy(np.ascontiguousarray(pair.masks, np.float32))
            feats[i, :n] = torch.from_numpy(np.ascontiguousarray(pair.feats, np.float32))
            valid[i, :n] = True
        if ann is None:
            sentences.append([])
            golds.append(())
            continue
        annotation = pair.annotations[ann]
        keep = [j for j, s in enumerate(annotation) if tokenize(s)]
        sentences.append([annotation[j] for j in keep])
        gold = pair.gold[ann] if ann < len(pair.gold) else ()
        golds.append(tuple(gold[j] if j < len(gold) else -1 for j in keep))
    s = max(1, max(len(x) for x in sentences))
    encoded = [[vocab.encode(t, max_len) for t in x] for x in sentences]
    t = max([2] + [len(e) for x in encoded for e in x])
    tokens = torch.full((b, s, t), PAD_ID, dtype=torch.long)
    sentence_valid = torch.zeros(b, s, dtype=torch.bool)
    gold_alignment = torch.full((b, s), -1, dtype=torch.long)
    multi = [vocab.encode_many(x, max_description_len) if x else [] for x in sentences]
    t2 = max([2] + [len(m) for m in multi])
    multi_tokens = torch.full((b, t2), PAD_ID, dtype=torch.long)
    for i in range(b):
        for j, ids in enumerate(encoded[i]):
            tokens[i, j, : len(ids)] = torch.tensor(ids)
            sentence_valid[i, j] = True
            gold_alignment[i, j] = golds[i][j] if j < len(golds[i]) else -1
        if multi[i]:
            multi_tokens[i, : len(multi[i])] = torch.tensor(multi[i])
    if images:
        inputs = {
            "before_images": torch.from_numpy(np.stack([p.before for p in pairs])),
            "after_images": torch.from_numpy(np.stack([p.after for p in pairs])),
        }
    else:
        inputs = {
            "before": torch.from_numpy(np.stack([p.before for p in pairs]).astype(np.float32)),
            "after": torch.from_numpy(np.stack([p.after for p in pairs]).astype(np.float32)),
        }
    for name in pairs[0].levels:  # before_s8, after_s8, ...: (B, C_s, h_s, w_s)
        for which, side in enumerate(("before", "after")):
            stacked = np.stack([p.levels[name][which] for p in pairs]).astype(np.float32)
            inputs[f"{side}_{name}"] = torch.from_numpy(stacked)
    return {
        **inputs,
        "cluster_masks": masks,
        "cluster_valid": valid,
        "cluster_feats": feats,
        "tokens": tokens,
        "sentence_valid": sentence_valid,
        "multi_tokens": multi_tokens,
        "gold_alignment": gold_alignment,
        "caption_groups": torch.tensor(caption_groups(sentences), dtype=torch.long),
        "pair_ids": [p.id for p in pairs],
        "references": [p.references for p in pairs],
        "descriptions": [p.descriptions for p in pairs],
        "cluster_ids": [list(p.cluster_ids) for p in pairs],
        "direction": torch.tensor([change_direction(p.change_types) for p in pairs]),
    }


ARRIVALS, DEPARTURES = frozenset({"appear", "add"}), frozenset({"disappear", "drop"})


def change_direction(change_types: Sequence[str]) -> int:
    """1 when every change of a pair is an arrival, 0 when every one is a departure, else -1 (a
    move, a colour, mixed kinds, no change, or not known): the label of a direction objective."""
    kinds = set(change_types)
    if kinds and kinds <= ARRIVALS:
        return 1
    if kinds and kinds <= DEPARTURES:
        return 0
    return -1


def move_batch(batch: Batch, device: Any) -> Batch:
    """The batch with every tensor on ``device`` (lists stay as they are)."""
    import torch

    return {
        k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v)
        for k, v in batch.items()
    }


# --------------------------------------------------------------------------------------------------
# inference: one analysed pair


def salient_clusters(analysis: Analysis, max_clusters: int = 10) -> list[Any]:
    """The analysis' clusters most salient first, at most ``max_clusters`` (0 = all), as training
    keeps them (``train/batches.py``)."""
    ranked = sorted(analysis.clusters, key=lambda c: -c.salience)
    return ranked[: max_clusters if max_clusters > 0 else None]


def cluster_tensors(analysis: Analysis, grid: tuple[int, int], max_clusters: int = 10) -> Batch:
    """A one-pair batch's cluster entries for a model that builds the rest of its inputs itself
    (onediff's levels): ``cluster_masks`` (1, K, h, w) projected onto ``grid`` (K >= 1, padded),
    ``cluster_valid`` (1, K) bool and ``cluster_ids``, what :func:`collate` gives."""
    import torch

    clusters = salient_clusters(analysis, max_clusters)
    height, width = analysis.mask.active.shape
    masks = np.stack([c.mask for c in clusters]) if clusters else np.zeros((0, height, width), bool)
    projected = project_masks(masks, grid)
    k = max(1, len(clusters))
    out = torch.zeros(1, k, *grid)
    out[0, : len(clusters)] = torch.from_numpy(projected)
    valid = torch.zeros(1, k, dtype=torch.bool)
    valid[0, : len(clusters)] = True
    return {"cluster_masks": out, "cluster_valid": valid, "cluster_ids": [[c.id for c in clusters]]}  # type: ignore[return-value]


def batch_from_analysis(
    analysis: Analysis,
    backbone: Backbone,
    vocab: Vocabulary,
    max_clusters: int = 10,
    device: str = "cpu",
    input_size: tuple[int, int] | None = None,
) -> Batch:
    """The one-pair batch for ``generate`` (no gold text) from an analysed pair.

    backbone: ``(module, BackboneInfo)`` as ``get_backbone`` / ``create_backbone`` return it.
    Features are computed on the analysed pair (working resolution, after shifted onto before),
    resized to ``input_size`` (h, w) for the backbone (default: its own; a model trained on a
    448 px feature cache must be fed 448 px here too); clusters are kept most salient first, at
    most ``max_clusters``, as in training.
    """
    clusters = salient_clusters(analysis, max_clusters)
    grids = backbone_grids(
        [analysis.pair.before.pixels, analysis.pair.after.pixels], backbone, device, input_size
    )
    _, gh, gw = grids.shape[1:]
    height, width = analysis.mask.active.shape
    masks = np.stack([c.mask for c in clusters]) if clusters else np.zeros((0, height, width), bool)
    feats = np.array([c.features for c in clusters], np.float32).reshape(-1, 4)
    pair = PairInputs(
        id=analysis.pair.before.source,
        before=grids[0].cpu().numpy(),
        after=grids[1].cpu().numpy(),
        masks=project_masks(masks, (gh, gw)),
        feats=normalise_prior_features(feats, height, width),
        cluster_ids=tuple(c.id for c in clusters),
        annotations=(),
    )
    return collate([(pair, None)], vocab)
