"""Backbones: output grids, and the offline efficientnet-lite0 weights mapping onto timm."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("timm")

from spotdiff_cli.captioners import backbones as B  # noqa: E402
from spotdiff_cli.errors import ModelError, WeightsNotFoundError  # noqa: E402

# Real media lives beside the repository (<repo>/../shared/media) and is not shipped with it.
MEDIA = Path(__file__).resolve().parents[1].parent / "shared" / "media"


@pytest.fixture()
def shared_media() -> Path:
    if not (MEDIA / "odiff_tiger.jpg").is_file():
        pytest.skip(f"real media not found at {MEDIA}")
    return MEDIA


def test_lite0_package_weights_map_onto_timm_with_no_missing_keys():
    import timm

    source = torch.load(B.lite0_package_weights(), map_location="cpu", weights_only=True)
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    mapped = B.map_lite0_state_dict(source, model.state_dict())
    result = model.load_state_dict(mapped, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    # Order matters: the first and last tensors land where they belong.
    assert torch.equal(mapped["conv_stem.weight"], source["_conv_stem.weight"])
    assert torch.equal(mapped["classifier.bias"], source["_fc.bias"])


def test_mapping_refuses_a_shape_mismatch():
    import timm

    source = torch.load(B.lite0_package_weights(), map_location="cpu", weights_only=True)
    target = timm.create_model("tf_efficientnet_lite0", pretrained=False).state_dict()
    source["_fc.weight"] = torch.zeros(10, 1280)
    with pytest.raises(ModelError, match="_fc.weight"):
        B.map_lite0_state_dict(source, target)


def test_efficientnet_lite0_grid_and_preprocessing():
    model, info = B.create_backbone("efficientnet_lite0")
    assert (info.channels, info.grid, info.input_size) == (1280, (7, 7), (224, 224))
    assert info.mean == (0.5, 0.5, 0.5) and info.weights is not None
    with torch.no_grad():
        out = model(torch.zeros(2, 3, 224, 224))
    assert out.shape == (2, 1280, 7, 7)


def test_resnet101_is_cut_after_layer3():
    model, info = B.create_backbone("resnet101", pretrained=False)
    assert (info.channels, info.grid) == (1024, (14, 14))
    with torch.no_grad():
        assert model(torch.zeros(1, 3, 224, 224)).shape == (1, 1024, 14, 14)


def test_resnet101_without_local_weights_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.delenv("SPOTDIFF_WEIGHTS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(WeightsNotFoundError, match="backbone weights 'resnet101' not found"):
        B.create_backbone("resnet101")


def test_any_timm_model_loads_weights_from_a_local_file(tmp_path):
    import timm

    reference = timm.create_model("resnet10t", pretrained=False)
    path = tmp_path / "resnet10t.pth"
    torch.save(reference.state_dict(), path)
    model, info = B.create_backbone("resnet10t", weights=str(path))
    assert info.weights == str(path)
    assert torch.equal(
        model.state_dict()["conv1.0.weight"], reference.state_dict()["conv1.0.weight"]
    )
    # resnet10t's own config asks for 176 px: the grid follows the model's input size (stride 32).
    assert info.input_size == (176, 176) and info.grid == (6, 6)


def test_unknown_name_suggests_a_close_one():
    with pytest.raises(ModelError, match="did you mean.*resnet101"):
        B.create_backbone("resnet1O1", pretrained=False)


def test_classifier_recognises_the_tiger(shared_media):
    import cv2
    import numpy as np

    model, info = B.create_classifier()
    bgr = cv2.imread(str(shared_media / "odiff_tiger.jpg"))
    h, w = bgr.shape[:2]
    s = min(h, w)
    crop = bgr[(h - s) // 2 : (h + s) // 2, (w - s) // 2 : (w + s) // 2]
    rgb = cv2.cvtColor(
        cv2.resize(crop, info.input_size[::-1], interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB
    )
    x = (rgb.astype(np.float32) / 255 - np.array(info.mean, np.float32)) / np.array(
        info.std, np.float32
    )
    with torch.no_grad():
        logits = model(torch.from_numpy(x.transpose(2, 0, 1))[None])
    assert logits.shape == (1, 1000)
    assert int(logits.argmax()) == 292  # "tiger, Panthera tigris"


def test_multi_level_features_come_with_the_final_grid_in_one_pass():
    """strides 8/16/32 of efficientnet_lite0 at 224 px, and the final grid equal to what the
    default cache stores; 448 px gives the 14 x 14 grid of the paper's ResNet; resnet101 (cut at
    layer3) has no stride-32 map and says so."""
    import numpy as np

    from spotdiff_cli.captioners.features import backbone_features, backbone_grids

    backbone = B.create_backbone("efficientnet_lite0", pretrained=False)
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 255, (120, 160, 3), dtype=np.uint8) for _ in range(2)]
    maps = backbone_features(images, backbone, levels=(8, 16, 32))
    assert {k: tuple(v.shape) for k, v in maps.items()} == {
        "grid": (2, 1280, 7, 7),
        "s8": (2, 40, 28, 28),
        "s16": (2, 112, 14, 14),
        "s32": (2, 320, 7, 7),
    }
    assert torch.allclose(maps["grid"], backbone_grids(images, backbone), atol=1e-5)
    assert backbone_grids(images, backbone, size=(448, 448)).shape == (2, 1280, 14, 14)
    with pytest.raises(ModelError, match="no feature stage at stride 3"):
        backbone_features(images, backbone, levels=(3,))
    resnet = B.create_backbone("resnet101", pretrained=False)
    assert backbone_features(images, resnet, levels=(8, 16))["s16"].shape == (2, 1024, 14, 14)
    with pytest.raises(ModelError, match="strides 8 and 16 only"):
        backbone_features(images, resnet, levels=(32,))
