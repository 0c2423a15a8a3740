# syntax=docker/dockerfile:1
#
# mozi: a static binary on a slim Debian base, with what mozi runs beside
# it — PostgreSQL 15's server for the embedded database, git for the
# agents' worktrees, bubblewrap and prlimit (util-linux) for their sandbox,
# curl for the agents' prompts, tini as PID 1.
#
#   docker build -t mozi --build-arg VERSION=$(git describe --always) .
#   podman build --format docker -t mozi --build-arg VERSION=$(git describe --always) .
#   docker run -d --name mozi -p 8080:8080 -v mozi:/var/lib/mozi \
#     -e MOZI_WEBHOOK_SECRET=$(openssl rand -hex 32) mozi
#
# podman (buildah) builds OCI images by default, whose format has no
# HEALTHCHECK: it is dropped, with a warning, unless built with --format
# docker. Base images are named in full (docker.io/library/…) so podman
# needs no unqualified-search registries in registries.conf.
#
# Out of the box mozi runs as the user mozi (uid and gid 10001) with its embedded
# PostgreSQL in the volume /var/lib/mozi; set MOZI_DATABASE_URL to use a
# server instead. Its configuration (deploy/image/mozi.yaml) holds no secret:
# mozi serve refuses to start without MOZI_WEBHOOK_SECRET or
# MOZI_WEBHOOK_SECRET_FILE. It declares no agent either, as no agent CLI is
# in this image. Build one on top with the CLIs and a configuration that
# declares them, e.g.
#
#   FROM mozi
#   USER root
#   RUN apt-get update \
#    && apt-get install -y --no-install-recommends nodejs npm \
#    && npm install -g @anthropic-ai/claude-code \
#    && rm -rf /var/lib/apt/lists/* /root/.npm
#   USER mozi
#   COPY mozi.yaml /etc/mozi/mozi.yaml
#
# Agents run in bubblewrap, which needs user namespaces and a /proc of its
# own: Docker's default seccomp profile, its AppArmor profile and its masked
# /proc paths refuse them. Run with (podman takes the same)
#   --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#   --security-opt systempaths=unconfined \
#   --security-opt no-new-privileges --cap-drop ALL
# or give the agents `sandbox: none`; `docker exec mozi mozi doctor` says
# whether the sandbox works (docs/quickstart.md).
#
# The stop signal reaches mozi through tini: running agents get
# spawner.shutdown_grace (30s) before they are stopped, so give the
# container more than Docker's 10s (docker run --stop-timeout 60).

FROM docker.io/library/golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mozi ./cmd/mozi \
 && /out/mozi version

FROM docker.io/library/debian:bookworm-slim
# postgresql-15 brings the server binaries (/usr/lib/postgresql/15/bin),
# which mozi finds by itself; postgresql-common must not create its own
# cluster: mozi makes one in the volume on first start.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/mozi.conf \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates curl git bubblewrap util-linux tini postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 mozi \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/mozi --create-home --shell /usr/sbin/nologin mozi
COPY --from=build /out/mozi /usr/local/bin/mozi
COPY deploy/image/mozi.yaml /etc/mozi/mozi.yaml
USER mozi
WORKDIR /var/lib/mozi
ENV MOZI_CONFIG=/etc/mozi/mozi.yaml \
    MOZI_DATA_DIR=/var/lib/mozi \
    MOZI_LISTEN=0.0.0.0:8080
EXPOSE 8080
VOLUME ["/var/lib/mozi"]
# Probes /readyz where MOZI_LISTEN says mozi listens (0.0.0.0 and [::] are
# reached on 127.0.0.1). The first start initialises the database: allow it
# a minute.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
  CMD l=${MOZI_LISTEN:-127.0.0.1:8080}; h=${l%:*}; \
      case $h in ""|0.0.0.0|::|"[::]") h=127.0.0.1;; esac; \
      curl -fsS -o /dev/null "http://$h:${l##*:}/readyz" || exit 1
# tini reaps the agents' orphaned children and forwards SIGTERM, so mozi's
# graceful shutdown (agents, then the embedded PostgreSQL) works.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/mozi"]
CMD ["serve"]
