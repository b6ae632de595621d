# Redis for docker/compose.yaml: Debian's redis-server (7.0) on the same base as the
# service image, so that the whole deployment builds without pulling from a registry
# when BASE_IMAGE is a local image (docker/compose-check.sh).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data

WORKDIR /data
USER redis
EXPOSE 6379
# Without a config file Redis 7 refuses other hosts (protected mode); the compose
# network is private and Redis publishes no port.
CMD ["redis-server", "--protected-mode", "no", "--dir", "/data"]
