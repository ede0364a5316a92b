// Watches files for changes (inode, size, modification time) by polling, so that
// certificates, keys and token files can be replaced on disk and picked up without a
// restart. A rename over the old file (how certificate tools rotate) counts as a change.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace feed {

class FileWatcher {
 public:
  explicit FileWatcher(std::chrono::milliseconds interval) : interval_(interval) {}
  ~FileWatcher();
  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

  // `on_change` runs on the watcher's thread after any of `paths` changed (not for their
  // state at the time of this call). Before Start only.
  void Watch(std::vector<std::string> paths, std::function<void()> on_change);
  void Start();

 private:
  struct Signature {
    bool exists = false;
    uint64_t inode = 0;
    int64_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const Signature&) const = default;
  };
  struct Entry {
    std::vector<std::string> paths;
    std::vector<Signature> seen;
    std::function<void()> on_change;
  };
  static Signature Read(const std::string& path);
  void Run();

  const std::chrono::milliseconds interval_;
  std::vector<Entry> entries_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace feed
