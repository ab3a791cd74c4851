"""Datasets: readers for every supported format, the synthetic change benchmark, the
preprocessing cache and Table-1 statistics."""

from .readers import (
    FORMATS,
    SPLITS,
    Dataset,
    DatasetPair,
    available_splits,
    detect_format,
    load_dataset,
)

__all__ = [
    "FORMATS",
    "SPLITS",
    "Dataset",
    "DatasetPair",
    "available_splits",
    "detect_format",
    "load_dataset",
]
