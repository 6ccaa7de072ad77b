"""``sandbox-kernel gc [--all] [--volumes] [--dry-run]``, a subcommand of the docker backend
(entry point ``sandbox_kernel.commands``; ``sandbox-kernel image ...`` is :mod:`.images.__main__`).

It removes the containers, volumes and host directories of sandboxes whose kernel is gone
(killed or crashed before it could clean up), and the sandboxes waiting in this host's warm
pool (``pool_size``; ``sandbox-kernel pool stop`` removes only those); ``--all`` removes every sandbox-kernel container of this
host, running ones too. On an engine shared by several hosts, other hosts' sandboxes are never touched:
their owner's host removes them (and each container ends by itself when its wrapper does).
Workspace volumes (``workdir_volume``) are kept unless ``--volumes``; ``--dry-run`` lists what
would be removed and the workspaces, and removes nothing.
"""

from __future__ import annotations

import argparse

from . import engine, pooled, workspace

HELP = "remove sandbox containers left by kernels that are gone (and workspace volumes with --volumes)"
"""The line ``sandbox-kernel --help`` shows."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all", action="store_true",
                        help="remove every sandbox-kernel container and volume of this host, also those of running kernels")
    parser.add_argument("--volumes", action="store_true",
                        help="also remove the workspace volumes (workdir_volume) no container uses: their files are lost")
    parser.add_argument("--dry-run", action="store_true", help="remove nothing; list what would be removed")


def run(args: argparse.Namespace) -> int:
    """Remove (or with ``--dry-run`` list) what ``args`` selects; returns the exit status, 0.

    Raises:
        BackendUnavailable: the Docker engine cannot be reached.
    """
    client = engine.connect()
    try:
        removed = engine.remove_leftovers(client, everything=args.all, dry_run=args.dry_run)
        removed += pooled.sweep(client, waiting_too=True, dry_run=args.dry_run)
        spaces = workspace.workspaces(client)
        if args.volumes and not args.dry_run:
            gone, in_use = workspace.remove_workspaces(client)
            removed += gone
    finally:
        client.close()
    verb = "would remove" if args.dry_run else "removed"
    for name in removed:
        print(f"{verb} {name}")
    for space in spaces:
        if args.dry_run or not args.volumes:
            state = "in use" if space["in_use"] else ("would remove" if args.volumes else "kept; --volumes removes it")
            print(f"workspace volume {space['name']} ({state})")
        elif space["name"] in in_use:
            print(f"workspace volume {space['name']} (in use: kept)")
    print(f"{len(removed)} {verb}" if removed else "nothing to remove")
    return 0

