"""Set resource limits, then exec a command: ``python -S -E .../rlimits.py --as BYTES --cpu SECONDS
--nproc N --fsize BYTES -- CMD ...``.

The local backend starts its kernel through this when a limit is set, so the limits apply to the
kernel's process and everything it starts, and never to the wrapper kernel (no ``preexec_fn`` in a
threaded process). A value of 0 leaves that limit unset. It is run as a script by its path, with
the standard library only: it must not import this package (that cost each start 0.2-0.8 s).
"""

from __future__ import annotations

import argparse
import os
import resource

LIMITS = {"as": resource.RLIMIT_AS, "cpu": resource.RLIMIT_CPU, "nproc": resource.RLIMIT_NPROC,
          "fsize": resource.RLIMIT_FSIZE}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sandbox_kernel.backends.local.rlimits")
    for name in LIMITS:
        parser.add_argument(f"--{name}", type=int, default=0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    for name, which in LIMITS.items():
        value = getattr(args, name)
        if value > 0:
            # CPU: SIGXCPU at the soft limit names the cause; SIGKILL one second later if ignored.
            resource.setrlimit(which, (value, value + 1 if name == "cpu" else value))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
