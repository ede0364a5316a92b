#include "common/file_watcher.h"

#include <pthread.h>
#include <sys/stat.h>

namespace feed {

FileWatcher::~FileWatcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

FileWatcher::Signature FileWatcher::Read(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

void FileWatcher::Watch(std::vector<std::string> paths, std::function<void()> on_change) {
  Entry entry{std::move(paths), {}, std::move(on_change)};
  for (const auto& p : entry.paths) entry.seen.push_back(Read(p));
  entries_.push_back(std::move(entry));
}

void FileWatcher::Start() {
  if (entries_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "feed-filewatch");
    Run();
  });
}

void FileWatcher::Run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    for (Entry& e : entries_) {
      bool changed = false;
      for (size_t i = 0; i < e.paths.size(); ++i) {
        Signature now = Read(e.paths[i]);
        if (!(now == e.seen[i])) {
          e.seen[i] = now;
          changed = true;
        }
      }
      if (changed) e.on_change();
    }
    lock.lock();
  }
}

}  // namespace feed
