"""Process plumbing under every layer: the background loop thread, SIGINT, process owners,
sandbox paths, byte-size traits, config checks, and the private upstream names we rely on
(:mod:`.compat`). Imports only :mod:`sandbox_kernel.core`."""
