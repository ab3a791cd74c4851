"""Reports: turn a described pair into a versioned dict (compose.py), draw boxes (draw.py), and
write txt / json / md / html / csv plus the annotated picture and the mask (writers.py). Writers
never compute; they format what compose.py produced."""

from .compose import SCHEMA, report_to_dict

__all__ = ["SCHEMA", "WRITERS", "report_to_dict", "write_report"]


def __getattr__(name: str):
    # writers.py brings the HTML page (its templates, the summary), which only ``--out`` needs:
    # ``spotdiff caption`` printing its sentences does not import it.
    if name in ("WRITERS", "write_report"):
        from . import writers

        return getattr(writers, name)
    raise AttributeError(f"module 'spotdiff_cli.report' has no attribute {name!r}")
