#include "core/change_feed.h"

#include <algorithm>

namespace feed::core {

ChangeFeed::Attach ChangeFeed::Subscribe(ChangeListener* listener, uint64_t after_sequence,
                                         std::vector<std::string> keys) {
  std::lock_guard lock(mu_);
  Attach a;
  if (!closed_.ok()) {
    listener->OnClosed(closed_);
    return a;
  }
  const uint64_t last_sequence = last_sequence_.load(std::memory_order_relaxed);
  a.last_sequence = last_sequence;
  a.oldest_retained = retained_.empty() ? last_sequence + 1 : retained_.front()->sequence();
  if (after_sequence < last_sequence) {
    if (after_sequence + 1 < a.oldest_retained) {
      a.gap = true;
    } else {
      for (const auto& e : retained_) {
        if (e->sequence() > after_sequence) a.replay.push_back(e);
      }
    }
  }
  if (keys.empty()) {
    listeners_.push_back(listener);
    return a;
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (const auto& k : keys) keyed_[k].push_back(listener);
  keys_of_[listener] = std::move(keys);
  return a;
}

void ChangeFeed::Unsubscribe(ChangeListener* listener) {
  std::lock_guard lock(mu_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
  auto it = keys_of_.find(listener);
  if (it == keys_of_.end()) return;
  for (const auto& k : it->second) {
    auto entry = keyed_.find(k);
    auto& v = entry->second;
    v.erase(std::remove(v.begin(), v.end(), listener), v.end());
    if (v.empty()) keyed_.erase(entry);
  }
  keys_of_.erase(it);
}

void ChangeFeed::Close(absl::Status why) {
  std::lock_guard lock(mu_);
  if (!closed_.ok()) return;
  closed_ = why.ok() ? absl::UnavailableError("the change feed ended") : std::move(why);
  for (ChangeListener* l : listeners_) l->OnClosed(closed_);
  for (auto& [l, keys] : keys_of_) l->OnClosed(closed_);
  listeners_.clear();
  keyed_.clear();
  keys_of_.clear();
}

void ChangeFeed::Publish(const std::vector<EventPtr>& events) {
  if (events.empty()) return;
  std::lock_guard lock(mu_);
  for (const auto& e : events) {
    retained_.push_back(e);
    if (retained_.size() > retention_) retained_.pop_front();
  }
  for (ChangeListener* l : listeners_) l->OnEvents(events);
  if (!keyed_.empty()) DeliverKeyed(events);
  last_sequence_.store(events.back()->sequence(), std::memory_order_release);
}

void ChangeFeed::DeliverKeyed(const std::vector<EventPtr>& events) {
  // Each keyed listener once, with its events in sequence order: the cost follows the
  // matches, not events x listeners (10,000 one-SKU watchers would otherwise each look at
  // every event).
  absl::flat_hash_map<ChangeListener*, std::vector<EventPtr>> matched;
  for (const auto& e : events) {
    auto it = keyed_.find(e->key());
    if (it == keyed_.end()) continue;
    for (ChangeListener* l : it->second) matched[l].push_back(e);
  }
  for (auto& [l, mine] : matched) l->OnEvents(mine);
}

void ChangeFeed::Reset(uint64_t last_sequence, std::vector<EventPtr> retained) {
  std::lock_guard lock(mu_);
  retained_.clear();
  const size_t skip = retained.size() > retention_ ? retained.size() - retention_ : 0;
  for (size_t i = skip; i < retained.size(); ++i) retained_.push_back(std::move(retained[i]));
  last_sequence_.store(last_sequence, std::memory_order_release);
}

size_t ChangeFeed::listeners() const {
  std::lock_guard lock(mu_);
  return listeners_.size() + keys_of_.size();
}

std::vector<EventPtr> ChangeFeed::Retained(size_t count) const {
  std::lock_guard lock(mu_);
  const size_t n = std::min(count, retained_.size());
  return std::vector<EventPtr>(retained_.end() - static_cast<std::ptrdiff_t>(n), retained_.end());
}

}  // namespace feed::core
