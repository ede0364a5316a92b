// The relay's window over the outbox, without librdkafka (Redpanda's produce_batcher is the
// model): which sequences are produced and not yet acknowledged, in order, and where the
// cursor may move.
//
//   outbox:   ... [cursor ............ acked_through ......... next_read) ...
//                  deleted with the     every slot below it     read and produced,
//                  next commit          is acknowledged         reports pending
//
// A delivery report acknowledges its slot only if it belongs to the current generation: a
// Restart (after a failed delivery or a new producer) drops the window and sends again from
// acked_through, and the reports of the records produced before it no longer count.
//
// Not thread-safe: the relay thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace feed::bridge::internal {

class OutboxWindow {
 public:
  struct Range {
    uint64_t from;   // first sequence to delete (the old cursor)
    uint64_t until;  // the new cursor: first sequence kept
  };

  // Starts at `cursor`: the first sequence not yet acknowledged.
  void Reset(uint64_t cursor);

  // The entry at `sequence` (>= next_read) was handed to the producer; `acked` for an entry
  // that will never report back (skipped as unreadable). Reads continue after it.
  void Produced(uint64_t sequence, int64_t occurred_at_ms, bool acked = false);
  // A delivery report for `sequence` produced in `generation`. False when it no longer
  // counts (an older generation, or not in the window).
  bool Ack(uint64_t sequence, uint64_t generation);
  // Moves acked_through over the acknowledged prefix; the range the outbox may drop now
  // (nothing when acked_through has not passed the cursor).
  std::optional<Range> AckedPrefix();
  // The outbox committed the deletion of [cursor, until).
  void Committed(uint64_t until) { cursor_ = until; }
  // Drops every slot: the next read starts again at acked_through, in a new generation.
  void Restart();

  uint64_t cursor() const { return cursor_; }
  uint64_t acked_through() const { return acked_through_; }
  uint64_t next_read() const { return next_read_; }
  uint64_t generation() const { return generation_; }
  size_t in_flight() const { return slots_.size(); }
  // Commit time of the oldest unacknowledged entry; 0 when none.
  int64_t oldest_unacked_ms() const { return slots_.empty() ? 0 : slots_.front().occurred_at_ms; }

 private:
  struct Slot {
    uint64_t sequence;
    int64_t occurred_at_ms;
    bool acked;
  };
  std::deque<Slot> slots_;  // sequences [acked_through_, next_read_), in order
  uint64_t cursor_ = 1;
  uint64_t acked_through_ = 1;
  uint64_t next_read_ = 1;
  uint64_t generation_ = 0;
};

}  // namespace feed::bridge::internal
