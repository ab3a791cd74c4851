"""Frame sequences (videos, folders, file lists) -> a timeline of change events."""

from .pipeline import SourceResult, describe_source
from .runs import describe_sources

__all__ = ["SourceResult", "describe_source", "describe_sources"]
