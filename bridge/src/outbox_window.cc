#include "outbox_window.h"

#include <algorithm>

namespace feed::bridge::internal {

void OutboxWindow::Reset(uint64_t cursor) {
  slots_.clear();
  cursor_ = acked_through_ = next_read_ = cursor;
}

void OutboxWindow::Produced(uint64_t sequence, int64_t occurred_at_ms, bool acked) {
  slots_.push_back(Slot{sequence, occurred_at_ms, acked});
  next_read_ = sequence + 1;
}

bool OutboxWindow::Ack(uint64_t sequence, uint64_t generation) {
  if (generation != generation_) return false;
  auto it = std::lower_bound(slots_.begin(), slots_.end(), sequence,
                             [](const Slot& s, uint64_t seq) { return s.sequence < seq; });
  if (it == slots_.end() || it->sequence != sequence) return false;
  it->acked = true;
  return true;
}

std::optional<OutboxWindow::Range> OutboxWindow::AckedPrefix() {
  while (!slots_.empty() && slots_.front().acked) {
    acked_through_ = slots_.front().sequence + 1;
    slots_.pop_front();
  }
  if (acked_through_ <= cursor_) return std::nullopt;
  return Range{cursor_, acked_through_};
}

void OutboxWindow::Restart() {
  slots_.clear();
  next_read_ = acked_through_;
  ++generation_;
}

}  // namespace feed::bridge::internal
