"""The package's version, in a module of its own so that any layer may read it without importing
the package's top (:mod:`sandbox_kernel`, which sits above every layer)."""

__version__ = "0.1.0"
