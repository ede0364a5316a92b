#include "cluster/shard_store.h"

#include "fmt/format.h"
#include "internal/v1/records.pb.h"

namespace feed::cluster {

absl::Status StoreLoggedEntry(storage::Store& store, std::string_view journal_entry,
                              int64_t offset) {
  internal::v1::JournalEntry entry;
  if (!entry.ParseFromArray(journal_entry.data(), static_cast<int>(journal_entry.size())) ||
      entry.events_size() == 0 ||
      entry.last_sequence() - entry.first_sequence() + 1 !=
          static_cast<uint64_t>(entry.events_size())) {
    return absl::DataLossError(
        fmt::format("shard log offset {}: not a journal entry with events", offset));
  }
  auto group = store.NewWriteGroup();
  group->Put(storage::Table::kJournal, storage::EncodeSequence(entry.last_sequence()),
             journal_entry);
  group->Put(storage::Table::kMeta, storage::meta_keys::kShardLogOffset,
             storage::EncodeSequence(static_cast<uint64_t>(offset)));
  return store.Commit(*group, storage::CommitMode::kNoSync);
}

absl::StatusOr<int64_t> NextLogOffset(const storage::ReadView& store) {
  auto stored = storage::ReadMetaSequence(store, storage::meta_keys::kShardLogOffset);
  if (!stored.ok()) return stored.status();
  return stored->has_value() ? static_cast<int64_t>(**stored) + 1 : 0;
}

}  // namespace feed::cluster
