"""What runs in the sandbox to unpack a workspace copy (sent as code: the sandbox needs nothing of
this project). The archive is the host's own (:func:`.archive.write_tar`); the sandbox unpacking it
into itself needs no protection from it, so this only puts the files in place.

It is run silently (no output, no count): a failure is the reply's error.
"""

from __future__ import annotations

_CODE = r'''
def _sandbox_workspace(archive, fresh):
    import atexit, functools, os, shutil, tarfile, tempfile
    if fresh:  # a folder of its own, removed when the kernel ends (a gateway's cwd may be shared)
        target = tempfile.mkdtemp(prefix="sandbox-workspace-")
        atexit.register(functools.partial(shutil.rmtree, target, True))
    else:
        target = os.getcwd()
    try:
        with tarfile.open(archive) as tar:
            options = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
            tar.extractall(target, **options)
    finally:
        os.remove(archive)
    os.chdir(target)
'''


def unpack(archive: str, fresh: bool) -> str:
    """The code that unpacks ``archive`` (an absolute path in the sandbox, removed afterwards) into
    the kernel's working directory, or into a new folder that becomes it (``fresh``)."""
    args = ", ".join(repr(a) for a in (archive, fresh))
    return f"{_CODE}\ntry:\n    _sandbox_workspace({args})\nfinally:\n    del _sandbox_workspace\n"
