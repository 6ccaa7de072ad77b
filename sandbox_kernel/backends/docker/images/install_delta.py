"""Run by packages.Dockerfile's builder stage as ``python install_delta.py BUILD DEST``: install
BUILD/requirements.txt from the wheels in BUILD/wheels with pip (no index), then copy every file
the install added or changed under ``sys.prefix`` to DEST/files (same paths, same modes) and
write DEST/remove.py, which deletes the paths the install removed (an upgraded package's old
files). Standard library only: it runs with the image's Python.
"""

import os
import shutil
import subprocess
import sys


def snapshot(root):
    """{path: (inode, size, mtime_ns, mode)} of everything under ``root``, symlinks not followed."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            found[path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
    return found


def copy_into(path, dest):
    """Copy ``path`` (file, symlink or empty directory) to ``dest + path``, parents with their modes."""
    target = dest + path
    parent = os.path.dirname(path)
    missing = []
    while not os.path.isdir(dest + parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for folder in reversed(missing):
        os.mkdir(dest + folder)
        shutil.copystat(folder, dest + folder)
    if os.path.islink(path):
        os.symlink(os.readlink(path), target)
    elif os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
        shutil.copystat(path, target)
    else:
        shutil.copy2(path, target)


def main(build, dest):
    root = sys.prefix
    before = snapshot(root)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir", "--no-index",
                    "--disable-pip-version-check", "--find-links", os.path.join(build, "wheels"),
                    "-r", os.path.join(build, "requirements.txt")], check=True)
    after = snapshot(root)
    os.makedirs(dest + "/files")
    changed = sorted(path for path, stat in after.items() if before.get(path) != stat)
    for path in changed:
        if not os.path.isdir(path) or os.path.islink(path) or path not in before:
            copy_into(path, dest + "/files")
    removed = sorted(path for path in before if path not in after)
    with open(dest + "/remove.py", "w") as out:
        out.write("import os, shutil\nfor path in %r:\n" % (removed,))
        out.write("    if os.path.isdir(path) and not os.path.islink(path):\n        shutil.rmtree(path, True)\n"
                  "    elif os.path.lexists(path):\n        os.remove(path)\n")
    print("sandbox-kernel: %d paths added or changed, %d removed under %s" % (len(changed), len(removed), root))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
