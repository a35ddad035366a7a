"""torch.distributed plumbing shared by ``graphloc train`` and ``graphloc influence``."""

from __future__ import annotations

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


def run(command: str, argv: list[str] | None = None) -> int:
    """Runs ``graphloc <command> argv`` in a process started by torchrun: joins the
    process group (gloo on CPU, nccl on GPU) first and leaves it after."""
    import torch.distributed as dist

    from graphloc.cli import main
    if "WORLD_SIZE" in os.environ and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        return main([command, *(sys.argv[1:] if argv is None else argv)])
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def relaunch(argv: list[str], nproc: int, module: str) -> int:
    """``torchrun --nproc_per_node=nproc -m module argv``, ``--nproc N`` removed from argv."""
    if "--nproc" in argv:
        at = argv.index("--nproc")
        argv = argv[:at] + argv[at + 2:]
    return subprocess.call([sys.executable, "-m", "torch.distributed.run",
                            f"--nproc_per_node={nproc}", "-m", module, *argv])
