#!/usr/bin/env bash
# Build a Debian bookworm base image with Python 3.11 from Debian packages alone: no registry.
#
#   usage: make-base-image.sh [TAG [MIRROR]]    (root; needs debootstrap and a running engine)
#
# TAG defaults to sandbox-kernel-base:bookworm; MIRROR defaults to the Debian archive named in
# this machine's apt sources. Sourcing this file only defines apt_mirror and build_base_image.
# bookworm is fixed on purpose: its python3 is 3.11, the version the wheelhouse is built for.

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

# debootstrap a minimal bookworm with Python 3.11 and `docker import` it as TAG (~1 min, ~300 MB).
build_base_image() (
    set -euo pipefail
    local tag=${1:-sandbox-kernel-base:bookworm} mirror=${2:-$(apt_mirror bookworm)} rootfs
    rootfs=$(mktemp -d /var/tmp/sandbox-kernel-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    echo "debootstrap bookworm from $mirror into $rootfs" >&2
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
        || { tail -n 20 "$rootfs.log" >&2; echo "debootstrap failed: see $rootfs.log" >&2; exit 1; }
    rm -f "$rootfs.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
    echo "imported $tag" >&2
)

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    build_base_image "$@"
fi
