"""The ways in: the Jupyter kernel (:mod:`.kernel`), the ``%%sandbox`` magic (:mod:`.magics`),
the Python API (:mod:`.api`) and the MCP server (:mod:`.mcp`). Each owns a session and differs
from the others only in its wire code and its sink."""
