"""torch.distributed plumbing shared by ``graphloc train`` and ``graphloc influence``.

The command line is the only entry point: ``--nproc N`` relaunches it under torchrun, and
each process joins the group around its command (``process_group``).
"""

from __future__ import annotations

import contextlib
import gc
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


@contextlib.contextmanager
def process_group():
    """Inside a process started by torchrun (``WORLD_SIZE`` set), joins the process group
    (gloo on CPU, nccl on GPU) for the body and leaves it after; elsewhere does nothing."""
    import torch.distributed as dist

    joined = "WORLD_SIZE" in os.environ and not dist.is_initialized()
    if joined:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
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


def relaunch(argv: list[str], nproc: int) -> int:
    """``torchrun --nproc_per_node=nproc -m graphloc.cli argv`` (the whole command line,
    ``--nproc N`` removed): every process runs the same command in one process group."""
    if "--nproc" in argv:
        at = argv.index("--nproc")
        argv = argv[:at] + argv[at + 2:]
    # --standalone: a free rendezvous port each time, so two runs never collide on one
    return subprocess.call([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            f"--nproc_per_node={nproc}", "-m", "graphloc.cli", *argv])
