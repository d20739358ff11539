# syntax=docker/dockerfile:1
# passkeyd's container image: built with the Swift image, run on distroless/cc as the non-root
# user 65532, SQLite in the /data volume by default. Every setting comes from the environment
# (PASSKEYD_*; README's configuration table). docs/deploy.md shows docker run, compose and Kubernetes.
#
#   docker build --build-arg PASSKEYD_COMMIT=$(git rev-parse HEAD) -t passkeyd:0.9.0 .
#   docker run -p 8080:8080 -v passkeyd-data:/data passkeyd:0.9.0
#
# The final stage copies exactly the paths in deploy/image.files (deploy/tests/test_image.py checks),
# which scripts/package stages and the tests run under chroot.

ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG BASE_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${SWIFT_IMAGE} AS build
# The static archives passkeyd links (SQLite, zlib; libstdc++ comes with the Swift image).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libsqlite3-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The commit `passkeyd --version` names (.dockerignore keeps .git out of the context).
ARG PASSKEYD_COMMIT=unknown
COPY . .
# The build folder is a cache kept between builds; scripts/package fails the build if the binary
# would need more than the C library (a static archive missing).
RUN --mount=type=cache,target=/src/.build \
    scripts/package build /src/dist/passkeyd \
    && scripts/package stage /stage /src/dist/passkeyd

FROM ${BASE_IMAGE}
COPY --from=build --chown=0:0 /stage/usr/bin/passkeyd /usr/bin/passkeyd
COPY --from=build --chown=0:0 /stage/usr/share/passkeyd/public /usr/share/passkeyd/public
COPY --from=build --chown=65532:65532 /stage/data /data
ENV PASSKEYD_LISTEN=0.0.0.0:8080 \
    PASSKEYD_DATABASE_URL=sqlite:///data/passkeyd.sqlite
USER 65532:65532
# Not /data: nothing the service can write is read as settings or web UI files.
WORKDIR /
VOLUME ["/data"]
EXPOSE 8080
# distroless has no shell or curl: the binary asks its own /readyz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/bin/passkeyd", "healthcheck"]
ENTRYPOINT ["/usr/bin/passkeyd"]
CMD ["serve"]
