# Sluice's container image: built with the repository's own scripts on Debian 12, run on
# debian:12-slim with only the shared libraries the binaries link.
#   docker build -t sluice:latest .
#   docker run --rm -p 8080:8080 -p 8081:8081 sluice:latest
# scripts/check-deployables checks that the runtime packages below cover every library that
# `ldd build/bin/sluice` resolves; scripts/check-image builds the image and runs it the ways it
# is used: bare, with Sluice's flags, with no command and envoyproxy/ratelimit's variables, and
# as Envoy Gateway runs it (docs/deployment.md).

# ---- build: the same steps as on a developer's machine ----
FROM debian:12 AS build
WORKDIR /src
# The toolchain and -dev packages first, in their own layer: editing the sources does not
# download them again. Only what building the server and the CLI needs: not the test tools.
COPY scripts/install-deps scripts/install-deps
RUN ./scripts/install-deps --build-only
COPY . .
# Only the server and the CLI, configured without the tests and benchmarks (TESTS=OFF), which
# are not shipped and whose packages this stage does not have.
RUN BUILD_TYPE=Release TESTS=OFF ./scripts/build sluice sluicectl

# ---- runtime ----
FROM debian:12-slim
# The runtime packages of every library the two binaries link (Debian 12 names; libc6 comes
# with the base image; libcurl4, the OTLP/HTTP exporter's client, brings the libraries it links
# itself as its dependencies), and the system's CA bundle (Sluice's own TLS reads the files its
# --tls_* flags name; the OTLP exporters trust it without --tracing_ca).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      libabsl20220623 \
      libc-ares2 \
      libcurl4 \
      libevent-core-2.1-7 \
      libevent-extra-2.1-7 \
      libevent-pthreads-2.1-7 \
      libgcc-s1 \
      libgrpc++1.51 \
      libgrpc29 \
      libhiredis0.14 \
      libprometheus-cpp-core1.0 \
      libprotobuf32 \
      libre2-9 \
      libssl3 \
      libstdc++6 \
      libyaml-cpp0.7 \
      zlib1g \
 && rm -rf /var/lib/apt/lists/*
# A fixed numeric uid: Kubernetes' runAsNonRoot can only verify a numeric USER, and the
# manifests in k8s/ pin the same ids.
RUN groupadd --system --gid 10001 sluice \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin sluice
COPY --from=build /src/build/bin/sluice /src/build/bin/sluicectl /usr/local/bin/
# Envoy Gateway runs the image it is given as envoyproxy/ratelimit's: the command /bin/ratelimit
# with no arguments (so not the ENTRYPOINT below), settings in envoyproxy/ratelimit's
# environment variables, which Sluice reads (SLUICE_* variables and flags win over them).
# /bin is /usr/bin on Debian 12. Sluice writes no file: it runs with a read-only root
# filesystem, as any uid.
RUN ln -s /usr/local/bin/sluice /usr/bin/ratelimit
# The example config, so that the image serves something on its own; mount your own directory
# (a Kubernetes ConfigMap, a compose volume) over /etc/sluice/config.
COPY examples/config/ /etc/sluice/config/
# Which rules to serve when nothing else names any: no --config (nor SLUICE_CONFIG), no
# --config_source=xds, and none of envoyproxy/ratelimit's variables. An environment variable
# rather than CMD ["--config=..."]: upstream's image (ENTRYPOINT ["/bin/ratelimit"]) has no
# command, so a manifest written for it gives none, only upstream's variables; a default
# --config on the command line would override their RUNTIME_ROOT and serve this example
# instead. This default gives way to them (server/settings/flag_layers.h), so the image run
# with no command behaves as /bin/ratelimit does, and `docker run IMAGE` still serves the
# example.
ENV SLUICE_DEFAULT_CONFIG=/etc/sluice/config
USER 10001:10001
# 8080: HTTP (/json, /healthz, /readyz, /metrics...); 8081: gRPC (Envoy's RLS v3 API).
EXPOSE 8080 8081
# Sluice is PID 1: it handles SIGTERM itself (drains, then exits 0) and starts no children,
# so no init process is needed. No CMD: arguments after the image name are Sluice's flags, and
# with none Sluice runs on the environment alone (SLUICE_DEFAULT_CONFIG above).
ENTRYPOINT ["/usr/local/bin/sluice"]
