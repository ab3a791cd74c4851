"""Distributed data parallel: two CPU processes (gloo) train the same model as one process on
the same data with the same global batch, and the batch helpers split work evenly."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
import torch
from test_train_loop import make_tiny_bench, tiny_config, weights_of

from spotdiff_cli.train.distributed import DistInfo, init_distributed, shard_batch, usable_batch

TESTS = str(Path(__file__).resolve().parent)


def test_shards_are_contiguous_equal_and_cover_the_global_batch() -> None:
    world = [DistInfo(rank=r, world_size=2) for r in range(2)]
    items = list(range(8))
    assert [shard_batch(items, w) for w in world] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert list(usable_batch(list(range(5)), world[0])) == [0, 1, 2, 3]  # short last batch trimmed
    single = DistInfo()
    assert (
        shard_batch(items, single) == items and list(usable_batch(items[:5], single)) == items[:5]
    )


def test_without_torchrun_it_is_one_process(monkeypatch) -> None:
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    info = init_distributed("cpu")
    assert not info.enabled and info.is_main and info.world_size == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, bench: str, out: str) -> None:
    """One torchrun-like process: the environment torchrun would set, then the ordinary train()."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from spotdiff_cli.train.loop import train

    result = train(tiny_config(Path(bench), epochs=1), out)
    assert result.steps == 6, result


def test_two_processes_train_the_same_model_as_one(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch
) -> None:
    import torch.multiprocessing as mp

    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    bench = make_tiny_bench(tmp_path_factory)
    from spotdiff_cli.train.loop import train

    single = train(tiny_config(bench, epochs=1), tmp_path / "one")
    mp.spawn(
        _worker, args=(2, _free_port(), str(bench), str(tmp_path / "two")), nprocs=2, join=True
    )
    one, two = weights_of(single.last_path), weights_of(tmp_path / "two" / "last.pt")
    assert one.keys() == two.keys()
    for key in one:
        assert torch.allclose(one[key], two[key], atol=1e-5, rtol=1e-4), key
    # rank 0 wrote the run, and says it ran on two processes
    assert json.loads((tmp_path / "two" / "config.json").read_text())["world_size"] == 2
    assert not (tmp_path / "one" / "config.json").read_text().count('"world_size": 2')
