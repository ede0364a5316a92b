// Backups of a store for operators: a consistent copy with a manifest of checksums
// (admin.v1.BackupManifest), its verification, and a restore that starts a new timeline.
// Free of transport types: the AdminService handler and `feed-server --restore-from` call it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "admin/v1/admin.pb.h"
#include "storage/store.h"

namespace feed::admin {

// Written last into a backup's folder: without it the backup is incomplete.
inline constexpr std::string_view kManifestFile = "BACKUP-MANIFEST.json";

// A backup's folder name: 1 to 128 of letters, digits, '.', '_', '-', not starting with '.'.
absl::Status ValidateBackupName(std::string_view name);

// Copies `store` into `dir` (which must not exist; its parent must): a store checkpoint (hard
// links where the folder is on the same file system), the facts read back from the copy
// itself (store id, last sequence, relay cursor, checkpoint, format), then the manifest with
// every file's size and SHA-256. A failure removes what it wrote.
absl::StatusOr<::admin::v1::BackupManifest> WriteBackup(storage::Store& store,
                                                        const std::string& dir, int64_t now_ms);

// The manifest of the backup in `dir`, once every file it names is there with its size and
// checksum and nothing else is (FAILED_PRECONDITION naming the file otherwise; DATA_LOSS for a
// checksum that does not match).
absl::StatusOr<::admin::v1::BackupManifest> VerifyBackup(const std::string& dir);

// Verifies the backup in `backup_dir`, copies it into `data_dir` (absent or empty: a
// non-empty folder is refused) and starts a new timeline there: the store id is dropped, so
// the server that opens it picks a new one and no event it writes reuses an id of the lost
// timeline's; the old id stays in meta previous_store_id.
absl::StatusOr<::admin::v1::BackupManifest> RestoreBackup(const std::string& backup_dir,
                                                          const std::string& data_dir);

}  // namespace feed::admin
