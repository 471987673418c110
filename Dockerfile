# One binary, one small image: `recover` runs the gate, the demo service, the workers and
# the controller (see manifests/). Build: docker build -t recover:dev .
# Not built on the development machines (no Docker engine there); see README "Kubernetes".

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
    && useradd --system --uid 10001 --no-create-home recover
COPY --from=build /src/target/release/recover /usr/local/bin/recover
COPY --from=build /src/runbooks /usr/share/recover/runbooks
USER 10001
ENTRYPOINT ["/usr/local/bin/recover"]
CMD ["--help"]
