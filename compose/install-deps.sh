#!/usr/bin/env bash
# Installs everything the build, the tests and the local stack need on a fresh Debian 12
# machine, idempotent and quick when everything is there:
#   - Debian packages (apt), redis-server and postgresql among them (the benchmark peers);
#   - into .cache/ (never committed): googleapis-common-protos from PyPI (google.api.http
#     for the gateway's routes), protoc-gen-openapiv2 (go install; the OpenAPI document),
#     swagger-ui-dist, uplot and puppeteer-core from npm (Swagger UI; the dashboard's charts;
#     the browser tests drive Debian's chromium with it);
#   - with --go-tools: grpcurl, grpc-health-probe and ghz (go install, into .cache/gobin).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librdkafka-dev librocksdb-dev libspdlog-dev libfmt-dev libabsl-dev
  libbenchmark-dev libgtest-dev libgmock-dev
  prometheus-cpp-dev libcli11-dev nlohmann-json3-dev libgoogle-perftools-dev
  kcat curl procps default-jre-headless maven tmux clang-format python3 python3-venv
  libboost-dev libjwt-dev libssl-dev chromium wrk
  redis-server redis-tools postgresql prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Java 17+ and Maven may come from outside apt (e.g. a JDK in /usr/lib/jvm): accept those.
if command -v java >/dev/null && command -v mvn >/dev/null; then
  missing=("${missing[@]/default-jre-headless}")
  missing=("${missing[@]/maven}")
fi
read -r -a missing <<<"${missing[*]:-}"
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  # redis-server and postgresql are the benchmark peers: their scripts start throw-away
  # instances on free loopback ports, so the packages' own services are not left running.
  $SUDO service redis-server stop >/dev/null 2>&1 || true
  $SUDO service postgresql stop >/dev/null 2>&1 || true
  # Prometheus too: compose/prometheus.sh starts one with the repo's configuration.
  $SUDO service prometheus stop >/dev/null 2>&1 || true
  $SUDO service prometheus-node-exporter stop >/dev/null 2>&1 || true
fi

# Pinned versions of what comes from the registries.
GOOGLEAPIS_PROTOS_VERSION=1.76.0
GRPC_GATEWAY_VERSION=v2.34.0
SWAGGER_UI_VERSION=5.35.0
PUPPETEER_CORE_VERSION=25.16.0
UPLOT_VERSION=1.6.32

GOOGLEAPIS="$REPO/.cache/googleapis"
if [ ! -f "$GOOGLEAPIS/google/api/annotations.proto" ]; then
  echo "install-deps: googleapis-common-protos $GOOGLEAPIS_PROTOS_VERSION (PyPI)" >&2
  python3 -m pip install -q --no-deps --target "$GOOGLEAPIS" \
    "googleapis-common-protos==$GOOGLEAPIS_PROTOS_VERSION" >&2
fi

export GOBIN="$REPO/.cache/gobin"
mkdir -p "$GOBIN"
if [ ! -x "$GOBIN/protoc-gen-openapiv2" ]; then
  go install "github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$GRPC_GATEWAY_VERSION" >&2
fi

NODE_DEPS="$REPO/.cache/node"
if [ ! -f "$NODE_DEPS/node_modules/swagger-ui-dist/package.json" ] ||
  [ ! -f "$NODE_DEPS/node_modules/puppeteer-core/package.json" ] ||
  [ ! -f "$NODE_DEPS/node_modules/uplot/package.json" ]; then
  echo "install-deps: swagger-ui-dist $SWAGGER_UI_VERSION, puppeteer-core $PUPPETEER_CORE_VERSION, uplot $UPLOT_VERSION (npm)" >&2
  mkdir -p "$NODE_DEPS"
  npm install --prefix "$NODE_DEPS" --no-audit --no-fund --silent \
    "swagger-ui-dist@$SWAGGER_UI_VERSION" "puppeteer-core@$PUPPETEER_CORE_VERSION" \
    "uplot@$UPLOT_VERSION" >&2
fi

if [[ " $* " == *" --go-tools "* ]]; then
  [ -x "$GOBIN/grpcurl" ] || go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4 >&2
  [ -x "$GOBIN/grpc-health-probe" ] ||
    go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.62 >&2
  [ -x "$GOBIN/ghz" ] || go install github.com/bojand/ghz/cmd/ghz@v0.93.0 >&2
fi
