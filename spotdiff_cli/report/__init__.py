"""Reports: turn a described pair into a versioned dict (compose.py), draw boxes (draw.py), and
write txt / json / md / html / csv plus the annotated picture and the mask (writers.py). Writers
never compute; they format what compose.py produced."""

from .compose import SCHEMA, report_to_dict
from .writers import WRITERS, write_report

__all__ = ["SCHEMA", "WRITERS", "report_to_dict", "write_report"]
