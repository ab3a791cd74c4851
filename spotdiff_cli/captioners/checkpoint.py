"""Self-describing checkpoints for learned captioners (docs/training-interfaces.md).

A checkpoint is a dict of plain Python types and tensors, nothing else, so it loads with
``torch.load(..., weights_only=True)`` and never unpickles arbitrary objects::

    {"format_version": 1, "model": "ddla", "config": {...}, "vocab": vocab.to_dict(),
     "state_dict": {...}, "backbone": "efficientnet_lite0",
     "extra": {"epoch", "step", "best_score", "optimizer", "rng", ...}}

A model trained with ``finetune_backbone: true`` carries its backbone as
``model.finetuned_backbone = (module, BackboneInfo)`` (a plain attribute, not a submodule, so
``state_dict`` keys stay the model's); its checkpoint then adds ``"backbone_state_dict"``, and
``load_checkpoint`` rebuilds that backbone so ``describe`` uses it. Checkpoints without the key
load as before (the shared pretrained backbone).

``config`` is everything the model's ``__init__(config, vocab)`` needs, so ``load_checkpoint``
rebuilds the model by name through the registry with no other input (whisper's habit: the file
carries its own dimensions). Writes are atomic (temp file + rename): a crash or Ctrl-C while
saving leaves the previous file intact.
"""

from __future__ import annotations

import codecs
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from .local_files import FolderFileError
from .vocab import Vocabulary

if TYPE_CHECKING:  # pragma: no cover
    pass

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format_version", "model", "config", "vocab", "state_dict")


def checkpoint_dict(
    model: Any,
    extra: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    backbone: str | None = None,
    half: bool = False,
) -> dict[str, Any]:
    """The checkpoint of ``model`` as a plain dict (what ``save_checkpoint`` writes).

    ``model`` needs ``config`` (dict), ``vocab`` (Vocabulary) and ``state_dict()``; its registry
    name comes from ``name`` or ``model.name``, the backbone from ``backbone``,
    ``model.config["backbone"]`` or ``model.backbone_name``. ``half`` stores floating tensors as
    float16 (shipped weights: half the bytes; loading casts back to the model's dtype).
    """
    import torch

    name = name or getattr(model, "name", "") or ""
    if not name:
        raise ModelError(
            "cannot save a checkpoint of a model without a registry name (set model.name)"
        )
    config = dict(getattr(model, "config", {}) or {})
    vocab = getattr(model, "vocab", None)
    if not isinstance(vocab, Vocabulary):
        raise ModelError(
            f"model '{name}' has no Vocabulary in .vocab; a checkpoint must carry its vocabulary"
        )
    backbone = backbone or config.get("backbone") or getattr(model, "backbone_name", None)

    def plain(state_dict: dict[str, Any]) -> dict[str, Any]:
        state = {}
        for key, value in state_dict.items():
            if isinstance(value, torch.Tensor):
                value = value.detach().to("cpu")
                if half and value.is_floating_point():
                    value = value.half()
            state[key] = value
        return state

    state, from_folders = _without_folder_parts(model, model.state_dict())
    data = {
        "format_version": FORMAT_VERSION,
        "model": str(name),
        "config": config,
        "vocab": vocab.to_dict(),
        "state_dict": plain(state),
        "backbone": backbone,
        "extra": dict(extra or {}),
    }
    if from_folders:
        data["from_folders"] = from_folders
    finetuned = getattr(model, "finetuned_backbone", None)
    if finetuned is not None:
        data["backbone_state_dict"] = plain(finetuned[0].state_dict())
    return data


def _without_folder_parts(
    model: Any, state: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``state`` without what the model rebuilds from a local folder and did not train.

    A model that loads a part from a folder (OneDiff's ``lm: PATH``: a 7B LM is 14-28 GB) says
    so in ``folder_parts()`` -> {state-dict prefix: folder}. Under such a prefix, a frozen
    parameter and every buffer are left out: the folder gives them back when the checkpoint is
    loaded. A parameter that trained stays in. Returns the state and the prefixes actually
    left out, with their folders (the checkpoint records them; loading allows exactly those
    keys to be missing)."""
    parts = getattr(model, "folder_parts", None)
    parts = parts() if callable(parts) else {}
    if not parts:
        return state, {}
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    kept, left = {}, {}
    for key, value in state.items():
        prefix = next((p for p in parts if key.startswith(p)), None)
        if prefix is not None and key not in trained:
            left[prefix] = parts[prefix]
            continue
        kept[key] = value
    return kept, left


def save_checkpoint(
    path: str | Path, model: Any, extra: dict[str, Any] | None = None, **kwargs: Any
) -> Path:
    """Write ``checkpoint_dict(model, extra, **kwargs)`` to ``path`` atomically; returns the path."""
    import torch

    from ..atomic import atomic_write_bytes

    buffer = io.BytesIO()
    torch.save(checkpoint_dict(model, extra, **kwargs), buffer)
    path = Path(path)
    atomic_write_bytes(path, buffer.getvalue())
    return path


# The fix every "this is not a checkpoint we can use" message ends with.
_FIX = (
    "use a .pt written by `spotdiff train`, or the shipped weights (--model NAME without --weights)"
)

# Field -> type a checkpoint must hold, beyond REQUIRED_KEYS being present ("extra" is optional).
_FIELD_TYPES: dict[str, type] = {
    "model": str,
    "config": dict,
    "vocab": dict,
    "state_dict": dict,
    "extra": dict,
}


def _first_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's message cut to one short line, for messages that quote a library."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:limit]


def _unreadable(path: Path, exc: BaseException) -> ModelError:
    """Why ``torch.load`` could not read ``path``, told from the file's first bytes."""
    with path.open("rb") as fh:
        head = fh.read(512)
    if not head:
        return ModelError(
            f"{path} is empty (0 bytes), not a checkpoint: an interrupted copy or download? {_FIX}"
        )
    if head.startswith(b"PK\x03\x04"):  # torch.save's zip container, cut short or corrupted
        return ModelError(
            f"{path} is a truncated or damaged checkpoint (its zip archive does not read): "
            f"copy or download it again, or {_FIX}"
        )
    if head[:1] == b"\x80":  # a pickle (protocol 2+) that weights_only=True refused
        return ModelError(
            f"{path} is a pickle of other Python objects, not a spotdiff checkpoint (checkpoints load "
            f"with weights_only=True: tensors and plain types, never arbitrary objects): {_FIX}"
        )
    try:  # incremental: a character cut at byte 512 is not a decoding error
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return ModelError(
            f"{path} is not a spotdiff checkpoint (its bytes are no format spotdiff reads): {_FIX}"
        )
    return ModelError(f"{path} is a text file, not a spotdiff checkpoint: {_FIX}")


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The raw checkpoint dict (tensors on the CPU), checked for the keys, their types and the
    format version. Anything else (an empty, text, truncated or foreign file) is a one-line
    ``ModelError`` that names the file and the fix."""
    import warnings

    import torch

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"checkpoint {path} not found")
    try:
        with warnings.catch_warnings():
            # torch warns on stderr about pickle protocols before refusing a foreign pickle; the
            # error below says what matters, in one line.
            warnings.simplefilter("ignore")
            data = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:
        raise ModelError(
            f"cannot read checkpoint {path}: {exc.strerror or _first_line(exc)}"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - torch.load raises whatever the bytes trigger (KeyError, EOFError, ...)
        raise _unreadable(path, exc) from exc
    if not isinstance(data, dict) or any(k not in data for k in REQUIRED_KEYS):
        missing = [k for k in REQUIRED_KEYS if not isinstance(data, dict) or k not in data]
        raise ModelError(
            f"{path} is not a spotdiff captioner checkpoint (missing {', '.join(missing)}): {_FIX}"
        )
    wrong = [
        f"'{k}' is {type(data[k]).__name__}, not {t.__name__}"
        for k, t in _FIELD_TYPES.items()
        if k in data and not isinstance(data[k], t)
    ]
    if wrong:
        raise ModelError(f"{path} is a damaged checkpoint ({'; '.join(wrong)}): {_FIX}")
    if data["format_version"] != FORMAT_VERSION:
        raise ModelError(
            f"{path} has checkpoint format {data['format_version']}; this spotdiff reads format "
            f"{FORMAT_VERSION}: upgrade spotdiff or re-train"
        )
    return data


def build_captioner(
    name: str, config: dict[str, Any], vocab: Vocabulary, device: str = "cpu"
) -> Any:
    """A fresh (untrained) captioner through the registry: the factory receives
    ``weights=None, device=device, config=config, vocab=vocab`` and calls ``__init__(config, vocab)``."""
    from .registry import create_model

    return create_model(name, weights=None, device=device, config=dict(config), vocab=vocab)


def resolve_checkpoint(name_or_path: str | Path | None, model: str | None = None) -> Path:
    """A checkpoint file from what a user typed, through ``weights.resolve_weights`` (explicit
    path -> $SPOTDIFF_WEIGHTS -> weights/ manifest -> user cache). ``model`` is the manifest kind
    (the model name); ``name_or_path=None`` asks for the manifest's default checkpoint of ``model``
    (what ``spotdiff caption --model ddla`` uses without ``--weights``)."""
    from ..weights import known_weights, resolve_weights

    if name_or_path is not None and Path(str(name_or_path)).expanduser().is_file():
        return Path(str(name_or_path)).expanduser()
    if model is None:
        listed = [e for e in known_weights() if e.name == str(name_or_path)]
        model = listed[0].kind if listed else "checkpoint"
    return resolve_weights(None if name_or_path is None else str(name_or_path), kind=model)


def _load_state(model: Any, data: dict[str, Any]) -> None:
    """``load_state_dict``, strict but for the parts the checkpoint says come from folders."""
    from_folders = data.get("from_folders") or {}
    if not from_folders:
        model.load_state_dict(data["state_dict"], strict=True)
        return
    result = model.load_state_dict(data["state_dict"], strict=False)
    missing = [k for k in result.missing_keys if not k.startswith(tuple(from_folders))]
    if result.unexpected_keys or missing:
        raise RuntimeError(
            f"unexpected keys {result.unexpected_keys[:3]}, missing keys {missing[:3]}"
        )


def load_checkpoint(
    path: str | Path | None, device: str = "cpu", model: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """Rebuild the captioner a checkpoint describes and load its weights.

    ``path`` is a file, or a name ``resolve_checkpoint`` finds (a manifest entry such as
    ``ddla-synth``), or None with ``model`` given: the manifest's default checkpoint of that model
    (the shipped ``weights/<model>-synth.pt``). ``model``, when given, must be the model the
    checkpoint holds.
    Returns ``(model, meta)``: the model on ``device`` in eval mode, and ``meta`` = the checkpoint
    dict without ``state_dict`` (model, config, vocab, backbone, extra, path).
    """
    path = resolve_checkpoint(path, model)
    data = read_checkpoint(path)
    if model is not None and data["model"] != model:
        raise ModelError(f"{path} holds a '{data['model']}' model, not '{model}'")
    model = _rebuild(path, data, device)
    try:
        _load_state(model, data)
    except (
        RuntimeError,
        TypeError,
        AttributeError,
    ) as exc:  # wrong keys or shapes, or non-tensor values
        raise ModelError(
            f"checkpoint {path} does not fit model '{data['model']}' as this spotdiff builds it "
            f"({_first_line(exc)}); was it written by another version?"
        ) from exc
    if hasattr(model, "to"):
        model.to(device)
    if hasattr(model, "eval"):
        model.eval()
    if "backbone_state_dict" in data:
        model.finetuned_backbone = load_backbone(data, device, path)
    meta = {k: v for k, v in data.items() if k not in ("state_dict", "backbone_state_dict")}
    meta["path"] = str(Path(path).resolve())
    return model, meta


def _rebuild(path: Path, data: dict[str, Any], device: str) -> Any:
    """The untrained model a checkpoint's vocabulary and stored config describe. A config that
    does not build (keys missing, a value of the wrong type, an unknown model) is the file's
    fault, not a bug: one line naming the file."""
    from .registry import available_models

    name = data["model"]
    if name not in available_models():
        raise ModelError(
            f"{path} holds a '{name}' model, which this spotdiff does not know (available: "
            f"{', '.join(available_models())}): upgrade spotdiff or {_FIX}"
        )
    try:
        vocab = Vocabulary.from_dict(data["vocab"])
    except (ModelError, KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{path} has a damaged vocabulary ({_first_line(exc)}): {_FIX}") from exc
    try:
        return build_captioner(name, data["config"], vocab, device)
    except FolderFileError:
        raise  # it names the model folder's file and the fix: wrapping would cut that off
    except (ModelError, KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise ModelError(
            f"{path}: its stored config does not build a '{name}' model ({_first_line(exc)}); "
            f"the file is damaged or from another spotdiff version: {_FIX}"
        ) from exc


def load_backbone(
    data: dict[str, Any], device: str = "cpu", path: Any = "checkpoint"
) -> tuple[Any, Any]:
    """The fine-tuned backbone a checkpoint dict carries: ``(module, BackboneInfo)`` on ``device``,
    in eval mode (architecture from ``data["backbone"]``, weights from ``backbone_state_dict``)."""
    from .backbones import create_backbone

    try:
        module, info = create_backbone(str(data.get("backbone")), pretrained=False)
        module.load_state_dict(data["backbone_state_dict"], strict=True)
    except (ModelError, RuntimeError, TypeError, AttributeError) as exc:
        raise ModelError(
            f"{path}: its fine-tuned backbone does not fit '{data.get('backbone')}' "
            f"({_first_line(exc)}); the file is damaged or from another spotdiff version: "
            f"{_FIX}"
        ) from exc
    return module.to(device).eval(), info


def slim_checkpoint(src: str | Path, dst: str | Path, half: bool = True) -> Path:
    """Copy a checkpoint without optimizer and RNG state (and in float16 when ``half``): what
    ships in ``weights/``. Epoch, step and scores stay in ``extra``."""
    import io as _io

    import torch

    from ..atomic import atomic_write_bytes

    data = read_checkpoint(src)
    data["extra"] = {
        k: v for k, v in data.get("extra", {}).items() if k not in ("optimizer", "rng", "scaler")
    }
    if half:
        data["state_dict"] = {
            k: (v.half() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for k, v in data["state_dict"].items()
        }
        if "backbone_state_dict" in data:
            data["backbone_state_dict"] = {
                k: (v.half() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                for k, v in data["backbone_state_dict"].items()
            }
    buffer = _io.BytesIO()
    torch.save(data, buffer)
    atomic_write_bytes(dst, buffer.getvalue())
    return Path(dst)
