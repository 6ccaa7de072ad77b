# Options of the sandbox-docker kernel that runs notebooks/docker.ipynb under `make test`
# (notebooks/conftest.py points JUPYTER_CONFIG_PATH here for that notebook). The same lines in
# your own Jupyter config directory (`jupyter --paths`), or the same options on a kernelspec's
# argv (`sandbox-kernel install --backend docker -- --DockerBackend.mounts=...`), give your
# sandbox kernels these options.
from pathlib import Path

# notebooks/data, read-only (no ':rw'), at /home/sandbox/data in the sandbox
c.DockerBackend.mounts = [f"{Path(__file__).resolve().parents[2] / 'data'}:/home/sandbox/data"]
# the working directory is this volume: its files outlive the sandbox (`sandbox-kernel gc --volumes` removes it)
c.DockerBackend.workdir_volume = "sandbox-kernel-notebook-docker"
# no size limit: most engines cannot limit a volume's size (docs/explanation/docker-backend.md), and the cell would say so
c.DockerBackend.workdir_size = 0
