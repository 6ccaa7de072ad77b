"""The test suite's pytest plugin (``pytest_plugins = ["tests.plugin"]`` in tests/conftest.py and
notebooks/conftest.py): what a test session sets up once and gives to tests as fixtures, and what
makes a run safe beside other runs.

- :mod:`.isolation`: the worker's own warm-pool registry, Jupyter and IPython folders, and run id;
- :mod:`.locks`: the machine locks of the few resources every run shares;
- :mod:`.targets`: the backends' test targets and their rigs (E2B server, Kernel Gateway, Podman
  service, remote engine) as session-scoped fixtures, ``backend_name`` and ``make_backend``;
- :mod:`.magic`: the ``%%sandbox`` notebook scenario's ``cells`` and ``replies``;
- :mod:`.tiers`: every test's tier marker, the xdist groups (``--dist loadgroup``), the order of
  the work, the nbval notebooks' kernels.
"""

pytest_plugins = ["tests.plugin.isolation", "tests.plugin.locks", "tests.plugin.targets", "tests.plugin.magic", "tests.plugin.tiers"]
