"""torch.distributed plumbing shared by ``graphloc train`` and ``graphloc influence``.

The command line is the only entry point: ``--nproc N`` relaunches it under torchrun, and
each process joins the group around its command (``process_group``).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import subprocess
import sys

import torch


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of processes (0, 1 outside torch.distributed)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def digest(t: torch.Tensor) -> str:
    """A hash of a tensor's dtype, shape and bytes: equal on two processes only when the
    tensors are (NaN payloads and -0.0 included)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"digest takes a tensor, got {type(t).__name__}")
    flat = t.detach().cpu().contiguous().reshape(-1)
    hashed = hashlib.blake2b(f"{t.dtype}{tuple(t.shape)}".encode(), digest_size=16)
    if flat.numel():  # the bytes read in place (no copy of a large feature matrix)
        hashed.update(memoryview(flat.view(torch.uint8).numpy()))
    return hashed.hexdigest()


def check_same_on_every_rank(tensors: dict[str, torch.Tensor], what: str) -> None:
    """Raises on every process unless each named tensor is the same (dtype, shape, bytes) on
    all of them. A computation sharded over the processes and gathered (the seeds of
    ``measure``) is one computation only if its inputs are one: a model initialised without
    a common seed, or seeds drawn from each process's own generator, would otherwise be
    gathered into one result without a word. Outside torch.distributed: nothing."""
    import torch.distributed as dist
    if rank_and_world()[1] == 1:
        return
    mine = {name: digest(t) for name, t in tensors.items()}
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    differing = {}
    for other, theirs in enumerate(everyone):
        for name in sorted(set(theirs) | set(everyone[0])):
            if theirs.get(name) != everyone[0].get(name):
                differing.setdefault(name, []).append(other)
    if differing:
        listed = "; ".join(f"{name!r} on ranks {ranks}" for name, ranks in
                           list(differing.items())[:8])
        more = f" and {len(differing) - 8} more" if len(differing) > 8 else ""
        raise ValueError(f"{what} differs between the processes, against rank 0's: {listed}"
                         f"{more}. Every process must hold the same (seed the model's "
                         f"initialisation and the seed draw alike, or load one checkpoint)")


@contextlib.contextmanager
def process_group():
    """Inside a process started by torchrun (``WORLD_SIZE`` set), joins the process group
    for the body and leaves it after; elsewhere does nothing. See ``_backend``."""
    import torch.distributed as dist

    joined = "WORLD_SIZE" in os.environ and not dist.is_initialized()
    if joined:
        backend, device = _backend()
        if device is not None:
            torch.cuda.set_device(device)
        dist.init_process_group(backend)
    done = False
    try:
        yield
        done = True
    finally:
        if joined and dist.is_initialized():
            if done:  # no process leaves while another still communicates (a failed one
                dist.barrier()  # is stopped by torchrun instead)
            # DistributedDataParallel wrappers and their pending work freed while the group
            # lives: a rank once aborted at exit ("terminate called without an active
            # exception") after a mini-batch run, with Gloo's work outliving the group
            gc.collect()
            dist.destroy_process_group()


def _backend() -> tuple[str, int | None]:
    """``(backend, CUDA device of this process or None)``. The commands compute on the CPU,
    and so do their collectives (gradients, digests, gathered influence rows): gloo carries
    them. Where CUDA and NCCL are present NCCL carries CUDA tensors beside it, each process
    on the GPU of its ``LOCAL_RANK``. The group was nccl alone there, which has no CPU
    collectives, with every process left on GPU 0."""
    import torch.distributed as dist
    if not (torch.cuda.is_available() and dist.is_nccl_available()):
        return "gloo", None
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = local_rank if local_rank < torch.cuda.device_count() else None
    return "cpu:gloo,cuda:nccl", device


def relaunch(argv: list[str], nproc: int) -> int:
    """``torchrun --nproc_per_node=nproc -m graphloc.cli argv`` (the whole command line,
    ``--nproc N`` removed): every process runs the same command in one process group."""
    if "--nproc" in argv:
        at = argv.index("--nproc")
        argv = argv[:at] + argv[at + 2:]
    # --standalone: a free rendezvous port each time, so two runs never collide on one
    return subprocess.call([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            f"--nproc_per_node={nproc}", "-m", "graphloc.cli", *argv])
