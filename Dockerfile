# Salvo's image: built with the Swift toolchain, run on a slim Debian with the three system libraries it links
# (libssl3, liburing2, libsqlite3-0). `docker build -t salvo .` from the repository root; deploy/README.md shows its use.

FROM swift:6.1-bookworm AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends liburing-dev libssl-dev libsqlite3-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The manifest first, so that the dependencies are fetched again only when it changes.
COPY Package.swift ./
RUN swift package resolve
COPY . .
# The Swift runtime and Foundation go into the binary; libssl, liburing and libsqlite3 stay shared.
RUN swift build -c release --product salvo --static-swift-stdlib \
    && install -D "$(swift build -c release --show-bin-path)/salvo" /out/salvo

FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libssl3 liburing2 libsqlite3-0 ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 salvo \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/salvo --create-home salvo
COPY --from=build /out/salvo /usr/local/bin/salvo
USER 10001:10001
WORKDIR /var/lib/salvo
# tini passes signals on (the first SIGTERM lets rows in flight settle and writes the report).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/salvo"]
CMD ["--help"]
