"""The pixel and object-level analysis on synthetic pairs whose truth is exact."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import draw_box, textured_background

from spotdiff_cli.analysis import analyse_pair, make_pair
from spotdiff_cli.analysis.cluster import grid_dbscan, sklearn_dbscan
from spotdiff_cli.config import AnalysisConfig
from spotdiff_cli.types import Frame


def analyse(before: np.ndarray, after: np.ndarray, **settings):
    return analyse_pair(
        make_pair(Frame(before, "before"), Frame(after, "after")), AnalysisConfig(**settings)
    )


def test_added_rectangle_is_one_cluster_with_its_box(scene):
    after = draw_box(scene, 200, 40, 50, 40, (220, 40, 40))
    result = analyse(scene, after)
    assert len(result.clusters) == 1
    x, y, w, h = result.clusters[0].bbox
    assert abs(x - 200) <= 3 and abs(y - 40) <= 3 and abs(w - 50) <= 6 and abs(h - 40) <= 6
    length, width, area, n_active = result.clusters[0].features
    assert (length, width) == (h, w) and area == w * h and n_active == result.clusters[0].n_active


def test_no_change_gives_no_clusters(scene):
    noisy = np.clip(
        scene.astype(np.int16) + np.random.default_rng(1).integers(-4, 5, scene.shape), 0, 255
    ).astype(np.uint8)
    result = analyse(scene, noisy)
    assert result.clusters == ()
    assert not result.mask.lighting_changed


@pytest.mark.parametrize("dx,dy", [(3, 0), (0, 3), (-3, 2), (2, -3)])
def test_camera_shift_is_found_and_cancels_out(dx, dy):
    big = textured_background(260, 340, seed=3)
    before = big[10:250, 10:330]
    # The camera pans by (dx, dy), so the scene's content moves by (-dx, -dy) in the frame.
    after = big[10 + dy : 250 + dy, 10 + dx : 330 + dx]
    after = draw_box(after, 60, 150, 40, 40, (40, 200, 60))
    result = analyse(before, after)
    assert (result.alignment.dx, result.alignment.dy) == pytest.approx((-dx, -dy), abs=0.3)
    assert len(result.clusters) == 1, "only the added object should remain once the shift is undone"


def test_without_alignment_a_shift_lights_up_edges():
    big = textured_background(260, 340, seed=3)
    big = draw_box(big, 100, 100, 80, 60, (230, 230, 230))  # a strong edge the shift exposes
    result = analyse(big[10:250, 10:330], big[13:253, 13:333], align="none")
    assert result.mask.n_active > 0


def test_global_brightness_change_is_lighting_not_objects(scene):
    brighter = np.clip(scene.astype(np.float32) * 1.45, 0, 255).astype(np.uint8)
    result = analyse(scene, brighter)
    assert result.mask.raw_changed_fraction > 0.5, "the raw difference should light up the frame"
    assert result.mask.lighting_changed
    assert result.clusters == ()


def test_lighting_correction_keeps_a_real_object(scene):
    darker = np.clip(scene.astype(np.float32) * 0.7, 0, 255).astype(np.uint8)
    after = draw_box(darker, 120, 100, 40, 60, (240, 240, 240))
    result = analyse(scene, after)
    assert result.mask.lighting_changed
    assert len(result.clusters) == 1


def test_view_change_is_flagged_not_clustered(scene):
    # Another view entirely: a colour ramp where the asphalt was.
    ramp = np.zeros_like(scene)
    ramp[:, :, 0] = np.linspace(0, 255, scene.shape[1], dtype=np.uint8)[None, :]
    ramp[:, :, 2] = np.linspace(255, 0, scene.shape[0], dtype=np.uint8)[:, None]
    result = analyse(scene, ramp)
    assert result.scene_changed and result.clusters == ()


def test_clusters_sorted_by_salience(scene):
    after = draw_box(scene, 20, 20, 20, 20, (200, 60, 60))
    after = draw_box(after, 180, 120, 80, 70, (30, 30, 220))
    result = analyse(scene, after)
    assert [c.id for c in result.clusters] == [0, 1]
    assert result.clusters[0].n_active > result.clusters[1].n_active


def test_dbscan_scales_with_resolution():
    config = AnalysisConfig()
    assert config.scaled_dbscan(224, 224) == (20.0, 9)
    eps, min_samples = config.scaled_dbscan(448, 640)
    assert eps == pytest.approx(40.0) and min_samples == 36


def test_grid_dbscan_matches_sklearn():
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(0)
    active = np.zeros((200, 260), dtype=bool)
    for _ in range(6):  # blobs of varying density plus scattered noise
        cy, cx = rng.integers(20, 180), rng.integers(20, 240)
        ys, xs = rng.normal(cy, 8, 300).astype(int), rng.normal(cx, 10, 300).astype(int)
        keep = (ys >= 0) & (ys < 200) & (xs >= 0) & (xs < 260)
        active[ys[keep], xs[keep]] = True
    active[rng.integers(0, 200, 80), rng.integers(0, 260, 80)] = True
    ours = grid_dbscan(active, 6.0, 9)
    reference = sklearn_dbscan(active, 6.0, 9)
    assert adjusted_rand_score(reference[active], ours[active]) >= 0.99
    assert (ours[active] == 0).sum() == (reference[active] == 0).sum()  # same noise


def test_different_sizes_are_resized_with_a_note(scene):
    import cv2

    after = cv2.resize(draw_box(scene, 100, 100, 40, 40, (200, 0, 0)), (640, 480))
    pair = make_pair(Frame(scene, "a"), Frame(after, "b"))
    assert pair.after.pixels.shape == scene.shape
    assert "resized" in pair.notes[0]


def test_dbscan_on_the_changed_area_alone_gives_the_whole_frame_labels():
    # grid_dbscan works on the active pixels' bounding box (+eps); the labels, their numbering
    # included, must be those of the whole frame.
    from spotdiff_cli.analysis.cluster import _grid_dbscan, grid_dbscan

    rng = np.random.default_rng(3)
    for _ in range(30):
        active = np.zeros((120, 200), bool)
        for _ in range(int(rng.integers(1, 5))):
            y, x = int(rng.integers(0, 120)), int(rng.integers(0, 200))
            patch = rng.random((int(rng.integers(3, 40)), int(rng.integers(3, 40))))
            region = active[y : y + patch.shape[0], x : x + patch.shape[1]]
            region |= patch[: region.shape[0], : region.shape[1]] < rng.uniform(0.2, 0.9)
        eps, min_samples = float(rng.uniform(2, 9)), int(rng.integers(3, 30))
        assert np.array_equal(
            grid_dbscan(active, eps, min_samples), _grid_dbscan(active, eps, min_samples)
        )
