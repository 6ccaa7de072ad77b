"""Subcommands of the docker backend, added to ``sandbox-kernel`` (see ``cli._load_commands``):

    sandbox-kernel image build [--base IMAGE] [--wheelhouse DIR] [--tag TAG] [--if-needed]
    sandbox-kernel image check IMAGE
    sandbox-kernel image download --wheelhouse DIR
    sandbox-kernel gc [--all]

``image`` runs the same commands as ``python -m sandbox_kernel.images``. ``gc`` removes the
containers, volumes and host directories of sandboxes whose kernel is gone (killed or crashed
before it could clean up); ``--all`` removes every sandbox-kernel container, running ones too.
"""

from __future__ import annotations

import argparse

from ..cli import COMMANDS
from ..images import __main__ as images_cli
from . import _docker_engine as engine


def _configure_gc(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all", action="store_true",
                        help="remove every sandbox-kernel container and volume, also those of running kernels")


def _run_gc(args: argparse.Namespace) -> int:
    client = engine.connect()
    try:
        removed = engine.remove_leftovers(client, everything=args.all)
    finally:
        client.close()
    for name in removed:
        print(f"removed {name}")
    print(f"{len(removed)} removed" if removed else "nothing to remove")
    return 0


COMMANDS["image"] = ("build or check the docker backend's sandbox image", images_cli.configure, images_cli.run)
COMMANDS["gc"] = ("remove sandbox containers left by kernels that are gone", _configure_gc, _run_gc)
