"""Frames in: still images, folders of frames, videos, and the time syntax for sampling them."""

from .image import load_image, save_image

__all__ = ["load_image", "save_image"]
