"""The docker backend's options (traitlets), with their checks: a base class that declares them,
so :class:`~sandbox_kernel.backends.docker.DockerBackend` holds behaviour only. Each option is set as
``--DockerBackend.NAME=VALUE`` on a kernelspec's argv, in a config file, as ``--name-with-dashes
VALUE`` on a ``%%sandbox`` line or as ``Sandbox("docker", name=value)``; docs/reference/options.md lists them.
"""

from __future__ import annotations

import re

from traitlets import Bool, Float, Integer, List, TraitError, Unicode, validate

from ...runtime.traits import ByteSize, HostVariables
from ..checkpoint import CheckpointOptions
from ..egress import allow_hosts_trait, pypi_index_trait, secrets_trait
from ..kernel_client.forked import Forking
from ..pool import pool_size_trait, pool_ttl_trait
from .images import DEFAULT_TAG
from .mounts import parse_gpus
from .prepare import check_option
from .proxy_spec import IMAGE as EGRESS_IMAGE
from .workspace import NAME as VOLUME_NAME


class DockerOptions(CheckpointOptions, Forking):
    """The options of a docker sandbox (secure by default, each an option: see docs/explanation/docker-backend.md)."""

    image = Unicode(DEFAULT_TAG, help="Image with python and ipykernel (python -m ipykernel_launcher). "
                                      "sandbox-kernel[:TAG] images are built from the packaged recipe when missing "
                                      "or outdated; any other image must be present (never pulled).").tag(config=True)
    network = Unicode("none", help="Docker network mode: 'none' (no network: only lo) or a network such as 'bridge' "
                                   "to opt in to a whole network; allow_hosts is the safe way to reach a few "
                                   "hosts.").tag(config=True)
    read_only = Bool(True, help="Mount the container's root filesystem read-only.").tag(config=True)
    tmp_size = ByteSize(256 * 1024**2, help="Size of the tmpfs at /tmp (mode 1777; counts toward "
                                            "memory_limit).").tag(config=True)
    workdir = Unicode("/home/sandbox/work", help="The kernel's working directory: a tmpfs volume, where uploads "
                                                 "and downloads happen.").tag(config=True)
    workdir_size = ByteSize(512 * 1024**2, help="Size limit of the working directory (counts toward memory_limit); "
                                                "0: none.").tag(config=True)
    user = Unicode("", help="Numeric uid:gid of the kernel, never 0 by default. Empty (default): 1000:1000 when "
                            "this process runs as root, else this process's own uid:gid (so it can reach the "
                            "kernel's sockets).").tag(config=True)
    cap_drop = List(Unicode(), ["ALL"], help="Linux capabilities to drop.").tag(config=True)
    no_new_privileges = Bool(True, help="Forbid gaining privileges in the container (no-new-privileges: setuid "
                                        "binaries gain nothing).").tag(config=True)
    pids_limit = Integer(256, help="Most processes and threads in the container (a fork bomb stops there); 0: none.").tag(
        config=True)
    memory_limit = ByteSize(1024**3, help="Memory of the container, e.g. '2g' (files in its tmpfs count); past it "
                                          "the kernel is killed and the cell says so. 0: none.").tag(config=True)
    swap = ByteSize(0, help="Swap the container may use beyond memory_limit; 0 (default): swap off.").tag(config=True)
    cpus = Float(1.0, help="CPUs the container may use (a rate, fractions allowed); 0: no limit.").tag(config=True)
    init = Bool(True, help="Run an init process as PID 1 (reaps orphans, forwards signals, fast stop).").tag(
        config=True)
    env_vars = HostVariables(help="Names of host environment variables to pass into the container; nothing else "
                                  "from the host environment enters it (never JupyterHub's).").tag(config=True)
    runtime = Unicode("", help="OCI runtime, e.g. 'runsc' (gVisor) if the engine has it: a second boundary (its "
                               "own kernel) for about 1.8x the sandbox's start, 1.5x the warm cell and 5-7x the file "
                               "system calls (measured). Empty: the engine's default (runc).").tag(config=True)
    mounts = List(Unicode(), help="Host paths to mount, HOST:CONTAINER[:ro|rw] each, read-only unless ':rw'; HOST "
                                  "absolute or ~/... and existing (on the engine's host), CONTAINER inside "
                                  "/home/sandbox, e.g. '~/data:/home/sandbox/data'. Anything else fails the cell "
                                  "with one message.").tag(config=True)
    history_file = Unicode(":memory:", help="Where the sandbox's IPython keeps its history (what history_request, "
                                            "console Up-arrow and %history read): ':memory:' (default) for this "
                                            "sandbox's life; a path in the workdir_volume (e.g. "
                                            "/home/sandbox/work/.history) keeps it with its files, where every later "
                                            "sandbox on that volume reads it.").tag(config=True)
    workdir_volume = Unicode("", help="A Docker volume for the working directory instead of the tmpfs: its files survive "
                                      "restarts and new kernels naming it; labelled, listed by `sandbox-kernel gc "
                                      "--dry-run`, removed only by `sandbox-kernel gc --volumes`. workdir_size "
                                      "applies where the engine has volume quota (XFS with pquota), else the cell "
                                      "says it does not. Empty: a tmpfs that goes with the sandbox.").tag(config=True)
    gpus = Unicode("", help="GPUs for the container: 'all' or a count (the engine's device requests, as docker run "
                            "--gpus; needs the NVIDIA Container Toolkit on the engine's host); empty: none.").tag(
        config=True)
    auto_build = Bool(True, help="Build a missing or outdated sandbox-kernel[:TAG] image at the first cell.").tag(config=True)
    build_base = Unicode("", help="Base image for automatic builds; empty: python:3.11-slim-bookworm or "
                                  "sandbox-kernel-base:bookworm, whichever is present, and on a rebuild the base it "
                                  "was built from.").tag(config=True)
    build_wheelhouse = Unicode("", help="Wheel directory for automatic builds, a folder per architecture inside "
                                        "(x86_64, aarch64: images follow the engine's), completed with pip when "
                                        "incomplete; empty: ~/.cache/sandbox-kernel/wheelhouse.").tag(config=True)
    packages = List(Unicode(), help="pip requirements added to the image (e.g. 'tqdm', 'scikit-learn>=1.5'): "
                                    "wheels downloaded on the host into build_wheelhouse, installed offline into "
                                    "sandbox-kernel-packages:DIGEST (recipe + base image + requirements), built at "
                                    "the first cell with its progress shown, reused while unchanged.").tag(config=True)
    dockerfile = Unicode("", help="Path of your Dockerfile, built instead of image with the legacy builder, its "
                                  "folder as the context, into sandbox-kernel-user:DIGEST; rebuilt when the context "
                                  "or build_args change. Its FROM must be present locally.").tag(config=True)
    build_args = List(Unicode(), help="NAME=value build arguments of dockerfile, repeated.").tag(config=True)
    kernel_name = Unicode("", help="Jupyter kernelspec installed in the image to run instead (e.g. 'bash' from "
                                   "bash_kernel); the wrapper reports its language, banner and completions. Empty: "
                                   "Python (ipykernel).").tag(config=True)
    pool_size = pool_size_trait()
    pool_ttl = pool_ttl_trait()
    allow_hosts = allow_hosts_trait()
    host_secrets = secrets_trait()
    pypi_index = pypi_index_trait()
    egress_network = Unicode("bridge", help="The engine network the egress proxy reaches allowed hosts through "
                                            "(with allow_hosts; the sandbox itself stays on network 'none').").tag(
        config=True)
    egress_dns = List(Unicode(), help="DNS servers (addresses) the egress proxy resolves names with; empty: the "
                                      "engine's default.").tag(config=True)
    egress_ca = Unicode("", help="A PEM file of CAs the egress proxy trusts, besides the system's, for the hosts "
                                 "of host_secrets.").tag(config=True)
    egress_image = Unicode(EGRESS_IMAGE, help="Image of the egress proxy (mitmproxy), built offline from the "
                                              "packaged recipe when missing, like the sandbox image.").tag(config=True)
    transport = Unicode("auto", help="How the host reaches the sandbox's kernel: 'ipc' (ZMQ sockets in a host "
                                     "directory mounted into the container: only for an engine on this machine "
                                     "that shares its filesystem), 'api' (the kernel's channels carried by the "
                                     "engine's attach stream: any engine, e.g. Docker Desktop, Colima, Podman, "
                                     "DOCKER_HOST=tcp:// or ssh://), or 'auto': ipc where it is known to work, "
                                     "else api.").tag(config=True)

    @validate("transport")
    def _check_transport(self, proposal: dict) -> str:
        if proposal["value"] not in ("auto", "ipc", "api"):
            raise TraitError(f"transport must be 'auto', 'ipc' or 'api', not {proposal['value']!r}")
        return proposal["value"]

    @validate("packages", "build_args")
    def _check_environment(self, proposal: dict) -> list[str]:
        return check_option(proposal["trait"].name, proposal["value"])

    @validate("user")
    def _check_user(self, proposal: dict) -> str:
        if proposal["value"] and not re.fullmatch(r"\d+(:\d+)?", proposal["value"]):
            raise TraitError(f"user must be a numeric uid or uid:gid, not {proposal['value']!r}")
        return proposal["value"]

    @validate("workdir_volume")
    def _check_workdir_volume(self, proposal: dict) -> str:
        if proposal["value"] and not VOLUME_NAME.fullmatch(proposal["value"]):
            raise TraitError(f"workdir_volume must be a volume name ([A-Za-z0-9][A-Za-z0-9_.-]+), "
                             f"not {proposal['value']!r}")
        return proposal["value"]

    @validate("gpus")
    def _check_gpus(self, proposal: dict) -> str:
        parse_gpus(proposal["value"])  # ValueError: a bad option value
        return proposal["value"]
