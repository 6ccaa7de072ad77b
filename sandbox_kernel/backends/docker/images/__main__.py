"""Command line of the image builder; ``sandbox-kernel image ...`` runs the same commands.

    python -m sandbox_kernel.backends.docker.images download --wheelhouse DIR [--platform P]
    python -m sandbox_kernel.backends.docker.images build [--base IMAGE] [--tag TAG] [--wheelhouse DIR] [--if-needed]
                                                          [--platform P] [--egress]
    python -m sandbox_kernel.backends.docker.images check IMAGE

P is linux/amd64 or linux/arm64; default: the engine's architecture (download: this machine's).
``--egress`` builds the egress proxy's image (``allow_hosts``; default tag sandbox-kernel-egress:latest,
base python:3.13-slim-trixie) instead of the sandbox image.

Exit status: 0 on success, 1 when the build or the check fails, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import platform as host
import sys
import time
from pathlib import Path

from ....core.errors import ImageBuildError, SandboxError
from .build import (
    DEFAULT_BASE,
    DEFAULT_TAG,
    EGRESS,
    EGRESS_BASE,
    EGRESS_TAG,
    PLATFORMS,
    SANDBOX,
    build_image,
    download_wheelhouse,
    engine_platform,
    image_has_ipykernel,
    image_is_current,
    image_platform,
    platform_of,
)

_PLATFORM_HELP = f"build for this platform: {' or '.join(p.docker for p in PLATFORMS.values())}"

HELP = "build or check the docker backend's sandbox image"
"""The line ``sandbox-kernel --help`` shows (entry point ``sandbox_kernel.commands``)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sandbox_kernel.backends.docker.images",
                                     description="Build and check sandbox-kernel images.")
    configure(parser)
    return parser


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``download``, ``build`` and ``check`` subcommands to ``parser``."""
    commands = parser.add_subparsers(dest="image_command", required=True)
    download = commands.add_parser("download", help="download the image's wheels (host pip)")
    download.add_argument("--wheelhouse", type=Path, required=True)
    download.add_argument("--requirements", type=Path)
    download.add_argument("--platform", help=f"{_PLATFORM_HELP} (default: this machine's)")
    download.add_argument("--egress", action="store_true", help="the egress proxy's wheels (CPython 3.13)")
    build = commands.add_parser("build", help="build the default sandbox image, or the image a docker kernel's "
                                              "options ask for (--kernel NAME, or --DockerBackend.* options)")
    build.add_argument("--kernel", help="a kernelspec (e.g. sandbox-docker): build the image its options ask for "
                                        "(packages, dockerfile, image...), as its first cell would")
    build.set_defaults(traitlets_options=True)  # --DockerBackend.packages=... after the flags
    build.add_argument("--base", help=f"base image (default {DEFAULT_BASE}; --egress: {EGRESS_BASE})")
    build.add_argument("--tag", help=f"image name (default {DEFAULT_TAG}; --egress: {EGRESS_TAG})")
    build.add_argument("--egress", action="store_true", help="build the egress proxy's image (allow_hosts)")
    build.add_argument("--wheelhouse", type=Path,
                       help="wheel directory, completed if needed (default: a temporary one)")
    build.add_argument("--requirements", type=Path)
    build.add_argument("--if-needed", action="store_true",
                       help="build only when TAG is missing or was built from an older recipe")
    build.add_argument("--platform", help=f"{_PLATFORM_HELP} (default: the engine's; another one needs "
                                          "qemu-user-static on the engine's host and a --base of that platform)")
    check = commands.add_parser("check", help="tell whether IMAGE can import ipykernel")
    check.add_argument("image")


def main(argv: list[str] | None = None) -> int:
    args, extra = _parser().parse_known_args(argv)
    args.extra = extra
    return run(args)


def _build_for_kernel(args: argparse.Namespace) -> int:
    """``build --kernel NAME`` / ``build --DockerBackend.*``: the image those options ask for."""
    from .for_kernel import build_for, kernel_config

    options = list(getattr(args, "extra", []) or [])
    if bad := [o for o in options if not o.startswith("--DockerBackend.")]:
        print(f"error: unknown argument {bad[0]} (give --DockerBackend.NAME=VALUE options)", file=sys.stderr)
        return 2
    started = time.monotonic()
    image = build_for(kernel_config(args.kernel, options), progress=lambda line: print(line, flush=True))
    print(f"ready: {image} ({time.monotonic() - started:.0f} s); a kernel with these options starts on it at once")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``download``, ``build`` or ``check`` command; returns the exit status."""
    try:
        if args.image_command == "download":
            platform = platform_of(args.platform or host.machine())
            download_wheelhouse(args.wheelhouse, args.requirements, platform=platform,
                                recipe=EGRESS if args.egress else SANDBOX)
            print(f"wheelhouse complete for {platform}: {args.wheelhouse}")
            return 0
        if args.image_command == "build" and (args.kernel or getattr(args, "extra", None)):
            return _build_for_kernel(args)
        from ..engine import connect

        client = connect()  # the backend's client: DOCKER_HOST, a docker context, a TLS engine's own CA
        if args.image_command == "check":
            ok = image_has_ipykernel(client, args.image)
            print(f"{args.image}: ipykernel {'found' if ok else 'missing'}")
            return 0 if ok else 1
        platform = platform_of(args.platform) if args.platform else engine_platform(client)
        recipe = EGRESS if args.egress else SANDBOX
        tag = args.tag or (EGRESS_TAG if args.egress else DEFAULT_TAG)
        base = args.base or (EGRESS_BASE if args.egress else DEFAULT_BASE)
        if (args.if_needed and image_is_current(client, tag, args.requirements, recipe)
                and image_platform(client, tag) == platform):
            print(f"{tag} is up to date with the recipe: not rebuilt")
            return 0
        started = time.monotonic()
        image_id = build_image(client, base=base, tag=tag, wheelhouse=args.wheelhouse,
                               requirements=args.requirements, platform=platform,
                               progress=lambda line: print(line, flush=True), recipe=recipe)
        size = client.api.inspect_image(image_id)["Size"]
        print(f"built {tag} for {platform} ({image_id[:19]}, {size / 1e6:.0f} MB) "
              f"in {time.monotonic() - started:.0f} s")
        return 0
    except (ImageBuildError, SandboxError) as exc:  # SandboxError: connect's BackendUnavailable, with its fix
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except SandboxError as exc:  # the engine's errors, mapped at the boundary; with their fix
        print(f"error: {exc} (see .ci/docker-setup.sh)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
