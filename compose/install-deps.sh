#!/usr/bin/env bash
# Installs everything the build, the tests and the local stack need on a fresh Debian 12
# machine: Debian packages (apt) and, with --go-tools, grpcurl, grpc-health-probe and ghz
# (go install, into .cache/gobin). Idempotent and quick when everything is there.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librdkafka-dev librocksdb-dev libspdlog-dev libfmt-dev libabsl-dev
  libbenchmark-dev libgtest-dev libgmock-dev
  prometheus-cpp-dev libcli11-dev nlohmann-json3-dev libgoogle-perftools-dev
  kcat curl procps default-jre-headless maven
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
fi

if [[ " $* " == *" --go-tools "* ]]; then
  export GOBIN="$REPO/.cache/gobin"
  mkdir -p "$GOBIN"
  [ -x "$GOBIN/grpcurl" ] || go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4 >&2
  [ -x "$GOBIN/grpc-health-probe" ] ||
    go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.62 >&2
  [ -x "$GOBIN/ghz" ] || go install github.com/bojand/ghz/cmd/ghz@v0.93.0 >&2
fi
