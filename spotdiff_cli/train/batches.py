"""Dataset + preprocessing cache -> the batches of docs/training-interfaces.md.

Two ways in, one collate:

* ``load_training_data(root, split, vocab, ...)`` reads a split, its cached cluster analysis
  (``data/cache.py: load_analysis``) and cached backbone grids (``load_features``), projects every
  cluster mask onto the grid once (``captioners/masks.py``), and keeps it all in memory as numpy.
  ``TrainingData.batch(examples)`` then collates any list of ``(pair index, annotation index)``.
  Each annotator's description is its own training example (Spot-the-diff repeats ``img_id`` per
  annotator; the paper trains on every annotation).
* ``batch_from_analysis(analysis, backbone, vocab)`` builds the one-pair batch a model's
  ``describe()`` needs at inference, from an ``Analysis`` and a backbone, with the same
  preprocessing as the cache so a model sees at inference what it saw in training.

Batch keys, shapes and meaning: see docs/training-interfaces.md. Two additive keys:
``descriptions`` (list[list[str]], each annotator's whole description: multi-sentence references)
and ``cluster_ids`` (list[list[int]], the analysis' cluster id of each cluster slot, so a model
can fill ``Sentence.cluster_ids``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ..captioners.masks import project_masks
from ..captioners.vocab import PAD_ID, Vocabulary, tokenize
from ..errors import DataError
from ..geometry import box_iou

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..types import Analysis

Batch = dict[str, Any]

# A cluster is the gold cluster of a sentence when its box overlaps the change's box this much
# (IoU with the before box, the after box or their union). Lower than the 0.3 of alignment
# precision (evaluate/protocols.py): here we want *the best* cluster, and a moved object's cluster
# often covers only one of its two boxes.
GOLD_IOU = 0.1


@dataclass(frozen=True)
class PairInputs:
    """One pair's model inputs, before collation.

    before, after: (C, h, w) float16/32 backbone grids, or, when fine-tuning the backbone,
    (3, H, W) uint8 RGB images at its input size (collate names them before_images/after_images).
    masks: (K, h, w) float32 cluster masks projected to the grid size. feats: (K, 4) float32
    normalised prior features g(z). cluster_ids: (K,) analysis ids. annotations: sentences per
    annotator. gold: per annotator, per sentence, the gold cluster index (or -1); empty when unknown.
    """

    id: str
    before: np.ndarray
    after: np.ndarray
    masks: np.ndarray
    feats: np.ndarray
    cluster_ids: tuple[int, ...]
    annotations: tuple[tuple[str, ...], ...]
    gold: tuple[tuple[int, ...], ...] = ()

    @property
    def references(self) -> list[str]:
        return [s for a in self.annotations for s in a if s.strip()]

    @property
    def descriptions(self) -> list[str]:
        return [" ".join(s for s in a if s.strip()) for a in self.annotations if any(s.strip() for s in a)]


def normalise_prior_features(features: np.ndarray, height: int, width: int) -> np.ndarray:
    """g(z) = (box length, box width, box area, active pixels) in pixels -> fractions of the image
    side / area, then log1p(100 x): the prior P(z|X) ∝ exp(wᵀg(z)) (§3.2) is log-linear, so the
    features should span a few units rather than 0..50000 pixels.

    features: (K, 4) float; returns (K, 4) float32.
    """
    features = np.asarray(features, np.float32).reshape(-1, 4)
    scale = np.array([height, width, height * width, height * width], np.float32)
    return np.log1p(100.0 * features / scale).astype(np.float32)


def _keep_clusters(salience: np.ndarray, max_clusters: int) -> np.ndarray:
    """Indices of the ``max_clusters`` most salient clusters, most salient first. DDLA runs its
    decoder once per cluster (§3.3), so the cost grows with K; the tail is noise in practice."""
    order = np.argsort(-np.asarray(salience, np.float32), kind="stable")
    return order[:max_clusters] if max_clusters > 0 else order


def gold_clusters(changes: Sequence[dict[str, Any]], boxes: np.ndarray, n_sentences: int) -> tuple[int, ...]:
    """Sentence i describes change i (the synthetic benchmark's rule); its gold cluster is the one
    whose box (image pixels, (K, 4) x, y, w, h) best overlaps the change's before box, after box or
    their union; -1 when none overlaps by ``GOLD_IOU``."""
    out = [-1] * n_sentences
    for i, change in enumerate(changes):
        index = int(change.get("sentence", i))
        if not 0 <= index < n_sentences:
            continue
        cands = [tuple(b) for b in (change.get("bbox_before"), change.get("bbox_after")) if b]
        if len(cands) == 2:
            (x0, y0, w0, h0), (x1, y1, w1, h1) = cands
            x, y = min(x0, x1), min(y0, y1)
            cands.append((x, y, max(x0 + w0, x1 + w1) - x, max(y0 + h0, y1 + h1) - y))
        best, best_iou = -1, GOLD_IOU
        for k, box in enumerate(boxes):
            score = max((box_iou(box, c) for c in cands), default=0.0)
            if score >= best_iou:
                best, best_iou = k, score
        out[index] = best
    return tuple(out)


# --------------------------------------------------------------------------------------------------
# collate


def collate(items: Sequence[tuple[PairInputs, int | None]], vocab: Vocabulary, max_len: int = 25,
            max_description_len: int = 80) -> Batch:
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
        inputs = {"before_images": torch.from_numpy(np.stack([p.before for p in pairs])),
                  "after_images": torch.from_numpy(np.stack([p.after for p in pairs]))}
    else:
        inputs = {"before": torch.from_numpy(np.stack([p.before for p in pairs]).astype(np.float32)),
                  "after": torch.from_numpy(np.stack([p.after for p in pairs]).astype(np.float32))}
    return {
        **inputs,
        "cluster_masks": masks,
        "cluster_valid": valid,
        "cluster_feats": feats,
        "tokens": tokens,
        "sentence_valid": sentence_valid,
        "multi_tokens": multi_tokens,
        "gold_alignment": gold_alignment,
        "pair_ids": [p.id for p in pairs],
        "references": [p.references for p in pairs],
        "descriptions": [p.descriptions for p in pairs],
        "cluster_ids": [list(p.cluster_ids) for p in pairs],
    }


def move_batch(batch: Batch, device: Any) -> Batch:
    """The batch with every tensor on ``device`` (lists stay as they are)."""
    import torch

    return {k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}


# --------------------------------------------------------------------------------------------------
# a dataset split from the cache


@dataclass
class TrainingData:
    """One split, in memory: pairs and the (pair, annotation) examples over them."""

    split: str
    pairs: list[PairInputs]
    examples: list[tuple[int, int]]
    vocab: Vocabulary
    max_len: int = 25
    max_description_len: int = 80
    grid_shape: tuple[int, int, int] | None = None  # (C, h, w) when pairs hold images (fine-tuning)

    @property
    def feature_shape(self) -> tuple[int, int, int]:
        """(C, h, w) of the backbone grids."""
        if self.grid_shape is not None:
            return self.grid_shape
        return tuple(int(x) for x in self.pairs[0].before.shape)  # type: ignore[return-value]

    def batch(self, examples: Sequence[tuple[int, int | None]]) -> Batch:
        return collate([(self.pairs[p], a) for p, a in examples], self.vocab, self.max_len, self.max_description_len)

    def example_batches(self, order: Sequence[int], batch_size: int) -> Iterable[Batch]:
        """Batches of training examples in ``order`` (indices into ``examples``)."""
        for start in range(0, len(order), batch_size):
            yield self.batch([self.examples[i] for i in order[start : start + batch_size]])

    def pair_batches(self, batch_size: int, limit: int = 0, with_text: bool = True) -> Iterable[Batch]:
        """Batches of whole pairs (first annotation as gold text): for validation and scoring."""
        n = min(len(self.pairs), limit) if limit else len(self.pairs)
        for start in range(0, n, batch_size):
            yield self.batch([(i, 0 if with_text and self.pairs[i].annotations else None)
                              for i in range(start, min(n, start + batch_size))])


def training_sentences(root: str | Path, split: str = "train", format: str = "auto") -> list[str]:
    """Every reference sentence of a split (what the vocabulary is built from)."""
    from ..data import load_dataset

    data = load_dataset(root, split, format, require_images=False)
    return [s for p in data.pairs for s in p.sentences if s.strip()]


def load_training_data(root: str | Path, split: str, vocab: Vocabulary, backbone: str = "efficientnet_lite0",
                       format: str = "auto", max_clusters: int = 10, max_len: int = 25,
                       max_description_len: int = 80, images: Any = None) -> TrainingData:
    """Read ``split`` of the dataset at ``root`` with its preprocessing cache into memory.

    Needs ``spotdiff data prepare ROOT --backbone BACKBONE`` to have run (the error says so).
    ``images``: a ``BackboneInfo`` to fine-tune that backbone: pairs then hold the images, resized
    to its input size as the cache does, (3, H, W) uint8, instead of the cached grids.
    Pairs whose analysis found no cluster keep K = 0 (a "no change" pair): their sentences have
    gold alignment -1.
    """
    from ..data import load_dataset
    from ..data.cache import cluster_masks, load_analysis, load_features

    data = load_dataset(root, split, format, require_images=images is not None)
    if images is not None:
        grids, row = {"before": None, "after": None}, {}
        gh, gw = images.grid
    else:
        grids = load_features(root, split, backbone)
        row = {str(i): n for n, i in enumerate(grids["ids"].tolist())}
        missing = [p.id for p in data.pairs if p.id not in row]
        if missing:
            raise DataError(f"{root}: {len(missing)} {split} pair(s) lack cached {backbone} features (e.g. {missing[0]}); "
                            f"run `spotdiff data prepare {root} --backbone {backbone}`")
        _, gh, gw = grids["before"].shape[1:]
    pairs: list[PairInputs] = []
    examples: list[tuple[int, int]] = []
    for pair in data.pairs:
        entry = load_analysis(root, split, pair.id)
        labels = entry["labels"]
        keep = _keep_clusters(entry["salience"], max_clusters)
        ids = entry["ids"][keep]
        masks = cluster_masks(entry, ids)
        height, width = labels.shape
        boxes = entry["bboxes"][keep].astype(np.float32) * float(entry["scale"])
        n = len(pair.annotations)
        gold = tuple(gold_clusters(pair.gold, boxes, len(a)) for a in pair.annotations) if pair.gold else ()
        # Sentences of the gold file are indexed over non-empty sentences of each annotation; the
        # synthetic benchmark writes no empty ones, so file order and sentence order agree.
        index = len(pairs)
        if images is not None:
            before, after = (_resized_image(p, images.input_size) for p in (pair.before, pair.after))
        else:
            before, after = grids["before"][row[pair.id]], grids["after"][row[pair.id]]
        pairs.append(PairInputs(
            id=pair.id, before=before, after=after,
            masks=project_masks(masks, (gh, gw)), feats=normalise_prior_features(entry["features"][keep], height, width),
            cluster_ids=tuple(int(i) for i in ids), annotations=pair.annotations, gold=gold,
        ))
        examples.extend((index, a) for a in range(n) if any(tokenize(s) for s in pair.annotations[a]))
    if not examples:
        raise DataError(f"{root}: split '{split}' has no non-empty reference sentences to train on")
    grid_shape = (int(images.channels), int(gh), int(gw)) if images is not None else None
    return TrainingData(split, pairs, examples, vocab, max_len, max_description_len, grid_shape)


def _resized_image(path: Any, size: tuple[int, int]) -> np.ndarray:
    """(3, H, W) uint8: the image resized to the backbone's input size exactly as data/cache.py does."""
    import cv2

    from ..frames.image import load_image

    height, width = size
    return np.ascontiguousarray(cv2.resize(load_image(path), (width, height), interpolation=cv2.INTER_AREA).transpose(2, 0, 1))


def with_grids(batch: Batch, backbone: tuple[Any, Any]) -> Batch:
    """A fine-tuning batch (``before_images``/``after_images``, uint8) with ``before``/``after``
    grids computed by ``backbone`` = ``(module, BackboneInfo)``, *with* gradients (normalised as
    data/cache.py does). A batch that already has grids is returned unchanged."""
    import torch

    if "before_images" not in batch:
        return batch
    module, info = backbone
    x = torch.cat([batch["before_images"], batch["after_images"]]).float().div(255)
    mean = torch.tensor(info.mean, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(info.std, device=x.device).view(1, 3, 1, 1)
    before, after = module((x - mean) / std).float().chunk(2)
    out = {k: v for k, v in batch.items() if k not in ("before_images", "after_images")}
    return {**out, "before": before, "after": after}


# --------------------------------------------------------------------------------------------------
# inference: one analysed pair


@functools.lru_cache(maxsize=4)
def get_backbone(name: str = "efficientnet_lite0", device: str = "cpu", weights: str | None = None) -> tuple[Any, Any]:
    """``create_backbone(name)`` once per process and device: describe() is called per pair."""
    from ..captioners.backbones import create_backbone

    module, info = create_backbone(name, weights=weights)
    return module.to(device).eval(), info


def backbone_grids(images: Sequence[np.ndarray], backbone: tuple[Any, Any], device: str = "cpu") -> "torch.Tensor":
    """(N, C, h, w) float32 grids of (H, W, 3) uint8 RGB images, preprocessed exactly as
    ``data/cache.py`` does (area resize to the input size, /255, mean/std)."""
    import cv2
    import torch

    module, info = backbone
    height, width = info.input_size
    batch = np.stack([cv2.resize(im, (width, height), interpolation=cv2.INTER_AREA) for im in images])
    x = torch.from_numpy(batch).to(device).permute(0, 3, 1, 2).float().div(255)
    mean = torch.tensor(info.mean, device=device).view(1, 3, 1, 1)
    std = torch.tensor(info.std, device=device).view(1, 3, 1, 1)
    with torch.inference_mode():
        return module((x - mean) / std).float()


def batch_from_analysis(analysis: "Analysis", backbone: tuple[Any, Any], vocab: Vocabulary,
                        max_clusters: int = 10, device: str = "cpu") -> Batch:
    """The one-pair batch for ``generate`` (no gold text) from an analysed pair.

    backbone: ``(module, BackboneInfo)`` as ``get_backbone`` / ``create_backbone`` return it.
    Features are computed on the analysed pair (working resolution, after shifted onto before);
    clusters are kept most salient first, at most ``max_clusters``, as in training.
    """
    clusters = sorted(analysis.clusters, key=lambda c: -c.salience)[: max_clusters if max_clusters > 0 else None]
    grids = backbone_grids([analysis.pair.before.pixels, analysis.pair.after.pixels], backbone, device)
    _, gh, gw = grids.shape[1:]
    height, width = analysis.mask.active.shape
    masks = np.stack([c.mask for c in clusters]) if clusters else np.zeros((0, height, width), bool)
    feats = np.array([c.features for c in clusters], np.float32).reshape(-1, 4)
    pair = PairInputs(
        id=analysis.pair.before.source, before=grids[0].cpu().numpy(), after=grids[1].cpu().numpy(),
        masks=project_masks(masks, (gh, gw)), feats=normalise_prior_features(feats, height, width),
        cluster_ids=tuple(c.id for c in clusters), annotations=(),
    )
    return collate([(pair, None)], vocab)
