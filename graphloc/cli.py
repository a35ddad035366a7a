"""The ``graphloc`` command line. Subcommands join as their features land."""

from __future__ import annotations

import argparse
import sys

import torch

import graphloc


def info(_args) -> int:
    """Prints what this installation runs on: versions, kernels, threads, devices."""
    print(f"graphloc {graphloc.__version__}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    if graphloc.HAS_EXTENSION:
        cuda = torch._C._dispatch_has_kernel_for_dispatch_key("graphloc::spmm", "CUDA")
        print(f"kernels: compiled graphloc._C (CPU{' + CUDA' if cuda else ''})")
    else:
        print("kernels: pure-torch reference ops (graphloc._C not loaded)")
    print(f"CUDA devices: {torch.cuda.device_count() if torch.cuda.is_available() else 0}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphloc", description=graphloc.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help=info.__doc__).set_defaults(run=info)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
