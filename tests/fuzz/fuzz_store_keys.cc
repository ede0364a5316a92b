// fuzz_store_keys: the key and value encodings shared by the writer and the relay
// (storage/store.h).
//
//   - DecodeSequence accepts exactly 8 bytes, and re-encoding gives the same bytes;
//   - EncodeSequence gives 8 bytes that decode to the value and sort like the numbers
//     (the outbox and the relay cursor rely on byte order = sequence order);
//   - DecodeTimestamped accepts 8 bytes or more, and re-encoding gives the same bytes;
//   - EncodeTimestamped round-trips any time (negative too) and any payload.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "fuzz_common.h"
#include "storage/store.h"

namespace {

uint64_t Load64(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  std::memcpy(&v, p, std::min(n, sizeof v));
  return v;
}

int Sign(int c) { return (c > 0) - (c < 0); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace st = feed::storage;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // Decoding arbitrary bytes.
  auto seq = st::DecodeSequence(bytes);
  FUZZ_CHECK(seq.has_value() == (size == 8), fmt::format("DecodeSequence of {} bytes", size));
  if (seq) FUZZ_CHECK(st::EncodeSequence(*seq) == bytes, fmt::format("sequence {}", *seq));

  int64_t created = 0;
  std::string_view payload;
  bool ok = st::DecodeTimestamped(bytes, &created, &payload);
  FUZZ_CHECK(ok == (size >= 8), fmt::format("DecodeTimestamped of {} bytes", size));
  if (ok) {
    FUZZ_CHECK(payload.size() == size - 8, fmt::format("{}", payload.size()));
    FUZZ_CHECK(st::EncodeTimestamped(created, payload) == bytes,
               fmt::format("created {}", created));
  }

  // Encoding values taken from the input.
  uint64_t a = Load64(data, size);
  uint64_t b = size > 8 ? Load64(data + 8, size - 8) : ~a;
  std::string ea = st::EncodeSequence(a), eb = st::EncodeSequence(b);
  FUZZ_CHECK(ea.size() == 8 && eb.size() == 8, "EncodeSequence size");
  FUZZ_CHECK(st::DecodeSequence(ea) == a && st::DecodeSequence(eb) == b,
             fmt::format("{} {}", a, b));
  int order = Sign(std::memcmp(ea.data(), eb.data(), 8));
  FUZZ_CHECK(order == (a < b   ? -1
                       : a > b ? 1
                               : 0),
             fmt::format("byte order of {} and {} is not numeric order", a, b));

  std::string_view rest = size > 8 ? bytes.substr(8) : std::string_view();
  std::string value = st::EncodeTimestamped(static_cast<int64_t>(a), rest);
  FUZZ_CHECK(value.size() == 8 + rest.size(), fmt::format("{}", value.size()));
  int64_t back = 0;
  std::string_view back_payload;
  FUZZ_CHECK(st::DecodeTimestamped(value, &back, &back_payload), "decoding our own value");
  FUZZ_CHECK(back == static_cast<int64_t>(a) && back_payload == rest,
             fmt::format("timestamp {} came back as {}", static_cast<int64_t>(a), back));
  return 0;
}
