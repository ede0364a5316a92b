#include "cluster/shard_store.h"

#include "fmt/format.h"
#include "internal/v1/records.pb.h"
#include "internal/v1/shard_log.pb.h"

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

absl::Status StoreClaim(storage::Store& store, const ShardOwner& owner) {
  internal::v1::ShardLogRecord claim;
  claim.set_epoch(owner.epoch);
  claim.set_node_id(owner.node_id);
  claim.mutable_claim()->set_address(owner.address);
  auto group = store.NewWriteGroup();
  group->Put(storage::Table::kMeta, storage::meta_keys::kShardLogOwner, claim.SerializeAsString());
  group->Put(storage::Table::kMeta, storage::meta_keys::kShardLogOffset,
             storage::EncodeSequence(static_cast<uint64_t>(owner.claim_offset)));
  return store.Commit(*group, storage::CommitMode::kNoSync);
}

absl::StatusOr<ShardLogPosition> LoadShardLogPosition(const storage::ReadView& store) {
  ShardLogPosition position;
  auto offset = storage::ReadMetaSequence(store, storage::meta_keys::kShardLogOffset);
  if (!offset.ok()) return offset.status();
  if (!offset->has_value()) return position;
  position.next_offset = static_cast<int64_t>(**offset) + 1;
  auto owner = store.Get(storage::Table::kMeta, storage::meta_keys::kShardLogOwner);
  if (!owner.ok()) return owner.status();
  if (!owner->has_value()) {
    return absl::DataLossError(
        fmt::format("the store holds the shard log up to offset {} but not its owner ({})",
                    **offset, storage::meta_keys::kShardLogOwner));
  }
  internal::v1::ShardLogRecord claim;
  if (!claim.ParseFromString(**owner) || !claim.has_claim()) {
    return absl::DataLossError(
        fmt::format("meta {} is not a claim", storage::meta_keys::kShardLogOwner));
  }
  position.owner = ShardOwner{claim.epoch(), claim.node_id(), claim.claim().address(), -1};
  return position;
}

}  // namespace feed::cluster
