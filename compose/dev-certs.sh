#!/usr/bin/env bash
# Development certificates for local runs and tests, made with openssl (never for production):
#   ca.crt ca.key                 the development CA
#   server.crt server.key         the server (SAN DNS:localhost, IP:127.0.0.1), signed by ca
#   client.crt client.key         a client (CN=feed-client, SAN URI:spiffe://feed/client), signed by ca
#   other-ca.crt other-ca.key     a second, unrelated CA
#   other-client.crt other-client.key   a client signed by other-ca (refused by mTLS)
#   server.p12 truststore.p12     the server key+certificate and the CA as PKCS#12 (password in
#                                 p12.password), for Java (the Kafka broker's SSL listener)
#
# Usage: compose/dev-certs.sh [DIR] [--days N] [--force]
#   DIR defaults to .cache/dev-certs. Existing files are kept unless --force.
#   Re-running with --force --server-only renews just server.crt/server.key (same CA), which
#   is what a certificate rotation looks like to the servers watching these files.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

DIR="$REPO/.cache/dev-certs"
DAYS=365
FORCE=0
SERVER_ONLY=0
while (($#)); do
  case "$1" in
    --days) DAYS="$2"; shift 2 ;;
    --force) FORCE=1; shift ;;
    --server-only) SERVER_ONLY=1; shift ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "dev-certs.sh: unknown option $1" >&2; exit 1 ;;
    *) DIR="$1"; shift ;;
  esac
done
command -v openssl >/dev/null || { echo "dev-certs.sh: openssl not found" >&2; exit 1; }
mkdir -p "$DIR"
cd "$DIR"
umask 077

if [[ -f server.crt && $FORCE == 0 ]]; then
  echo "dev-certs.sh: certificates already in $DIR (use --force to renew)" >&2
  exit 0
fi

make_ca() {  # name subject
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$DAYS" \
    -subj "$2" -keyout "$1.key" -out "$1.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
}

# name ca subject extensions: writes name.key and name.crt atomically (renames), so a server
# watching the files never reads a half-written pair for long.
make_leaf() {
  local name="$1" ca="$2" subj="$3" ext="$4" tmp
  tmp="$(mktemp -d "$name.XXXX")"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$tmp/key" -out "$tmp/csr" 2>/dev/null
  printf '%s\n' "$ext" >"$tmp/ext"
  openssl x509 -req -in "$tmp/csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial \
    -days "$DAYS" -extfile "$tmp/ext" -out "$tmp/crt" 2>/dev/null
  # Key first: a watcher that sees the new certificate with the old key refuses the pair and
  # keeps serving the old one until both match.
  mv "$tmp/key" "$name.key"
  mv "$tmp/crt" "$name.crt"
  rm -rf "$tmp"
}

SERVER_EXT="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
CLIENT_EXT="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectAltName=URI:spiffe://feed/client"

if [[ $SERVER_ONLY == 0 || ! -f ca.crt ]]; then
  make_ca ca "/CN=feed dev CA"
  make_ca other-ca "/CN=some other CA"
  make_leaf client ca "/CN=feed-client" "$CLIENT_EXT"
  make_leaf other-client other-ca "/CN=feed-client" "$CLIENT_EXT"
fi
make_leaf server ca "/CN=localhost" "$SERVER_EXT"

# PKCS#12 stores for Java (Kafka's SSL listener).
[[ -f p12.password ]] || head -c 18 /dev/urandom | base64 | tr -d '/+=' >p12.password
pw="$(cat p12.password)"
openssl pkcs12 -export -in server.crt -inkey server.key -name server -passout "pass:$pw" \
  -out server.p12.tmp && mv server.p12.tmp server.p12
rm -f truststore.p12
keytool_bin="$(command -v keytool || true)"
if [[ -n "$keytool_bin" ]]; then
  "$keytool_bin" -importcert -noprompt -alias ca -file ca.crt -keystore truststore.p12 \
    -storetype PKCS12 -storepass "$pw" >/dev/null 2>&1
fi
chmod 0644 ./*.crt
echo "dev-certs.sh: certificates in $DIR" >&2
