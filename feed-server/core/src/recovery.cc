// WriterState::Recover: the writer's state rebuilt from the store at startup: the tables as of
// the last checkpoint, then the journal entries after it.
#include <chrono>
#include <random>
#include <thread>

#include "core/level_key.h"
#include "journal.h"
#include "logging.h"
#include "writer_state.h"

namespace feed::core {

using inventory::v1::Reservation;
using inventory::v1::StockLevel;
using storage::Table;

namespace {

int64_t MillisSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

Level ToLevel(const StockLevel& p) {
  return Level{p.on_hand(),         p.reserved(),      p.version(),
               p.allow_backorder(), p.updated_at_ms(), p.sequence()};
}

}  // namespace

absl::StatusOr<WriterState::Recovered> WriterState::Recover() {
  const auto started = std::chrono::steady_clock::now();
  Recovered r;
  if (absl::Status s = LoadState(&r, /*write_meta=*/true); !s.ok()) return s;
  if (absl::Status s = CheckInvariants(); !s.ok()) return s;
  if (!stale_available_.empty()) {
    CoreLogger()->warn("{} stored levels had a stale available field (recomputed), e.g. '{}'",
                       stale_available_.size(), stale_available_.front().key);
    stale_available_.clear();
  }
  CoreLogger()->info(
      "recovered {} stock levels, {} open holds, next sequence {}, store id {} in {} ms (tables "
      "as of sequence {} read in {} ms, then {} journal entries replayed)",
      levels_.size(), holds_.size(), next_sequence_, store_id_, MillisSince(started),
      r.checkpoint_sequence, r.tables_ms, r.replayed_entries);
  return r;
}

absl::Status WriterState::Load(Recovered* out) { return LoadState(out, /*write_meta=*/false); }

absl::Status WriterState::LoadState(Recovered* out, bool write_meta) {
  const auto started = std::chrono::steady_clock::now();
  if (absl::Status s = RecoverMeta(&out->checkpoint_sequence, write_meta); !s.ok()) return s;
  if (absl::Status s = LoadTables(); !s.ok()) return s;
  out->tables_ms = MillisSince(started);
  auto replayed = ReplayJournal(out->checkpoint_sequence);
  if (!replayed.ok()) return replayed.status();
  out->replayed_entries = *replayed;
  out->last_sequence = next_sequence_ - 1;
  stat_holds_ = holds_.size();
  stat_levels_ = levels_.size();
  return absl::OkStatus();
}

void WriterState::NoteStoredLevel(std::string_view key, const StockLevel& record) {
  if (record.available() != record.on_hand() - record.reserved()) {
    stale_available_.push_back(
        {std::string(key), record.available(), record.on_hand() - record.reserved()});
  }
}

absl::Status WriterState::RecoverMeta(uint64_t* checkpoint_sequence, bool write) {
  auto format = storage::ReadMetaSequence(store_, storage::meta_keys::kFormatVersion);
  if (!format.ok()) return format.status();
  if (*format && **format > storage::kFormatVersion) {
    return absl::FailedPreconditionError(fmt::format(
        "the store was written by data format {}, newer than this server's format {}: run a "
        "server of that version or newer",
        **format, storage::kFormatVersion));
  }
  auto next = storage::ReadMetaSequence(store_, storage::meta_keys::kNextSequence);
  if (!next.ok()) return next.status();
  if (*next) next_sequence_ = **next;
  auto checkpoint = storage::ReadMetaSequence(store_, storage::meta_keys::kCheckpointSequence);
  if (!checkpoint.ok()) return checkpoint.status();
  *checkpoint_sequence = checkpoint->value_or(0);

  auto id = store_.Get(Table::kMeta, storage::meta_keys::kStoreId);
  if (!id.ok()) return id.status();
  if (!write) {
    if (id->has_value()) store_id_ = **id;
    return absl::OkStatus();
  }
  auto group = store_.NewWriteGroup();
  if (id->has_value()) {
    store_id_ = **id;
  } else {
    // A new store: a random id keeps event ids unique across stores that restart at 1.
    std::random_device rd;
    const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    store_id_ = fmt::format("{:016x}", v);
    group->Put(Table::kMeta, storage::meta_keys::kStoreId, store_id_);
  }
  if (!*format || **format < storage::kFormatVersion) {
    // Format 2 needs no conversion: this build reads its records as they are. Marking the
    // store 3 keeps an older server, which would miss the keys kept in reservations, off it.
    if (*format) {
      CoreLogger()->info("store {} of data format {} is format {} from now on", store_id_, **format,
                         storage::kFormatVersion);
    }
    group->Put(Table::kMeta, storage::meta_keys::kFormatVersion,
               storage::EncodeSequence(storage::kFormatVersion));
  }
  if (group->Count() > 0) return store_.Commit(*group);
  return absl::OkStatus();
}

// The two tables are independent: read them on two threads (startup with a million levels and
// a million holds is mostly protobuf parsing and hash-map inserts). Every index is sized from
// the store's estimate first, so none is rehashed while it grows.
absl::Status WriterState::LoadTables() {
  absl::Status stock_error, holds_error;
  std::thread stock_reader([&] {
    levels_.reserve(store_.ApproximateCount(Table::kStock));
    absl::Status parse_error;
    stock_error =
        store_.Scan(Table::kStock, "", "", [&](std::string_view key, std::string_view value) {
          StockLevel p;
          if (!p.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
            parse_error = absl::DataLossError("stock level record is corrupt");
            return false;
          }
          levels_.emplace(std::string(key), ToLevel(p));
          NoteStoredLevel(key, p);
          return true;
        });
    if (stock_error.ok()) stock_error = parse_error;
  });
  {
    holds_.reserve(store_.ApproximateCount(Table::kHolds));
    absl::Status parse_error;
    Reservation record;  // reused: parsing into it again allocates nothing new
    holds_error =
        store_.Scan(Table::kHolds, "", "", [&](std::string_view key, std::string_view value) {
          if (!record.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
            parse_error = absl::DataLossError(fmt::format("hold record '{}' is corrupt", key));
            return false;
          }
          Hold& hold = holds_.try_emplace(std::string(key)).first->second;
          if (record.reservation_id() != key || !ToHold(record, &hold)) {
            parse_error = absl::DataLossError(
                fmt::format("hold record '{}' is not a HELD reservation with that id", key));
            return false;
          }
          return true;
        });
    if (holds_error.ok()) holds_error = parse_error;
  }
  stock_reader.join();
  if (!stock_error.ok()) return stock_error;
  return holds_error;
}

// Every entry after the checkpoint, in order, gap-free: its levels and holds into this state,
// all its records into the overlay (which the next checkpoint writes into the tables).
absl::StatusOr<size_t> WriterState::ReplayJournal(uint64_t checkpoint_sequence) {
  size_t entries = 0;
  absl::Status error;
  StockLevel level;
  Reservation reservation;
  auto apply = [&](ReplayedEntry& entry, size_t) {
    const MutationLog& log = entry.mutations;
    for (const auto& op : log.ops()) {
      const std::string_view k = log.key(op), v = log.value(op);
      if (op.table == Table::kStock && !op.deleted) {
        if (!level.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
          error = absl::DataLossError(
              fmt::format("journal entry {}: stock level record is corrupt", entry.last_sequence));
          return false;
        }
        levels_.insert_or_assign(std::string(k), ToLevel(level));
        NoteStoredLevel(k, level);
      } else if (op.table == Table::kHolds && op.deleted) {
        holds_.erase(absl::string_view(k.data(), k.size()));
      } else if (op.table == Table::kHolds) {
        Hold hold;
        if (!reservation.ParseFromArray(v.data(), static_cast<int>(v.size())) ||
            reservation.reservation_id() != k || !ToHold(reservation, &hold)) {
          error = absl::DataLossError(
              fmt::format("journal entry {}: hold record '{}' is corrupt", entry.last_sequence, k));
          return false;
        }
        holds_.insert_or_assign(std::string(k), std::move(hold));
      }
    }
    next_sequence_ = entry.last_sequence + 1;
    overlay_.Apply(std::make_shared<MutationLog>(std::move(entry.mutations)), entry.last_sequence);
    ++entries;
    return true;
  };
  if (absl::Status s = ScanJournalAfter(store_, checkpoint_sequence, next_sequence_, apply);
      !s.ok()) {
    return s;
  }
  if (!error.ok()) return error;
  return entries;
}

absl::Status WriterState::CheckInvariants() {
  std::vector<std::pair<int64_t, std::string_view>> expiring;
  expiring.reserve(holds_.size());
  for (const auto& [id, hold] : holds_) expiring.emplace_back(hold.expires_at_ms, id);
  // Sorted first, the expiry index is built by appending.
  std::sort(expiring.begin(), expiring.end());
  expiry_index_.clear();
  for (const auto& entry : expiring) expiry_index_.insert(expiry_index_.end(), entry);

  std::vector<InvariantViolation> broken;
  if (FindViolations(1, &broken) > 0) {
    return absl::DataLossError("invariant broken: " + broken.front().message);
  }
  return absl::OkStatus();
}

size_t WriterState::FindViolations(size_t max, std::vector<InvariantViolation>* out) const {
  size_t count = 0;
  auto add = [&](std::string_view kind, std::string key, std::string message) {
    if (count++ < max) out->push_back({std::string(kind), std::move(key), std::move(message)});
  };
  // What the open holds reserve per level, keyed by views of the level keys inside holds_
  // (its nodes do not move), so summing a million lines allocates nothing per line.
  absl::flat_hash_map<std::string_view, int64_t> held;
  held.reserve(holds_.size());
  for (const auto& [id, hold] : holds_) {
    for (const auto& line : hold.lines) held[line.level_key] += line.quantity;
  }
  auto where = [](std::string_view sku, std::string_view location) {
    return fmt::format("{}@{}", sku, location);
  };
  size_t levels_with_holds = 0;
  for (const auto& [key, level] : levels_) {
    auto [sku, location] = SplitLevelKey(key);
    auto it = held.find(key);
    int64_t sum = 0;
    if (it != held.end()) {
      sum = it->second;
      ++levels_with_holds;
    }
    if (sum != level.reserved) {
      add("reserved_mismatch", where(sku, location),
          fmt::format("sku '{}' at '{}' has reserved {} but its open holds sum to {}", sku,
                      location, level.reserved, sum));
    }
    if (!level.allow_backorder && level.on_hand - level.reserved < 0) {
      add("negative_available", where(sku, location),
          fmt::format("sku '{}' at '{}' has negative available ({} on hand, {} reserved)", sku,
                      location, level.on_hand, level.reserved));
    }
    if (!level.allow_backorder && level.on_hand < 0) {
      add("negative_on_hand", where(sku, location),
          fmt::format("sku '{}' at '{}' has negative on_hand ({})", sku, location, level.on_hand));
    }
  }
  // Every held level was found above unless some hold names a level that does not exist.
  for (const auto& [level_key, sum] : held) {
    if (levels_with_holds == held.size()) break;
    if (levels_.contains(absl::string_view(level_key.data(), level_key.size()))) continue;
    auto [sku, location] = SplitLevelKey(level_key);
    add("hold_without_level", where(sku, location),
        fmt::format("open holds reserve {} of sku '{}' at '{}', a level that does not exist", sum,
                    sku, location));
  }
  for (const auto& stale : stale_available_) {
    auto [sku, location] = SplitLevelKey(stale.key);
    add("available_mismatch", where(sku, location),
        fmt::format("sku '{}' at '{}' is stored with available {}, but on_hand - reserved is {}",
                    sku, location, stale.available, stale.computed));
  }
  return count;
}

}  // namespace feed::core
