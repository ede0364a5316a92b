#include "journal.h"

#include "core/format_migration.h"
#include "fmt/format.h"

namespace feed::core {
namespace {

// Wire types and field tags of JournalEntry and JournalMutation (records.proto).
constexpr uint8_t kEntryFirstSequence = (1 << 3) | 1;  // fixed64
constexpr uint8_t kEntryLastSequence = (2 << 3) | 1;   // fixed64
constexpr uint8_t kEntryEvent = (3 << 3) | 2;          // bytes
constexpr uint8_t kEntryMutation = (4 << 3) | 2;       // message
constexpr uint8_t kMutationTable = (1 << 3) | 0;       // varint
constexpr uint8_t kMutationKey = (2 << 3) | 2;         // bytes
constexpr uint8_t kMutationValue = (3 << 3) | 2;       // bytes
constexpr uint8_t kMutationDeleted = (4 << 3) | 0;     // varint

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendBytes(std::string* out, uint8_t tag, std::string_view bytes) {
  out->push_back(static_cast<char>(tag));
  AppendVarint(out, bytes.size());
  out->append(bytes);
}

}  // namespace

std::string JournalEntryOfEvent(uint64_t sequence, std::string_view event) {
  std::string out;
  out.push_back(static_cast<char>(kEntryFirstSequence));
  AppendFixed64(&out, sequence);
  out.push_back(static_cast<char>(kEntryLastSequence));
  AppendFixed64(&out, sequence);
  out.push_back(static_cast<char>(kEntryEvent));
  AppendVarint(&out, event.size());
  out.append(event);
  return out;
}

void EncodeJournalEntry(const std::vector<std::shared_ptr<events::v1::Event>>& events,
                        const MutationLog& mutations, std::string* out) {
  out->clear();
  if (!events.empty()) {
    out->push_back(static_cast<char>(kEntryFirstSequence));
    AppendFixed64(out, events.front()->sequence());
    out->push_back(static_cast<char>(kEntryLastSequence));
    AppendFixed64(out, events.back()->sequence());
  }
  for (const auto& e : events) {
    const size_t size = e->ByteSizeLong();
    out->push_back(static_cast<char>(kEntryEvent));
    AppendVarint(out, size);
    const size_t at = out->size();
    out->resize(at + size);
    e->SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out->data() + at));
  }
  for (const auto& op : mutations.ops()) {
    const std::string_view key = mutations.key(op);
    const std::string_view value = mutations.value(op);
    const auto table = static_cast<uint64_t>(op.table);
    size_t size = 1 + VarintSize(table) + 1 + VarintSize(key.size()) + key.size();
    if (op.deleted) {
      size += 2;
    } else {
      size += 1 + VarintSize(value.size()) + value.size();
    }
    out->push_back(static_cast<char>(kEntryMutation));
    AppendVarint(out, size);
    out->push_back(static_cast<char>(kMutationTable));
    AppendVarint(out, table);
    AppendBytes(out, kMutationKey, key);
    if (op.deleted) {
      out->push_back(static_cast<char>(kMutationDeleted));
      out->push_back(1);
    } else {
      AppendBytes(out, kMutationValue, value);
    }
  }
}

absl::StatusOr<ReplayedEntry> DecodeJournalEntry(std::string_view key, std::string_view value) {
  const std::optional<uint64_t> keyed = storage::DecodeSequence(key);
  internal::v1::JournalEntry entry;
  if (!keyed || !entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(fmt::format(
        "journal entry of {} bytes under key of {} bytes is corrupt", value.size(), key.size()));
  }
  const uint64_t events = static_cast<uint64_t>(entry.events_size());
  if (entry.last_sequence() != *keyed || events == 0 ||
      entry.last_sequence() - entry.first_sequence() + 1 != events) {
    return absl::DataLossError(
        fmt::format("journal entry {} is corrupt: it says sequences {}..{} and holds {} events",
                    *keyed, entry.first_sequence(), entry.last_sequence(), events));
  }
  ReplayedEntry out;
  out.first_sequence = entry.first_sequence();
  out.last_sequence = entry.last_sequence();
  for (const auto& m : entry.mutations()) {
    if (m.table() < 0 || m.table() >= storage::kTableCount ||
        m.table() == static_cast<int>(storage::Table::kJournal)) {
      return absl::DataLossError(
          fmt::format("journal entry {} changes an unknown table {}", *keyed, m.table()));
    }
    const auto table = static_cast<storage::Table>(m.table());
    if (m.deleted()) {
      out.mutations.Delete(table, m.key());
    } else {
      out.mutations.Put(table, m.key(), m.value());
    }
  }
  return out;
}

absl::Status ScanJournalAfter(const storage::ReadView& view, uint64_t checkpoint_sequence,
                              uint64_t first_sequence,
                              const std::function<bool(ReplayedEntry& entry, size_t bytes)>& each) {
  uint64_t expected = first_sequence;
  absl::Status error;
  absl::Status scanned =
      view.Scan(storage::Table::kJournal, storage::EncodeSequence(checkpoint_sequence + 1), "",
                [&](std::string_view key, std::string_view value) {
                  auto entry = DecodeJournalEntry(key, value);
                  if (!entry.ok()) {
                    error = entry.status();
                    return false;
                  }
                  if (entry->first_sequence != expected) {
                    error = absl::DataLossError(
                        fmt::format("journal gap: expected an entry from sequence {}, found {}..{}",
                                    expected, entry->first_sequence, entry->last_sequence));
                    return false;
                  }
                  expected = entry->last_sequence + 1;
                  return each(*entry, value.size());
                });
  if (!scanned.ok()) return scanned;
  return error;
}

std::optional<int64_t> JournalEntryTime(std::string_view value) {
  internal::v1::JournalEntry entry;
  events::v1::Event first;
  if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size())) ||
      entry.events_size() == 0 || !first.ParseFromString(entry.events(0))) {
    return std::nullopt;
  }
  return first.occurred_at().seconds() * 1000 + first.occurred_at().nanos() / 1'000'000;
}

absl::StatusOr<std::vector<EventPtr>> ReadJournalEvents(const storage::ReadView& view,
                                                        uint64_t first, uint64_t last) {
  std::vector<EventPtr> events;
  absl::Status error;
  internal::v1::JournalEntry entry;
  absl::Status s = view.Scan(
      storage::Table::kJournal, storage::EncodeSequence(first), "",
      [&](std::string_view key, std::string_view value) {
        if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          error = absl::DataLossError(
              fmt::format("journal entry of {} bytes is corrupt", value.size()));
          return false;
        }
        for (int i = 0; i < entry.events_size(); ++i) {
          const uint64_t sequence = entry.first_sequence() + static_cast<uint64_t>(i);
          if (sequence < first || sequence > last) continue;
          auto event = std::make_shared<events::v1::Event>();
          if (!event->ParseFromString(entry.events(i)) || event->sequence() != sequence) {
            error = absl::DataLossError(fmt::format("journal event {} is corrupt", sequence));
            return false;
          }
          // Only a run that continues the one before it counts.
          if (!events.empty() && events.back()->sequence() + 1 != sequence) events.clear();
          events.push_back(std::move(event));
        }
        return entry.last_sequence() < last;
      });
  if (!s.ok()) return s;
  if (!error.ok()) return error;
  if (!events.empty() && events.back()->sequence() != last) events.clear();
  return events;
}

}  // namespace feed::core
