"""Finding weight files: one function, one documented search order.

``resolve_weights(name_or_path, kind=...)`` turns what a user typed (a file path or a short name
such as ``efficientnet_lite0_imagenet``) into an existing file. It looks, in this order:

1. **an explicit path** — ``name_or_path`` names an existing file (``~`` is expanded);
2. **``$SPOTDIFF_WEIGHTS``** — one or more folders (``os.pathsep``-separated) holding a file called
   ``<name>`` or ``<name>.<ext>``;
3. **the ``weights/`` manifest** — ``weights/manifest.json`` maps names to a file, its sha256, its
   licence and its source. Two folders are read: the repository's ``weights/`` (a source checkout)
   and ``<sys.prefix>/share/spotdiff/weights`` (where an installed wheel puts data files: the
   package folder cannot hold them, because ``spotdiff_cli/weights`` would shadow this module);
4. **the user cache** — ``$XDG_CACHE_HOME/spotdiff`` or ``~/.cache/spotdiff``: ``<name>``,
   ``<name>.<ext>``, or the file the manifest names for ``<name>`` (large checkpoints are listed
   in the manifest but live in the cache, not in git);
5. **download** — only when the caller allows it. No download source is configured in this
   build, so the search says so instead of reaching the network.

If nothing is found, :class:`~spotdiff_cli.errors.WeightsNotFoundError` names every place it
looked, on one line, plus the closest known name. A manifest file whose sha256 does not match is
an error rather than a silent fallback: loading the wrong bytes gives wrong captions, not a crash.

Nothing here imports torch: the default caption path resolves its ONNX model through this module.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelError, WeightsNotFoundError

ENV_VAR = "SPOTDIFF_WEIGHTS"
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1

# Folders that may hold a manifest, searched in this order.
REPO_WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "weights"
INSTALLED_WEIGHTS_DIR = Path(sys.prefix) / "share" / "spotdiff" / "weights"

# A Git LFS pointer is a ~130-byte text file; saying so beats a bare "sha256 mismatch".
_LFS_POINTER_PREFIX = b"version https://git-lfs"


@dataclass(frozen=True)
class WeightsEntry:
    """One named entry of a ``weights/manifest.json``.

    ``path`` is where the manifest says the file is; ``present`` tells whether it is there (large
    files are listed but fetched into the user cache instead of being committed).
    """

    name: str
    kind: str
    file: str
    sha256: str
    licence: str
    source: str
    description: str
    path: Path
    present: bool
    default: bool = False  # the entry used when a caller names no weights of this kind
    # One line on the training data (the manifest's optional "trained_on"): what `spotdiff models`
    # shows, so a user sees what a shipped checkpoint has seen before trusting its sentences.
    trained_on: str = ""
    # The manifest's optional "checks" (what it scored on the project's checks, one line) and
    # "warning" (where it is weak, one line): `spotdiff models` shows both under the table.
    checks: str = ""
    warning: str = ""


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/spotdiff`` if that variable is set and non-empty, else ``~/.cache/spotdiff``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "spotdiff"


def file_key(path: str | os.PathLike, *more: str) -> str | None:
    """A short key for what was derived from the file at ``path`` and ``more`` (versions, the
    CPU): its resolved path, size and time, hashed, so a cached copy follows the file it was
    made from. None when the file cannot be read."""
    try:
        real = Path(path).resolve()
        stat = real.stat()
    except OSError:
        return None
    made_of = "|".join([str(real), str(stat.st_size), str(stat.st_mtime_ns), *more])
    return hashlib.sha256(made_of.encode()).hexdigest()[:20]


def manifest_dirs() -> list[Path]:
    """The folders whose ``manifest.json`` is read, in search order, de-duplicated."""
    dirs: list[Path] = []
    for d in (REPO_WEIGHTS_DIR, INSTALLED_WEIGHTS_DIR):
        if d not in dirs:
            dirs.append(d)
    return dirs


def known_weights() -> list[WeightsEntry]:
    """Every entry of every manifest, sorted by name; the first manifest wins on a name clash."""
    entries: dict[str, WeightsEntry] = {}
    for d in manifest_dirs():
        for entry in _read_manifest(d):
            entries.setdefault(entry.name, entry)
    return [entries[k] for k in sorted(entries)]


def shipped_default(kind: str) -> WeightsEntry | None:
    """The manifest's default entry of ``kind`` whose file is present (shipped), else None."""
    return next((e for e in known_weights() if e.kind == kind and e.default and e.present), None)


def unshipped_notes() -> dict[str, str]:
    """The manifests' ``"unshipped"`` object: model name -> one line on a model that ships no
    weights (what its own training runs gave, and what to do instead). The first manifest wins
    on a name; no manifest, or none with the object, is an empty dict."""
    notes: dict[str, str] = {}
    for folder in manifest_dirs():
        path = folder / MANIFEST_NAME
        if not path.is_file():
            continue
        _read_manifest(folder)  # a malformed manifest fails here with its one-line error
        data = json.loads(path.read_text(encoding="utf-8"))
        for name, note in (data.get("unshipped") or {}).items():
            notes.setdefault(str(name), str(note))
    return notes


def resolve_weights(name_or_path: str | None, *, kind: str, allow_download: bool = False) -> Path:
    """Return the existing weights file that ``name_or_path`` refers to.

    Args:
        name_or_path: a file path, or a name known to ``$SPOTDIFF_WEIGHTS``, a manifest or the
            cache. ``None`` asks for the manifest's default entry of ``kind`` (``"default": true``).
        kind: what the weights are for (``"classifier-onnx"``, ``"backbone"``, a captioner name…).
            A manifest entry only matches when its ``kind`` is the same, so an ONNX file is never
            handed to code expecting a torch checkpoint; the kind also appears in the error.
        allow_download: the user allowed network access. No download source is configured yet,
            so this only changes what the error says.

    Raises:
        WeightsNotFoundError: nothing found; the message lists every place looked, on one line.
        ModelError: a manifest file exists but its sha256 differs from the manifest's.
    """
    looked: list[str] = []
    entries = known_weights()

    if name_or_path is None:
        defaults = [e for e in entries if e.kind == kind and e.default]
        if not defaults:
            raise WeightsNotFoundError(
                f"no {kind} weights are shipped or named: pass --weights FILE (a captioner's come from "
                f"`spotdiff train --model NAME`); manifests read: {', '.join(str(d / MANIFEST_NAME) for d in manifest_dirs())}"
            )
        name_or_path = defaults[0].name

    raw = str(name_or_path).strip()
    if not raw:
        raise WeightsNotFoundError(
            f"an empty {kind} weights name was given: pass a name or a file path"
        )

    # 1. An explicit path.
    explicit = Path(raw).expanduser()
    if explicit.is_file():
        return explicit.resolve()
    looked.append(
        f"path {explicit} ({'a folder, not a file' if explicit.is_dir() else 'no such file'})"
    )

    name = raw

    # 2. $SPOTDIFF_WEIGHTS: one folder or several, os.pathsep-separated like $PATH.
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        for folder in (Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()):
            hit = _find_in_folder(folder, name)
            if hit is not None:
                return hit
            looked.append(f"${ENV_VAR} {folder} (no {name} or {name}.*)")
    else:
        looked.append(f"${ENV_VAR} (not set)")

    # 3. Manifests. Entries whose file is absent fall through to the cache under the same file name.
    listed: WeightsEntry | None = None  # the manifest entry whose file may sit in the cache
    for folder in manifest_dirs():
        manifest = folder / MANIFEST_NAME
        in_this = [e for e in _read_manifest(folder) if e.name == name]
        if not manifest.is_file():
            looked.append(f"manifest {manifest} (absent)")
            continue
        if not in_this:
            looked.append(f"manifest {manifest} (no entry '{name}')")
            continue
        entry = in_this[0]
        if entry.kind != kind:
            looked.append(f"manifest {manifest} ('{name}' is kind '{entry.kind}', not '{kind}')")
            continue
        listed = listed or entry
        if entry.present:
            _check_sha256(entry.path, entry.sha256, name)
            return entry.path
        looked.append(f"manifest {manifest} (lists '{name}' as {entry.file}, file absent)")

    # 4. The user cache.
    cache = user_cache_dir()
    hit = _find_in_folder(cache, name)
    if hit is None and listed is not None and (cache / listed.file).is_file():
        hit = (cache / listed.file).resolve()
        _check_sha256(hit, listed.sha256, name)
    if hit is not None:
        return hit
    also = f", {listed.file}" if listed is not None else ""
    looked.append(f"cache {cache} (no {name}, {name}.*{also})")

    # 5. Download: allowed or not, nothing is configured to fetch from, so never touch the network.
    looked.append(
        "download (allowed, but no download source is configured)"
        if allow_download
        else "download (not allowed)"
    )

    hint = ""
    close = difflib.get_close_matches(name, [e.name for e in entries if e.kind == kind], n=1)
    if close:
        hint = f"; did you mean '{close[0]}'?"
    raise WeightsNotFoundError(
        f"{kind} weights '{name}' not found; looked in: " + "; ".join(looked) + hint
    )


# --------------------------------------------------------------------------------------------------
# helpers


def _read_manifest(folder: Path) -> list[WeightsEntry]:
    """Parse ``folder/manifest.json``; a missing file is an empty list, a malformed one an error."""
    path = folder / MANIFEST_NAME
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read weights manifest {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
        raise ModelError(
            f"weights manifest {path} must be an object with a 'weights' object inside"
        )
    if data.get("format", MANIFEST_FORMAT) != MANIFEST_FORMAT:
        raise ModelError(
            f"weights manifest {path} has format {data.get('format')}, this spotdiff reads {MANIFEST_FORMAT}"
        )
    out: list[WeightsEntry] = []
    for name, spec in data["weights"].items():
        missing = [k for k in ("file", "kind", "sha256", "licence", "source") if k not in spec]
        if missing:
            raise ModelError(f"weights manifest {path}: entry '{name}' lacks {', '.join(missing)}")
        file_path = (folder / spec["file"]).resolve()
        out.append(
            WeightsEntry(
                name=name,
                kind=spec["kind"],
                file=spec["file"],
                sha256=spec["sha256"].lower(),
                licence=spec["licence"],
                source=spec["source"],
                description=spec.get("description", ""),
                path=file_path,
                present=file_path.is_file(),
                default=bool(spec.get("default", False)),
                trained_on=str(spec.get("trained_on", "")),
                checks=str(spec.get("checks", "")),
                warning=str(spec.get("warning", "")),
            )
        )
    return out


def _find_in_folder(folder: Path, name: str) -> Path | None:
    """``folder/name`` or the one ``folder/name.*``; several ``name.*`` files are ambiguous."""
    if not folder.is_dir():
        return None
    exact = folder / name
    if exact.is_file():
        return exact.resolve()
    # glob would read "[" or "*" in a name as patterns: compare names instead.
    candidates = sorted(
        p for p in folder.iterdir() if p.is_file() and p.name.startswith(name + ".")
    )
    if len(candidates) > 1:
        raise ModelError(
            f"weights '{name}' is ambiguous in {folder}: {', '.join(p.name for p in candidates)}; "
            "pass the file path instead"
        )
    return candidates[0].resolve() if candidates else None


# sha256 of a 19 MB file costs ~15-20 ms, and the recognisers' warm-up paid it for two files at
# the start of every process, on the path to the first caption. So a file is hashed once per
# process (``_VERIFIED``) and, once it matched, once per version of the file: a marker in the
# user cache records the match (``_verified_marker``).
_VERIFIED: set[tuple[str, int, int]] = set()


def _verified_marker(path: Path, stat: os.stat_result, expected: str) -> Path:
    """Where the record that ``path`` as it is now matched ``expected`` is kept:
    ``<user cache>/verified/<key>``. The key holds the file's inode and change time besides its
    size and modification time: a file written again, copied over (``cp -p`` keeps the
    modification time) or replaced gets a new change time, which no user can set, so its bytes
    are hashed again."""
    made_of = (
        f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}|"
        f"{stat.st_ctime_ns}|{expected}"
    )
    return user_cache_dir() / "verified" / hashlib.sha256(made_of.encode()).hexdigest()[:32]


def _check_sha256(path: Path, expected: str, name: str) -> None:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key in _VERIFIED:
        return
    marker = _verified_marker(path, stat, expected)
    if marker.is_file():
        _VERIFIED.add(key)
        return
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        head = fh.read(len(_LFS_POINTER_PREFIX))
        digest.update(head)
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    actual = digest.hexdigest()
    if actual != expected:
        why = (
            " (it is a Git LFS pointer: run `git lfs pull`)" if head == _LFS_POINTER_PREFIX else ""
        )
        raise ModelError(
            f"weights '{name}' at {path} has sha256 {actual[:12]}…, the manifest expects {expected[:12]}…{why}; "
            "re-fetch the file or fix weights/manifest.json"
        )
    _VERIFIED.add(key)
    try:  # an empty file: its name is the record; a cache that cannot be written keeps none
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
