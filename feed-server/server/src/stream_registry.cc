#include "server/services.h"

namespace feed::server {

bool StreamRegistry::TryAdd(Stream* stream) {
  std::lock_guard lock(mu_);
  if (closed_ || streams_.size() >= limit_) return false;
  streams_.insert(stream);
  return true;
}

void StreamRegistry::Remove(Stream* stream) {
  std::lock_guard lock(mu_);
  streams_.erase(stream);
}

void StreamRegistry::CloseAll(const absl::Status& status) {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (Stream* s : streams_) s->Close(status);
}

size_t StreamRegistry::size() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

}  // namespace feed::server
