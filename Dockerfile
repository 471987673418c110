# One binary, one small image: `recover` runs the gate, the demo service, the workers and
# the controller (see manifests/). Build: docker build -t recover:0.1.0 .  (the manifests
# pin that tag: the crate's version). Not built on the development machines (no Docker
# engine there); see docs/guide/kubernetes.md.
#
# It runs as user and group 10001 (the manifests' runAsUser), never root, in a working
# directory that user owns (/var/lib/recover: journals go to ./recover-runs by default).
# The manifests mount an emptyDir there, because they make the root filesystem read-only.

FROM rust:1.89-slim-bookworm AS build
WORKDIR /src
# Dependencies first, so a source change does not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src && echo 'fn main() {}' > src/main.rs && echo '' > src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src target/release/deps/recover* target/release/deps/librecover* target/release/.fingerprint/recover-*
COPY src ./src
COPY runbooks ./runbooks
RUN cargo build --release --locked --bin recover \
    && strip target/release/recover

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 recover \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/recover recover \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/recover
COPY --from=build /src/target/release/recover /usr/local/bin/recover
COPY --from=build /src/runbooks /usr/share/recover/runbooks
WORKDIR /var/lib/recover
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/recover"]
CMD ["--help"]
