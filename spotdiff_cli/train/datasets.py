"""Where a run's data comes from: the dataset folder with its feature cache ready, and the
benchmarks made once into the user cache when ``--data`` is ``synth`` or ``clevr``."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from . import distributed as dist
from .recipes import CACHED_DATASETS, TrainConfig
from .run import Log, Progress


def default_dataset_dir(config: TrainConfig) -> Path:
    """Where a cached benchmark ("synth" or "clevr") lives: the user cache, keyed by its settings."""
    from ..weights import user_cache_dir

    if config.data == "clevr":
        name = (
            f"clevr-{config.clevr_pairs}x{config.clevr_width}x{config.clevr_height}"
            f"-spp{config.clevr_spp}-seed{config.clevr_seed}"
        )
    else:
        name = f"synth-{config.synth_pairs}x{config.synth_size}-seed{config.synth_seed}"
    return user_cache_dir() / "datasets" / name


def dataset_root(
    config: TrainConfig,
    info: dist.DistInfo,
    say: Log,
    notes: list[str],
    progress: Progress | None = None,
) -> Path:
    """The dataset folder, with its preprocessing cache ready.

    ``data == "synth"`` (the default): the synthetic benchmark is generated once into the user
    cache (``data/synth.py``, seconds). ``data == "clevr"``: the rendered CLEVR-Change-style
    benchmark is rendered once into the user cache (``data/clevr_render.py``, hours: the
    estimate is said first; an interrupted render resumes on the next run). Either is then
    prepared (``data/cache.py``) and reused by later runs. A real dataset without a cache for
    the backbone is prepared in place (what ``spotdiff data prepare`` does). Under torchrun only
    rank 0 does this work; the others wait.
    """
    from ..data.cache import feature_folder, prepare_dataset
    from ..errors import DataError

    cached = config.data in CACHED_DATASETS
    root = default_dataset_dir(config) if cached else Path(config.data).expanduser()
    if not cached and not root.exists():
        raise DataError(
            f"dataset folder {root} not found; pass --data DIR (or leave it out for the synthetic benchmark)"
        )
    splits = [config.train_split, config.val_split]
    size = config.input_size or None
    folder = root / "cache" / feature_folder(config.backbone, size, config.feature_levels)
    ready = all((folder / f"{s}.npz").is_file() for s in splits)
    if info.is_main and not ready:
        if config.data == "synth" and not (root / "synth.json").is_file():
            from ..data.synth import synthesize

            message = (
                f"no --data given: generating the default synthetic benchmark ({config.synth_pairs} pairs, "
                f"{config.synth_size} px) into {root} (once; later runs reuse it)"
            )
            say(message)
            notes.append(message)
            synthesize(
                root,
                pairs=config.synth_pairs,
                seed=config.synth_seed,
                size=config.synth_size,
                overwrite=True,
            )
        if config.data == "clevr" and not (root / "gold.json").is_file():
            render_default_clevr(config, root, info, say, notes, progress)
        say(f"preparing {root}: cluster analysis and {folder.name} (once per dataset)")
        prepare_dataset(
            root,
            splits,
            backbone=config.backbone,
            device=config.device,
            format=config.format,
            input_size=size,
            levels=config.feature_levels,
        )
    elif cached:
        which = "the default synthetic" if config.data == "synth" else "the rendered CLEVR"
        notes.append(f"--data {config.data}: using {which} benchmark in {root}")
        say(notes[-1])
    dist.barrier(info)
    return root


def render_default_clevr(
    config: TrainConfig,
    root: Path,
    info: dist.DistInfo,
    say: Log,
    notes: list[str],
    progress: Progress | None,
) -> None:
    """1. Render the "clevr" benchmark into ``root``, saying first how long it will take."""
    from ..data.clevr_render import (
        default_jobs,
        estimate_seconds,
        format_duration,
        render_clevr_change,
        scenes_done,
    )

    size = dict(width=config.clevr_width, height=config.clevr_height, spp=config.clevr_spp)
    if info.enabled:
        # The other processes would wait at a barrier far longer than its timeout.
        raise UsageError(
            f"--data clevr is not rendered yet: render it once without torchrun (spotdiff train "
            f"--data clevr ..., or spotdiff data clevr --out {root} --pairs {config.clevr_pairs} "
            f"--seed {config.clevr_seed}), then start the distributed run"
        )
    jobs = default_jobs()
    done = scenes_done(root, config.clevr_pairs)
    left = config.clevr_pairs - done
    resumed = f", {done} already there" if done else ""
    message = (
        f"--data clevr: rendering the CLEVR benchmark ({config.clevr_pairs} scenes{resumed}, "
        f"{config.clevr_width}x{config.clevr_height}, {config.clevr_spp} spp) into {root} with "
        f"{jobs} processes: about {format_duration(estimate_seconds(left, jobs=jobs, **size))} "
        f"(once; later runs reuse it; if interrupted, the same command resumes it)"
    )
    say(message)
    notes.append(message)
    render_clevr_change(
        root,
        pairs=config.clevr_pairs,
        seed=config.clevr_seed,
        jobs=jobs,
        progress=(lambda d, t: progress("rendering CLEVR scenes", d, t)) if progress else None,
        **size,
    )
