"""A dataset split and its preprocessing cache -> training batches (docs/training-interfaces.md).

``load_training_data(root, split, vocab, ...)`` reads a split, its cached cluster analysis
(``data/cache.py: load_analysis``) and cached backbone grids (``load_features``), projects every
cluster mask onto the grid once, and keeps it all in memory as numpy. ``TrainingData.batch(examples)``
then collates any list of ``(pair index, annotation index)``. Each annotator's description is its
own training example (Spot-the-diff repeats ``img_id`` per annotator; the paper trains on every
annotation). What only training needs lives here: the examples, the gold cluster of each sentence
(``gold_clusters``), the vocabulary's sentences.

Pair inputs, collation, mask projection and backbone preprocessing are shared with inference and
live in ``captioners/features.py``, so a model sees at inference what it saw in training.
``batch_from_analysis``, ``backbone_grids``, ``get_backbone``, ``collate``, ``move_batch`` and
``with_grids`` are still importable from here, where they used to live.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..captioners.features import (
    Batch,
    PairInputs,
    backbone_grids,
    batch_from_analysis,
    caption_key,
    collate,
    get_backbone,
    move_batch,
    normalise_prior_features,
    project_masks,
    resize_for_backbone,
    with_grids,
)
from ..captioners.vocab import Vocabulary, tokenize
from ..errors import DataError
from ..geometry import box_iou

# A cluster is the gold cluster of a sentence when its box overlaps the change's box this much
# (IoU with the before box, the after box or their union). Lower than the 0.3 of alignment
# precision (evaluate/protocols.py): here we want *the best* cluster, and a moved object's cluster
# often covers only one of its two boxes.
GOLD_IOU = 0.1


def _keep_clusters(salience: np.ndarray, max_clusters: int) -> np.ndarray:
    """Indices of the ``max_clusters`` most salient clusters, most salient first. DDLA runs its
    decoder once per cluster (§3.3), so the cost grows with K; the tail is noise in practice."""
    order = np.argsort(-np.asarray(salience, np.float32), kind="stable")
    return order[:max_clusters] if max_clusters > 0 else order


def gold_clusters(
    changes: Sequence[dict[str, Any]], boxes: np.ndarray, n_sentences: int
) -> tuple[int, ...]:
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
    # Ids of the pairs that hold a change, by the dataset's labels (evaluate/judge.py's truth:
    # distractors and "no change" pairs are not in it): validation's ``changed/<metric>``.
    changed_ids: frozenset[str] = frozenset()

    @property
    def feature_shape(self) -> tuple[int, int, int]:
        """(C, h, w) of the backbone grids."""
        if self.grid_shape is not None:
            return self.grid_shape
        return tuple(int(x) for x in self.pairs[0].before.shape)  # type: ignore[return-value]

    def batch(self, examples: Sequence[tuple[int, int | None]]) -> Batch:
        return collate(
            [(self.pairs[p], a) for p, a in examples],
            self.vocab,
            self.max_len,
            self.max_description_len,
        )

    def example_keys(self) -> tuple[list[int], list[str]]:
        """(pair index, caption key) of every example, in order: what the contrastive sampler
        keeps apart (``train/sampler.py``)."""
        pairs = [p for p, _ in self.examples]
        captions = [caption_key(self.pairs[p].annotations[a]) for p, a in self.examples]
        return pairs, captions

    def example_changed(self) -> list[bool]:
        """Whether each example's pair holds a change (``changed_ids``): what
        ``balance_changes`` balances (``train/sampler.py``)."""
        return [self.pairs[p].id in self.changed_ids for p, _ in self.examples]

    def example_batches(self, order: Sequence[int], batch_size: int) -> Iterable[Batch]:
        """Batches of training examples in ``order`` (indices into ``examples``)."""
        for start in range(0, len(order), batch_size):
            yield self.batch([self.examples[i] for i in order[start : start + batch_size]])

    def pair_batches(
        self, batch_size: int, limit: int = 0, with_text: bool = True
    ) -> Iterable[Batch]:
        """Batches of whole pairs (first annotation as gold text): for validation and scoring."""
        n = min(len(self.pairs), limit) if limit else len(self.pairs)
        for start in range(0, n, batch_size):
            yield self.batch(
                [
                    (i, 0 if with_text and self.pairs[i].annotations else None)
                    for i in range(start, min(n, start + batch_size))
                ]
            )


@dataclass(frozen=True)
class ImageInput:
    """``load_training_data(images=...)`` for a model that reads pixels itself (a local CLIP,
    ``registry.image_side``): the images' size. ``grid`` only sizes the cluster masks the batches
    carry (such models read none); ``channels`` is what the model is told it gets."""

    input_size: tuple[int, int]
    grid: tuple[int, int] = (7, 7)
    channels: int = 3


def training_sentences(root: str | Path, split: str = "train", format: str = "auto") -> list[str]:
    """Every reference sentence of a split (what the vocabulary is built from)."""
    from ..data import load_dataset

    data = load_dataset(root, split, format, require_images=False)
    return [s for p in data.pairs for s in p.sentences if s.strip()]


def load_training_data(
    root: str | Path,
    split: str,
    vocab: Vocabulary,
    backbone: str = "efficientnet_lite0",
    format: str = "auto",
    max_clusters: int = 10,
    max_len: int = 25,
    max_description_len: int = 80,
    images: Any = None,
    input_size: int | None = None,
    levels: Sequence[int] = (),
) -> TrainingData:
    """Read ``split`` of the dataset at ``root`` with its preprocessing cache into memory.

    Needs ``spotdiff data prepare ROOT --backbone BACKBONE`` to have run (the error says so).
    ``input_size``, ``levels``: which feature cache (``data/cache.py: feature_folder``): another
    input size (448: lite0's 14 x 14 grid), multi-level maps (pairs then carry ``levels``).
    ``images``: a ``BackboneInfo`` to fine-tune that backbone, or an :class:`ImageInput` for a
    model that reads pixels: pairs then hold the images, resized to its input size (or
    ``input_size``) as the cache does, (3, H, W) uint8, instead of grids.
    Pairs whose analysis found no cluster keep K = 0 (a "no change" pair): their sentences have
    gold alignment -1.
    """
    from ..data import load_dataset
    from ..data.cache import cluster_masks, feature_folder, load_analysis, load_features

    data = load_dataset(root, split, format, require_images=images is not None)
    size = (input_size, input_size) if input_size else None
    level_names = [f"s{int(s)}" for s in sorted(levels)]
    if images is not None:
        grids, row = {"before": None, "after": None}, {}
        size = size or images.input_size
        gh, gw = images.grid
        if input_size:  # the grid at another input size: the backbone's stride times the side
            gh, gw = (round(v * input_size / images.input_size[0]) for v in images.grid)
    else:
        grids = load_features(root, split, backbone, input_size, levels)
        row = {str(i): n for n, i in enumerate(grids["ids"].tolist())}
        missing = [p.id for p in data.pairs if p.id not in row]
        if missing:
            raise DataError(
                f"{root}: {len(missing)} {split} pair(s) lack cached features in "
                f"{feature_folder(backbone, input_size, levels)} (e.g. {missing[0]}); run "
                f"`spotdiff data prepare {root} --backbone {backbone}`"
                + (f" --input-size {input_size}" if input_size else "")
                + "".join(f" --level {s}" for s in sorted(levels))
            )
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
        gold = (
            tuple(gold_clusters(pair.gold, boxes, len(a)) for a in pair.annotations)
            if pair.gold
            else ()
        )
        # Sentences of the gold file are indexed over non-empty sentences of each annotation; the
        # synthetic benchmark writes no empty ones, so file order and sentence order agree.
        index = len(pairs)
        pair_levels: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if images is not None:
            before, after = (_resized_image(p, size) for p in (pair.before, pair.after))
        else:
            r = row[pair.id]
            before, after = grids["before"][r], grids["after"][r]
            pair_levels = {
                n: (grids[f"before_{n}"][r], grids[f"after_{n}"][r]) for n in level_names
            }
        pairs.append(
            PairInputs(
                id=pair.id,
                before=before,
                after=after,
                masks=project_masks(masks, (gh, gw)),
                feats=normalise_prior_features(entry["features"][keep], height, width),
                cluster_ids=tuple(int(i) for i in ids),
                annotations=pair.annotations,
                gold=gold,
                levels=pair_levels,
                change_types=tuple(pair.change_types),
            )
        )
        examples.extend(
            (index, a) for a in range(n) if any(tokenize(s) for s in pair.annotations[a])
        )
    if not examples:
        raise DataError(f"{root}: split '{split}' has no non-empty reference sentences to train on")
    grid_shape = (int(images.channels), int(gh), int(gw)) if images is not None else None
    from ..evaluate.judge import is_changed

    changed = frozenset(p.id for p in data.pairs if is_changed(p))
    return TrainingData(
        split, pairs, examples, vocab, max_len, max_description_len, grid_shape, changed
    )


def _resized_image(path: Any, size: tuple[int, int]) -> np.ndarray:
    """(3, H, W) uint8: the image at the backbone's input size, resized as the feature cache does."""
    from ..frames.image import load_image

    return np.ascontiguousarray(resize_for_backbone(load_image(path), size).transpose(2, 0, 1))


__all__ = [
    "GOLD_IOU",
    "ImageInput",
    "PairInputs",
    "TrainingData",
    "backbone_grids",
    "batch_from_analysis",
    "collate",
    "get_backbone",
    "gold_clusters",
    "load_training_data",
    "move_batch",
    "training_sentences",
    "with_grids",
]
