"""The egress options as the backends read them: allowlist entries with presets, secrets bound to
hosts, and what the sandbox's environment needs to use the proxy.

``allow_hosts`` entries are those of :mod:`.rules`, or a preset: ``pypi`` is the Python package
index (``pypi_index``'s host, and for the default index its file host too), so that ``%pip install``
works. ``secrets`` entries bind one request header to a host::

    api.example.com Authorization: Bearer {env:API_TOKEN}
    api.example.com:8443 X-Api-Key: {file:~/.config/example/key}

``{env:NAME}`` is read from the host's environment, ``{file:PATH}`` from a host file (its text,
stripped), when the sandbox starts; the proxy sets the header on every request to that host it
terminated TLS for. The sandbox holds only a placeholder: ``NAME`` in its environment is
``sandbox-kernel-secret:NAME`` (for code that checks a key is set), never the value.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ...core.errors import EgressError
from .rules import parse_entry

PYPI_INDEX = "https://pypi.org/simple"
PYPI_FILES = "files.pythonhosted.org"
PRESETS = ("pypi",)
PLACEHOLDER = "sandbox-kernel-secret:{}"
PROXY_PORT = 3128
"""The sandbox's proxy address is ``http://127.0.0.1:3128``: the forwarder in its launcher."""
SANDBOX_DIR = "/run/sandbox-kernel-egress"
"""Where the sandbox mounts the proxy's volume (read-only): ``proxy.sock``, ``ca-bundle.pem``."""
PACKAGES = "/tmp/sandbox-packages"
"""``pip install``'s prefix in the sandbox (``PIP_PREFIX``): on the tmpfs ``/tmp``, so packages
count toward ``tmp_size`` and the memory limit; the launcher puts its site-packages on ``sys.path``."""
_SOURCE = re.compile(r"\{(env|file):([^}]+)\}")
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True)
class Secret:
    """A header bound to a host: ``name: template``, the template's sources read at start."""

    host: str
    header: str
    template: str

    @property
    def variables(self) -> list[str]:
        """The host environment variables the template reads (each a placeholder in the sandbox)."""
        return [name for kind, name in _SOURCE.findall(self.template) if kind == "env"]

    def value(self) -> str:
        """The header's value with its sources read (never logged, never sent to the sandbox).

        Raises:
            EgressError: a variable is not set, or a file cannot be read.
        """
        def read(match: re.Match[str]) -> str:
            kind, name = match.groups()
            if kind == "env":
                if name not in os.environ:
                    raise EgressError(f"secrets: the environment variable {name} (for {self.host}) is not set")
                return os.environ[name]
            try:
                return Path(name).expanduser().read_text().strip()
            except OSError as exc:
                raise EgressError(f"secrets: cannot read {name} (for {self.host}): {exc.strerror}") from None

        value = _SOURCE.sub(read, self.template)
        if "\n" in value or "\r" in value:
            raise EgressError(f"secrets: the value for {self.host} holds a line break")
        return value


def parse_secret(text: str) -> Secret:
    """``HOST[:PORT] Header-Name: template`` (see the module docstring).

    Raises:
        EgressError: not of that form, or the template reads no source.
    """
    host, _, rest = text.strip().partition(" ")
    header, sep, template = rest.partition(":")
    header, template = header.strip(), template.strip()
    if not sep or not _HEADER.fullmatch(header) or not template:
        raise EgressError(f"secrets: {text!r} is not 'HOST Header-Name: value with {{env:NAME}} or {{file:PATH}}'")
    if not _SOURCE.search(template):
        raise EgressError(f"secrets: {text!r} names no {{env:NAME}} or {{file:PATH}}; a secret written in the "
                          "option itself would be saved with it")
    try:
        entry = parse_entry(host)
    except ValueError as exc:
        raise EgressError(f"secrets: {exc}") from None
    if entry.name is None or entry.name.startswith("*."):
        raise EgressError(f"secrets: {host!r} must be one host name (no address or wildcard)")
    return Secret(host, header, template)


def index_hosts(index: str) -> list[str]:
    """The allowlist entries of the ``pypi`` preset for the index URL ``index``.

    Raises:
        EgressError: ``index`` is not an http(s) URL.
    """
    url = urlsplit(index)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise EgressError(f"pypi_index must be an http(s) URL of a package index, not {index!r}")
    host = url.hostname + (f":{url.port}" if url.port else "")
    return [host, PYPI_FILES] if index.rstrip("/") == PYPI_INDEX else [host]


def expand(entries: list[str], secrets: list[Secret], index: str) -> list[str]:
    """The allowlist the proxy enforces: presets expanded, each secret's host added.

    Raises:
        EgressError: an entry that is neither a preset nor a valid entry (:mod:`.rules`).
    """
    expanded: list[str] = []
    for entry in entries:
        if entry.strip().lower() in PRESETS:
            expanded += index_hosts(index)
            continue
        try:
            parse_entry(entry)
        except ValueError as exc:
            raise EgressError(f"allow_hosts: {exc}, or a preset ({', '.join(PRESETS)})") from None
        expanded.append(entry.strip())
    expanded += [s.host for s in secrets]
    return list(dict.fromkeys(expanded))


def pip_environment(entries: list[str], index: str) -> dict[str, str]:
    """pip's index in the sandbox when the ``pypi`` preset names another than PyPI (an
    ``http://`` one is also a trusted host: pip refuses plain HTTP otherwise)."""
    if not any(e.strip().lower() == "pypi" for e in entries) or index.rstrip("/") == PYPI_INDEX:
        return {}
    env = {"PIP_INDEX_URL": index}
    if urlsplit(index).scheme == "http":
        env["PIP_TRUSTED_HOST"] = urlsplit(index).hostname or ""
    return env


def placeholders(secrets: list[Secret]) -> dict[str, str]:
    """A placeholder in the sandbox for each host variable a secret reads (never its value)."""
    return {name: PLACEHOLDER.format(name) for secret in secrets for name in secret.variables}


def sandbox_environment(entries: list[str], secrets: list[Secret], index: str) -> dict[str, str]:
    """The docker sandbox's variables: its proxy (the launcher's forwarder, ``SANDBOX_KERNEL_EGRESS``),
    pip's index, the CA bundle when a secret needs the proxy to terminate TLS, the placeholders."""
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    env = {name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    env |= {"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
            "SANDBOX_KERNEL_EGRESS": f"{PROXY_PORT} {SANDBOX_DIR}/proxy.sock"}
    if secrets:
        bundle = f"{SANDBOX_DIR}/ca-bundle.pem"
        env |= {name: bundle for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT")}
    return env | pip_environment(entries, index) | placeholders(secrets)


def packages_environment() -> dict[str, str]:
    """pip in the sandbox installs into :data:`PACKAGES` (the root filesystem is read-only), and
    does not look for a newer pip (a request the allowlist would refuse and report)."""
    return {"PIP_PREFIX": PACKAGES, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
