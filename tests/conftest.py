"""The suite's fixtures and hooks are the test plugin's (tests/plugin/): the backends' targets and
rigs, the tiers and xdist groups, what keeps a run's machine state its own."""

pytest_plugins = ["tests.plugin"]
