"""The wrapper kernel (:class:`~.kernel.SandboxKernel`), its application and its kernelspecs."""
