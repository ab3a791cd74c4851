"""A moved camera is not a changed scene: synthetic pairs whose camera motion is an exact,
known homography (a flat, textured floor warped with cv2.warpPerspective), objects that stand
off the floor (parallax), objects that really changed, and a fixed camera that must behave as
it did before camera motion was followed. A rendered CLEVR-style check runs with ``-m slow``.
"""

from __future__ import annotations

import dataclasses
import math

import cv2
import numpy as np
import pytest
from conftest import draw_box, textured_background
from typer.testing import CliRunner

from spotdiff_cli import api
from spotdiff_cli.analysis import analyse_pair, make_pair
from spotdiff_cli.analysis.camera import estimate_homography, project
from spotdiff_cli.cli import app
from spotdiff_cli.config import AnalysisConfig, CaptionConfig
from spotdiff_cli.types import Frame

OBJECT_KINDS = {"appeared", "disappeared", "moved", "colour", "material", "changed", "scene"}
H, W = 240, 320


def floor(seed: int = 0) -> np.ndarray:
    """A flat floor: asphalt-like texture with 60 small painted marks (what ORB finds), (H, W, 3)
    uint8 RGB. Everything in it lies on one plane, so a homography maps it exactly."""
    rng = np.random.default_rng(seed)
    image = textured_background(H, W, seed)
    for _ in range(60):
        colour = tuple(int(c) for c in rng.integers(30, 230, 3))
        x, y = int(rng.integers(0, W)), int(rng.integers(0, H))
        if rng.random() < 0.5:
            cv2.circle(image, (x, y), int(rng.integers(3, 8)), colour, -1)
        else:
            w, h = (int(v) for v in rng.integers(4, 14, 2))
            cv2.rectangle(image, (x, y), (x + w, y + h), colour, -1)
    return image


def camera_motion(
    angle: float = 2.0, zoom: float = 1.05, shift: tuple[float, float] = (8.0, -5.0)
) -> np.ndarray:
    """(3, 3) homography before -> after: turn the content by ``angle`` degrees (clockwise on
    screen) and scale it by ``zoom`` about the centre, then move it by ``shift`` px."""
    c, s = math.cos(math.radians(angle)) * zoom, math.sin(math.radians(angle)) * zoom
    cx, cy = (W - 1) / 2, (H - 1) / 2
    to_centre = np.array([[1, 0, -cx], [0, 1, -cy], [0, 0, 1]], dtype=np.float64)
    turn = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=np.float64)
    back = np.array([[1, 0, cx + shift[0]], [0, 1, cy + shift[1]], [0, 0, 1]], dtype=np.float64)
    return back @ turn @ to_centre


def seen_from(image: np.ndarray, homography: np.ndarray) -> np.ndarray:
    """The image as the moved camera sees it: after(H p) = image(p)."""
    return cv2.warpPerspective(image, homography, (W, H), borderMode=cv2.BORDER_REFLECT)


def at(homography: np.ndarray, x: float, y: float) -> tuple[int, int]:
    """Where before pixel (x, y) is in the after image."""
    px, py = project(homography, np.array([[x, y]], dtype=np.float64))[0]
    return round(px), round(py)


def describe(before: np.ndarray, after: np.ndarray, **analysis):
    return api.describe_pair(
        before, after, AnalysisConfig(**analysis), CaptionConfig(recognise=False)
    )


def kinds(report) -> list[str]:
    return [s.kind for s in report.sentences]


def test_the_homography_is_recovered():
    truth = camera_motion()
    fit = estimate_homography(floor(), seen_from(floor(), truth))
    assert fit is not None and fit.inliers >= 30
    corners = np.array([[0, 0], [W, 0], [W, H], [0, H]], dtype=np.float64)
    error = np.linalg.norm(project(fit.matrix, corners) - project(truth, corners), axis=1)
    assert error.max() < 1.5, error


def test_a_moved_camera_alone_is_no_change_and_says_how_much_it_moved():
    before = floor()
    report = describe(before, seen_from(before, camera_motion()))
    assert not set(kinds(report)) & OBJECT_KINDS, [s.text for s in report.sentences]
    assert kinds(report) == ["camera"]
    motion = report.analysis.camera
    assert motion is not None
    assert motion.zoom == pytest.approx(1.05, abs=0.01)
    assert motion.rotation == pytest.approx(2.0, abs=0.3)
    assert (motion.dx, motion.dy) == pytest.approx((8.0, -5.0), abs=1.0)
    # The content went right and up, so the camera panned left and tilted down; the content
    # turned clockwise, so the camera rolled anticlockwise; things look bigger: zoomed in.
    assert report.sentences[0].text == (
        "the camera moved: it panned 8 px left, tilted 5 px down, rolled 2.0° anticlockwise "
        "and zoomed in 5 %"
    )


def test_an_object_added_while_the_camera_moved_is_reported_where_it_is():
    before = floor()
    truth = camera_motion(angle=-1.5, zoom=0.96, shift=(-10.0, 6.0))
    x, y = at(truth, 250, 180)  # where the before frame's lower right is, in the after image
    after = draw_box(seen_from(before, truth), x - 20, y - 15, 40, 30, (220, 40, 40))
    report = describe(before, after)
    assert kinds(report) == ["appeared", "camera"], [s.text for s in report.sentences]
    assert report.sentences[0].text == "a red object appeared in the lower right"
    bx, by, bw, bh = report.analysis.clusters[0].bbox
    assert abs(bx + bw / 2 - 250) < 6 and abs(by + bh / 2 - 180) < 6


def test_parallax_of_an_object_standing_off_the_floor_is_not_a_change():
    # A post on the floor: its top sits above the plane, so it lands 4 px from where the
    # floor's homography puts it.
    before = floor(1)
    truth = camera_motion()
    cv2.circle(before, (110, 90), 16, (40, 90, 200), -1)
    after = seen_from(floor(1), truth)
    x, y = at(truth, 110, 90)
    cv2.circle(after, (x + 3, y - 3), 17, (40, 90, 200), -1)
    report = describe(before, after)
    assert not set(kinds(report)) & OBJECT_KINDS, [s.text for s in report.sentences]
    assert "camera" in kinds(report)


def test_a_recoloured_object_is_a_colour_change_even_when_the_camera_moved():
    before = floor(2)
    truth = camera_motion(angle=1.0, zoom=1.03, shift=(6.0, 4.0))
    after = seen_from(before, truth)
    cv2.circle(before, (160, 120), 22, (210, 40, 40), -1)
    cv2.circle(after, at(truth, 160, 120), 23, (40, 70, 210), -1)
    report = describe(before, after)
    assert kinds(report)[0] == "colour", [s.text for s in report.sentences]
    assert report.sentences[0].text.endswith("changed colour from red to blue")


@pytest.mark.parametrize("dx,dy", [(3, 0), (-3, 2)])
def test_a_fixed_camera_that_drifts_reads_as_before(dx, dy):
    big = textured_background(260, 340, seed=3)
    before = big[10:250, 10:330]
    after = draw_box(big[10 + dy : 250 + dy, 10 + dx : 330 + dx], 60, 150, 40, 40, (40, 200, 60))
    followed = describe(before, after)
    fixed = describe(before, after, camera="fixed")
    assert followed.analysis.camera is None and "camera" not in kinds(followed)
    assert [s.text for s in followed.sentences] == [s.text for s in fixed.sentences]
    assert followed.analysis.alignment == fixed.analysis.alignment


def test_fixed_setting_keeps_the_shift_search_alone():
    before = floor()
    report = describe(before, seen_from(before, camera_motion()), camera="fixed")
    assert report.analysis.camera is None and "camera" not in kinds(report)
    assert set(kinds(report)) & OBJECT_KINDS  # the old behaviour: the view's edges differ


def _plain_floor(seed: int) -> np.ndarray:
    """A plain grey floor with sensor noise, like a rendered CLEVR ground."""
    noise = np.random.default_rng(seed).normal(0, 3, (H, W, 3))
    return np.clip(150 + noise, 0, 255).astype(np.uint8)


def _shadowed(image: np.ndarray, centre: tuple[int, int]) -> np.ndarray:
    """``image`` with a soft cast shadow (60 % light) around ``centre``."""
    shade = np.zeros((H, W), np.float32)
    cv2.ellipse(shade, centre, (28, 12), 0, 0, 360, 1.0, -1)
    shade = cv2.GaussianBlur(shade, (0, 0), 2.5)[:, :, None]
    return np.clip(image * (1 - 0.4 * shade), 0, 255).astype(np.uint8)


def test_a_swung_light_moves_shadows_but_changes_nothing():
    # A fixed camera; the key light swings and brightens: the object's shadow goes from its
    # right to its left and the whole view gets 30 % brighter.
    def view(shadow_x: int, gain: float) -> np.ndarray:
        image = _shadowed(_plain_floor(int(gain * 10)).astype(np.float32), (shadow_x, 130))
        image = draw_box(image, 145, 105, 30, 30, (40, 160, 60))
        return np.clip(image.astype(np.float32) * gain, 0, 255).astype(np.uint8)

    report = describe(view(195, 1.0), view(125, 1.3))
    assert not set(kinds(report)) & OBJECT_KINDS, [s.text for s in report.sentences]


def test_under_a_changed_light_a_light_object_that_arrives_is_still_reported(scene):
    # The exposure rises by a third and a white box arrives on the (grey, textured) ground:
    # its colour points the way the ground's does, but it brings edges the ground did not have.
    brighter = np.clip(scene.astype(np.float32) * 1.35, 0, 255).astype(np.uint8)
    report = describe(scene, draw_box(brighter, 120, 100, 40, 60, (245, 245, 245)))
    assert kinds(report)[0] == "appeared", [s.text for s in report.sentences]


def test_camera_flag_on_the_command_line(tmp_path):
    before, after = floor(), seen_from(floor(), camera_motion())
    paths = []
    for name, image in (("before.png", before), ("after.png", after)):
        cv2.imwrite(str(tmp_path / name), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
        paths.append(str(tmp_path / name))
    runner = CliRunner()
    result = runner.invoke(app, ["caption", *paths, "--no-recognise"])
    assert result.exit_code == 0 and "the camera moved: it panned 8 px left" in result.output
    result = runner.invoke(app, ["caption", *paths, "--no-recognise", "--camera", "fixed"])
    assert result.exit_code == 0 and "camera moved" not in result.output
    result = runner.invoke(app, ["caption", *paths, "--camera", "moving"])
    assert result.exit_code == 2 and "--camera must be auto or fixed" in result.output


def test_a_watched_region_keeps_the_fixed_camera_path():
    before = floor()
    after = seen_from(before, camera_motion())
    watch = np.zeros((H, W), bool)
    watch[60:180, 80:240] = True
    pair = make_pair(Frame(before, "before"), Frame(after, "after"))
    assert analyse_pair(pair, AnalysisConfig(), watch).camera is None


@pytest.mark.slow
def test_rendered_clevr_scenes_moved_camera_and_real_changes(tmp_path):
    """Eight rendered CLEVR-Change-style scenes (the default preset, seed 1): most distractors
    (camera moved, or light changed) are no change, half the semantic changes or more are
    reported with their type, and every object sentence names the object in CLEVR's words.
    (On 150 scenes: docs/analysis.md; a material misjudged from one side is the commonest
    slip.)"""
    pytest.importorskip(
        "mitsuba", reason="rendering needs Mitsuba 3: pip install 'spotdiff[render]'"
    )
    import json

    from spotdiff_cli.data.clevr_render import render_clevr_change
    from spotdiff_cli.frames import load_image

    out = tmp_path / "clevr"
    render_clevr_change(out, pairs=8, seed=1, jobs=1)
    gold = json.loads((out / "gold.json").read_text())
    expected = {
        "material": "material",
        "move": "moved",
        "color": "colour",
        "drop": "disappeared",
        "add": "appeared",
    }
    quiet = right = 0
    for record in gold.values():
        i = record["index"]
        before = load_image(out / "images" / f"CLEVR_default_{i:06d}.png")
        distractor = load_image(out / "nsc_images" / f"CLEVR_nonsemantic_{i:06d}.png")
        semantic = load_image(out / "sc_images" / f"CLEVR_semantic_{i:06d}.png")
        calm = describe(before, distractor)
        quiet += not set(kinds(calm)) & OBJECT_KINDS
        changed = describe(before, semantic)
        right += kinds(changed)[0] == expected[record["type"]]
        for sentence in (*calm.sentences, *changed.sentences):
            if sentence.kind in OBJECT_KINDS:
                words = sentence.text.split()
                assert {"cube", "sphere", "cylinder"} & set(words), sentence.text
                assert "something" not in words, sentence.text
    # The first change said is the right type for 4 of these 8 (89 % of 150 tuning scenes,
    # 81 % of the wide split's: docs/analysis.md); before objects were the unit, 2 of 8.
    assert quiet >= 6 and right >= 4, (quiet, right)


def test_the_report_places_the_after_box_and_the_camera_in_original_pixels():
    # The annotated picture's after box must sit on the object in the after image as given,
    # and the JSON must say how the camera moved, both in the caller's pixels.
    from spotdiff_cli.report.compose import report_to_dict
    from spotdiff_cli.report.draw import box_in_after

    before = floor()
    truth = camera_motion(angle=-1.5, zoom=0.96, shift=(-10.0, 6.0))
    x, y = at(truth, 250, 180)
    after = draw_box(seen_from(before, truth), x - 20, y - 15, 40, 30, (220, 40, 40))
    report = describe(before, after)
    bx, by, bw, bh = box_in_after(report.analysis.clusters[0].bbox, report.analysis)
    assert abs(bx + bw / 2 - x) < 6 and abs(by + bh / 2 - y) < 6
    camera = report_to_dict(report)["camera"]
    assert camera["moved"] is True and camera["zoom"] == pytest.approx(0.96, abs=0.02)
    assert np.array(camera["homography"]) == pytest.approx(truth / truth[2, 2], abs=0.05, rel=0.05)
    fixed = describe(before, draw_box(before, 230, 165, 40, 30, (220, 40, 40)))
    assert report_to_dict(fixed)["camera"] is None


# ----------------------------------------------------------------------------------------------
# objects on a plain floor (analysis/objects3d.py): the camera from the objects' contact points


def _floor(seed: int = 0, shape: tuple[int, int] = (320, 480)) -> np.ndarray:
    """A plain grey floor, lighter towards the camera, with render-like grain."""
    h, w = shape
    rng = np.random.default_rng(seed)
    ramp = np.linspace(120, 175, h)[:, None, None] * np.ones((1, w, 3))
    return np.clip(ramp + rng.normal(0, 4, (h, w, 1)), 0, 255).astype(np.uint8)


_PAINT = {
    "red": (173, 35, 35),
    "blue": (42, 75, 215),
    "green": (29, 105, 20),
    "yellow": (230, 210, 40),
    "cyan": (41, 190, 190),
    "purple": (129, 38, 192),
}


def _scene(objects: list[tuple[str, float, float, float]], seed: int = 0) -> np.ndarray:
    """Shaded balls standing on the floor, each with a soft shadow at its foot: (colour, x, y
    of the contact point, radius px)."""
    image = _floor(seed).astype(np.float32)
    shade = np.zeros(image.shape[:2], np.float32)
    for _, x, y, r in objects:
        cv2.ellipse(shade, (int(x) + 6, int(y) - 3), (int(r), int(r * 0.35)), 0, 0, 360, 1.0, -1)
    image *= 1 - 0.4 * cv2.GaussianBlur(shade, (0, 0), 3.0)[:, :, None]
    image = image.astype(np.uint8)
    for colour, x, y, r in sorted(objects, key=lambda o: o[2]):  # far (higher) first
        centre = (int(round(x)), int(round(y - r)))
        for k in range(int(r), 0, -1):  # lit from the upper left
            light = 0.55 + 0.45 * (1 - k / r)
            c = tuple(int(min(255, v * light + 20 * (1 - k / r))) for v in _PAINT[colour])
            off = int(round((r - k) * 0.3))
            cv2.circle(image, (centre[0] - off, centre[1] - off), k, c, -1, lineType=cv2.LINE_AA)
    return image


def _moved(points: list[tuple[str, float, float, float]], zoom: float = 1.12, shift=(18.0, 26.0)):
    """The same objects seen from a camera that came closer and turned: contact points under
    an affine map about the frame's centre, radii zoomed."""
    cx, cy = 240.0, 160.0
    return [
        (
            c,
            cx + (x - cx) * zoom + shift[0] + 0.04 * (y - cy),
            cy + (y - cy) * zoom + shift[1],
            r * zoom,
        )
        for c, x, y, r in points
    ]


_OBJECTS = [
    ("red", 120, 150, 22),
    ("blue", 300, 130, 16),
    ("green", 230, 230, 26),
    ("yellow", 380, 210, 18),
    ("cyan", 170, 95, 14),
]


def test_objects_are_segmented_and_named_in_clevr_colours():
    from spotdiff_cli.analysis.objects3d import segment_objects

    found = segment_objects(_scene(_OBJECTS))
    assert found is not None
    assert sorted(o.colour for o in found) == sorted(c for c, *_ in _OBJECTS)
    for obj in found:
        colour, x, y, r = next(o for o in _OBJECTS if o[0] == obj.colour)
        assert abs(obj.contact[0] - x) < 0.5 * r and abs(obj.contact[1] - y) < 6, (
            obj.colour,
            obj.contact,
        )
    # A textured view (real footage) is not objects on a plain floor.
    assert segment_objects(textured_background(320, 480, seed=1)) is None


def test_objects_tell_a_moved_camera_from_a_moved_object():
    from spotdiff_cli.analysis.objects3d import analyse_objects

    before = _scene(_OBJECTS)
    quiet = analyse_objects(before, _scene(_moved(_OBJECTS), seed=1))
    assert quiet is not None and quiet.changes == [] and len(quiet.camera.pairs) == 5
    moved = [o if o[0] != "yellow" else ("yellow", 300, 260, 18) for o in _OBJECTS]
    found = analyse_objects(before, _scene(_moved(moved), seed=1))
    assert found is not None
    assert [(c.event, c.subject.colour) for c in found.changes] == [("moved", "yellow")]


def test_a_short_move_the_camera_fit_took_in_is_still_a_move():
    from spotdiff_cli.analysis.objects3d import analyse_objects

    # Seven objects: the robust affine through them takes a ball moved 26 px (29 in the zoomed
    # view) as one more pair, its contact point some 25 px from the camera's place where the
    # others keep within a few.
    objects = _OBJECTS + [("purple", 420, 120, 15), ("red", 90, 260, 20)]
    before = _scene(objects)
    assert analyse_objects(before, _scene(_moved(objects), seed=1)).changes == []
    moved = [o if o[0] != "yellow" else ("yellow", 406, 210, 18) for o in objects]
    found = analyse_objects(before, _scene(_moved(moved), seed=1))
    assert any(found.before[i].colour == "yellow" for i, _ in found.camera.pairs)
    assert [(c.event, c.subject.colour) for c in found.changes] == [("moved", "yellow")]


def test_an_unlit_lump_where_an_object_arrived_is_no_repaint_of_it(monkeypatch):
    from spotdiff_cli.analysis.objects3d import analyse_objects

    # A dark lump in the before view (a shadow, a metal's dark reflection: grey, but no grey
    # paint) where a blue ball stands after: the two are no repaint (no two paints), so the
    # ball is left to the arrival test instead of going unsaid with the lump.
    monkeypatch.setitem(_PAINT, "dark", (60, 55, 40))
    objects = _OBJECTS + [("purple", 420, 120, 15), ("red", 90, 260, 20)]
    before = _scene(objects + [("dark", 410, 262, 11)])
    found = analyse_objects(before, _scene(_moved(objects + [("blue", 412, 262, 16)]), seed=1))
    assert [(c.event, c.subject.colour) for c in found.changes] == [("appeared", "blue")]


def test_objects_added_removed_and_repainted_while_the_camera_moved():
    from spotdiff_cli.analysis.objects3d import analyse_objects

    before = _scene(_OBJECTS)
    cases = {
        "appeared": _OBJECTS + [("purple", 420, 110, 15)],
        "disappeared": [o for o in _OBJECTS if o[0] != "green"],
        "colour": [o if o[0] != "red" else ("purple", *o[1:]) for o in _OBJECTS],
    }
    for event, objects in cases.items():
        found = analyse_objects(before, _scene(_moved(objects), seed=2))
        assert found is not None and [c.event for c in found.changes] == [event], event
    repainted = analyse_objects(before, _scene(_moved(cases["colour"]), seed=2))
    assert repainted.changes[0].subject.colour == "red" and repainted.changes[0].new == "purple"


def test_a_sliver_or_an_object_the_camera_left_behind_is_no_change():
    from spotdiff_cli.analysis.objects3d import analyse_objects

    before = _scene(_OBJECTS)
    # A piece narrower than half a CLEVR object (a neighbour hides the rest, a metal mirrors
    # it) left unmatched is not an arrival; one of an object's size is.
    sliver = analyse_objects(before, _scene(_moved(_OBJECTS + [("purple", 420, 250, 8)]), seed=1))
    assert sliver is not None and sliver.changes == []
    whole = analyse_objects(before, _scene(_moved(_OBJECTS + [("purple", 420, 250, 16)]), seed=1))
    assert [(c.event, c.subject.colour) for c in whole.changes] == [("appeared", "purple")]
    # An object at the right edge that the camera's move carries out of the after view did
    # not go: the view shows nothing where it stood.
    edge = _OBJECTS + [("purple", 462, 200, 14)]
    left = analyse_objects(_scene(edge), _scene(_moved(edge), seed=1))
    assert left is not None and left.changes == [] and len(left.camera.pairs) == 5


def test_two_objects_of_one_colour_found_as_one_are_cut_apart():
    from spotdiff_cli.analysis.objects3d import analyse_objects, segment_objects

    # A second red ball touching the first: one red object in the before view.
    touching = _OBJECTS + [("red", 150, 165, 16)]
    before = _scene(touching)
    assert [o.colour for o in segment_objects(before)].count("red") == 1
    # Dropped: what the merged object holds beyond the remaining ball is gone (it was read
    # as the red object moving, the merged outline's foot being the dropped ball's).
    dropped = analyse_objects(before, _scene(_moved(_OBJECTS), seed=1))
    assert [(c.event, c.subject.colour) for c in dropped.changes] == [("disappeared", "red")]
    x, y, w, h = dropped.changes[0].subject.bbox
    assert abs(x + w / 2 - 150) < 12 and abs(y + h - 165) < 8
    # Both still there, seen again from the moved camera: no change.
    assert analyse_objects(before, _scene(_moved(touching), seed=1)).changes == []


def test_a_moved_camera_over_objects_is_described_in_clevr_words():
    before = _scene(_OBJECTS)
    after = _scene(_moved([o if o[0] != "red" else ("purple", *o[1:]) for o in _OBJECTS]), seed=3)
    report = describe(before, after)
    assert kinds(report) == ["colour", "camera"], [s.text for s in report.sentences]
    text = report.sentences[0].text
    assert text.startswith("the ") and " red " in text and text.endswith("changed colour to purple")
    assert any(w in text.split() for w in ("sphere", "cube", "cylinder"))
    assert any(w in text.split() for w in ("metal", "rubber"))
    assert "something" not in text
    assert describe(before, _scene(_moved(_OBJECTS), seed=3)).sentences[0].kind == "camera"


def test_a_fixed_camera_over_objects_keeps_the_pixel_path():
    # The same plain floor and objects, the camera still: the objects' fit is the shift, so
    # today's fixed-camera analysis answers (its words, not CLEVR's).
    before = _scene(_OBJECTS)
    after = _scene([o if o[0] != "green" else ("green", 330, 280, 26) for o in _OBJECTS])
    report = describe(before, after)
    assert report.analysis.camera is None
    assert not any(type(c).__name__ == "ObjectCluster" for c in report.analysis.clusters)


def _seen(
    p_metal: float = 0.1,
    median_ratio: float = 0.3,
    colour: str = "red",
    contact: tuple[float, float] = (2.0, 4.0),
    whole: bool = True,
    lab: tuple[float, float, float] | None = None,
):
    """A ball as one view segmented it, from the measurements a rule reads: its material
    reading, brightness against the floor, colour, where it stands, whether seen whole, its
    median Lab (by default a red paint, its chroma lowered by the metal reading as a CLEVR
    metal shows its paint darkened: 47 as rubber, 28 as a sure metal)."""
    from spotdiff_cli.analysis.objects3d import SceneObject

    if lab is None:
        tint = 1.0 - 0.4 * p_metal
        lab = (90.0, 128.0 + 42.0 * tint, 128.0 + 22.0 * tint)

    return SceneObject(
        mask=np.ones((4, 4), bool),
        bbox=(int(contact[0]) - 2, int(contact[1]) - 4, 4, 4),
        contact=contact,
        area=16,
        colour=colour,
        lab=np.array(lab, np.float32),
        material="metal" if p_metal > 0.5 else "rubber",
        shape="sphere",
        scale=0.15,
        whole=whole,
        features={"p_metal": p_metal, "median_ratio": median_ratio},
    )


def test_a_shift_across_the_view_onto_a_look_alike_is_not_the_camera():
    from spotdiff_cli.analysis.objects3d import fit_camera

    # Two objects seen half-hidden after the move agree on a zoom and a turn; a purple ball that
    # moved across the view agrees with a 328 px pan on its own. Such a pan is no camera jitter
    # (the objects' camera is bounded at 0.4 of the frame): the two objects give the camera.
    before = [
        _seen(colour="yellow", contact=(292, 138)),
        _seen(colour="gray", contact=(323, 186)),
        _seen(colour="purple", contact=(389, 172)),
    ]
    after = [
        _seen(colour="yellow", contact=(246, 108), whole=False),
        _seen(colour="purple", contact=(61, 156)),
        _seen(colour="gray", contact=(266, 152), whole=False),
    ]
    fit = fit_camera(before, after, (480, 320))
    assert sorted(fit.pairs) == [(0, 0), (1, 2)] and fit.model == "similarity"
    # A lone look-alike far across the view gives no camera at all.
    far = fit_camera([_seen(contact=(400, 200))], [_seen(contact=(40, 190))], (480, 320))
    assert far.pairs == () and far.model == "none"


def _part(colour: str, mask: np.ndarray):
    """An object found in one view as ``mask`` (only its colour and outline matter here)."""
    ys, xs = np.nonzero(mask)
    obj = _seen(colour=colour, contact=(float(xs.mean()), float(ys.max())))
    box = (int(xs.min()), int(ys.min()), int(np.ptp(xs)) + 1, int(np.ptp(ys)) + 1)
    return dataclasses.replace(obj, mask=mask, area=int(mask.sum()), bbox=box)


def test_a_bright_patch_split_off_a_metal_sphere_is_not_a_repainted_object():
    from spotdiff_cli.analysis.objects3d import _part_of

    ball = np.zeros((120, 160), np.uint8)
    cv2.circle(ball, (60, 60), 30, 1, -1)
    lower = ball.astype(bool) & (np.arange(120)[:, None] > 70)  # the bright patch, read cyan
    patch, rest = _part("cyan", lower), _part("blue", ball.astype(bool) & ~lower)
    assert _part_of(patch, [patch, rest], "blue")
    # A cyan ball touching the blue one is an object of its own: together they make a waist.
    other = np.zeros_like(ball)
    cv2.circle(other, (112, 66), 24, 1, -1)
    neighbour = _part("cyan", other.astype(bool) & ~ball.astype(bool))
    whole = _part("blue", ball.astype(bool))
    assert not _part_of(neighbour, [neighbour, whole], "blue")
    # ... and a piece with no part of that colour beside it is no one's piece.
    assert not _part_of(patch, [patch, rest], "red")


def test_a_fixed_camera_under_a_changed_light_compares_the_objects():
    # The camera stayed and the light dimmed across the view: the objects, compared where they
    # stand, say what changed (in CLEVR's words), not the pixels' moved shadows and shading.
    before = _scene(_OBJECTS)
    gain = np.linspace(0.7, 0.9, before.shape[1])[None, :, None]

    def relit(objects):
        return np.clip(_scene(objects, seed=1).astype(np.float32) * gain, 0, 255).astype(np.uint8)

    report = describe(before, relit([o if o[0] != "red" else ("purple", *o[1:]) for o in _OBJECTS]))
    assert report.analysis.camera is None
    assert kinds(report) == ["colour", "lighting"], [s.text for s in report.sentences]
    assert all(type(c).__name__ == "ObjectCluster" for c in report.analysis.clusters)
    assert report.sentences[0].text.endswith(
        "red rubber sphere on the left changed colour to purple"
    )
    # The same objects under the same changed light: only the light changed.
    assert kinds(describe(before, relit(_OBJECTS))) == ["lighting"]


def test_a_repaint_keeps_the_object_about_as_bright_against_the_floor():
    from spotdiff_cli.analysis.objects3d import _lit_alike

    # Yellow rubber repainted red: 2.1x darker, as CLEVR's paints differ.
    assert _lit_alike(_seen(median_ratio=1.9, colour="yellow"), _seen(median_ratio=0.9))
    assert _lit_alike(_seen(median_ratio=0.1), _seen(median_ratio=0.98, colour="yellow"))
    # A metal's piece black in one view (mirroring the dark world) and brighter than the floor
    # in the other (mirroring a lamp): 145x, no paint does that.
    assert not _lit_alike(_seen(median_ratio=2.9, colour="yellow"), _seen(median_ratio=0.02))
    assert not _lit_alike(_seen(median_ratio=0.02), _seen(median_ratio=2.9, colour="yellow"))


def test_a_light_dimmed_a_little_still_lets_the_objects_answer():
    # A lamp dimmed by 1 %: the light correction (about 1.9 grey levels) is under the pixels'
    # threshold for a changed light, but over the objects' (_OBJECTS_RELIT), so the objects,
    # compared where they stand, name the repaint; by 0.5 % (0.9) the pixels answer as before.
    before = _scene(_OBJECTS)
    repainted = [o if o[0] != "red" else ("purple", *o[1:]) for o in _OBJECTS]

    def dimmed(gain: float) -> np.ndarray:
        after = _scene(repainted, seed=1).astype(np.float32) * gain
        return np.clip(after, 0, 255).astype(np.uint8)

    report = describe(before, dimmed(0.99))
    assert report.analysis.camera is None
    assert [type(c).__name__ for c in report.analysis.clusters] == ["ObjectCluster"]
    assert report.sentences[0].text.endswith("changed colour to purple")
    barely = describe(before, dimmed(0.995))
    assert [type(c).__name__ for c in barely.analysis.clusters] == ["Cluster"]


def test_a_one_row_piece_reads_a_finite_material(recwarn):
    from spotdiff_cli.analysis.objects3d import _maps, _material_of

    # A sliver one row high (seed 32's scene 52 cut one off a merged pair): its vertical
    # gradient is 0, not the NaN a correlation with a constant row index gives, which the
    # material trees would have sent down one side of every split.
    image = _scene([("blue", 240, 200, 30)])
    mask = np.zeros(image.shape[:2], bool)
    mask[180, 220:260] = True
    _, features = _material_of(_maps(image), mask)
    assert features["vgrad"] == 0.0
    assert all(math.isfinite(v) for v in features.values())
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_the_hue_read_in_a_crop_or_an_outline_is_the_whole_views():
    from spotdiff_cli.analysis.objects3d import _maps

    # Computed where it is read (_Maps.hue_at), the hue must be the whole view's to the bit:
    # colour names, the evidence that an object is still there and repaints all compare it.
    maps = _maps(_scene([("blue", 240, 200, 30), ("red", 120, 150, 24), ("yellow", 350, 170, 20)]))
    a, b = maps.lab[:, :, 1] - 128.0, maps.lab[:, :, 2] - 128.0
    whole = np.degrees(np.arctan2(b, a)) % 360.0
    outline = np.zeros(whole.shape, bool)
    cv2.circle(outline.view(np.uint8), (240, 200), 40, 1, -1)
    assert np.array_equal(maps.hue_at(outline), whole[outline])
    crop = (slice(150, 260), slice(90, 300))
    assert np.array_equal(maps.hue_at(crop), whole[crop])
    assert maps.hue_at(outline).dtype == np.float32


def test_a_coloured_object_too_dark_to_show_its_hue_is_not_grey_paint():
    from spotdiff_cli.analysis.objects3d import _other_paint

    def lab(lightness: float, a: float, b: float) -> np.ndarray:
        return np.array([lightness, a, b], np.float32)

    brown, green = lab(49, 140, 150), lab(92, 91, 163)
    # CLEVR's grey paint reads neutral, even a grey metal mirroring the dark world (L 21-28).
    assert _other_paint(lab(75, 128, 128), brown)
    assert _other_paint(lab(26, 128, 129), green)
    # A brown metal's dark side keeps a tint (chroma 7.8): no grey paint, no repaint.
    assert not _other_paint(lab(35, 134, 133), brown)
    assert not _other_paint(brown, lab(11, 134, 133))
    # A green cylinder's unlit side reads black: nothing says which paint it has.
    assert not _other_paint(lab(0, 128, 128), green)
    # Two colourful paints are compared by hue as before.
    assert _other_paint(brown, green) and not _other_paint(green, lab(80, 94, 161))


def test_a_flat_band_is_no_clevr_object_to_arrive_or_go():
    from spotdiff_cli.analysis.objects3d import _object_sized

    ball = _seen()
    assert _object_sized(dataclasses.replace(ball, bbox=(300, 100, 56, 51), scale=0.19))
    # The top of a cube standing behind a neighbour, 78 x 16 px: a piece, not an object.
    assert not _object_sized(dataclasses.replace(ball, bbox=(310, 103, 78, 16), scale=0.36))
    # A sliver (scale 0.05, or a piece of 0.078 beside two objects) and the far floor's dark
    # band (1.7) are not either.
    assert not _object_sized(dataclasses.replace(ball, bbox=(0, 0, 10, 20), scale=0.05))
    assert not _object_sized(dataclasses.replace(ball, bbox=(306, 152, 21, 20), scale=0.078))
    assert _object_sized(dataclasses.replace(ball, bbox=(300, 150, 30, 30), scale=0.09))
    assert not _object_sized(dataclasses.replace(ball, bbox=(0, 0, 400, 200), scale=1.7))
    # The dark top of a grey metal sphere behind a neighbour (43 x 17 px) is a piece too; a
    # ball half hidden behind another (37 x 21 px) is an object.
    assert not _object_sized(dataclasses.replace(ball, bbox=(203, 105, 43, 17), scale=0.2))
    assert _object_sized(dataclasses.replace(ball, bbox=(211, 167, 37, 21), scale=0.13))


def test_a_view_that_only_leans_the_other_way_is_no_new_finish(monkeypatch):
    from spotdiff_cli.analysis import objects3d

    # Trees that call every candidate a new finish: what is left to decide is the gate. A side
    # read 0.58 metal beside one sure of it is no candidate; sure both ways is.
    always = {"features": [], "baseline": 30.0, "trees": []}
    monkeypatch.setattr(objects3d, "_finish_trees", lambda: always)
    changed = objects3d._material_changed
    assert not changed(_seen(0.58, 0.31, "purple"), _seen(1.0, 0.09, "purple"))
    assert not changed(_seen(0.25, 0.33), _seen(0.9, 0.11))
    assert changed(_seen(0.02, 0.31, "purple"), _seen(1.0, 0.09, "purple"))
    assert changed(_seen(0.03, 0.33), _seen(0.75, 0.11))  # the metal side needs only 0.7
    # ... and trees that call none: no candidate is said.
    never = {"features": [], "baseline": -30.0, "trees": []}
    monkeypatch.setattr(objects3d, "_finish_trees", lambda: never)
    assert not changed(_seen(0.02, 0.31, "purple"), _seen(1.0, 0.09, "purple"))


def test_a_metal_repainted_grey_is_another_paint_though_its_colour_is_dark():
    from spotdiff_cli.analysis.objects3d import _metal_to_grey, _other_paint

    # Seed 34's scene 81: a large cyan metal sphere (median Lab chroma 20.9) repainted grey
    # (neutral, lightness 48). A metal shows its paint darkened, under the 24 _other_paint asks.
    cyan = _seen(0.95, 0.5, "cyan", lab=(97.0, 128.0 - 19.8, 128.0 - 6.8))
    grey = _seen(0.95, 0.5, "gray", lab=(48.0, 128.0, 128.0))
    assert not _other_paint(cyan.lab, grey.lab)
    assert _metal_to_grey(cyan, grey) and _metal_to_grey(grey, cyan)
    # A coloured metal's dark side reads grey with a tint, or black: the same paint.
    tinted = _seen(0.95, 0.5, "gray", lab=(11.0, 128.0 + 6.0, 128.0 + 5.0))
    black = _seen(0.95, 0.5, "gray", lab=(1.0, 128.0, 128.0))
    assert not _metal_to_grey(cyan, tinted) and not _metal_to_grey(cyan, black)
    # Rubber shows its paint as it is: _other_paint's bar stands for it.
    assert not _metal_to_grey(_seen(0.02, 0.5, "cyan", lab=cyan.lab), grey)


def test_a_metal_reading_with_a_lit_top_is_rubber_seen_from_above(monkeypatch):
    from spotdiff_cli.analysis import objects3d

    # Trees that call every candidate a new finish: the lit top alone must say no. A side read
    # as metal whose top is 14x brighter than its bottom (a rubber cylinder's lit top face seen
    # by a higher camera), beside a side read as rubber at 1x: the same finish. At 8x (the
    # most a true change measured on six renders) the trees decide.
    always = {"features": [], "baseline": 30.0, "trees": []}
    monkeypatch.setattr(objects3d, "_finish_trees", lambda: always)

    def seen(p_metal: float, top_over_bottom: float):
        obj = _seen(p_metal, 0.31, "blue")
        return dataclasses.replace(
            obj, features={**obj.features, "top_over_bottom": top_over_bottom}
        )

    changed = objects3d._material_changed
    assert not changed(seen(0.02, 1.0), seen(0.95, 14.0))
    assert not changed(seen(0.95, 14.0), seen(0.02, 1.0))  # either view first
    assert changed(seen(0.02, 1.0), seen(0.95, 9.0))
    assert changed(seen(0.02, 4.0), seen(0.95, 0.5))  # rubber's top brighter: the usual way


def test_the_finish_trees_read_both_views_from_the_metal_side_to_the_rubber_side():
    from spotdiff_cli.analysis.objects3d import _finish_trees, finish_features

    rubber = _seen(0.03, 0.33, "red", lab=(120.0, 168.0, 150.0))
    metal = dataclasses.replace(_seen(0.98, 0.11, "red", lab=(60.0, 152.0, 140.0)), area=32)
    one_way, other_way = finish_features(rubber, metal, 1.0), finish_features(metal, rubber, 1.0)
    assert one_way == other_way  # which view came first does not matter
    assert one_way["lighter"] == pytest.approx(3.0)
    assert one_way["saturated"] == pytest.approx(np.hypot(40, 22) / np.hypot(24, 12))
    assert one_way["size_gap"] == pytest.approx(math.log(2))  # twice the area: a neighbour held
    assert (one_way["least"], one_way["most"]) == (0.03, 0.98)
    # A grey object has no paint to compare: saturation 1, and the trees know why.
    grey = finish_features(_seen(0.02, 0.3, "gray", lab=(90.0, 128.0, 128.0)), metal, 1.0)
    assert (grey["saturated"], grey["colourless"]) == (1.0, 1.0)
    # The shipped trees read exactly these values.
    assert _finish_trees()["features"] == list(one_way)
    assert len(_finish_trees()["trees"]) == 100


# What finish_features measured on four matched objects of the tuning renders that one view read
# as metal and the other as rubber (data/objects3d_fit.py --finish-trees): two true material
# changes (seed 26's scene 2, a grey cylinder; seed 20's scene 0, a blue cube read 1.00 / 0.00
# whose rubber side is only 2.4x as bright) and two that stayed (a grey metal that a distractor's
# moved lamp lit 2.1x brighter from one side, which the rules before the trees called "changed
# material to rubber"; a grey metal mirroring a lamp from one side, 10.6x).
_FINISH_ROWS = {  # name: (changed, the values in the trees' order)
    "seed 26 scene 2, grey rubber turned metal": (
        True,
        "2.6609 1.0 1.0 0.394 0.0004 0.9998 0.0 0.0 -0.2558 -28.0215 "
        "-0.784 0.0469 -0.4473 -0.7165 2.5089 -0.9241 -1.7205 -0.1044 -0.4944 -0.387 -0.0994",
    ),
    "seed 20 scene 0, blue metal turned rubber": (
        True,
        "2.4103 1.171 0.0 0.1174 0.0013 0.9999 0.0 0.0 0.0395 -2.6458 "
        "0.2175 0.0539 0.0071 0.1212 1.4872 -0.9473 0.8783 -0.1063 -0.1069 -0.0014 -0.6643",
    ),
    "seed 27 distractor 0, a grey metal under a moved lamp": (
        False,
        "2.1495 1.0 1.0 0.679 0.0006 0.9739 0.0 0.0 -0.0934 -1.2967 "
        "0.0519 0.1359 -0.2856 -0.2364 -0.0393 -0.2504 -0.3664 0.0 -0.1263 0.3286 -0.0268",
    ),
    "seed 24 scene 4, a grey metal mirroring a lamp": (
        False,
        "10.5615 1.0 1.0 0.0356 0.0852 0.9975 0.0 0.0 -0.1025 -20.9223 "
        "0.1439 0.2205 0.2669 -0.7015 -5.6253 0.5648 -7.4051 0.0 -0.719 0.6329 -0.6559",
    ),
}


@pytest.mark.parametrize("name", sorted(_FINISH_ROWS))
def test_the_shipped_finish_trees_tell_a_new_finish_from_a_metal_seen_two_ways(name):
    from spotdiff_cli.analysis.objects3d import _NEW_FINISH, _finish_trees, _trees_probability

    changed, values = _FINISH_ROWS[name]
    trees = _finish_trees()
    measured = [float(v) for v in values.split()]
    p = _trees_probability(trees, dict(zip(trees["features"], measured, strict=True)))
    assert (p >= _NEW_FINISH) == changed, f"{name}: {p:.3f}"


def test_the_material_trees_are_evaluated_as_scikit_learn_grows_them():
    from spotdiff_cli.analysis.objects3d import _material_trees, _trees_probability

    # Two stumps: a node goes left when its feature is at most its threshold.
    model = {
        "features": ["a", "b"],
        "baseline": -1.0,
        "trees": [
            {
                "feature": [0, 0, 0],
                "threshold": [0.5, 0, 0],
                "left": [1, 0, 0],
                "right": [2, 0, 0],
                "leaf": [0, 1, 1],
                "value": [0, -2.0, 3.0],
            },
            {
                "feature": [1, 0, 0],
                "threshold": [10.0, 0, 0],
                "left": [1, 0, 0],
                "right": [2, 0, 0],
                "leaf": [0, 1, 1],
                "value": [0, 0.5, -0.5],
            },
        ],
    }
    assert _trees_probability(model, {"a": 0.5, "b": 10.0}) == pytest.approx(
        1 / (1 + math.exp(2.5))
    )
    assert _trees_probability(model, {"a": 0.6, "b": 11.0}) == pytest.approx(
        1 / (1 + math.exp(-1.5))
    )
    # The shipped trees read the features the segmentation measures.
    image = np.full((240, 320, 3), 170, np.uint8)
    cv2.circle(image, (160, 150), 30, (200, 40, 40), -1)
    from spotdiff_cli.analysis.objects3d import segment_objects

    (ball,) = segment_objects(image)
    assert set(_material_trees()["features"]) <= set(ball.features)
    assert len(_material_trees()["trees"]) == 100


def test_a_departure_beside_a_repainted_object_ranks_below_the_repaint():
    from spotdiff_cli.analysis.objects3d import ObjectChange, _below_repaint

    ball, piece, apart = (np.zeros((120, 160), bool) for _ in range(3))
    ball[40:80, 40:80] = True
    piece[45:70, 80:100] = True  # touches the ball
    apart[45:70, 120:140] = True
    repaint = ObjectChange("colour", _part("brown", ball), _part("purple", ball), "purple", 0.8)
    gone = ObjectChange("disappeared", _part("yellow", piece), None, "", 0.9)
    assert _below_repaint(gone, [repaint, gone]).confidence < repaint.confidence
    # One standing apart keeps its rank, and so does the repaint itself.
    away = ObjectChange("disappeared", _part("yellow", apart), None, "", 0.9)
    assert _below_repaint(away, [repaint, away]).confidence == 0.9
    assert _below_repaint(repaint, [repaint, gone]) is repaint


def test_an_object_whose_foot_alone_moved_stayed():
    from spotdiff_cli.analysis.objects3d import _top_gap

    # A cylinder whose foot a metal in front mirrors: the after outline reaches 16 px lower and
    # its contact point 33 px aside, its top where it was (the camera fixed).
    before, after = np.zeros((320, 480), bool), np.zeros((320, 480), bool)
    before[64:139, 232:295] = True
    after[63:139, 231:296] = True
    after[139:155, 240:255] = True
    still = np.eye(3)
    obj_b = dataclasses.replace(_part("cyan", before), contact=(280.0, 138.5))
    obj_a = dataclasses.replace(_part("cyan", after), contact=(247.0, 154.5))
    assert _top_gap(still, obj_b, obj_a) < 0.027 * 480
    # The same object carried 60 px to the right moves its top along.
    moved = np.roll(before, 60, axis=1)
    obj_m = dataclasses.replace(_part("cyan", moved), contact=(340.0, 138.5))
    assert _top_gap(still, obj_b, obj_m) > 0.027 * 480
    # ... and a camera that zoomed in by 10 % about the frame's centre puts it where it is.
    zoom = np.array([[1.1, 0, -24.0], [0, 1.1, -16.0], [0, 0, 1]])
    grown = np.zeros((320, 480), bool)
    grown[
        round(64 * 1.1 - 16) : round(139 * 1.1 - 16), round(232 * 1.1 - 24) : round(295 * 1.1 - 24)
    ] = True
    obj_z = dataclasses.replace(_part("cyan", grown), contact=(280.0 * 1.1 - 24, 138.5 * 1.1 - 16))
    assert _top_gap(zoom, obj_b, obj_z) < 3


def test_a_camera_moved_sideways_shifts_the_near_floor_further_than_the_far_floor():
    from spotdiff_cli.analysis.objects3d import _floor_plan, _floor_similarity, _similarity

    # Three objects seen from CLEVR's camera, which then moved sideways and turned a little
    # about the vertical: on the floor seen from above that is a similarity; in the view,
    # the near floor shifts further than the far floor.
    size = (480, 320)
    plan = _floor_plan(size)
    turn = math.radians(3.0)
    move = np.array(
        [[math.cos(turn), -math.sin(turn), 0.3], [math.sin(turn), math.cos(turn), 0.05], [0, 0, 1]]
    )
    view_move = np.linalg.inv(plan) @ move @ plan

    def seen(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
        v = np.column_stack((points, np.ones(len(points)))) @ matrix.T
        return v[:, :2] / v[:, 2:]

    near = np.array([[200.0, 250.0], [330.0, 262.0]])  # two objects close to the camera
    far = np.array([[300.0, 150.0]])  # one far behind them, which did not move
    fitted = _floor_similarity(near, seen(view_move, near), size)
    assert np.hypot(*(seen(fitted, far) - seen(view_move, far))[0]) < 1.0
    # The image's similarity through the two near objects puts the far one 19 px or more off
    # (the distance at which an object moved).
    image = _similarity(near[0], near[1], *seen(view_move, near))
    assert np.hypot(*(seen(image, far) - seen(view_move, far))[0]) > 0.04 * 480


def test_an_object_that_moved_in_front_of_a_look_alike_is_cut_from_it():
    from spotdiff_cli.analysis.objects3d import analyse_objects, segment_objects

    # A small green ball moved from the lower right to just in front of the large green one:
    # the after view finds one green object whose foot is the small ball's. The large ball's
    # top is where the camera puts it, so it stayed; the small ball is cut from it and moved.
    before = _scene(_OBJECTS + [("green", 400, 280, 13)])
    after = _scene(_moved(_OBJECTS + [("green", 236, 254, 13)]), seed=1)
    assert [o.colour for o in segment_objects(after)].count("green") == 1
    found = analyse_objects(before, after)
    assert [(c.event, c.subject.colour) for c in found.changes] == [("moved", "green")]
    assert found.changes[0].before.bbox[0] > 350  # the small ball, not the large one
    x, y, w, h = found.changes[0].after.bbox
    assert abs(x + w / 2 - 258) < 15 and y > 250  # in front of the large ball


def test_a_patch_lying_on_a_metal_is_no_object_that_arrived_or_went():
    from spotdiff_cli.analysis.objects3d import _lies_on

    # A blue metal cylinder's outline with a bite in its face, where a lamp's reflection was
    # split off by colour and read as a small cyan cube: the patch lies on the cylinder.
    cylinder = np.zeros((120, 160), bool)
    cylinder[20:100, 40:100] = True
    patch = np.zeros((120, 160), bool)
    patch[30:48, 60:80] = True
    metal = _part("blue", cylinder & ~patch)
    assert _lies_on(_part("cyan", patch), [metal, _part("cyan", patch)])
    # A small ball standing in front of the cylinder hides its lower part and stands out below
    # it: an object of its own (a third of it inside the cylinder's outline).
    ball = np.zeros((120, 160), bool)
    cv2.circle(ball.view(np.uint8), (70, 104), 14, 1, -1)
    front = _part("cyan", ball)
    assert not _lies_on(front, [_part("blue", cylinder & ~ball), front])
    # ... and a piece of the same colour is left to the merged-object cut.
    assert not _lies_on(_part("blue", patch), [metal])


def test_a_grey_object_brighter_than_grey_paint_is_no_object_to_arrive_or_go():
    from spotdiff_cli.analysis.objects3d import _object_sized

    ball = dataclasses.replace(_seen(colour="gray"), bbox=(300, 100, 30, 30), scale=0.12)
    # Grey rubber lit as the floor is reads 0.27 of it, grey metal darker still.
    assert _object_sized(dataclasses.replace(ball, features={"median_ratio": 0.31}))
    assert _object_sized(dataclasses.replace(ball, features={"median_ratio": 0.02}))
    # A lit patch of floor between objects, found by its edges, reads as bright as the floor.
    assert not _object_sized(dataclasses.replace(ball, features={"median_ratio": 0.95}))
    # A coloured object may be brighter than the floor (a yellow rubber ball: 2.5).
    yellow = dataclasses.replace(ball, colour="yellow", features={"median_ratio": 2.5})
    assert _object_sized(yellow)


def test_a_grey_find_smaller_than_any_grey_object_neither_arrives_nor_goes():
    from spotdiff_cli.analysis.objects3d import _can_come_or_go

    view = np.zeros((320, 480), bool)
    piece = dataclasses.replace(_seen(colour="gray"), mask=view, area=386)
    # A dark piece beside a neighbour, 386 px of a 480x320 view (seed 33's pair 56 "the small
    # gray rubber sphere on the left is gone"); the smallest true grey arrival measured 608.
    assert not _can_come_or_go(piece)
    assert _can_come_or_go(dataclasses.replace(piece, area=608))
    # The same size in another colour is a small object far off, not a piece of grey.
    assert _can_come_or_go(dataclasses.replace(piece, colour="blue"))
    # Relative to the view: the same share of a view twice as wide.
    wide = np.zeros((320, 960), bool)
    assert not _can_come_or_go(dataclasses.replace(piece, mask=wide, area=2 * 386))


def test_an_object_between_the_places_of_the_cameras_maps_did_not_move():
    from spotdiff_cli.analysis.objects3d import _span_gap

    # A large cylinder near the camera, under a similarity through two far objects: the image's
    # similarity puts it 48 px short of where it is (the near floor shifted further), the
    # floor's similarity 33 px beyond it; the floor's map lies between the two.
    image, floor = np.array([329.0, 273.4]), np.array([410.0, 276.7])
    assert _span_gap([image, floor], (377.5, 270.5)) < 0.04 * 480
    # An object carried 40 px across that line moved.
    assert _span_gap([image, floor], (377.5, 230.0)) > 0.04 * 480
    # With one map only, the distance to its place.
    assert _span_gap([image], (329.0, 300.0)) == pytest.approx(26.6)


def test_a_flat_piece_is_not_cut_from_a_merged_object():
    from spotdiff_cli.analysis.objects3d import _built

    # The lit top of a grey cube found whole in one view and in part in the other (46 x 21 px)
    # is a face of it, not a neighbour merged with it; a ball behind it (30 x 24) is one.
    ball = _seen(colour="gray")
    assert not _built(dataclasses.replace(ball, bbox=(284, 87, 46, 21)))
    assert _built(dataclasses.replace(ball, bbox=(284, 87, 30, 24)))


def test_one_convex_outline_is_not_cut_as_two_merged_objects():
    from spotdiff_cli.analysis.objects3d import _ONE_CONVEX, _solidity

    # A ball found whole in one view (and in part in the other, where a neighbour hid it) is
    # as convex as one object: nothing to cut from it.
    ball = np.zeros((120, 160), np.uint8)
    cv2.circle(ball, (80, 60), 20, 1, -1)
    assert _solidity(ball.astype(bool)) >= _ONE_CONVEX
    # A small ball in front of a large one of its colour makes a waist where they meet.
    pair = ball.copy()
    cv2.circle(pair, (92, 88), 11, 1, -1)
    assert _solidity(pair.astype(bool)) < _ONE_CONVEX


def test_a_grey_object_is_gone_only_where_the_other_view_is_as_bright_as_floor():
    from spotdiff_cli.analysis.objects3d import _maps, _shows_floor

    # A floor (sRGB 200) with a soft grey ball half as bright as it (in linear light): neither
    # dark enough nor sharp-edged enough to be found as an object.
    image = np.full((240, 320, 3), 200, np.uint8)
    ball = np.zeros((240, 320), np.uint8)
    cv2.circle(ball, (160, 120), 22, 1, -1)
    shade = cv2.GaussianBlur(ball.astype(np.float32), (0, 0), 3.0)
    image = (image * (1.0 - 0.27 * shade[..., None])).astype(np.uint8)
    maps = _maps(image)
    on_ball = cv2.erode(ball, np.ones((9, 9), np.uint8)) > 0
    on_floor = np.roll(on_ball, 100, axis=1)
    grey = _seen(colour="gray")
    # The grey ball is still there: its place is not floor.
    assert not _shows_floor(maps, on_ball, grey)
    # ... which the pixels' evidence alone would not say (nothing dark, sharp or colourful).
    assert _shows_floor(maps, on_ball, grey, lit_like_floor=False)
    # Plain floor is floor; and a red object's place shows no red there either way.
    assert _shows_floor(maps, on_floor, grey)
    assert _shows_floor(maps, on_ball, _seen(colour="red"))


def test_a_dark_object_behind_a_coloured_one_is_no_cap():
    from spotdiff_cli.analysis.objects3d import _stands_behind

    # A dark metal sphere half hidden behind a nearer coloured object, above it and within its
    # columns: a disc that fills its box (0.79), 700 px of a 480x320 frame, touching the
    # coloured part along a third of its outline: an object of its own.
    sphere = np.zeros((320, 480), bool)
    cv2.circle(sphere.view(np.uint8), (200, 100), 15, 1, -1)
    assert _stands_behind(sphere, 0.3)
    # A metal's dark cap (the far floor it mirrors): a thin crescent, a fifth of its box.
    cap = np.zeros((320, 480), np.uint8)
    cv2.ellipse(cap, (200, 100), (30, 12), 0, 180, 360, 1, 3)
    assert not _stands_behind(cap.astype(bool), 0.3)
    # ... nor a disc the coloured object holds along half its outline, nor a sliver of 300 px.
    assert not _stands_behind(sphere, 0.45)
    small = np.zeros((320, 480), bool)
    cv2.circle(small.view(np.uint8), (200, 100), 9, 1, -1)
    assert not _stands_behind(small, 0.3)


def test_an_object_with_its_foot_hidden_moved_only_twice_as_far():
    from spotdiff_cli.analysis.objects3d import _stayed

    # At 480 px: a whole object moved beyond 19 px at the foot and 13 at the top ...
    assert not _stayed(25.0, 20.0, False, 480)
    assert _stayed(25.0, 10.0, False, 480)
    # ... one touching another in both views only beyond 38 px at the foot: on the untouched
    # renders as many distractors as true moves measured 24-38 px there, their tops as far.
    assert _stayed(35.6, 34.6, True, 480)
    assert not _stayed(40.0, 30.0, True, 480)


def test_a_grey_object_bigger_than_its_coloured_neighbour_is_no_piece_of_it():
    from spotdiff_cli.analysis.objects3d import _part_of

    # A grey cylinder standing before a cyan ball: one convex outline together.
    ball, cylinder = np.zeros((200, 200), np.uint8), np.zeros((200, 200), bool)
    cv2.circle(ball, (100, 70), 18, 1, -1)
    cylinder[86:150, 76:124] = True
    ball_part = _part("cyan", ball.astype(bool) & ~cylinder)
    grey = _part("gray", cylinder)
    assert not _part_of(grey, [grey, ball_part], "cyan")
    # A metal ball's dark lower side, read grey, smaller than the coloured rest: a piece of it.
    sphere = np.zeros((200, 200), np.uint8)
    cv2.circle(sphere, (100, 100), 40, 1, -1)
    dark = sphere.astype(bool) & (np.arange(200)[:, None] > 125)
    lit = _part("cyan", sphere.astype(bool) & ~dark)
    assert _part_of(_part("gray", dark), [lit, _part("gray", dark)], "cyan")


def test_a_matched_objects_pixels_end_where_the_camera_puts_its_outline():
    from spotdiff_cli.analysis.objects3d import _set_down

    # A ball of radius 20 standing at (100, 150), seen from a camera that came 20 % closer
    # and put its foot at (220, 120): its outline there, and not the ball merged behind it.
    disc = np.zeros((240, 320), np.uint8)
    cv2.circle(disc, (100, 130), 20, 1, -1)
    ball = dataclasses.replace(_part("purple", disc.astype(bool)), contact=(100.0, 150.0))
    placed = _set_down(ball, np.array([220.0, 120.0]), 1.2, (320, 240))
    assert placed[96, 220] and placed[120 - 4, 220] and placed[96, 220 - 20]
    assert not placed[96 - 24 - 12 - 20, 220]  # a neighbour behind, 20 px above its top
    assert not placed[96, 100]  # where it stood before


def test_an_object_touching_the_dark_far_floor_is_not_lost_in_it():
    from spotdiff_cli.analysis.objects3d import segment_objects

    # The far floor at the top of a CLEVR view falls off to dark over a band 40 px tall, which
    # the floor's closing (a kernel wider than the band) filled in as it would a dark object:
    # the band read as one dark object, and a grey cylinder standing against it went with it.
    image = _floor().astype(np.float32)
    fall_off = np.clip(np.linspace(0.25, 1.6, 64), 0.25, 1.0)  # dark up to row 27, floor by 40
    image[:64] *= fall_off[:, None, None]
    image = image.astype(np.uint8)
    cv2.rectangle(image, (200, 24), (250, 110), (58, 58, 58), -1)  # a grey cylinder's body
    cv2.ellipse(image, (225, 110), (25, 7), 0, 0, 180, (58, 58, 58), -1)  # its round foot
    found = segment_objects(image)
    assert found is not None
    assert all(o.bbox[2] < 0.5 * image.shape[1] for o in found), [o.bbox for o in found]
    grey = [o for o in found if o.colour == "gray"]
    assert len(grey) == 1, [(o.words(), o.bbox) for o in found]
    x, y, w, h = grey[0].bbox
    assert abs(x - 200) <= 3 and abs(w - 51) <= 4 and y + h >= 112 and y <= 40


def test_a_pool_of_light_that_moved_is_no_object_that_appeared():
    # The camera stayed and a lamp's pool of light moved from the upper left of the floor to
    # the lower right: one gain per channel does not model it (the correction stays under a
    # level), and two fifths of the view changed. The pixels read the lit floor as "a large
    # grey object appeared in the lower right" and the one it left as "gone"; the objects all
    # stand where they stood, so nothing appeared or went: the light changed.
    h, w = 320, 480
    yy, xx = np.mgrid[0:h, 0:w]
    scene = _scene(_OBJECTS).astype(np.float32)

    def lit(x: float, y: float) -> np.ndarray:
        pool = np.exp(-(((xx - x) / 120.0) ** 2 + ((yy - y) / 84.0) ** 2))
        return np.clip(scene * (0.75 + 0.5 * pool)[:, :, None], 0, 255).astype(np.uint8)

    report = describe(lit(100, 100), lit(380, 250))
    assert report.analysis.camera is None
    assert report.analysis.mask.lighting_correction < 1.0
    assert kinds(report) == ["lighting"], [s.text for s in report.sentences]


def test_a_grey_rubbers_place_partly_behind_an_object_in_front_is_judged_on_what_is_seen():
    from spotdiff_cli.analysis.objects3d import _maps, _shows_floor

    # Plain floor where a grey object stood; a red object in front of that place covers a
    # quarter of it (its edge and paint are what a grey object's evidence counts).
    image = np.full((240, 320, 3), 200, np.uint8)
    place = np.zeros((240, 320), np.uint8)
    cv2.circle(place, (160, 120), 24, 1, -1)
    place = place > 0
    front = np.zeros((240, 320), bool)
    front[130:, :] = True  # the lower quarter of the place
    image[front] = (200, 30, 30)
    maps = _maps(image)
    grey = _seen(colour="gray")
    assert not _shows_floor(maps, place, grey)
    # Told that the red object stands in front, the place is judged on the floor it leaves
    # in sight.
    assert _shows_floor(maps, place, grey, in_front=front)
    # ... for a grey rubber: a grey metal mirrors its neighbours, so their paint may be it.
    assert not _shows_floor(maps, place, _seen(colour="gray", p_metal=0.9), in_front=front)
    # ... but not when it hides most of the place: the grey object may stand behind it.
    hides_most = np.zeros_like(front)
    hides_most[105:, :] = True  # 0.88 of it
    image[hides_most] = (200, 30, 30)
    assert not _shows_floor(_maps(image), place, grey, in_front=hides_most)


def test_a_large_repainted_object_off_its_predicted_foot_is_still_at_its_place():
    from spotdiff_cli.analysis.objects3d import _same_place

    # 19 px is the same place at 480 px; a large object whose outlines overlap almost whole
    # stands at one place though its foot is 25 px off (a metal sphere repainted on seed 36).
    assert _same_place(12.0, 19.2, 0, 3000)
    assert _same_place(25.0, 19.2, 2500, 2700)
    assert not _same_place(25.0, 19.2, 1000, 2700)  # mostly elsewhere: another object
    assert not _same_place(45.0, 19.2, 2700, 2700)  # too far, whatever the outlines


def test_a_lamps_highlight_on_a_metal_is_no_paint():
    from spotdiff_cli.analysis.objects3d import _glint, _highlight

    # A blue metal sphere's highlight split off it, as the wide tuning renders measured it
    # (OpenCV's 8-bit Lab): nearly white, faintly cyan.
    glint = np.array([242.0, 105.0, 120.0])
    assert _highlight(glint) and _highlight(np.array([246.0, 113.0, 123.0]))
    # CLEVR's light paints seen whole: a cyan rubber, a yellow rubber, a yellow metal.
    assert not _highlight(np.array([228.0, 95.0, 118.0]))
    assert not _highlight(np.array([241.0, 122.0, 213.0]))
    assert not _highlight(np.array([243.0, 130.0, 180.0]))
    # A grey metal mirroring a lamp is as light but colourless: grey paint, not a highlight.
    assert not _highlight(np.array([254.0, 128.0, 128.0]))
    # Against the sphere's dark blue in the other view it is no new paint, either way round;
    # against a green as light as itself, it is (a cyan metal lit whole, repainted).
    dark_blue = np.array([20.0, 139.0, 102.0])
    assert _glint(glint, dark_blue) and _glint(dark_blue, glint)
    assert not _glint(np.array([237.0, 101.0, 119.0]), np.array([228.0, 70.0, 186.0]))
