#include "power_loss_fs.h"

#include <string>

namespace feed::storage::internal {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

class UnsyncedInMemoryFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  using FSWritableFileOwnerWrapper::FSWritableFileOwnerWrapper;

  IOStatus Append(const Slice& data, const IOOptions&, IODebugContext*) override {
    unsynced_.append(data.data(), data.size());
    return IOStatus::OK();
  }
  IOStatus Append(const Slice& data, const IOOptions& options, const rocksdb::DataVerificationInfo&,
                  IODebugContext* dbg) override {
    return Append(data, options, dbg);
  }
  // Flush only hands data to the OS, which a power cut loses too: keep it here.
  IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = Drain(options, dbg);
    return s.ok() ? target()->Sync(options, dbg) : s;
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = Drain(options, dbg);
    return s.ok() ? target()->Fsync(options, dbg) : s;
  }
  IOStatus RangeSync(uint64_t, uint64_t, const IOOptions&, IODebugContext*) override {
    return IOStatus::OK();
  }
  IOStatus Close(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = Drain(options, dbg);
    return s.ok() ? target()->Close(options, dbg) : s;
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = Drain(options, dbg);
    return s.ok() ? target()->Truncate(size, options, dbg) : s;
  }
  uint64_t GetFileSize(const IOOptions& options, IODebugContext* dbg) override {
    return target()->GetFileSize(options, dbg) + unsynced_.size();
  }

 private:
  IOStatus Drain(const IOOptions& options, IODebugContext* dbg) {
    if (unsynced_.empty()) return IOStatus::OK();
    IOStatus s = target()->Append(unsynced_, options, dbg);
    if (s.ok()) s = target()->Flush(options, dbg);
    unsynced_.clear();
    return s;
  }

  std::string unsynced_;
};

class PowerLossFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit PowerLossFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
      : FileSystemWrapper(std::move(base)) {}
  const char* Name() const override { return "feed.PowerLossFileSystem"; }

  IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                           std::unique_ptr<rocksdb::FSWritableFile>* result,
                           IODebugContext* dbg) override {
    return Wrap(target()->NewWritableFile(name, options, result, dbg), result);
  }
  IOStatus ReopenWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                              std::unique_ptr<rocksdb::FSWritableFile>* result,
                              IODebugContext* dbg) override {
    return Wrap(target()->ReopenWritableFile(name, options, result, dbg), result);
  }
  IOStatus ReuseWritableFile(const std::string& name, const std::string& old_name,
                             const rocksdb::FileOptions& options,
                             std::unique_ptr<rocksdb::FSWritableFile>* result,
                             IODebugContext* dbg) override {
    return Wrap(target()->ReuseWritableFile(name, old_name, options, result, dbg), result);
  }

 private:
  static IOStatus Wrap(IOStatus s, std::unique_ptr<rocksdb::FSWritableFile>* result) {
    if (s.ok()) result->reset(new UnsyncedInMemoryFile(std::move(*result)));
    return s;
  }
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> NewPowerLossFileSystem(
    std::shared_ptr<rocksdb::FileSystem> base) {
  return std::make_shared<PowerLossFileSystem>(std::move(base));
}

}  // namespace feed::storage::internal
