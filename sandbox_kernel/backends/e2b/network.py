"""``allow_hosts`` and ``host_secrets`` as E2B's network settings (the SDK's ``SandboxNetworkOpts``,
sent as ``network`` of ``POST /v2/sandboxes``; ``PUT /sandboxes/{id}/network`` for a running one).

- the entries go to ``allow_out`` (names, ``*.`` wildcards, addresses, CIDRs), and ``deny_out`` is
  ``["0.0.0.0/0"]``: everything else is refused;
- each secret becomes a rule of its host, ``{"transform": {"headers": {name: value}}}``: E2B's egress
  proxy sets the header outside the sandbox, so the value reaches E2B's API, never the sandbox.

What E2B's settings cannot say is refused or said (docs/explanation/security.md, "E2B"): E2B matches names
on ports 80 (HTTP, by Host) and 443 (TLS, by SNI) only, so a name with another port is refused;
an address or network entry is matched by E2B on every port (E2B filters addresses by CIDR
only); E2B lets the sandbox reach its DNS server (8.8.8.8) when a name is allowed.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import EgressError
from ..egress import egress_settings
from ..egress.options import Secret, expand, pip_environment, placeholders
from ..egress.rules import DEFAULT_PORTS, parse_entry

ALL_TRAFFIC = "0.0.0.0/0"


def _allow_out(entries: list[str]) -> list[str]:
    """E2B's ``allow_out`` for the expanded entries.

    Raises:
        EgressError: a name with a port E2B cannot filter names on."""
    out = []
    for text in entries:
        entry = parse_entry(text)
        if entry.network is not None:
            out.append(str(entry.network.network_address) if entry.network.num_addresses == 1 else str(entry.network))
        elif set(entry.ports) <= set(DEFAULT_PORTS):
            out.append(entry.name)
        else:
            raise EgressError(f"allow_hosts: {text!r} cannot be said to E2B, which filters host names on ports 80 and "
                              "443 only: leave the port out, or use the docker backend")
    return list(dict.fromkeys(out))


def network_options(allow: list[str], secrets: list[Secret], index: str) -> dict[str, Any] | None:
    """The SDK's ``network`` argument for these options; None when neither is set (E2B's default:
    the internet).

    Raises:
        EgressError: an entry E2B cannot enforce, or a secret that cannot be read."""
    if not allow and not secrets:
        return None
    network: dict[str, Any] = {"allow_out": _allow_out(expand(allow, secrets, index)), "deny_out": [ALL_TRAFFIC]}
    rules: dict[str, list[dict[str, Any]]] = {}
    for secret in secrets:
        host = parse_entry(secret.host).name
        rules.setdefault(host, []).append({"transform": {"headers": {secret.header: secret.value()}}})
    if rules:
        network["rules"] = rules
    return network


def network_of(backend: Any) -> dict[str, Any] | None:
    """:func:`network_options` of an ``E2BBackend``'s options.

    Raises:
        EgressError: an entry E2B cannot enforce, a secret's variable also in ``env_vars``, or a
            secret that cannot be read."""
    allow, secrets = egress_settings(backend)
    if clash := sorted({name for s in secrets for name in s.variables} & set(backend.env_vars)):
        raise EgressError(f"{', '.join(clash)} feeds host_secrets, so it stays out of the sandbox: remove it "
                          "from env_vars")
    return network_options(allow, secrets, backend.pypi_index)


def egress_environment(backend: Any) -> dict[str, str]:
    """The sandbox's variables for these options: pip's index (the ``pypi`` preset pointed
    elsewhere) and the secrets' placeholders."""
    allow, secrets = egress_settings(backend)
    return pip_environment(allow, backend.pypi_index) | placeholders(secrets)
