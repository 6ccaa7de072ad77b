# The egress proxy of sandbox-kernel's docker backend (allow_hosts): mitmproxy in a venv, run as
# uid 1000 with a read-only root filesystem. The program it runs is not in the image: the backend
# sends it over the container's stdin (sandbox_kernel/backends/docker/egress/).
#
# Build context (made by sandbox_kernel.backends.docker.images.build_image with the EGRESS recipe):
# this Dockerfile, requirements.txt and wheels/, a wheelhouse for CPython 3.13 (mitmproxy 11.1 and
# later need Python 3.12 or later). Nothing is fetched during the build; legacy builder compatible.
#
# BASE needs python3 3.13 with the venv module: python:3.13-slim-trixie, or
# sandbox-kernel-base:trixie made by make-base-image.sh (SUITE trixie).
ARG BASE=python:3.13-slim-trixie

FROM ${BASE} AS builder
USER root
COPY requirements.txt /build/requirements.txt
COPY wheels/ /build/wheels/
RUN python3 -m venv /opt/egress \
 && /opt/egress/bin/pip install --no-cache-dir --no-index --find-links /build/wheels \
        --disable-pip-version-check -r /build/requirements.txt

FROM ${BASE}
USER root
COPY --from=builder /opt/egress /opt/egress
ENV PATH=/opt/egress/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 1000:1000
WORKDIR /tmp
