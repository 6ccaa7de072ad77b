"""The ``%%sandbox`` IPython extension: ``%load_ext magics``.

Placeholder until the magic lands: loading it says so instead of failing obscurely.
"""


def load_ipython_extension(ipython):
    raise ImportError("The %%sandbox magic is not available in this version of sandbox-kernel yet.")
