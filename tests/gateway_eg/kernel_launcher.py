"""The kernel container's command: start ipykernel and tell Enterprise Gateway how to reach it.

Written for these tests from Enterprise Gateway's remote-kernel contract (protocol version 1),
not taken from its launchers:

1. The kernel listens on free TCP ports of every interface (EG dials the container's address
   on its network); the launcher listens on one more, the communication port.
2. The connection info (ports, key, transport, signature scheme) plus ``kernel_id``, ``pid``,
   ``pgid`` and ``comm_port`` goes to ``RESPONSE_ADDRESS`` (``host:port``) as one base64 text:
   a JSON object ``{"version": 1, "key": K, "conn_info": C}``, where C is the info as JSON,
   PKCS#7-padded and encrypted with a fresh 16-byte AES key (ECB), and K is that key encrypted
   with ``PUBLIC_KEY`` (RSA, PKCS#1 v1.5; the key is base64 DER), both base64. The launcher
   then closes the connection: EG reads until it is closed.
3. On the communication port EG sends one JSON object per connection: ``{"signum": N}`` (0:
   are you there; 2: interrupt, ...), passed on to the kernel, or ``{"shutdown": 1}``.
The container lives as long as the kernel: the launcher exits with the kernel's status.
"""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid

from Cryptodome.Cipher import AES, PKCS1_v1_5
from Cryptodome.PublicKey import RSA
from Cryptodome.Random import get_random_bytes
from Cryptodome.Util.Padding import pad
from jupyter_client.connect import write_connection_file


def sealed(info: dict, public_key: str) -> bytes:
    """The payload of step 2 for ``info``."""
    aes_key = get_random_bytes(16)
    body = AES.new(aes_key, AES.MODE_ECB).encrypt(pad(json.dumps(info).encode(), 16))
    wrapped = PKCS1_v1_5.new(RSA.import_key(base64.b64decode(public_key))).encrypt(aes_key)
    envelope = {"version": 1, "key": base64.b64encode(wrapped).decode(), "conn_info": base64.b64encode(body).decode()}
    return base64.b64encode(json.dumps(envelope).encode())


def listen(server: socket.socket, kernel: subprocess.Popen) -> None:
    """Step 3: pass EG's signals on to the kernel until it asks the listener to stop."""
    while True:
        conn, _ = server.accept()
        with conn:
            data = b""
            while chunk := conn.recv(4096):
                data += chunk
                try:
                    request = json.loads(data)
                    break
                except ValueError:
                    continue
            else:
                continue
        if request.get("shutdown"):
            return
        if request.get("signum") and kernel.poll() is None:
            os.kill(kernel.pid, int(request["signum"]))


def main() -> int:
    connection_file = os.path.join(tempfile.mkdtemp(), f"kernel-{uuid.uuid4()}.json")
    _, info = write_connection_file(connection_file, ip="0.0.0.0", key=uuid.uuid4().hex.encode())
    comm = socket.create_server(("0.0.0.0", 0))
    # JPY_PARENT_PID came with EG's environment (a host pid): ipykernel would exit at once, its
    # "parent" missing here. This launcher is the kernel's parent.
    kernel = subprocess.Popen([sys.executable, "-m", "ipykernel_launcher", "-f", connection_file],
                              env={**os.environ, "JPY_PARENT_PID": str(os.getpid())})
    signal.signal(signal.SIGTERM, lambda signum, frame: kernel.send_signal(signum))
    info = {**{k: v.decode() if isinstance(v, bytes) else v for k, v in info.items()},
            "kernel_id": os.environ["KERNEL_ID"], "pid": os.getpid(), "pgid": os.getpgid(0),
            "comm_port": comm.getsockname()[1]}
    host, port = os.environ["RESPONSE_ADDRESS"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as response:
        response.sendall(sealed(info, os.environ["PUBLIC_KEY"]))
    threading.Thread(target=listen, args=(comm, kernel), daemon=True).start()
    return kernel.wait()


if __name__ == "__main__":
    sys.exit(main())
