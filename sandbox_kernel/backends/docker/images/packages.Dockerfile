# A sandbox image with extra Python packages: BASE plus the requirements in requirements.txt,
# installed offline from wheels/ (downloaded on the host by sandbox_kernel.images.packages).
# Legacy builder compatible (no BuildKit syntax).
#
# The builder stage installs into BASE's `python` and copies what the install added or changed
# under the interpreter's prefix to /delta/files; the final stage gets only those files and
# removes what pip replaced, so neither the wheels nor a second copy of the environment end up
# in the image.
ARG BASE
FROM ${BASE} AS builder
# removed after the build (it holds the wheels): see sandbox_kernel.images.packages
LABEL org.sandbox-kernel.builder=packages
USER root
COPY . /sandbox-kernel-build/
RUN python /sandbox-kernel-build/install_delta.py /sandbox-kernel-build /delta

FROM ${BASE}
ARG BASE_USER=root
USER root
COPY --from=builder /delta/files/ /
COPY --from=builder /delta/remove.py /tmp/sandbox-kernel-remove.py
RUN python /tmp/sandbox-kernel-remove.py && rm /tmp/sandbox-kernel-remove.py
USER ${BASE_USER}
