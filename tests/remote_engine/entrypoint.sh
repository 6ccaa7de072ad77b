#!/bin/bash
# PID 2 of the rig container (tini is PID 1, `init=True`): make the nested engine possible, start
# sshd, then run dockerd in the foreground. Inputs, bind-mounted read-only at /rig by the tests:
#   /rig/tls/{ca,server-cert,server-key}.pem  the engine's TLS (clients must present a cert of ca)
#   /rig/ssh/host_key                         sshd's host key (the tests' known_hosts names it)
#   /rig/ssh/authorized_keys                  the tests' client key, for root
# /var/lib/docker must be a tmpfs (exec,dev,suid): overlay2 does not work on the container's overlay.
set -euo pipefail

# The local engine mounts /sys and each cgroup v1 hierarchy (this container's own subtree)
# read-only even with every capability; dockerd and runc must write them to make the inner
# containers' cgroups. A plain `remount,rw` of a hierarchy fails ("mount point is busy"); as a
# bind remount it works, and the inner cgroups nest under this container's (its limits hold).
mount -o remount,rw /sys
while read -r _ mountpoint fstype _; do
    if [[ $fstype == cgroup || $fstype == cgroup2 ]]; then mount -o remount,bind,rw "$mountpoint"; fi
done < <(grep -E ' cgroup2? ' /proc/self/mounts)

install -d -m 0700 /root/.ssh /run/sshd
install -m 0600 /rig/ssh/authorized_keys /root/.ssh/authorized_keys
install -m 0600 /rig/ssh/host_key /etc/ssh/rig_host_key
/usr/sbin/sshd -h /etc/ssh/rig_host_key -o PermitRootLogin=prohibit-password -o MaxSessions=64 \
    -o PasswordAuthentication=no -o UsePAM=no -E /var/log/sshd.log

exec dockerd --host unix:///var/run/docker.sock --host tcp://0.0.0.0:2376 \
    --tlsverify --tlscacert /rig/tls/ca.pem --tlscert /rig/tls/server-cert.pem --tlskey /rig/tls/server-key.pem \
    --storage-driver "${RIG_STORAGE_DRIVER:-overlay2}"
