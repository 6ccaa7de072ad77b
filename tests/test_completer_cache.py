"""The local sandboxes' published jedi cache (sandbox_kernel.backends.local.pooled): what is
published is whole, a sandbox gets a copy of it, and nothing a sandbox writes reaches it.
End to end, through real kernels: tests/test_kernel.py."""

from __future__ import annotations

import os
import pickle
import time

import pytest

from sandbox_kernel.backends.local import pooled

pytestmark = pytest.mark.unit

PYTHON = "/usr/bin/python3-under-test"


@pytest.fixture
def caches(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path


def warmed_home(root, name: str, files: dict[str, bytes]):
    """A sandbox's HOME whose jedi cache holds ``files`` (name -> bytes) in jedi's layout."""
    home = pooled.make_home(root / name)
    folder = home / ".cache" / "jedi" / "CPython-311-33"
    folder.mkdir(parents=True)
    for file, data in files.items():
        (folder / file).write_bytes(data)
    return home


WHOLE = pickle.dumps({"module": list(range(1000))}, pickle.HIGHEST_PROTOCOL)


def test_a_warm_up_s_cache_is_published_and_the_next_sandbox_gets_a_copy(caches):
    home = warmed_home(caches, "first", {"a.pkl": WHOLE, "b.pkl": WHOLE})
    assert not pooled.completer_cache(PYTHON).is_dir()
    assert pooled.publish_completer(home, PYTHON)
    assert pooled.completer_cache(PYTHON).is_dir()
    assert not pooled.publish_completer(home, PYTHON)  # published once
    published = pooled.completer_cache(PYTHON)
    assert sorted(p.name for p in published.rglob("*.pkl")) == ["a.pkl", "b.pkl"]
    assert [p.name for p in published.parent.iterdir()] == [published.name]  # no copy left beside it

    second = pooled.make_home(caches / "second")
    assert not pooled.completer_seeded(second)
    pooled.seed_completer(second, PYTHON)
    assert pooled.completer_seeded(second)
    copy = second / ".cache" / "jedi" / "CPython-311-33" / "a.pkl"
    assert copy.read_bytes() == WHOLE
    copy.write_bytes(b"")  # what the sandbox writes stays in its copy
    assert (published / "CPython-311-33" / "a.pkl").read_bytes() == WHOLE


@pytest.mark.parametrize("damaged", [WHOLE[:-1], WHOLE[: len(WHOLE) // 2], b"", WHOLE + b"trailing"])
def test_a_cache_with_a_damaged_file_is_not_published(caches, damaged):
    home = warmed_home(caches, "first", {"a.pkl": WHOLE, "b.pkl": damaged})
    assert not pooled.publish_completer(home, PYTHON)
    assert not pooled.completer_cache(PYTHON).is_dir()
    assert not any(pooled.completer_cache(PYTHON).parent.iterdir())  # its copy removed


def test_a_sandbox_whose_jedi_made_its_folder_first_keeps_it(caches):
    assert pooled.publish_completer(warmed_home(caches, "first", {"a.pkl": WHOLE}), PYTHON)
    home = pooled.make_home(caches / "second")
    (home / ".cache" / "jedi").mkdir()
    (home / ".cache" / "jedi" / "own.pkl").write_bytes(b"x")
    pooled.seed_completer(home, PYTHON)
    assert [p.name for p in (home / ".cache").iterdir()] == ["jedi"]  # no copy left beside it
    assert [p.name for p in (home / ".cache" / "jedi").iterdir()] == ["own.pkl"]


def test_an_empty_cache_is_not_published(caches):
    home = pooled.make_home(caches / "first")
    (home / ".cache" / "jedi" / "CPython-311-33").mkdir(parents=True)
    assert not pooled.publish_completer(home, PYTHON)
    assert not pooled.completer_cache(PYTHON).is_dir()


def test_no_published_cache_leaves_the_sandbox_s_cache_empty(caches):
    home = pooled.make_home(caches / "first")
    pooled.seed_completer(home, PYTHON)
    assert list((home / ".cache").iterdir()) == [] and not pooled.completer_seeded(home)


def test_a_copy_left_by_a_killed_publisher_is_removed_by_the_next(caches):
    root = pooled.completer_cache(PYTHON).parent
    stale, fresh = root / ".left-by-a-killed-one", root / ".another-publishing-now"
    for folder in (stale, fresh):
        (folder / "CPython-311-33").mkdir(parents=True)
    old = time.time() - pooled.STALE_COPY_S - 60
    os.utime(stale, (old, old))
    assert pooled.publish_completer(warmed_home(caches, "first", {"a.pkl": WHOLE}), PYTHON)
    assert sorted(p.name for p in root.iterdir()) == sorted([fresh.name, pooled.completer_cache(PYTHON).name])
