"""Distributed data parallel: two CPU processes (gloo) train the same model as one process on
the same data with the same global batch, and the batch helpers split work evenly."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
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


def spawn_like_torchrun(worker: Callable[..., None], args: tuple, nprocs: int = 2) -> None:
    """Run ``worker(rank, world, port, *args)`` in ``nprocs`` fresh processes the way torchrun
    does: its agent, here this process, hosts the rendezvous store, so rank 0 finishing first
    cannot take the store away from a peer still leaving the group (with rank 0 as the host, a
    loaded CI machine saw the peer abort with SIGABRT after a passing run)."""
    import torch.multiprocessing as mp
    from torch.distributed import TCPStore

    port = _free_port()
    store = TCPStore("127.0.0.1", port, nprocs, is_master=True, wait_for_workers=False)
    try:
        mp.spawn(worker, args=(nprocs, port, *args), nprocs=nprocs, join=True)
    finally:
        del store


def enter_torchrun_process(rank: int, world: int, port: int) -> None:
    """The environment torchrun gives each process, its agent's store included."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_USE_AGENT_STORE="True",
        TORCHELASTIC_RESTART_COUNT="0",
    )
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)


def leave_like_the_console_script() -> None:
    """End the process as ``spotdiff`` does after a command (flush, exit handlers, ``os._exit``):
    a torchrun'd ``spotdiff train`` never runs the interpreter's teardown of gloo's threads."""
    from spotdiff_cli.cli import _exit_now

    _exit_now(0)


def _worker(rank: int, world: int, port: int, bench: str, out: str) -> None:
    """One torchrun process: the environment torchrun would set, the ordinary train(), the
    console script's exit."""
    enter_torchrun_process(rank, world, port)
    from spotdiff_cli.train.loop import train

    result = train(tiny_config(Path(bench), epochs=1), out)
    assert result.steps == 6, result
    leave_like_the_console_script()


def test_two_processes_train_the_same_model_as_one(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch
) -> None:
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    bench = make_tiny_bench(tmp_path_factory)
    from spotdiff_cli.train.loop import train

    single = train(tiny_config(bench, epochs=1), tmp_path / "one")
    spawn_like_torchrun(_worker, (str(bench), str(tmp_path / "two")))
    one, two = weights_of(single.last_path), weights_of(tmp_path / "two" / "last.pt")
    assert one.keys() == two.keys()
    for key in one:
        assert torch.allclose(one[key], two[key], atol=1e-5, rtol=1e-4), key
    # rank 0 wrote the run, and says it ran on two processes
    assert json.loads((tmp_path / "two" / "config.json").read_text())["world_size"] == 2
    assert not (tmp_path / "one" / "config.json").read_text().count('"world_size": 2')
