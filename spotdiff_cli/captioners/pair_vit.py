"""The pair ViT of CLIP4IDC (``papers/clip4idc-2022.txt`` §3.1, eqs. 2-4), which IDC-PCL also uses
as its pair encoder, and the local-CLIP-folder reading that clip4idc, idc-pcl and onediff share.

For a pair (X¹, X²), each image becomes n tokens plus a class token with positions p_I (eqs. 2-3),
goes through N_intra transformer layers on its own (F_intra), gets a learned embedding e₁ or e₂
saying which image it is, and the 2(n + 1) tokens of both go through N_inter joint layers with a
second position embedding p (eq. 4); a linear projection W gives W F(X¹, X²). The layers are
timm's ViT ``Block`` (pre-norm, as CLIP's ``ResidualAttentionBlock``).

Two ways in, the same layers after them:

* ``pixels`` (the paper's): CLIP's 32 × 32 stride-32 convolution over a 224-px image (n = 49),
  CLIP's ``ln_pre``, then the layers. :func:`load_clip_vision` maps a local Hugging Face CLIP
  folder (``CLIPModel`` or ``CLIPVisionModelWithProjection``, e.g. openai/clip-vit-base-patch32
  saved with ``save_pretrained``) onto it: CLIP's first N_intra layers become F_intra, the next
  N_inter become F_inter (ViT-B/32: 9 + 3 = its 12, §4.2), ``post_layernorm`` and
  ``visual_projection`` become the final norm and W; e₁, e₂ and p are new.
* ``grid`` (what trains here by default, no CLIP weights being installable): the cells of the
  cached efficientnet-lite0 grid (1280 × 7 × 7 at 224 px: the same n = 49 tokens as ViT-B/32's
  patches) through a LayerNorm and a linear map stand in for the patch convolution; every layer
  is then trained here from random initialisation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from timm.layers import QuickGELU
from timm.models.vision_transformer import Block
from torch import Tensor, nn

from ..errors import ModelError
from .local_files import check_json_files, read_state_dict

# OpenAI CLIP's normalisation (every published CLIP preprocessor_config.json).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class PairViT(nn.Module):
    """F of eq. 4 followed by W: (before, after) -> tokens (B, 2(n + 1), embed_dim).

    Args:
        source: ``grid`` (cached backbone cells (B, channels, h, w)) or ``pixels`` (images
            (B, 3, S, S) float, normalised; n = (S / patch)²).
        channels: C of the grid (``grid`` only).
        tokens: n, the tokens per image (h·w, or (S / patch)²).
        width, heads: the layers' width and attention heads.
        intra, inter: N_intra and N_inter.
        embed_dim: the width of W's output (CLIP's projection_dim).
        patch: the patch convolution's kernel and stride (``pixels`` only).
        quick_gelu: CLIP's activation (x·σ(1.702x)) instead of GELU.
        dropout: on attention and projections (0 for CLIP's weights).
        mlp_ratio: the feed-forward width over ``width`` (4 in CLIP).
    """

    def __init__(
        self,
        source: str,
        channels: int,
        tokens: int,
        width: int,
        heads: int,
        intra: int,
        inter: int,
        embed_dim: int,
        patch: int = 32,
        quick_gelu: bool = False,
        dropout: float = 0.0,
        mlp_ratio: float = 4.0,
    ) -> None:
        super().__init__()
        if source not in ("grid", "pixels"):
            raise ModelError(f"unknown vision source '{source}' (grid or pixels)")
        if width % heads:
            raise ModelError(f"vision width {width} must be a multiple of its {heads} heads")
        self.source, self.n, self.width = source, tokens, width
        if source == "pixels":
            self.patch_embed: nn.Module = nn.Conv2d(3, width, patch, patch, bias=False)
        else:
            self.patch_embed = nn.Sequential(nn.LayerNorm(channels), nn.Linear(channels, width))
        scale = width**-0.5  # CLIP's initialisation of its class and position embeddings
        self.cls_token = nn.Parameter(scale * torch.randn(width))
        self.pos_embed = nn.Parameter(scale * torch.randn(tokens + 1, width))  # p_I
        self.norm_pre = nn.LayerNorm(width)  # CLIP's ln_pre

        def blocks(count: int) -> nn.ModuleList:
            return nn.ModuleList(
                Block(
                    width,
                    heads,
                    mlp_ratio=mlp_ratio,
                    qkv_bias=True,
                    proj_drop=dropout,
                    attn_drop=dropout,
                    act_layer=QuickGELU if quick_gelu else nn.GELU,
                    norm_layer=nn.LayerNorm,
                )
                for _ in range(count)
            )

        self.intra = blocks(intra)
        self.inter = blocks(inter)
        self.image_embed = nn.Parameter(0.02 * torch.randn(2, width))  # e₁, e₂
        self.pair_pos = nn.Parameter(0.02 * torch.randn(2 * (tokens + 1), width))  # p
        self.norm = nn.LayerNorm(width)  # CLIP's ln_post
        self.proj = nn.Linear(width, embed_dim, bias=False)  # W

    def image_tokens(self, x: Tensor) -> Tensor:
        """One image per row -> F_intra's tokens (B, n + 1, width) (eqs. 2-3, then N_intra)."""
        if self.source == "pixels":
            cells = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, n, width)
        else:
            cells = self.patch_embed(x.flatten(2).transpose(1, 2))
        if cells.shape[1] != self.n:
            raise ModelError(
                f"the vision encoder was built for {self.n} tokens per image, got "
                f"{cells.shape[1]}: use the input size / backbone it was built with"
            )
        cls = self.cls_token.to(cells.dtype).expand(cells.shape[0], 1, -1)
        h = self.norm_pre(torch.cat([cls, cells], dim=1) + self.pos_embed)
        for block in self.intra:
            h = block(h)
        return h

    def forward(self, before: Tensor, after: Tensor) -> Tensor:
        """before, after: (B, C, h, w) grids or (B, 3, S, S) normalised images ->
        W F(X¹, X²): (B, 2(n + 1), embed_dim); token 0 and token n + 1 are the class tokens."""
        b = before.shape[0]
        both = self.image_tokens(torch.cat([before, after]))  # one pass for both images
        first, second = both[:b], both[b:]
        if len(self.inter):  # eq. 4 (with N_inter = 0 the encoder is CLIP's, per image)
            h = torch.cat([first + self.image_embed[0], second + self.image_embed[1]], dim=1)
            h = h + self.pair_pos
            for block in self.inter:
                h = block(h)
        else:
            h = torch.cat([first, second], dim=1)
        return self.proj(self.norm(h))

    def pooled(self, tokens: Tensor) -> Tensor:
        """Eq. 5: v = mean of the two class tokens of W F(X¹, X²). tokens: (B, 2(n+1), E) -> (B, E)."""
        return 0.5 * (tokens[:, 0] + tokens[:, self.n + 1])


def clip_vision_config(folder: Path, family: str = "clip4idc") -> dict[str, Any]:
    """The vision settings of a local HF CLIP folder's config.json (a CLIPModel's
    ``vision_config`` with its ``projection_dim``, or a CLIP vision model's own); ``family``
    names the model in the error."""
    file = folder / "config.json"
    if not file.is_file():
        raise ModelError(
            f"{family}: vision folder {folder} not found or without config.json; give a local "
            "Hugging Face CLIP folder (config.json, model.safetensors), or vision: '' for the "
            "ViT over the cached backbone grid"
        )
    check_json_files(folder, family)  # a malformed config.json is one line naming it
    data = json.loads(file.read_text(encoding="utf-8"))
    vision = dict(data.get("vision_config") or data)
    if "vision_config" in data and "projection_dim" in data:  # a CLIPModel: its own projection
        vision["projection_dim"] = data["projection_dim"]
    vision.setdefault("projection_dim", vision.get("hidden_size", 768))
    defaults = {  # transformers' CLIPVisionConfig defaults (ViT-B/32), for keys a file leaves out
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 224,
        "patch_size": 32,
        "hidden_act": "quick_gelu",
        "intermediate_size": 3072,
    }
    return {**defaults, **vision}


def clip_image_side(model_config: dict[str, Any], family: str) -> int | None:
    """The side of the images a model reads with ``vision: PATH`` in its config (the CLIP
    folder's input size), else None (it reads backbone grids): ``spotdiff train`` then loads
    images instead of grids."""
    vision = str(model_config.get("vision", "") or "").strip()
    if not vision:
        return None
    return int(clip_vision_config(Path(vision).expanduser(), family)["image_size"])


def clip_key_map(layers: int, intra: int) -> dict[str, str]:
    """HF CLIP vision key (without the ``vision_model.`` prefix) -> :class:`PairViT` key, for
    the non-attention tensors; q/k/v are fused by :func:`load_clip_vision`."""
    out = {
        "embeddings.patch_embedding.weight": "patch_embed.weight",
        "embeddings.class_embedding": "cls_token",
        "embeddings.position_embedding.weight": "pos_embed",
        "pre_layrnorm.weight": "norm_pre.weight",
        "pre_layrnorm.bias": "norm_pre.bias",
        "post_layernorm.weight": "norm.weight",
        "post_layernorm.bias": "norm.bias",
    }
    for i in range(layers):
        block = f"intra.{i}" if i < intra else f"inter.{i - intra}"
        src = f"encoder.layers.{i}"
        for a, b in (
            ("self_attn.out_proj", "attn.proj"),
            ("layer_norm1", "norm1"),
            ("layer_norm2", "norm2"),
            ("mlp.fc1", "mlp.fc1"),
            ("mlp.fc2", "mlp.fc2"),
        ):
            for p in ("weight", "bias"):
                out[f"{src}.{a}.{p}"] = f"{block}.{b}.{p}"
    return out


def build_clip_vision(
    folder: Path, inter: int, dropout: float = 0.0, family: str = "clip4idc"
) -> PairViT:
    """An untrained :class:`PairViT` shaped as the CLIP vision tower in ``folder``, with the
    last ``inter`` of its layers as F_inter (the rest F_intra)."""
    cfg = clip_vision_config(folder, family)
    layers = int(cfg["num_hidden_layers"])
    if not 0 <= inter <= layers:
        raise ModelError(
            f"{family}: inter_layers is {inter} but the CLIP in {folder} has {layers} layers "
            "(N_intra + N_inter must be its depth)"
        )
    side = int(cfg["image_size"]) // int(cfg["patch_size"])
    return PairViT(
        "pixels",
        3,
        side * side,
        int(cfg["hidden_size"]),
        int(cfg["num_attention_heads"]),
        layers - inter,
        inter,
        int(cfg["projection_dim"]),
        patch=int(cfg["patch_size"]),
        quick_gelu=str(cfg["hidden_act"]) == "quick_gelu",
        dropout=dropout,
        mlp_ratio=int(cfg["intermediate_size"]) / int(cfg["hidden_size"]),
    )


def load_clip_vision(
    folder: str | Path, inter: int, dropout: float = 0.0, family: str = "clip4idc"
) -> PairViT:
    """:func:`build_clip_vision` with CLIP's weights: every tensor of the vision tower and the
    visual projection lands in the encoder (module docstring); e₁, e₂ and p stay new."""
    folder = Path(folder).expanduser()
    model = build_clip_vision(folder, inter, dropout, family)
    state = read_state_dict(folder, family)
    prefix = "vision_model." if any(k.startswith("vision_model.") for k in state) else ""
    layers = len(model.intra) + len(model.inter)
    mapping = clip_key_map(layers, len(model.intra))
    target: dict[str, Tensor] = {}
    missing = []
    for src, dst in mapping.items():
        if prefix + src not in state:
            missing.append(prefix + src)
            continue
        target[dst] = state[prefix + src]
    for i in range(layers):
        block = f"intra.{i}" if i < len(model.intra) else f"inter.{i - len(model.intra)}"
        attn = f"{prefix}encoder.layers.{i}.self_attn"
        parts = [f"{attn}.{x}_proj" for x in ("q", "k", "v")]
        if not all(f"{p}.weight" in state for p in parts):
            missing.append(f"{attn}.q_proj.weight")
            continue
        target[f"{block}.attn.qkv.weight"] = torch.cat([state[f"{p}.weight"] for p in parts])
        target[f"{block}.attn.qkv.bias"] = torch.cat([state[f"{p}.bias"] for p in parts])
    if "visual_projection.weight" in state:
        target["proj.weight"] = state["visual_projection.weight"]
    else:
        missing.append("visual_projection.weight")
    if missing:
        raise ModelError(
            f"{family}: {folder} is not a CLIP vision checkpoint: it lacks {missing[0]} "
            f"(and {len(missing) - 1} more); save a CLIPModel or CLIPVisionModelWithProjection "
            "with save_pretrained"
        )
    # The conv's (width, 3, p, p) and every other shape follow config.json; a mismatch means the
    # weights are not those of the config beside them.
    try:
        model.load_state_dict(target, strict=False)
    except RuntimeError as exc:
        raise ModelError(
            f"{family}: {folder}'s weights do not fit its config.json ({exc})"
        ) from exc
    return model


def normalise_images(images: Tensor, mean: tuple[float, ...] = CLIP_MEAN, std=CLIP_STD) -> Tensor:
    """(B, 3, S, S) uint8 RGB -> CLIP's normalised float input."""
    x = images.float().div(255)
    m = torch.tensor(mean, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(std, device=x.device).view(1, 3, 1, 1)
    return (x - m) / s


__all__ = [
    "CLIP_MEAN",
    "CLIP_STD",
    "PairViT",
    "build_clip_vision",
    "clip_image_side",
    "clip_key_map",
    "clip_vision_config",
    "load_clip_vision",
    "normalise_images",
]
