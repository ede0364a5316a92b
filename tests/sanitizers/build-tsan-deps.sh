# Builds abseil, gRPC and RocksDB with -fsanitize=thread into a cached prefix, for the TSan
# build of the whole suite (`FEED_SANITIZE=thread tests/run.sh` calls this and puts
# PREFIX/lib on LD_LIBRARY_PATH for the tests).
#
# Why: Debian's libraries are not instrumented, so TSan cannot see the atomics that order a
# call started on one thread and completed on another inside them (a gRPC completion, a
# RocksDB flush), and it reports the library's inline header code compiled into our
# binaries, on both sides, as racing (1,381 reports in one gRPC test before). Built here with
# TSan, their own ordering is visible. Same versions and Debian patches as the installed
# packages (sources from deb.debian.org, checked by SHA-256), so the libraries have the same
# sonames and ABI and simply replace Debian's at run time: the project still compiles
# against the installed headers. protobuf, re2, c-ares, OpenSSL and librdkafka stay
# Debian's (tsan.supp).
#
# Takes about 35 minutes on 2 cores the first time; afterwards it only checks the stamps.
# Usage: build-tsan-deps.sh [PREFIX]   (default .cache/tsan-deps; libraries in PREFIX/lib)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PREFIX="${1:-$REPO/.cache/tsan-deps}"
JOBS="${JOBS:-2}"
POOL=http://deb.debian.org/debian/pool/main

ABSL_VERSION=20220623.1
ABSL_DEBIAN=20220623.1-1+deb12u2
GRPC_VERSION=1.51.1
GRPC_DEBIAN=1.51.1-3
ROCKSDB_VERSION=7.8.3
ROCKSDB_DEBIAN=7.8.3-2
STAMP="$PREFIX/.built-absl-$ABSL_DEBIAN-grpc-$GRPC_DEBIAN-rocksdb-$ROCKSDB_DEBIAN"
if [ -f "$STAMP" ]; then
  exit 0
fi

WORK="$REPO/.cache/tsan-deps-src"
mkdir -p "$WORK" "$PREFIX"
cd "$WORK"

fetch() {  # fetch URL SHA256: download once, verify every time
  local file="${1##*/}"
  if [ ! -f "$file" ]; then
    curl -fsSL --retry 3 -o "$file.part" "$1"
    mv "$file.part" "$file"
  fi
  echo "$2  $file" | sha256sum -c --quiet -
}

# Unpacks the upstream tarball and Debian's packaging, then applies Debian's patches in
# the order of debian/patches/series (commented-out lines skipped).
unpack() {  # unpack DIR ORIG DEBIAN
  rm -rf "$1" && mkdir -p "$1"
  tar xzf "$2" -C "$1" --strip-components=1
  tar xJf "$3" -C "$1"
  (cd "$1" && grep -v '^\s*#' debian/patches/series | while read -r p; do
     [ -n "$p" ] && patch -p1 -s < "debian/patches/$p"
   done)
}

TSAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -g -O1"
COMMON=(-G Ninja -DCMAKE_BUILD_TYPE=None -DBUILD_SHARED_LIBS=ON -DCMAKE_CXX_STANDARD=17
        "-DCMAKE_C_FLAGS=$TSAN_FLAGS" "-DCMAKE_CXX_FLAGS=$TSAN_FLAGS"
        -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread)
mkdir -p "$PREFIX/lib"

TRIPLE=$(gcc -dumpmachine)

if [ ! -f "$PREFIX/.built-absl-$ABSL_DEBIAN" ]; then
echo "tsan-deps: abseil $ABSL_DEBIAN"
fetch "$POOL/a/abseil/abseil_$ABSL_VERSION.orig.tar.gz" \
  abfe2897f3a30edaa74bc34365afe3c2a3cd012091a97dc7e008f7016adcd5fe
fetch "$POOL/a/abseil/abseil_$ABSL_DEBIAN.debian.tar.xz" \
  e08490fc7b6f3beca1925953b0c4fb92df2de5e2a01295e4641e2a3d4e528eeb
unpack abseil "abseil_$ABSL_VERSION.orig.tar.gz" "abseil_$ABSL_DEBIAN.debian.tar.xz"
cmake -S abseil -B abseil/build "${COMMON[@]}" -DABSL_PROPAGATE_CXX_STD=ON >/dev/null
cmake --build abseil/build -j"$JOBS"
find abseil/build -name 'libabsl_*.so*' -exec cp -P {} "$PREFIX/lib/" \;
touch "$PREFIX/.built-absl-$ABSL_DEBIAN"
fi

if [ ! -f "$PREFIX/.built-grpc-$GRPC_DEBIAN" ]; then
echo "tsan-deps: gRPC $GRPC_DEBIAN"
fetch "$POOL/g/grpc/grpc_$GRPC_VERSION.orig.tar.gz" \
  b55696fb249669744de3e71acc54a9382bea0dce7cd5ba379b356b12b82d4229
fetch "$POOL/g/grpc/grpc_$GRPC_DEBIAN.debian.tar.xz" \
  767b69da166bae708a54c4740056d9e847d57d89885173016bfc57ebbf154b2d
unpack grpc "grpc_$GRPC_VERSION.orig.tar.gz" "grpc_$GRPC_DEBIAN.debian.tar.xz"
# Debian's providers (abseil's headers and sonames are the same as the ones built above);
# only libgrpc++ and what it links (libgrpc, libgpr, libupb, libaddress_sorting); no tests,
# no code generators (its CMake still wants libprotoc's path: Debian's, never linked here).
# libgrpc++_reflection stays Debian's: it only serves reflection requests through grpc++.
cmake -S grpc -B grpc/build "${COMMON[@]}" \
  -DgRPC_ABSL_PROVIDER=package -DgRPC_CARES_PROVIDER=package -DgRPC_PROTOBUF_PROVIDER=package \
  -DgRPC_RE2_PROVIDER=package -DgRPC_SSL_PROVIDER=package -DgRPC_ZLIB_PROVIDER=package \
  -DgRPC_BENCHMARK_PROVIDER=none -DgRPC_BUILD_TESTS=OFF -DgRPC_BACKWARDS_COMPATIBILITY_MODE=OFF \
  -DgRPC_BUILD_CODEGEN=OFF -DgRPC_BUILD_CSHARP_EXT=OFF \
  -DProtobuf_PROTOC_LIBRARY="$(ls /usr/lib/"$TRIPLE"/libprotoc.so.* | head -1)" >/dev/null
cmake --build grpc/build -j"$JOBS" --target grpc++
find grpc/build -maxdepth 1 -name 'lib*.so*' -exec cp -P {} "$PREFIX/lib/" \;
touch "$PREFIX/.built-grpc-$GRPC_DEBIAN"
fi

if [ ! -f "$PREFIX/.built-rocksdb-$ROCKSDB_DEBIAN" ]; then
echo "tsan-deps: RocksDB $ROCKSDB_DEBIAN"
fetch "$POOL/r/rocksdb/rocksdb_$ROCKSDB_VERSION.orig.tar.gz" \
  b85408a374770897332bf15e51620a5f35720dd416a4749e3899057f9cfaf84d
fetch "$POOL/r/rocksdb/rocksdb_$ROCKSDB_DEBIAN.debian.tar.xz" \
  4ead930612734d2b79e8f5e72e51659004c5a47f8d6bb90dea8eb42fd6d88a02
unpack rocksdb "rocksdb_$ROCKSDB_VERSION.orig.tar.gz" "rocksdb_$ROCKSDB_DEBIAN.debian.tar.xz"
# Debian's compression choices (the store's files must stay readable both ways); only the
# shared library.
cmake -S rocksdb -B rocksdb/build "${COMMON[@]}" -DWITH_BZ2=ON -DWITH_LZ4=ON -DWITH_ZLIB=ON \
  -DWITH_ZSTD=ON -DWITH_SNAPPY=ON -DWITH_GFLAGS=OFF -DROCKSDB_BUILD_SHARED=ON \
  -DWITH_BENCHMARK_TOOLS=OFF -DWITH_CORE_TOOLS=OFF -DWITH_TOOLS=OFF -DWITH_TESTS=OFF \
  -DPORTABLE=ON -DFAIL_ON_WARNINGS=OFF >/dev/null
cmake --build rocksdb/build -j"$JOBS" --target rocksdb-shared
find rocksdb/build -maxdepth 1 -name 'librocksdb.so*' -exec cp -P {} "$PREFIX/lib/" \;
touch "$PREFIX/.built-rocksdb-$ROCKSDB_DEBIAN"
fi

# The replacements must carry the sonames the project was linked against.
for lib in libgrpc++.so libgrpc.so libgpr.so libabsl_synchronization.so librocksdb.so; do
  want=$(objdump -p "/usr/lib/$TRIPLE/$lib" | awk '/SONAME/ {print $2}')
  [ -e "$PREFIX/lib/$want" ] || { echo "tsan-deps: $want missing in $PREFIX/lib" >&2; exit 1; }
done

touch "$STAMP"
echo "tsan-deps: ready in $PREFIX/lib"
