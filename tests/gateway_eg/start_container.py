"""Start one kernel container for Enterprise Gateway's ``DockerProcessProxy`` (the kernelspec's argv).

Written for these tests from Enterprise Gateway's remote-kernel contract (protocol version 1),
not taken from its launchers. EG runs this on the host with the kernel's environment (the
kernelspec's ``env``, the request's ``KERNEL_*`` variables, ``KERNEL_IMAGE`` from the process
proxy's ``image_name`` and ``EG_DOCKER_NETWORK``) and then waits for two things: a running
container labelled ``kernel_id=ID`` on that network, whose address it reads, and the kernel's
connection info sent to ``--RemoteProcessProxy.response-address`` by ``kernel_launcher.py``
in the container. This script only starts the container (detached, removed when it exits) and
returns.
"""

import argparse
import os

import docker

OPTION = "--RemoteProcessProxy."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("kernel-id", "response-address", "public-key"):
        parser.add_argument(OPTION + name, dest=name.replace("-", "_"), required=True)
    parser.add_argument(OPTION + "port-range", dest="port_range", default="0..0")  # 0..0: any free ports
    args = parser.parse_args()
    env = {name: value for name, value in os.environ.items() if name != "PATH"}  # the image's PATH applies
    env.update(KERNEL_ID=args.kernel_id, RESPONSE_ADDRESS=args.response_address, PUBLIC_KEY=args.public_key,
               PORT_RANGE=args.port_range)
    name = f"{env.get('KERNEL_USERNAME', 'kernel')}-{args.kernel_id}"
    client = docker.from_env()
    client.containers.run(env["KERNEL_IMAGE"], name=name, hostname=name, detach=True, remove=True,
                          environment=env, network=env.get("EG_DOCKER_NETWORK", "bridge"),
                          user=f"{env.get('KERNEL_UID', '1000')}:{env.get('KERNEL_GID', '1000')}",
                          labels={"kernel_id": args.kernel_id, "component": "kernel", "app": "enterprise-gateway"})


if __name__ == "__main__":
    main()
