#include "admin/backup.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include "google/protobuf/util/json_util.h"
#include "storage/rocksdb_store.h"

namespace feed::admin {
namespace {

namespace fs = std::filesystem;
using ::admin::v1::BackupManifest;
using storage::Table;

constexpr uint32_t kManifestVersion = 1;
// Meta record a restore leaves behind: the store id of the timeline it came from.
constexpr std::string_view kPreviousStoreId = "previous_store_id";

// Files a store writes on every open that are not part of its data: not in the manifest.
bool IsEngineScratch(const std::string& name) {
  return name == "LOCK" || name.rfind("LOG", 0) == 0 || name == kManifestFile;
}

absl::StatusOr<std::string> Sha256File(const fs::path& path, uint64_t* size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::FailedPreconditionError(fmt::format("cannot read {}", path.string()));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::string buffer(1 << 20, '\0');
  *size = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    EVP_DigestUpdate(ctx.get(), buffer.data(), n);
    *size += n;
  }
  if (in.bad()) return absl::DataLossError(fmt::format("read error in {}", path.string()));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

absl::Status WriteFileDurably(const fs::path& path, const std::string& content) {
  const fs::path tmp = path.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
  }
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
      ::fsync(fd) == 0;
  ::close(fd);
  std::error_code ec;
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    fs::remove(tmp, ec);
    return absl::FailedPreconditionError(fmt::format("cannot write {}", path.string()));
  }
  return absl::OkStatus();
}

// What the copy in `dir` holds, read from it without writing (a read-only open).
absl::Status ReadFacts(const std::string& dir, BackupManifest* m) {
  storage::RocksDbOptions options;
  options.path = dir;
  options.read_only = true;
  auto store = storage::OpenRocksDbStore(options);
  if (!store.ok()) return store.status();
  const storage::Store& s = **store;
  auto id = s.Get(Table::kMeta, storage::meta_keys::kStoreId);
  if (!id.ok()) return id.status();
  m->set_store_id(id->value_or(""));
  uint64_t cursor = 0, checkpoint = 0, format = 0, next = 0;
  for (auto [name, out] : {std::pair{storage::meta_keys::kRelayCursor, &cursor},
                           std::pair{storage::meta_keys::kCheckpointSequence, &checkpoint},
                           std::pair{storage::meta_keys::kFormatVersion, &format},
                           std::pair{storage::meta_keys::kNextSequence, &next}}) {
    auto value = storage::ReadMetaSequence(s, name);
    if (!value.ok()) return value.status();
    *out = value->value_or(0);
  }
  m->set_relay_cursor(cursor);
  m->set_checkpoint_sequence(checkpoint);
  m->set_format_version(format);
  // The journal after the checkpoint is short (one checkpoint interval): its last key is the
  // last committed sequence.
  uint64_t last = std::max(next > 0 ? next - 1 : 0, checkpoint);
  absl::Status scanned = s.Scan(Table::kJournal, storage::EncodeSequence(checkpoint + 1), "",
                                [&](std::string_view key, std::string_view) {
                                  if (auto seq = storage::DecodeSequence(key)) {
                                    last = std::max(last, *seq);
                                  }
                                  return true;
                                });
  if (!scanned.ok()) return scanned;
  m->set_last_sequence(last);
  auto log_offset = storage::ReadMetaSequence(s, storage::meta_keys::kShardLogOffset);
  if (!log_offset.ok()) return log_offset.status();
  if (*log_offset) m->set_shard_log_next_offset(static_cast<int64_t>(**log_offset) + 1);
  return absl::OkStatus();
}

absl::StatusOr<BackupManifest> ReadManifest(const fs::path& dir) {
  std::ifstream in(dir / kManifestFile);
  if (!in) {
    return absl::FailedPreconditionError(
        fmt::format("{} is not a complete backup: it has no {}", dir.string(), kManifestFile));
  }
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BackupManifest m;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &m); !s.ok()) {
    return absl::DataLossError(fmt::format("{}/{} does not parse: {}", dir.string(), kManifestFile,
                                           s.message().as_string()));
  }
  if (m.manifest_version() != kManifestVersion) {
    return absl::FailedPreconditionError(
        fmt::format("{}: manifest version {} is not {}, the one this server reads", dir.string(),
                    m.manifest_version(), kManifestVersion));
  }
  return m;
}

}  // namespace

absl::Status ValidateBackupName(std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError(
        fmt::format("name: {} characters given, 1 to 128 allowed", name.size()));
  }
  if (name.front() == '.') return absl::InvalidArgumentError("name: must not start with '.'");
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          fmt::format("name: '{}' is not allowed (letters, digits, '.', '_', '-')", c));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<BackupManifest> WriteBackup(storage::Store& store, const std::string& dir,
                                           int64_t now_ms, std::optional<ShardOfStore> shard) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    return absl::AlreadyExistsError(
        fmt::format("{} exists already: a backup needs a new folder", dir));
  }
  if (absl::Status s = store.CreateCheckpoint(dir); !s.ok()) {
    fs::remove_all(dir, ec);
    return s;
  }
  auto fail = [&](absl::Status s) {
    fs::remove_all(dir, ec);
    return s;
  };
  BackupManifest m;
  m.set_manifest_version(kManifestVersion);
  m.set_created_at_ms(now_ms);
  if (shard) {
    m.set_shard(shard->shard);
    m.set_shard_count(shard->shard_count);
  }
  if (absl::Status s = ReadFacts(dir, &m); !s.ok()) return fail(s);
  std::map<std::string, fs::path> files;  // sorted: a stable manifest
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && !IsEngineScratch(name)) files.emplace(name, entry.path());
  }
  if (ec) return fail(absl::FailedPreconditionError(fmt::format("cannot list {}", dir)));
  for (const auto& [name, path] : files) {
    uint64_t size = 0;
    auto sha = Sha256File(path, &size);
    if (!sha.ok()) return fail(sha.status());
    auto* f = m.add_files();
    f->set_name(name);
    f->set_size(size);
    f->set_sha256(*sha);
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = true;
  print.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(m, &json, print).ok()) {
    return fail(absl::InternalError("cannot encode the backup manifest"));
  }
  if (absl::Status s = WriteFileDurably(fs::path(dir) / kManifestFile, json); !s.ok()) {
    return fail(s);
  }
  return m;
}

absl::StatusOr<BackupManifest> VerifyBackup(const std::string& dir) {
  auto m = ReadManifest(dir);
  if (!m.ok()) return m.status();
  std::map<std::string, const ::admin::v1::BackupFile*> expected;
  for (const auto& f : m->files()) expected.emplace(f.name(), &f);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsEngineScratch(name) && !expected.contains(name)) {
      return absl::FailedPreconditionError(
          fmt::format("{}: {} is not in the backup's manifest", dir, name));
    }
  }
  for (const auto& [name, f] : expected) {
    const fs::path path = fs::path(dir) / name;
    if (!fs::exists(path, ec)) {
      return absl::FailedPreconditionError(
          fmt::format("{}: {} is missing (the backup is incomplete)", dir, name));
    }
    uint64_t size = 0;
    auto sha = Sha256File(path, &size);
    if (!sha.ok()) return sha.status();
    if (size != f->size() || *sha != f->sha256()) {
      return absl::DataLossError(fmt::format(
          "{}: {} does not match the manifest ({} bytes, sha256 {}; the manifest says {} bytes, "
          "{}): the backup is corrupt",
          dir, name, size, *sha, f->size(), f->sha256()));
    }
  }
  return m;
}

namespace {

// A data folder a restore may fill: absent or empty.
absl::Status CheckRestorable(const std::string& data_dir) {
  std::error_code ec;
  if (fs::exists(data_dir, ec) && !fs::is_empty(data_dir, ec)) {
    return absl::FailedPreconditionError(fmt::format(
        "data dir {} is not empty: a restore goes into a new or empty folder", data_dir));
  }
  return absl::OkStatus();
}

// Copies the verified backup in `backup_dir` (manifest `m`) into `data_dir` and drops its
// store id: the server that opens it picks a new one, so no event it writes reuses an id the
// backup's store wrote after the backup.
absl::Status CopyVerifiedBackup(const std::string& backup_dir, const BackupManifest& m,
                                const std::string& data_dir) {
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  for (const auto& f : m.files()) {
    fs::copy_file(fs::path(backup_dir) / f.name(), fs::path(data_dir) / f.name(), ec);
    if (ec) {
      return absl::FailedPreconditionError(
          fmt::format("copying {} into {}: {}", f.name(), data_dir, ec.message()));
    }
  }
  storage::RocksDbOptions options;
  options.path = data_dir;
  auto store = storage::OpenRocksDbStore(options);
  if (!store.ok()) return store.status();
  auto group = (*store)->NewWriteGroup();
  group->Delete(Table::kMeta, storage::meta_keys::kStoreId);
  group->Put(Table::kMeta, kPreviousStoreId, m.store_id());
  return (*store)->Commit(*group);
}

}  // namespace

absl::StatusOr<BackupManifest> RestoreBackup(const std::string& backup_dir,
                                             const std::string& data_dir) {
  if (absl::Status s = CheckRestorable(data_dir); !s.ok()) return s;
  auto m = VerifyBackup(backup_dir);
  if (!m.ok()) return m.status();
  if (m->has_shard()) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is a backup of shard {} of a cluster: restore it into a cluster node "
        "(--cluster-shards with --restore-from the folder that holds its shard-<n> folders)",
        backup_dir, m->shard()));
  }
  if (absl::Status s = CopyVerifiedBackup(backup_dir, *m, data_dir); !s.ok()) return s;
  return m;
}

std::string ShardFolderName(uint32_t shard) { return fmt::format("shard-{}", shard); }

absl::StatusOr<std::vector<BackupManifest>> RestoreShardBackups(
    const std::string& backup_dir, uint32_t shard_count,
    const std::function<std::string(uint32_t shard)>& store_path) {
  // Everything is checked before anything is copied: a refused restore leaves no trace.
  std::vector<std::pair<uint32_t, BackupManifest>> found;
  for (uint32_t shard = 0; shard < shard_count; ++shard) {
    const fs::path dir = fs::path(backup_dir) / ShardFolderName(shard);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    auto m = VerifyBackup(dir.string());
    if (!m.ok()) return m.status();
    if (!m->has_shard() || m->shard() != shard || m->shard_count() != shard_count) {
      return absl::FailedPreconditionError(fmt::format(
          "{} is not a backup of shard {} of a cluster of {} shards (its manifest says {})",
          dir.string(), shard, shard_count,
          m->has_shard() ? fmt::format("shard {} of {}", m->shard(), m->shard_count())
                         : std::string("a single node")));
    }
    if (absl::Status s = CheckRestorable(store_path(shard)); !s.ok()) return s;
    found.emplace_back(shard, *std::move(m));
  }
  if (found.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "{} holds no shard-<n> backup folder of a cluster of {} shards", backup_dir, shard_count));
  }
  std::vector<BackupManifest> restored;
  for (auto& [shard, m] : found) {
    const std::string source = (fs::path(backup_dir) / ShardFolderName(shard)).string();
    if (absl::Status s = CopyVerifiedBackup(source, m, store_path(shard)); !s.ok()) return s;
    restored.push_back(std::move(m));
  }
  return restored;
}

}  // namespace feed::admin
