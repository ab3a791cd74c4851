"""OneDiff's published image encoder, CLIP ViT-L/14 (``papers/onediff-2024.txt`` §5.1), from a
local Hugging Face folder (``vision: /path``; ``CLIPVisionModel.from_pretrained(...,
local_files_only=True)``: nothing is downloaded).

§5.1: "We utilize the penultimate layer outputs of the CLIP vision encoder for image feature
extraction [...] We select image features from the 8th, 16th, and 24th layers of the vision
encoder" (of 24). For an encoder of L layers :class:`ClipLevels` returns the patch tokens (the
class token dropped, as LLaVA does) of layers L/3, 2L/3 and L for the Visual Delta Module and of
layer L - 1 for the projector. The encoder stays frozen, as in both of the paper's stages (§4.2),
and is not stored in checkpoints: a checkpoint names the folder and loads it again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..pair_vit import CLIP_MEAN, CLIP_STD
from .lm import load_local


class ClipLevels:
    """A frozen local CLIP vision tower giving OneDiff's multi-level patch tokens.

    Not an ``nn.Module`` attribute of the captioner (so its weights stay out of checkpoints);
    ``to(device)`` moves it.
    """

    def __init__(self, path: str) -> None:
        def load(folder: str) -> Any:
            from transformers import CLIPVisionModel

            return CLIPVisionModel.from_pretrained(
                folder, local_files_only=True, dtype=torch.float32
            )

        self.model = load_local(path, "vision", "a CLIP vision model", load)
        folder = Path(path).expanduser()
        self.model.eval().requires_grad_(False)
        config = self.model.config
        self.layers = int(config.num_hidden_layers)
        self.width = int(config.hidden_size)
        self.image_size = int(config.image_size)
        self.side = self.image_size // int(config.patch_size)
        self.mean, self.std = CLIP_MEAN, CLIP_STD
        preprocessor = folder / "preprocessor_config.json"
        if preprocessor.is_file():  # the folder's own normalisation wins
            data = json.loads(preprocessor.read_text(encoding="utf-8"))
            self.mean = tuple(data.get("image_mean", self.mean))
            self.std = tuple(data.get("image_std", self.std))

    @property
    def level_layers(self) -> list[int]:
        """The layers the Visual Delta Module reads: L/3, 2L/3, L (8, 16, 24 for ViT-L/14)."""
        return [max(1, round(self.layers * k / 3)) for k in (1, 2, 3)]

    def to(self, device: torch.device | str) -> ClipLevels:
        self.model.to(device)
        return self

    @torch.no_grad()
    def __call__(self, images: Tensor) -> tuple[Tensor, list[Tensor]]:
        """images: (B, 3, S, S) uint8 RGB at ``image_size`` -> (projector tokens (B, N, C) of
        layer L - 1, [VDM tokens (B, N, C) of layers L/3, 2L/3, L]) with N = (S / patch)^2."""
        device = next(self.model.parameters()).device
        x = images.to(device).float().div(255)
        mean = torch.tensor(self.mean, device=device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=device).view(1, 3, 1, 1)
        out = self.model(pixel_values=(x - mean) / std, output_hidden_states=True)
        hidden = out.hidden_states  # L + 1: the embeddings, then every layer's output
        tokens = hidden[max(1, self.layers - 1)][:, 1:]
        return tokens, [hidden[k][:, 1:] for k in self.level_layers]
