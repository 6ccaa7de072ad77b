"""Egress by name: the options that say which hosts a sandbox may reach, shared by the backends.

``allow_hosts`` (entries of :mod:`.rules`, or the preset ``pypi``), ``secrets`` (headers bound to
hosts, :mod:`.options`) and ``pypi_index`` are one meaning each, defined here once as trait types
and used by every backend that has them:

- docker enforces them with a proxy per session: its engine runs this package's proxy
  (:mod:`.proxy`, sent as :mod:`.bootstrap` says) in a container of its own
  (:mod:`..docker.proxy`), the sandbox reaches it through :mod:`.forwarder`, and the cell shows
  each refusal (:mod:`.notes`);
- e2b maps them to E2B's ``network`` settings (``allow_out``, ``deny_out``, ``rules``);
- local cannot enforce them (the code runs as you, with your network): the option is refused
  there in one message (:func:`refused_allow_hosts`);
- gateway cannot either: it is refused at start unless the gateway's own network policy is
  named (``GatewayBackend.network_policy``), which then decides.

With no entry a docker sandbox has no network at all (``network=none``, the default); an e2b one
has E2B's default (the internet) and a gateway's kernel what its gateway gives it.

This package is everything egress means and decides: the options (here, :mod:`.options`), the
allowlist (:mod:`.rules`, which the proxy runs too), the proxy's program, the sandbox's forwarder
and the notes of refusals. It imports no backend; each backend maps it to its engine or service:
docker runs the proxy (:mod:`..docker.proxy`), e2b sets E2B's network (:mod:`..e2b.network`).
"""

from __future__ import annotations

from typing import Any

from traitlets import List, TraitError, Unicode

from ...core.errors import EgressError
from . import options
from .options import PYPI_INDEX, parse_secret

ALLOW_HOSTS_HELP = ("Hosts the sandbox may reach, the safe way to opt in: each NAME[:PORT] (ports 80 and 443 "
                    "unless given), *.DOMAIN, an address or a CIDR network, or 'pypi' (the package index, so "
                    "%pip install then import works); repeated. The sandbox keeps network 'none' and reaches only "
                    "a per-session egress proxy, which resolves names itself, checks TLS server names and Host "
                    "headers, and refuses the rest at once, one line per refused host in the cell naming the entry "
                    "that would allow it. Sandbox.allow(HOST), %sandbox allow HOST in a sandbox kernel's cell "
                    "(asking you first: SandboxKernel.egress_commands) or the magic's %sandbox allow HOST --name "
                    "SESSION adds one to a running sandbox, its state kept. Empty: no network.")
SECRETS_HELP = ("Headers the egress proxy adds to HTTPS requests for a host, 'HOST Header: value {env:NAME}' or "
                "'... {file:PATH}' (read on the host at start); the host is allowed too. For that host only, the "
                "proxy terminates TLS with a per-session CA only the sandbox trusts and verifies the real host "
                "itself; the sandbox sees NAME as a placeholder, never the value.")
PYPI_INDEX_HELP = ("The package index of the 'pypi' preset (pip's PIP_INDEX_URL in the sandbox when it is "
                   "another).")


class Entries(List):
    """A list of strings each checked by :meth:`check` (a bad one is a TraitError: one line)."""

    help_text = ""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help", self.help_text)
        super().__init__(Unicode(), **kwargs)

    def check(self, entries: list[str]) -> None:
        """Raise EgressError for a bad entry."""

    def validate(self, obj: Any, value: Any) -> Any:
        value = super().validate(obj, value)
        try:
            self.check(list(value))
        except EgressError as exc:
            raise TraitError(str(exc)) from None
        return value


class AllowHosts(Entries):
    """``allow_hosts``: each an entry of :mod:`.rules` or a preset."""

    help_text = ALLOW_HOSTS_HELP

    def check(self, entries: list[str]) -> None:
        options.expand(entries, [], PYPI_INDEX)


class Secrets(Entries):
    """``host_secrets``: each ``HOST Header: template`` (:func:`.options.parse_secret`)."""

    help_text = SECRETS_HELP

    def check(self, entries: list[str]) -> None:
        for entry in entries:
            parse_secret(entry)


def allow_hosts_trait(help: str = ALLOW_HOSTS_HELP) -> AllowHosts:
    """The ``allow_hosts`` option; ``help`` says what the backend does with it (default: docker's proxy)."""
    return AllowHosts(help=help).tag(config=True)


def secrets_trait(help: str = SECRETS_HELP) -> Secrets:
    """The ``host_secrets`` option; ``help`` says who adds the headers (default: docker's proxy)."""
    return Secrets(help=help).tag(config=True)


def pypi_index_trait() -> Unicode:
    return Unicode(PYPI_INDEX, help=PYPI_INDEX_HELP).tag(config=True)


class Unenforced(AllowHosts):
    """``allow_hosts`` of a backend that cannot enforce it: any entry is refused with ``reason``."""

    def __init__(self, reason: str, **kwargs: Any) -> None:
        self.reason = reason
        kwargs.setdefault("help", f"Refused on this backend: {reason}")
        super().__init__(**kwargs)

    def validate(self, obj: Any, value: Any) -> Any:
        value = super().validate(obj, value)
        if value:
            raise TraitError(self.reason)
        return value


def refused_allow_hosts(reason: str) -> Unenforced:
    """The ``allow_hosts`` option of a backend that cannot enforce it (local): any entry fails
    with ``reason``, one message saying what to use instead."""
    return Unenforced(reason).tag(config=True)


def egress_settings(backend: Any) -> tuple[list[str], list[options.Secret]]:
    """``(allow_hosts, host_secrets)`` of ``backend`` parsed; secrets are not read yet.

    Raises:
        EgressError: a bad entry."""
    return list(backend.allow_hosts), [parse_secret(s) for s in backend.host_secrets]
