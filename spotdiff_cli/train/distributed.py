"""Distributed data-parallel training with no code change for the user.

``spotdiff train ...`` runs in one process; ``torchrun --standalone --nproc_per_node N
$(which spotdiff) train ...`` runs the same command in N processes. ``init_distributed`` reads torchrun's environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``/``PORT``) and picks the backend for the device: NCCL for CUDA,
gloo for the CPU. Without those variables it is a no-op and everything below degrades to
single-process behaviour, so the loop has one code path.

Data parallel semantics (what makes N processes train the same model as one): every process
draws the same shuffled order from the seed, each global batch of ``batch_size`` examples is cut
into N contiguous, equal shares (``shard_batch``), and DDP averages the gradients. With a loss that
is a mean over equally sized shares, the averaged gradient is exactly the gradient of the mean over
the global batch, so the weights follow the single-process run (tests/test_distributed.py checks
it). A model whose loss is a mean per *token* gets the mean of per-process means instead: the
standard DDP behaviour, close to but not bit-equal to one process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: ``rank`` of ``world_size``, and its GPU index ``local_rank``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 writes checkpoints, logs and validates; the others train and wait."""
        return self.rank == 0


def launched_by_torchrun() -> bool:
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))


def init_distributed(device: str = "cpu") -> DistInfo:
    """Join the process group torchrun set up (NCCL on CUDA, gloo on the CPU); single process
    otherwise. ``device`` is the resolved device string ("cpu", "cuda"); on CUDA each process takes
    GPU ``LOCAL_RANK``."""
    if not launched_by_torchrun() or int(os.environ["WORLD_SIZE"]) <= 1:
        return DistInfo()
    import torch
    import torch.distributed as dist

    rank, world, local = (
        int(os.environ["RANK"]),
        int(os.environ["WORLD_SIZE"]),
        int(os.environ["LOCAL_RANK"]),
    )
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return DistInfo(rank, world, local, backend)


def process_device(device: str, info: DistInfo) -> str:
    """The device of this process: ``cuda:LOCAL_RANK`` under torchrun on GPUs, else ``device``."""
    if info.enabled and device == "cuda":
        return f"cuda:{info.local_rank}"
    return device


def cleanup(info: DistInfo, finished: bool = False) -> None:
    """Leave the process group. ``finished``: every process got here the ordinary way, so all
    wait for each other first; a process that tore gloo down while its peer was still leaving
    could abort the peer ("Connection closed by peer", a signal instead of an exit code). Not
    after an error or Ctrl-C: a peer that is gone would never reach the barrier."""
    if info.enabled:
        import torch.distributed as dist

        if dist.is_initialized():
            if finished:
                dist.barrier()
            dist.destroy_process_group()


def shard_batch(items: Sequence[T], info: DistInfo) -> list[T]:
    """This process' contiguous share of a global batch. ``len(items)`` must be a multiple of the
    world size (``usable_batch`` trims the last, short batch to one)."""
    if not info.enabled:
        return list(items)
    share = len(items) // info.world_size
    return list(items[info.rank * share : (info.rank + 1) * share])


def usable_batch(items: Sequence[T], info: DistInfo) -> Sequence[T]:
    """Trim a (last, short) global batch to a multiple of the world size: every process must run
    the same number of steps on equal shares, or DDP would hang waiting for the missing one."""
    if not info.enabled:
        return items
    return items[: len(items) - len(items) % info.world_size]


def wrap_model(module: Any, info: DistInfo, device: str, find_unused: bool = True) -> Any:
    """``module`` wrapped in DistributedDataParallel when distributed, else unchanged."""
    if not info.enabled:
        return module
    from torch.nn.parallel import DistributedDataParallel as DDP

    device_ids = [info.local_rank] if device.startswith("cuda") else None
    return DDP(module, device_ids=device_ids, find_unused_parameters=find_unused)


def broadcast_object(value: Any, info: DistInfo) -> Any:
    """Rank 0's ``value`` on every rank (validation scores, the stop decision)."""
    if not info.enabled:
        return value
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_reduce_sum(values: Sequence[float], info: DistInfo) -> list[float]:
    """Element-wise sum over ranks of a few floats (loss and token counts for the log line)."""
    if not info.enabled:
        return [float(v) for v in values]
    import torch
    import torch.distributed as dist

    # NCCL reduces GPU tensors only; gloo takes CPU ones.
    device = f"cuda:{info.local_rank}" if info.backend == "nccl" else "cpu"
    tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.cpu().tolist()


def barrier(info: DistInfo) -> None:
    if info.enabled:
        import torch.distributed as dist

        dist.barrier()
