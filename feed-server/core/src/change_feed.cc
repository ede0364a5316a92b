#include "core/change_feed.h"

#include <algorithm>

namespace feed::core {

ChangeFeed::Attach ChangeFeed::Subscribe(ChangeListener* listener, uint64_t after_sequence) {
  std::lock_guard lock(mu_);
  Attach a;
  a.last_sequence = last_sequence_;
  a.oldest_retained = retained_.empty() ? last_sequence_ + 1 : retained_.front()->sequence();
  if (after_sequence < last_sequence_) {
    if (after_sequence + 1 < a.oldest_retained) {
      a.gap = true;
    } else {
      for (const auto& e : retained_) {
        if (e->sequence() > after_sequence) a.replay.push_back(e);
      }
    }
  }
  listeners_.push_back(listener);
  return a;
}

void ChangeFeed::Unsubscribe(ChangeListener* listener) {
  std::lock_guard lock(mu_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
}

void ChangeFeed::Publish(const std::vector<EventPtr>& events) {
  if (events.empty()) return;
  std::lock_guard lock(mu_);
  for (const auto& e : events) {
    retained_.push_back(e);
    if (retained_.size() > retention_) retained_.pop_front();
  }
  last_sequence_ = events.back()->sequence();
  for (ChangeListener* l : listeners_) l->OnEvents(events);
}

void ChangeFeed::Reset(uint64_t last_sequence) {
  std::lock_guard lock(mu_);
  retained_.clear();
  last_sequence_ = last_sequence;
}

uint64_t ChangeFeed::last_sequence() const {
  std::lock_guard lock(mu_);
  return last_sequence_;
}

size_t ChangeFeed::listeners() const {
  std::lock_guard lock(mu_);
  return listeners_.size();
}

}  // namespace feed::core
