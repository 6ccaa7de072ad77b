"""What a docker sandbox's egress proxy container is made of: the session's settings from the
backend's options and the container's specification; the program it runs is egress's
(:mod:`sandbox_kernel.backends.egress.bootstrap`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import EgressError
from ..egress import egress_settings
from ..egress import options as egress_options
from ..egress.bootstrap import BOOTSTRAP
from .boundary import load_docker
from .images.build import EGRESS_TAG

IMAGE = EGRESS_TAG
PROXY_DIR = "/run/egress"
"""Where the proxy mounts the volume (read-write): it creates ``proxy.sock`` and ``ca-bundle.pem``."""
PROXY_UID = 1000
VOLUME_BYTES = 1024**2
READY_TIMEOUT = 30.0
ALLOW_TIMEOUT = 1.0
"""Seconds an allowlist change may take to be in force (the issue's bound: "within a second")."""
@dataclass
class EgressSettings:
    """What the backend's options say about egress (see ``DockerBackend``'s traits)."""

    allow: list[str]
    secrets: list[egress_options.Secret]
    index: str
    network: str = "bridge"
    dns: list[str] = field(default_factory=list)
    upstream_ca: str = ""
    """PEM text of CAs the proxy trusts besides the system's, for hosts it terminates TLS for."""
    image: str = IMAGE

    @property
    def entries(self) -> list[str]:
        """The allowlist the proxy enforces (presets expanded, secret hosts added)."""
        return egress_options.expand(self.allow, self.secrets, self.index)


def proxy_spec(settings: EgressSettings, name: str, volume: str, labels: dict[str, str]) -> dict[str, Any]:
    """Keyword arguments of ``client.containers.create`` for the proxy: hardened like a sandbox
    (read-only root, no capabilities, no new privileges, a non-root uid, limits), on
    ``settings.network``, its resolvers ``settings.dns`` when given, the volume at :data:`PROXY_DIR`."""
    docker = load_docker()
    spec: dict[str, Any] = dict(
        image=settings.image, name=name, labels=labels, entrypoint=["python", "-c", BOOTSTRAP], command=[],
        stdin_open=True, detach=False,  # StdinOnce: the engine closes stdin when this process's attach ends
        network=settings.network or "bridge", read_only=True, init=True, user=f"{PROXY_UID}:{PROXY_UID}",
        tmpfs={"/tmp": "mode=1777,size=67108864"}, cap_drop=["ALL"], security_opt=["no-new-privileges"],
        mem_limit=256 * 1024**2, memswap_limit=256 * 1024**2, pids_limit=64, nano_cpus=int(1e9),
        environment={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"},
        mounts=[docker.types.Mount(PROXY_DIR, volume, type="volume", no_copy=True)],
        log_config=docker.types.LogConfig(type="json-file", config={"max-size": "1m", "max-file": "2"}),
    )
    if settings.dns:
        spec["dns"] = list(settings.dns)
    return spec


def settings_of(backend: Any) -> EgressSettings | None:
    """The session's egress settings from a ``DockerBackend``'s options; None without
    ``allow_hosts`` and ``host_secrets`` (the sandbox then has no network at all).

    Raises:
        EgressError: options that cannot work together, or an ``egress_ca`` file that cannot be read.
    """
    allow, secrets = egress_settings(backend)
    if not allow and not secrets:
        return None
    if backend.network != "none":
        raise EgressError(f"allow_hosts needs network='none' (the default), not {backend.network!r}: the "
                          "sandbox's only way out is then the egress proxy")
    if backend.kernel_name:
        raise EgressError("allow_hosts needs the sandbox's Python kernel (kernel_name empty): the forwarder to "
                          "the egress proxy runs in it")
    if clash := sorted({name for s in secrets for name in s.variables} & set(backend.env_vars)):
        raise EgressError(f"{', '.join(clash)} feeds host_secrets, so it stays out of the sandbox: remove it "
                          "from env_vars")
    upstream = ""
    if backend.egress_ca:
        try:
            upstream = Path(backend.egress_ca).expanduser().read_text()
        except OSError as exc:
            raise EgressError(f"egress_ca: cannot read {backend.egress_ca}: {exc.strerror}") from None
    return EgressSettings(allow, secrets, backend.pypi_index, backend.egress_network, list(backend.egress_dns),
                          upstream, backend.egress_image)
