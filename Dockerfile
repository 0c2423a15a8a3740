# syntax=docker/dockerfile:1
#
# mozi: a static binary on a slim Debian base. The base is not distroless on
# purpose: mozi spawns agent CLIs as child processes, and the prompts it
# gives them use git and curl. Add your agents in an image built on this
# one (see docs/quickstart.md), e.g.
#   FROM mozi
#   USER root
#   RUN apt-get update && apt-get install -y nodejs npm && npm install -g @anthropic-ai/claude-code
#   USER mozi
#
#   docker build -t mozi --build-arg VERSION=$(git describe --always) .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mozi ./cmd/mozi \
 && /out/mozi version

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git curl tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/mozi --create-home --shell /usr/sbin/nologin mozi
COPY --from=build /out/mozi /usr/local/bin/mozi
COPY deploy/mozi.example.yaml /etc/mozi/mozi.yaml
USER mozi
WORKDIR /var/lib/mozi
ENV MOZI_CONFIG=/etc/mozi/mozi.yaml \
    MOZI_DATA_DIR=/var/lib/mozi \
    MOZI_LISTEN=0.0.0.0:8080
EXPOSE 8080
VOLUME ["/var/lib/mozi"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
  CMD curl -fsS http://127.0.0.1:8080/readyz || exit 1
# tini reaps the agents' orphaned children and forwards SIGTERM, so mozi's
# graceful shutdown (agents get spawner.shutdown_grace) works under Docker.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/mozi"]
CMD ["serve"]
