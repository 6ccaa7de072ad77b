"""Subcommands of the docker backend, added to ``sandbox-kernel`` (see ``cli._load_commands``):

    sandbox-kernel image build [--base IMAGE] [--wheelhouse DIR] [--tag TAG] [--if-needed]
    sandbox-kernel image check IMAGE
    sandbox-kernel image download --wheelhouse DIR
    sandbox-kernel gc [--all] [--volumes] [--dry-run]

``image`` runs the same commands as ``python -m sandbox_kernel.images``. ``gc`` removes the
containers, volumes and host directories of sandboxes whose kernel is gone (killed or crashed
before it could clean up); ``--all`` removes every sandbox-kernel container, running ones too.
Workspace volumes (``workdir_volume``) are kept unless ``--volumes``; ``--dry-run`` lists what
would be removed and the workspaces, and removes nothing.
"""

from __future__ import annotations

import argparse

from ..cli import COMMANDS
from ..images import __main__ as images_cli
from . import _docker_engine as engine
from . import _docker_workspace as workspace


def _configure_gc(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all", action="store_true",
                        help="remove every sandbox-kernel container and volume, also those of running kernels")
    parser.add_argument("--volumes", action="store_true",
                        help="also remove the workspace volumes (workdir_volume) no container uses: their files are lost")
    parser.add_argument("--dry-run", action="store_true", help="remove nothing; list what would be removed")


def _run_gc(args: argparse.Namespace) -> int:
    client = engine.connect()
    try:
        removed = engine.remove_leftovers(client, everything=args.all, dry_run=args.dry_run)
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


COMMANDS["image"] = ("build or check the docker backend's sandbox image", images_cli.configure, images_cli.run)
COMMANDS["gc"] = ("remove sandbox containers left by kernels that are gone (and workspace volumes with --volumes)",
                  _configure_gc, _run_gc)
