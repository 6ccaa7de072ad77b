#!/usr/bin/env bash
# Build a Debian base image from Debian packages alone (bookworm, Python 3.11, by default): no registry.
#
#   usage: make-base-image.sh [TAG [MIRROR [ARCH [SUITE]]]]   (root; needs debootstrap and a running engine)
#
# TAG defaults to sandbox-kernel-base:SUITE; MIRROR defaults to the Debian archive named in
# this machine's apt sources; ARCH (a Debian architecture: amd64, arm64) defaults to this
# machine's; SUITE defaults to bookworm (trixie, whose python3 is 3.13, is the base of the
# egress proxy's image: mitmproxy needs Python 3.12 or later). Another ARCH needs its binaries runnable here: qemu-user-static with binfmt_misc
# (see .ci/arm64-setup.sh); the image is recorded as linux/ARCH. Sourcing this file only defines
# apt_mirror, build_base_image and load_rootfs.
# bookworm is the default on purpose: its python3 is 3.11, the version the sandbox's wheelhouse is
# built for.

# Print the first Debian mirror URL serving SUITE (default bookworm) in the apt sources, reading
# both the one-line format (*.list) and deb822 (*.sources); fall back to deb.debian.org.
apt_mirror() {
    local suite=${1:-bookworm} found=""
    local lists=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list)
    local sources=(/etc/apt/sources.list.d/*.sources)
    found=$(cat "${lists[@]}" 2>/dev/null | awk -v suite="$suite" '
        { sub(/\[[^]]*\]/, "") }
        $1 == "deb" && $3 == suite { print $2; exit }') || true
    [[ -n $found ]] || found=$(cat "${sources[@]}" 2>/dev/null | awk -v suite="$suite" '
        BEGIN { RS = "" }
        {
            types = suites = uris = ""; enabled = "yes"
            n = split($0, line, "\n")
            for (i = 1; i <= n; i++) {
                if (line[i] ~ /^Types:/)   types = " " substr(line[i], 7) " "
                if (line[i] ~ /^Suites:/)  suites = " " substr(line[i], 8) " "
                if (line[i] ~ /^URIs:/)    uris = substr(line[i], 6)
                if (line[i] ~ /^Enabled:/) enabled = tolower(substr(line[i], 9))
            }
            gsub(/[ \t]+/, " ", types); gsub(/[ \t]+/, " ", suites); gsub(/[ \t]/, "", enabled)
            if (types ~ / deb / && suites ~ (" " suite " ") && enabled != "no") {
                split(uris, uri, " "); print uri[1]; exit
            }
        }') || true
    echo "${found:-http://deb.debian.org/debian}"
}

# debootstrap a minimal SUITE (bookworm: Python 3.11) and `docker import` it as TAG (~1 min, ~200 MB;
# another architecture under qemu: several minutes).
build_base_image() (
    set -euo pipefail
    local suite=${4:-bookworm}
    local tag=${1:-sandbox-kernel-base:$suite} mirror=${2:-$(apt_mirror bookworm)} rootfs
    local arch=${3:-$(dpkg --print-architecture)}
    rootfs=$(mktemp -d /var/tmp/sandbox-kernel-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    echo "debootstrap $suite ($arch) from $mirror into $rootfs" >&2
    debootstrap --arch "$arch" --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
        || { tail -n 20 "$rootfs.log" >&2; echo "debootstrap failed: see $rootfs.log" >&2; exit 1; }
    rm -f "$rootfs.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    if [[ $arch == "$(dpkg --print-architecture)" ]]; then
        tar -C "$rootfs" -c . | docker import --change 'ENV LANG=C.UTF-8' \
            --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
    else
        tar -C "$rootfs" -c . >"$rootfs.tar"
        trap 'rm -rf "$rootfs" "$rootfs.tar"' EXIT
        rm -rf "$rootfs"
        load_rootfs "$tag" "$arch" "$rootfs.tar"
    fi
    echo "imported $tag (linux/$arch)" >&2
)

# `docker load` the root filesystem tarball ROOTFS_TAR as the one-layer image TAG for linux/ARCH,
# with the config `docker import` gives (LANG=C.UTF-8, CMD bash). Engine 20.10's import records
# the engine's own architecture whatever --platform says, so a foreign root filesystem would be
# labelled amd64 and a --platform linux/arm64 build would not find it; load keeps ARCH.
load_rootfs() (
    set -euo pipefail
    local tag=$1 arch=$2 layer=$3 dir diff_id config_id variant=""
    [[ $arch == arm64 ]] && variant='"variant": "v8",'
    dir=$(mktemp -d /var/tmp/sandbox-kernel-load.XXXXXX)
    trap 'rm -rf "$dir"' EXIT
    diff_id=sha256:$(sha256sum "$layer" | cut -d' ' -f1)
    cat >"$dir/config.json" <<EOF
{"architecture": "$arch", $variant "os": "linux", "created": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
 "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
            "Cmd": ["/bin/bash"]},
 "rootfs": {"type": "layers", "diff_ids": ["$diff_id"]}}
EOF
    config_id=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
    mv "$dir/config.json" "$dir/$config_id.json"
    printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$config_id" "$tag" >"$dir/manifest.json"
    ln "$layer" "$dir/layer.tar" 2>/dev/null || cp "$layer" "$dir/layer.tar"
    tar -C "$dir" -c manifest.json "$config_id.json" layer.tar | docker load >/dev/null
)

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    build_base_image "$@"
fi
