"""The private upstream names the project uses (sandbox_kernel/runtime/compat.py) still exist."""

from __future__ import annotations

import importlib

import pytest

from sandbox_kernel.runtime import compat

pytestmark = pytest.mark.unit


def test_every_private_upstream_name_still_exists():
    gone = compat.missing()
    assert not gone, ("an upstream upgrade removed private names sandbox-kernel uses; adapt the code that uses "
                      "each, then sandbox_kernel/runtime/compat.py:\n  " + "\n  ".join(gone))


def test_a_removed_name_is_reported_with_where_it_is_used(monkeypatch):
    entry = compat.Private("json", "", "_no_such_thing", "CPython 3.11", "nowhere: a test entry")
    monkeypatch.setattr(compat, "PRIVATE", (entry,))
    assert compat.missing() == ["json._no_such_thing (checked: CPython 3.11; used in nowhere: a test entry)"]


def test_an_instance_attribute_a_class_only_declares_counts():
    kernelbase = importlib.import_module("ipykernel.kernelbase")
    assert not hasattr(kernelbase.Kernel, "_parent_ident") and compat._has(kernelbase.Kernel, "_parent_ident")
