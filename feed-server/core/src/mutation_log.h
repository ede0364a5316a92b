// The table changes of one committed batch, or of one journal entry read back at startup: the
// puts and deletes the journal records and the checkpointer later applies to the tables. Keys
// and values sit back to back in one buffer (one allocation per batch, not one per record), so
// the overlay (table_overlay.h) can view them for as long as it keeps the log.
//
// Not thread-safe while it is built (the writer); immutable once handed on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/message_lite.h"
#include "storage/store.h"

namespace feed::core {

class MutationLog {
 public:
  struct Op {
    storage::Table table;
    bool deleted;
    // The key had no record in its table before this put (a new hold): a later delete of it
    // before any checkpoint cancels both, and neither ever reaches the table.
    bool fresh;
    uint32_t key_at, key_size, value_at, value_size;
  };

  void Put(storage::Table table, std::string_view key, std::string_view value, bool fresh = false) {
    Add(table, key, false, fresh);
    const size_t at = buffer_.size();
    buffer_.append(value);
    Finish(at);
  }
  // The value is `prefix`, `message` serialized, then `suffix`, written in place.
  void PutMessage(storage::Table table, std::string_view key,
                  const google::protobuf::MessageLite& message, std::string_view prefix = {},
                  bool fresh = false, std::string_view suffix = {}) {
    Add(table, key, false, fresh);
    const size_t at = buffer_.size();
    buffer_.append(prefix);
    message.AppendToString(&buffer_);
    buffer_.append(suffix);
    Finish(at);
  }
  void Delete(storage::Table table, std::string_view key) {
    Add(table, key, true, false);
    Finish(buffer_.size());
  }

  const std::vector<Op>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }
  // Bytes of keys and values.
  size_t bytes() const { return buffer_.size(); }
  std::string_view key(const Op& op) const { return {buffer_.data() + op.key_at, op.key_size}; }
  std::string_view value(const Op& op) const {
    return {buffer_.data() + op.value_at, op.value_size};
  }

 private:
  void Add(storage::Table table, std::string_view key, bool deleted, bool fresh) {
    ops_.push_back(Op{table, deleted, fresh, static_cast<uint32_t>(buffer_.size()),
                      static_cast<uint32_t>(key.size()), 0, 0});
    buffer_.append(key);
  }
  void Finish(size_t value_at) {
    ops_.back().value_at = static_cast<uint32_t>(value_at);
    ops_.back().value_size = static_cast<uint32_t>(buffer_.size() - value_at);
  }

  std::string buffer_;
  std::vector<Op> ops_;
};

}  // namespace feed::core
