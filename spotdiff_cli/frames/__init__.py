"""Frames in: still images, folders of frames, videos, and the time syntax for sampling them."""

from .image import load_image, save_image
from .sources import FrameSource, SourceInfo, open_source, sample
from .timecode import format_timecode, parse_every, parse_time

__all__ = [
    "FrameSource",
    "SourceInfo",
    "format_timecode",
    "load_image",
    "open_source",
    "parse_every",
    "parse_time",
    "sample",
    "save_image",
]
