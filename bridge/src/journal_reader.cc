#include "journal_reader.h"

#include <optional>

#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/util/time_util.h"
#include "google/protobuf/wire_format_lite.h"

namespace feed::bridge::internal {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// The fields of JournalEntry (proto/internal/v1/records.proto).
constexpr uint32_t kFirstSequence = 1, kLastSequence = 2, kEvent = 3;

// Calls `event(sequence, bytes)` for the entry's events; its mutations are passed over.
// False when the bytes are not an entry keyed `key_sequence`.
bool ForEachEvent(std::string_view value, uint64_t key_sequence, std::string* why,
                  const std::function<bool(uint64_t, std::string_view)>& event, bool* stopped) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(value.data()),
                      static_cast<int>(value.size()));
  uint64_t first = 0, last = 0, count = 0;
  std::vector<std::string_view> events;
  while (uint32_t tag = in.ReadTag()) {
    const uint32_t field = tag >> 3;
    if (field == kFirstSequence || field == kLastSequence) {
      uint64_t v = 0;
      if ((tag & 7) != 1 || !in.ReadLittleEndian64(&v)) {
        *why = "bad sequence field";
        return false;
      }
      (field == kFirstSequence ? first : last) = v;
    } else if (field == kEvent) {
      uint32_t size = 0;
      const void* data = nullptr;
      int available = 0;
      if ((tag & 7) != 2 || !in.ReadVarint32(&size) ||
          !in.GetDirectBufferPointer(&data, &available) ||
          static_cast<uint32_t>(available) < size) {
        // GetDirectBufferPointer fails on an empty event, which the writer never stores.
        *why = "bad event field";
        return false;
      }
      events.emplace_back(static_cast<const char*>(data), size);
      in.Skip(static_cast<int>(size));
      ++count;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      *why = fmt::format("bad field {}", field);
      return false;
    }
  }
  if (!in.ConsumedEntireMessage() || last != key_sequence || count == 0 ||
      last - first + 1 != count) {
    *why = fmt::format("it says sequences {}..{} and holds {} events", first, last, count);
    return false;
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (!event(first + i, events[i])) {
      *stopped = true;
      return true;
    }
  }
  return true;
}

}  // namespace

absl::Status ReadJournal(const storage::ReadView& view, uint64_t from,
                         const JournalVisitor& visitor) {
  return view.Scan(storage::Table::kJournal, storage::EncodeSequence(from), "",
                   [&](std::string_view key, std::string_view value) {
                     const std::optional<uint64_t> last = storage::DecodeSequence(key);
                     std::string why;
                     bool stopped = false;
                     if (!last)
                       return visitor.corrupt(0, fmt::format("a key of {} bytes", key.size()));
                     auto event = [&](uint64_t sequence, std::string_view bytes) {
                       return sequence < from || visitor.event(sequence, bytes);
                     };
                     if (!ForEachEvent(value, *last, &why, event, &stopped))
                       return visitor.corrupt(*last, why);
                     return !stopped;
                   });
}

absl::StatusOr<std::optional<uint64_t>> FirstJournalSequence(const storage::ReadView& view) {
  std::optional<uint64_t> first;
  absl::Status error;
  absl::Status s = view.Scan(
      storage::Table::kJournal, "", "", [&](std::string_view key, std::string_view value) {
        std::optional<uint64_t> last = storage::DecodeSequence(key);
        std::string why;
        bool stopped = false;
        auto take = [&](uint64_t sequence, std::string_view) {
          first = sequence;
          return false;
        };
        if (!last || !ForEachEvent(value, *last, &why, take, &stopped)) {
          error = absl::DataLossError(
              fmt::format("relay: the first journal entry is corrupt: {}", why));
        }
        return false;
      });
  if (!s.ok()) return s;
  if (!error.ok()) return error;
  return first;
}

absl::StatusOr<std::optional<int64_t>> FirstEventTime(const storage::ReadView& view,
                                                      uint64_t from) {
  std::optional<int64_t> at;
  JournalVisitor first;
  first.event = [&](uint64_t, std::string_view bytes) {
    events::v1::Event e;
    if (e.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      at = google::protobuf::util::TimeUtil::TimestampToMilliseconds(e.occurred_at());
    }
    return false;
  };
  first.corrupt = [](uint64_t, std::string_view) { return true; };
  if (absl::Status s = ReadJournal(view, from, first); !s.ok()) return s;
  return at;
}

}  // namespace feed::bridge::internal
