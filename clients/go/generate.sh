#!/usr/bin/env bash
# Generates the Go code of proto/ into clients/go/gen/ (never committed): installs the pinned
# protoc-gen-go and protoc-gen-go-grpc into $REPO/.cache/gobin and runs protoc with
# -I proto -I .cache/googleapis. Idempotent; safe to run on every build.
#
# Env: PROTOC (default: protoc on PATH).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
cd "$REPO"

# Pinned versions (the Go module proxy serves them; they build with Go 1.24 and newer).
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
# Same pin as compose/install-deps.sh: google/api/*.proto, needed only to resolve imports.
GOOGLEAPIS_PROTOS_VERSION=1.76.0

MODULE=inventoryfeed/clients/go
GEN="$HERE/gen"
PROTOC="${PROTOC:-protoc}"

die() { echo "generate.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "go not found"
command -v "$PROTOC" >/dev/null || die "$PROTOC not found (apt-get install protobuf-compiler)"

export GOBIN="$REPO/.cache/gobin"
mkdir -p "$GOBIN"
# A tool is reinstalled when its recorded version differs from the pin.
install_tool() { # install_tool NAME PACKAGE VERSION
  local stamp="$GOBIN/.$1.version"
  if [[ -x "$GOBIN/$1" && -f "$stamp" && "$(cat "$stamp")" == "$3" ]]; then
    return 0
  fi
  echo "generate.sh: go install $2@$3" >&2
  go install "$2@$3"
  echo "$3" >"$stamp"
}
install_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

GOOGLEAPIS="$REPO/.cache/googleapis"
if [[ ! -f "$GOOGLEAPIS/google/api/annotations.proto" ]]; then
  command -v python3 >/dev/null || die "$GOOGLEAPIS/google/api/annotations.proto missing and no python3 to install it (run compose/install-deps.sh)"
  echo "generate.sh: googleapis-common-protos $GOOGLEAPIS_PROTOS_VERSION (PyPI) into $GOOGLEAPIS" >&2
  python3 -m pip install -q --no-deps --target "$GOOGLEAPIS" \
    "googleapis-common-protos==$GOOGLEAPIS_PROTOS_VERSION" >&2
fi

# Every proto file lands in a package of this module; google/api comes from genproto.
PROTOS=(
  feed/auth/v1/auth.proto
  inventory/v1/inventory.proto
  order/v1/order.proto
  events/v1/events.proto
)
MAPS=(
  "Mfeed/auth/v1/auth.proto=$MODULE/gen/authv1"
  "Minventory/v1/inventory.proto=$MODULE/gen/inventoryv1"
  "Morder/v1/order.proto=$MODULE/gen/orderv1"
  "Mevents/v1/events.proto=$MODULE/gen/eventsv1"
  "Mgoogle/api/annotations.proto=google.golang.org/genproto/googleapis/api/annotations"
  "Mgoogle/api/http.proto=google.golang.org/genproto/googleapis/api/annotations"
)
GO_OPTS=(--go_opt=module="$MODULE")
GRPC_OPTS=(--go-grpc_opt=module="$MODULE")
for m in "${MAPS[@]}"; do
  GO_OPTS+=(--go_opt="$m")
  GRPC_OPTS+=(--go-grpc_opt="$m")
done

# Generate into a fresh directory, then swap it in: no stale files from a removed proto.
TMP="$(mktemp -d "$HERE/.gen-XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PATH="$GOBIN:$PATH" "$PROTOC" -I proto -I "$GOOGLEAPIS" \
  --go_out="$TMP" "${GO_OPTS[@]}" \
  --go-grpc_out="$TMP" "${GRPC_OPTS[@]}" \
  "${PROTOS[@]}"
rm -rf "$GEN"
mv "$TMP/gen" "$GEN"
echo "generate.sh: wrote $(find "$GEN" -name '*.go' | wc -l) files into clients/go/gen" >&2
