"""The pixel and object-level analysis on synthetic pairs whose truth is exact."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO, draw_box, textured_background

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


def test_neighbour_counts_are_the_disks_exact_counts():
    """Large disks are counted through a DFT: every count within a small fraction of the exact
    integer, so the core test (at half a count) is exact; the sklearn check above uses a small
    eps, which takes OpenCV's direct filter."""
    from spotdiff_cli.analysis.cluster import _disk, _neighbour_counts

    rng = np.random.default_rng(11)
    for eps, shape, density in [
        (6.5, (50, 70), 0.3),
        (12.0, (90, 41), 0.6),
        (32.14, (140, 260), 0.1),
    ]:
        active = (rng.random(shape) < density).astype(np.uint8)
        disk = _disk(eps).astype(np.int64)
        r = disk.shape[0] // 2
        padded = np.pad(active.astype(np.int64), r)
        exact = np.zeros(shape, np.int64)
        for dy, dx in zip(*np.nonzero(disk)):
            exact += padded[dy : dy + shape[0], dx : dx + shape[1]]
        counts = _neighbour_counts(active, eps)
        assert counts.shape == shape
        assert np.abs(counts - exact).max() < 0.05


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


# The fast forms of the analysis' inner loops must give the values of the plain numpy forms
# they replaced, to the bit: the video pipeline's events were checked identical on the real
# clips, and these keep it so on any input.


def test_median_of_levels_is_numpys_median():
    from spotdiff_cli.analysis.diff import level_median

    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 16, 17, 1000, 20_001):
        for high in (2, 30, 256):
            levels = rng.integers(0, high, n).astype(np.uint8)
            assert level_median(levels) == float(np.median(levels.astype(np.float32)))


def test_masked_medians_are_the_medians_of_the_masked_pixels():
    from spotdiff_cli.analysis.diff import masked_medians

    rng = np.random.default_rng(6)
    image = rng.integers(0, 256, (60, 80, 3)).astype(np.uint8)
    image[:, :, 1] //= 7  # a channel with few levels: ties at the middle
    view = image[5:50, 10:70]  # a crop of a frame, as the readers pass them: not contiguous
    for share in (0.0005, 0.01, 0.5, 1.0):
        mask = rng.random(view.shape[:2]) < share
        got = masked_medians(view, mask)
        if not mask.any():
            assert got is None
            continue
        want = [float(np.median(view[mask][:, c].astype(np.float32))) for c in range(3)]
        assert got.tolist() == want


def _plain_fit_lighting(before, after, valid):
    """The light fit as first written (float samples, np.median): the reference."""
    stride = max(1, int(np.sqrt(valid.size / 20_000)))
    sel = valid[::stride, ::stride]
    samples_b = before[::stride, ::stride][sel].astype(np.float32)
    samples_a = after[::stride, ::stride][sel].astype(np.float32)
    gains = np.ones(3, dtype=np.float32)
    for c in range(3):
        x, y = samples_a[:, c], samples_b[:, c]
        usable = (x > 3) & (x < 252) & (y > 3) & (y < 252)
        x, y = x[usable], y[usable]
        if x.size < 16:
            continue
        gain = float(np.median(y)) / max(1.0, float(np.median(x)))
        for _ in range(2):
            residual = y - gain * x
            sigma = 1.4826 * float(np.median(np.abs(residual))) + 1.0
            keep = np.abs(residual) < 2.5 * sigma
            if keep.sum() < 16:
                break
            gain = float(np.dot(x[keep], y[keep]) / max(1e-6, np.dot(x[keep], x[keep])))
        if 0.3 < gain < 3.3:
            gains[c] = gain
    return gains


@pytest.mark.parametrize("shape,masked", [((240, 320), False), ((361, 641), True)])
def test_light_fit_and_distance_match_their_plain_forms(scene, shape, masked):
    from spotdiff_cli.analysis.diff import fit_lighting, pixel_distance

    rng = np.random.default_rng(7)
    before = textured_background(*shape, seed=4)
    after = np.clip(before.astype(np.float32) * [1.3, 1.1, 0.8] + 5, 0, 255).astype(np.uint8)
    after = draw_box(after, 40, 30, 60, 50, (250, 250, 250))
    valid = np.ones(shape, bool)
    if masked:
        valid[:, :13] = False
        valid &= rng.random(shape) > 0.1
    gains, offsets = fit_lighting(before, after, valid)
    assert np.array_equal(gains, _plain_fit_lighting(before, after, valid))
    assert not offsets.any()
    b, a = before.astype(np.float32), after.astype(np.float32)
    d = a - b
    assert np.array_equal(pixel_distance(b, a), np.sqrt(np.einsum("hwc,hwc->hw", d, d)))


def test_shift_scores_match_their_plain_form():
    from spotdiff_cli.analysis.align import _TRUNCATE, _scores

    rng = np.random.default_rng(8)
    a, b = rng.normal(size=(2, 90, 130)).astype(np.float32)
    found = _scores(a, b, (1, -1), 2, 4, samples=2000)
    stride = max(1, int(np.sqrt((90 - 8) * (130 - 8) / 2000)))
    ref = b[4:86:stride, 4:126:stride]
    for iy, dy in enumerate(range(-3, 2)):
        for ix, dx in enumerate(range(-1, 4)):
            moved = a[4 + dy : 86 + dy : stride, 4 + dx : 126 + dx : stride]
            assert found[iy, ix] == float(np.mean(np.minimum((moved - ref) ** 2, _TRUNCATE)))


def test_cluster_sums_over_the_labelled_box_match_the_whole_frame():
    from spotdiff_cli.analysis.cluster import clusters_from_labels
    from spotdiff_cli.types import ChangeMask

    rng = np.random.default_rng(9)
    labels = np.zeros((120, 160), np.int32)
    labels[30:50, 90:130] = 1
    labels[60:62, 100:101] = 2
    labels[45:80, 120:150][rng.random((35, 30)) > 0.5] = 3
    distance = rng.uniform(0, 60, labels.shape).astype(np.float32)
    mask = ChangeMask(labels > 0, distance, 20.0, 0.1, 0.1, False, 0.0)
    found = clusters_from_labels(labels, mask)
    excess = np.maximum(distance - 20.0, 0)
    for cluster in found:
        k = int(labels[cluster.mask][0])
        ys, xs = np.nonzero(labels == k)
        assert cluster.bbox == (
            xs.min(),
            ys.min(),
            xs.max() - xs.min() + 1,
            ys.max() - ys.min() + 1,
        )
        assert cluster.n_active == ys.size
        assert (
            cluster.salience == float(np.bincount(labels.ravel(), excess.ravel())[k]) / labels.size
        )
    assert [c.salience for c in found] == sorted((c.salience for c in found), reverse=True)


def test_a_video_pair_with_little_changed_skips_the_camera_check(scene, monkeypatch):
    # The video pipeline believes a camera move only when more than STILL_BACKGROUND of the
    # view changed; below that, under a steady light, the feature check cannot change the
    # answer and is not run. Above it, or without the rule, it is.
    from spotdiff_cli.analysis import viewpoint

    calls = []
    real = viewpoint.camera_stayed
    monkeypatch.setattr(viewpoint, "camera_stayed", lambda *a: calls.append(1) or real(*a))
    big = textured_background(400, 600, seed=2)
    after = draw_box(big, 300, 200, 60, 50, (30, 200, 40))
    pair = make_pair(Frame(big, "before"), Frame(after, "after"))
    plain = analyse_pair(pair, AnalysisConfig())
    assert len(calls) == 1 and len(plain.clusters) == 1
    quick = analyse_pair(pair, AnalysisConfig(), still_background=0.3)
    assert len(calls) == 1, "the camera check ran below the still-background share"
    assert [c.bbox for c in quick.clusters] == [c.bbox for c in plain.clusters]
    assert np.array_equal(quick.mask.active, plain.mask.active) and quick.camera is None
    analyse_pair(pair, AnalysisConfig(), still_background=plain.mask.changed_fraction / 2)
    assert len(calls) == 2


def _plain_is_relit(before, after, region, min_correlation):
    """``diff.is_relit`` as first written (numpy copies, np.std, np.corrcoef): the reference."""
    from spotdiff_cli.analysis.diff import _RELIT_ANGLE, _colour_angle

    levels_b, levels_a = before[region], after[region]
    if levels_b.shape[0] < 16:
        return False
    median_b = np.median(levels_b.astype(np.float32), axis=0)
    median_a = np.median(levels_a.astype(np.float32), axis=0)
    if _colour_angle(median_b, median_a) > _RELIT_ANGLE:
        return False
    b, a = levels_b.astype(np.float32), levels_a.astype(np.float32)
    judged = 0
    for c in range(3):
        if b[:, c].std() < 6 or a[:, c].std() < 6:
            continue
        judged += 1
        if float(np.corrcoef(b[:, c], a[:, c])[0, 1]) < min_correlation:
            return False
    return judged > 0


def test_relit_test_answers_as_its_plain_numpy_form():
    from spotdiff_cli.analysis.diff import is_relit

    rng = np.random.default_rng(7)
    answers = []
    for case in range(120):
        h, w = rng.integers(3, 60, 2)
        shading = rng.integers(0, 256, (h, w, 1)).astype(np.float32)
        paint = rng.uniform(0.3, 1.0, 3).astype(np.float32)
        before = shading * paint
        kind = case % 4
        if kind == 0:  # the light changed: a gain and a little noise
            after = before * rng.uniform(0.5, 1.6) + rng.normal(0, rng.uniform(1, 30), before.shape)
        elif kind == 1:  # repainted
            after = shading * rng.uniform(0.3, 1.0, 3) + rng.normal(0, 3, before.shape)
        elif kind == 2:  # something else stands there
            after = rng.integers(0, 256, before.shape).astype(np.float32)
        else:  # flat: nothing to judge
            before = np.full(before.shape, rng.integers(0, 256), np.float32)
            after = before + rng.normal(0, 2, before.shape)
        before = np.clip(before, 0, 255).astype(np.uint8)
        after = np.clip(after, 0, 255).astype(np.uint8)
        region = rng.random((h, w)) < rng.uniform(0.05, 1.0)
        for correlation in (0.5, 0.8, 0.95):
            want = _plain_is_relit(before, after, region, correlation)
            assert is_relit(before, after, region, correlation) == want, (case, correlation)
            answers.append(want)
    assert 0.2 < np.mean(answers) < 0.8  # both answers are exercised


def test_alignment_coarse_layer_is_a_sigma_8_blur_taken_small():
    """The band-pass's coarse layer is computed at a quarter of the size (align._coarse); inside
    the frame it stays within a fraction of a grey level of the sigma-8 Gaussian it stands for."""
    import cv2

    from spotdiff_cli.analysis import resize_for_analysis
    from spotdiff_cli.analysis.align import _coarse
    from spotdiff_cli.frames import load_image

    for name in ("parking-lot", "room"):
        image, _ = resize_for_analysis(load_image(REPO / "examples" / name / "after.jpg"), 640)
        grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32)
        gap = np.abs(_coarse(grey) - cv2.GaussianBlur(grey, (0, 0), 8.0))[16:-16, 16:-16]
        assert gap.mean() < 0.25 and gap.max() < 4.0, (name, gap.mean(), gap.max())
    small = np.random.default_rng(0).random((40, 50)).astype(np.float32)
    assert np.array_equal(_coarse(small), cv2.GaussianBlur(small, (0, 0), 8.0))


def test_relighting_a_blurred_view_gives_numpys_values():
    from spotdiff_cli.analysis.diff import _relit

    rng = np.random.default_rng(8)
    image = (rng.random((37, 53, 3)) * 255).astype(np.float32)
    gains = rng.uniform(0.3, 3.3, 3).astype(np.float32)
    for offsets in (np.zeros(3, np.float32), rng.uniform(-9, 9, 3).astype(np.float32)):
        assert np.array_equal(_relit(image, gains, offsets), image * gains + offsets)
