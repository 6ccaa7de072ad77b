"""``sandbox-kernel``: install and list kernelspecs, launch the kernel, build the image, gc.

    sandbox-kernel install [--user | --sys-prefix | --prefix DIR] [--backend NAME ...] [-- OPTIONS]
    sandbox-kernel uninstall [--backend NAME ...]
    sandbox-kernel list
    sandbox-kernel mcp [--backend NAME] [--allowed-command REGEX ...] [--Backend.option=VALUE ...]
    sandbox-kernel -f CONNECTION_FILE [--SandboxKernel.backend=NAME ...]   (what kernelspecs run)
"""

from __future__ import annotations

import argparse
import sys

from . import kernelspec
from .backends import backend_names
from .errors import SandboxError

# Subcommands other modules add: name -> (help, configure(parser), run(args) -> int).
COMMANDS: dict[str, tuple] = {}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sandbox-kernel", description="Jupyter kernels that run cells in a sandbox.")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="write kernelspecs (sandbox-local, sandbox-docker, ...)")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="into the user's Jupyter data directory")
    where.add_argument("--sys-prefix", action="store_true", help="into this Python environment (sys.prefix)")
    where.add_argument("--prefix", help="into PREFIX/share/jupyter/kernels")
    install.add_argument("--backend", action="append", choices=backend_names(),
                         help="backend to install a kernelspec for (repeatable; default: all)")
    install.add_argument("options", nargs="*", help="traitlets options for the kernel, after --, "
                         "e.g. -- --DockerBackend.memory_limit=2g")
    uninstall = sub.add_parser("uninstall", help="remove kernelspecs")
    uninstall.add_argument("--backend", action="append", help="backend (repeatable; default: all)")
    sub.add_parser("list", help="list installed sandbox kernelspecs")
    for name, (help_text, configure, _) in COMMANDS.items():
        configure(sub.add_parser(name, help=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if _is_kernel_launch(argv):
        from .app import launch

        launch(argv)
        return 0
    _load_commands()
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "traitlets_options", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return _run(args)
    except SandboxError as exc:
        print(f"sandbox-kernel: {exc}", file=sys.stderr)
        return 1


def _is_kernel_launch(argv: list[str]) -> bool:
    """A kernelspec's argv (``-f CONNECTION_FILE`` and ``--Class.trait=value`` options), as
    opposed to a subcommand."""
    return bool(argv) and all(a == "-f" or a.startswith(("-f=", "--f=", "--help-all")) or
                              (a.startswith("--") and "." in a.split("=")[0]) or not a.startswith("-")
                              for a in argv) and argv[0].startswith("-")


def _run(args: argparse.Namespace) -> int:
    if args.command == "install":
        prefix = sys.prefix if args.sys_prefix else args.prefix
        for backend in args.backend or backend_names():
            path = kernelspec.install(backend, user=args.user, prefix=prefix, options=args.options)
            print(f"installed {kernelspec.kernel_name(backend)} in {path}")
    elif args.command == "uninstall":
        for backend in args.backend or backend_names():
            if (path := kernelspec.uninstall(backend)) is not None:
                print(f"removed {kernelspec.kernel_name(backend)} from {path}")
    elif args.command == "list":
        for name, path in sorted(kernelspec.installed().items()):
            print(f"{name}\t{path}")
    else:
        return COMMANDS[args.command][2](args)
    return 0


def _load_commands() -> None:
    """Import the modules that add subcommands (``image``, ``gc``), where present."""
    import importlib

    for module in ("sandbox_kernel.backends.docker_cli", "sandbox_kernel.mcp_cli"):
        try:
            importlib.import_module(module)
        except ImportError:
            pass
