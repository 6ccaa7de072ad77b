"""Egress by name (``allow_hosts``) against its baselines, in the same run:

1. the session start: ``Sandbox("docker").start()`` and a first cell with ``allow_hosts`` against
   ``network=none`` (the default), the two taken in turns; and, with ``allow_hosts``, the start to
   a first answer from an allowed host (the proxy starts once the kernel is ready);
2. ``pip install`` of a few wheels through the egress proxy against the same install straight from
   the same test index (a sandbox on the rig's network, no proxy).

    .venv/bin/python benchmarks/egress.py [--starts 8] [--installs 5] [--wheels 6] [--wheel-mb 2]

Everything runs against the tests' own rig (tests/support/egress.py: pypiserver on a network of
the engine); nothing leaves this machine. Medians in seconds; compare ratios, not absolutes (2
shared cores). The issue's goals: start +0.3 s at most (or none with a pool), pip 1.2x at most.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docker  # noqa: E402

from sandbox_kernel import Sandbox  # noqa: E402
from tests.support import egress  # noqa: E402

INDEX_CHECK = "import urllib.request\nurllib.request.urlopen('http://index.test:8080/simple/').status"


def wheels(count: int, megabytes: float) -> dict[str, bytes]:
    """``count`` pure-Python wheels of about ``megabytes`` each (incompressible data)."""
    made = {}
    for i in range(count):
        blob = os.urandom(int(megabytes * 1024**2)).hex()[: int(megabytes * 1024**2)]
        name, data = egress.make_wheel(f"bench-{i}", "1.0", {f"bench_{i}/__init__.py": f"BLOB = {blob!r}\n"})
        made[name] = data
    return made


def start(options: dict, first: str) -> tuple[float, float]:
    """(start + first cell ``1``, then until ``first`` answered) in seconds."""
    began = time.perf_counter()
    sb = Sandbox("docker", **options)
    sb.start()
    sb.run("1")
    ready = time.perf_counter() - began
    if first:
        assert sb.run(first).text == "200"
    answered = time.perf_counter() - began
    sb.close()
    return ready, answered


def installs(sb: Sandbox, index: str, packages: list[str], repeats: int) -> list[float]:
    """Seconds of ``pip install`` into a fresh prefix each time (no cache), from ``index``."""
    times = []
    for n in range(repeats):
        code = (f"import subprocess, sys, time\nt = time.perf_counter()\n"
                f"subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-cache-dir', '--prefix', "
                f"'/tmp/bench-{n}', '--index-url', {index!r}, '--trusted-host', {index.split('/')[2].split(':')[0]!r}, "
                f"*{packages!r}], check=True)\nprint(time.perf_counter() - t)")
        result = sb.run(code, timeout=600)
        assert result.error is None, result.stderr
        times.append(float(result.stdout.strip().splitlines()[-1]))
        sb.run(f"import shutil; shutil.rmtree('/tmp/bench-{n}')")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--installs", type=int, default=5)
    parser.add_argument("--wheels", type=int, default=6)
    parser.add_argument("--wheel-mb", type=float, default=2.0)
    args = parser.parse_args()
    client = docker.from_env()
    made = wheels(args.wheels, args.wheel_mb)
    packages = [f"bench-{i}" for i in range(args.wheels)]
    with egress.rig(client, made) as rig:
        proxied = rig.options()
        times: dict[str, list[float]] = {"none": [], "allow_hosts": [], "allow_hosts, first answer": []}
        for _ in range(args.starts):  # in turns, so drift and neighbours move both rows alike
            times["none"].append(start({}, "")[0])
            ready, answered = start(proxied, INDEX_CHECK)
            times["allow_hosts"].append(ready)
            times["allow_hosts, first answer"].append(answered)
        base = statistics.median(times["none"])
        print(f"session start + first cell ({args.starts} each, in turns)")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:28s} median {median:6.2f} s   {median - base:+.2f} s   {median / base:.2f}x")
        direct_index = f"http://{rig.addresses['index']}:{egress.INDEX_PORT}/simple/"
        with Sandbox("docker", network=rig.network) as direct, Sandbox("docker", **proxied) as through:
            results = {"direct (the rig's network)": [], "through the egress proxy": []}
            for _ in range(args.installs):
                results["direct (the rig's network)"] += installs(direct, direct_index, packages, 1)
                results["through the egress proxy"] += installs(through, rig.index_url, packages, 1)
        base = statistics.median(results["direct (the rig's network)"])
        size = sum(len(w) for w in made.values()) / 1e6
        print(f"pip install of {args.wheels} wheels ({size:.1f} MB), {args.installs} each, in turns")
        for name, values in results.items():
            median = statistics.median(values)
            print(f"  {name:28s} median {median:6.2f} s   {median / base:.2f}x")


if __name__ == "__main__":
    main()
