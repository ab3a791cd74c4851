"""Moved to :mod:`spotdiff_cli.atomic` (checkpoints use it too, and a model must not import the
report layer); kept so imports of the old path keep working."""

from ..atomic import LOCK_NAME, atomic_write_bytes, atomic_write_text, folder_lock, write_new_folder

__all__ = [
    "LOCK_NAME",
    "atomic_write_bytes",
    "atomic_write_text",
    "folder_lock",
    "write_new_folder",
]
