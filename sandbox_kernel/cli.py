"""``sandbox-kernel``: install and list kernelspecs, launch the kernel, build the image, gc.

    sandbox-kernel install [--user | --sys-prefix | --prefix DIR] [--backend NAME ...] [--default NAME [--only]] [-- OPTIONS]
    sandbox-kernel uninstall [--backend NAME ...]
    sandbox-kernel list
    sandbox-kernel mcp [--backend NAME] [--allowed-command REGEX ...] [--Backend.option=VALUE ...]
    sandbox-kernel user-engine start|stop USER [--memory SIZE --pids N --cpus N]   (as root: a user's own engine)
    sandbox-kernel -f CONNECTION_FILE [--SandboxKernel.backend=NAME ...]   (what kernelspecs run)
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points
from types import ModuleType

from .backends import backend_names, install_fix, kernelspec_backends, missing_packages
from .core.errors import ConfigError, SandboxError
from .frontdoors.kernel import kernelspec, server_config

COMMAND_GROUP = "sandbox_kernel.commands"
"""Entry-point group of the subcommands other modules provide (``image``, ``gc``, ``mcp``): each
names a module with ``HELP`` (one line), ``configure(parser)`` and ``run(args) -> int`` (the exit
status). A module whose optional dependency is missing is left out of the command line."""


def _parser(commands: dict[str, ModuleType]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sandbox-kernel", description="Jupyter kernels that run cells in a sandbox.")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="write kernelspecs (sandbox-local, sandbox-docker, ...)")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="into the user's Jupyter data directory")
    where.add_argument("--sys-prefix", action="store_true", help="into this Python environment (sys.prefix)")
    where.add_argument("--prefix", help="into PREFIX/share/jupyter/kernels")
    install.add_argument("--backend", action="append", choices=kernelspec_backends(),
                         help="backend to install a kernelspec for (repeatable; default: all)")
    install.add_argument("--default", metavar="NAME", choices=kernelspec_backends(),
                         help="make sandbox-NAME the Jupyter server's default kernel (the Launcher's first card, "
                              "new notebooks' kernel) instead of python3")
    install.add_argument("--only", action="store_true",
                         help="with --default: offer that kernel alone (python3 and the others hidden)")
    install.add_argument("options", nargs="*", help="traitlets options for the kernel, after --, "
                         "e.g. -- --DockerBackend.memory_limit=2g")
    uninstall = sub.add_parser("uninstall", help="remove kernelspecs")
    uninstall.add_argument("--backend", action="append", help="backend (repeatable; default: all)")
    sub.add_parser("list", help="list installed sandbox kernelspecs")
    for name, module in commands.items():
        module.configure(sub.add_parser(name, help=module.HELP))
    return parser


def parser() -> argparse.ArgumentParser:
    """The command line's parser, with every subcommand whose module imports here (what
    ``sandbox-kernel --help`` shows, and what the documentation's CLI reference is written from)."""
    return _parser(load_commands())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if _is_kernel_launch(argv):
        from .frontdoors.kernel.app import launch

        launch(argv)
        return 0
    commands = load_commands()
    parser = _parser(commands)
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "traitlets_options", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return _run(args, commands)
    except SandboxError as exc:
        print(f"sandbox-kernel: {exc}", file=sys.stderr)
        return 1


def _is_kernel_launch(argv: list[str]) -> bool:
    """A kernelspec's argv (``-f CONNECTION_FILE`` and ``--Class.trait=value`` options), as
    opposed to a subcommand."""
    return bool(argv) and all(a == "-f" or a.startswith(("-f=", "--f=", "--help-all")) or
                              (a.startswith("--") and "." in a.split("=")[0]) or not a.startswith("-")
                              for a in argv) and argv[0].startswith("-")


def _run(args: argparse.Namespace, commands: dict[str, ModuleType]) -> int:
    if args.command == "install":
        _install(args)
    elif args.command == "uninstall":
        removed = set()
        for backend in args.backend or backend_names():
            if (path := kernelspec.uninstall(backend)) is not None:
                removed.add(kernelspec.kernel_name(backend))
                print(f"removed {kernelspec.kernel_name(backend)} from {path}")
        for path in server_config.forget(removed):
            print(f"took {', '.join(sorted(removed))} out of the server's default kernel in {path}")
    elif args.command == "list":
        for name, path in sorted(kernelspec.installed().items()):
            print(f"{name}\t{path}")
    else:
        return commands[args.command].run(args)
    return 0


def _install(args: argparse.Namespace) -> None:
    """Write the kernelspecs asked for; by default only those whose backend's packages are
    installed, saying which were skipped and how to install them. Named with ``--backend``, a
    kernelspec is written anyway (its kernel says what is missing at the first cell)."""
    prefix = sys.prefix if args.sys_prefix else args.prefix
    if args.only and not args.default:
        raise ConfigError("--only needs --default NAME: the kernel to offer alone.")
    written = set()
    for backend in args.backend or kernelspec_backends():
        if (missing := missing_packages(backend)) and not args.backend:
            print(f"skipped {kernelspec.kernel_name(backend)}: its backend needs {', '.join(missing)} "
                  f"({install_fix(backend)}, then install again)")
            continue
        path = kernelspec.install(backend, user=args.user, prefix=prefix, options=args.options)
        written.add(kernelspec.kernel_name(backend))
        print(f"installed {kernelspec.kernel_name(backend)} in {path}")
        if missing:
            print(f"  note: its backend needs {', '.join(missing)} ({install_fix(backend)})")
    if args.default:
        _make_default(args.default, args.only, written, user=args.user, prefix=prefix)


def _make_default(backend: str, only: bool, written: set[str], *, user: bool, prefix: str | None) -> None:
    """Write the server settings that make sandbox-BACKEND the default (and with ``only`` the
    only kernel), once its kernelspec is installed (``written`` now, or earlier)."""
    name = kernelspec.kernel_name(backend)
    if name not in written and name not in kernelspec.installed():
        raise ConfigError(f"--default {backend}: {name} is not installed ({install_fix(backend)}, then install "
                          f"again, or name it: --backend {backend}).")
    path = server_config.make_default(name, server_config.config_dir(user=user, prefix=prefix), only=only)
    print(f"{name} is the default kernel (the Launcher's first card, new notebooks' kernel)"
          f"{', and no other kernel is offered' if only else ''}, in Jupyter servers started from now on: {path}")


def load_commands() -> dict[str, ModuleType]:
    """The subcommands registered in :data:`COMMAND_GROUP` whose modules import here, by name."""
    commands = {}
    for ep in sorted(entry_points(group=COMMAND_GROUP), key=lambda ep: ep.name):
        try:
            commands[ep.name] = ep.load()
        except ImportError:
            pass
    return commands
