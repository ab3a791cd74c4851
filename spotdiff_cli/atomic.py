"""Atomic file writes: a crash or Ctrl-C never leaves a half-written report or checkpoint, and two
runs writing to one folder at once never mix their files."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a temp file in the same folder, fsync, then rename over ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(
            f"cannot write {path}: {exc.strerror or exc}; choose a writable --out folder"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; give the file the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(
            f"cannot write {path}: {exc.strerror or exc}; check free space and permissions"
        ) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def folder_lock(folder: str | Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``folder`` (made if missing) while writing into it.

    Two spotdiff processes given the same ``--out`` at the same instant would otherwise both
    pass the "already exists?" check and mix their files. The lock is ``flock`` on a hidden file,
    so it dies with its process: a crash never leaves a stale lock behind. Where ``fcntl`` does
    not exist (Windows) the lock is skipped.

    Raises OutputError when another process holds it.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / LOCK_NAME, "a+b")  # noqa: SIM115 - closed in finally
    except OSError as exc:
        raise OutputError(
            f"cannot write into {folder}: {exc.strerror or exc}; choose a writable --out folder"
        ) from exc
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise OutputError(
                f"{folder} is being written by another spotdiff run right now; "
                "wait for it or choose another --out"
            ) from exc
        yield
    finally:
        handle.close()


def write_new_folder(folder: str | Path, files: dict[str, bytes]) -> None:
    """Create ``folder`` holding ``files`` all at once: written into a hidden sibling, then
    renamed. Of two processes racing for the same new folder one wins whole; the other gets an
    OutputError saying it exists (rename onto a non-empty folder fails)."""
    folder = Path(folder)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(
            tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent)
        )
    except OSError as exc:
        raise OutputError(
            f"cannot create {folder}: {exc.strerror or exc}; choose a writable --out folder"
        ) from exc
    try:
        for name, data in files.items():
            atomic_write_bytes(staging / name, data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes 0700; a plain mkdir would not
        try:
            os.rename(staging, folder)
        except OSError as exc:
            if folder.exists():
                raise OutputError(
                    f"{folder} already exists (another run just wrote it); choose another --out or pass --overwrite"
                ) from exc
            raise OutputError(
                f"cannot create {folder}: {exc.strerror or exc}; choose a writable --out folder"
            ) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


LOCK_NAME = ".spotdiff.lock"
