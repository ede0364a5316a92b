#include "core/store_audit.h"

#include <chrono>

#include "absl/strings/match.h"
#include "fmt/format.h"
#include "journal.h"
#include "table_overlay.h"
#include "writer_state.h"

namespace feed::core {
namespace {

using storage::Table;

// A Store whose reads come from one snapshot: what WriterState::Load reads through. Nothing
// on the audit path writes (Load writes no meta), so the write side refuses.
class SnapshotStore final : public storage::Store {
 public:
  SnapshotStore(const storage::Store& base, std::unique_ptr<storage::ReadView> view)
      : base_(base), view_(std::move(view)) {}
  absl::StatusOr<std::optional<std::string>> Get(Table table, std::string_view key) const override {
    return view_->Get(table, key);
  }
  absl::Status Scan(Table table, std::string_view start, std::string_view prefix,
                    const storage::ScanFn& fn) const override {
    return view_->Scan(table, start, prefix, fn);
  }
  std::unique_ptr<storage::WriteGroup> NewWriteGroup() override { return nullptr; }
  absl::Status Commit(storage::WriteGroup&, storage::CommitMode) override {
    return absl::FailedPreconditionError("an audit does not write");
  }
  std::unique_ptr<storage::ReadView> Snapshot() const override { return nullptr; }
  storage::Durability durability() const override { return base_.durability(); }
  size_t ApproximateCount(Table table) const override { return base_.ApproximateCount(table); }

 private:
  const storage::Store& base_;
  std::unique_ptr<storage::ReadView> view_;
};

void AddViolation(::admin::v1::CheckStoreResponse& report, size_t max, std::string_view kind,
                  std::string key, std::string message) {
  report.set_violation_count(report.violation_count() + 1);
  if (static_cast<size_t>(report.violations_size()) >= max) return;
  auto* v = report.add_violations();
  v->set_kind(std::string(kind));
  v->set_key(std::move(key));
  v->set_message(std::move(message));
}

// The journal entries from the one holding `from` up to `through` must follow each other
// without a gap (the relay has yet to send them; entries after the checkpoint are checked by
// the replay). Without a relay cursor (`from` 0) every stored entry is checked.
absl::StatusOr<uint64_t> CheckJournalUpTo(const storage::ReadView& view, uint64_t from,
                                          uint64_t through, ::admin::v1::CheckStoreResponse& report,
                                          size_t max) {
  uint64_t entries = 0;
  uint64_t expected = from;  // 0: whatever the first entry starts at
  bool stop = false;
  absl::Status s = view.Scan(
      Table::kJournal, storage::EncodeSequence(from), "",
      [&](std::string_view key, std::string_view value) {
        auto entry = DecodeJournalEntry(key, value);
        if (!entry.ok()) {
          auto seq = storage::DecodeSequence(key);
          AddViolation(report, max, "corrupt_record", fmt::format("journal/{}", seq.value_or(0)),
                       std::string(entry.status().message()));
          stop = true;
          return false;
        }
        if (entry->first_sequence > through) return false;
        ++entries;
        const bool first = entries == 1;
        if (first ? (from != 0 && entry->first_sequence > from)
                  : entry->first_sequence != expected) {
          AddViolation(report, max, "journal_gap", fmt::format("{}", expected),
                       fmt::format("the journal has no entry for sequences {}..{}", expected,
                                   entry->first_sequence - 1));
        }
        expected = entry->last_sequence + 1;
        return true;
      });
  if (!s.ok()) return s;
  if (!stop && from != 0 && from <= through && expected <= through) {
    AddViolation(report, max, "journal_gap", fmt::format("{}", std::max(expected, from)),
                 fmt::format("the journal has no entry for sequences {}..{}",
                             std::max(expected, from), through));
  }
  return entries;
}

}  // namespace

absl::StatusOr<::admin::v1::CheckStoreResponse> AuditStore(const storage::Store& store,
                                                           const Clock& clock,
                                                           const CoreOptions& options,
                                                           size_t max_violations) {
  const auto started = std::chrono::steady_clock::now();
  ::admin::v1::CheckStoreResponse report;
  report.set_checked_at_ms(clock.NowMillis());
  SnapshotStore view(store, store.Snapshot());

  auto stored_cursor = storage::ReadMetaSequence(view, storage::meta_keys::kRelayCursor);
  if (!stored_cursor.ok()) return stored_cursor.status();
  auto stored_checkpoint = storage::ReadMetaSequence(view, storage::meta_keys::kCheckpointSequence);
  if (!stored_checkpoint.ok()) return stored_checkpoint.status();
  const uint64_t cursor = stored_cursor->value_or(0);
  const uint64_t checkpoint = stored_checkpoint->value_or(0);
  report.set_relay_cursor(cursor);
  report.set_checkpoint_sequence(checkpoint);

  // The entries the relay has yet to send that the checkpoint already includes.
  auto journal = CheckJournalUpTo(view, cursor, checkpoint, report, max_violations);
  if (!journal.ok()) return journal.status();

  TableOverlay overlay(view);
  WriterState state(view, overlay, clock, options);
  WriterState::Recovered loaded;
  absl::Status s = state.Load(&loaded);
  report.set_journal_entries_checked(*journal + loaded.replayed_entries);
  if (s.code() == absl::StatusCode::kDataLoss) {
    const bool gap = absl::StrContains(s.message(), "journal gap");
    AddViolation(report, max_violations, gap ? "journal_gap" : "corrupt_record", "",
                 std::string(s.message()));
  } else if (!s.ok()) {
    return s;
  } else {
    std::vector<InvariantViolation> found;
    const size_t room = max_violations - static_cast<size_t>(report.violations_size());
    const size_t count = state.FindViolations(room, &found);
    report.set_violation_count(report.violation_count() + count);
    for (auto& v : found) {
      auto* out = report.add_violations();
      out->set_kind(std::move(v.kind));
      out->set_key(std::move(v.key));
      out->set_message(std::move(v.message));
    }
    report.set_as_of_sequence(loaded.last_sequence);
    report.set_levels_checked(state.stock_levels());
    report.set_holds_checked(state.open_holds());
  }
  report.set_duration_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - started)
                             .count());
  return report;
}

}  // namespace feed::core
