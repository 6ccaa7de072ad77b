# Sourced by the .ci/*-setup.sh scripts: install Debian packages, unattended, only when some are missing.

# apt_install PACKAGE...: nothing when no package is named; else apt-get update, then install them.
apt_install() {
    (($# == 0)) && return 0
    echo "installing $*"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -q "$@"
}
