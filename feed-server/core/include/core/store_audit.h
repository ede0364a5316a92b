// The online audit: every invariant of DESIGN section 3 checked on a consistent point-in-time
// view of a store, while a server keeps writing to it (AdminService.CheckStore) or on a
// stopped one (feed-server --check). It reads what a restart would: the levels and open holds
// of the tables, the journal after the checkpoint replayed over them, and the journal from
// the relay cursor on, which must be gap-free. It writes nothing.
//
// Cost: the view's levels and holds are loaded into memory once more for the audit's
// duration (what a startup takes: about 2 s and a few hundred MB for 1M levels and holds).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "admin/v1/admin.pb.h"
#include "core/clock.h"
#include "core/options.h"
#include "storage/store.h"

namespace feed::core {

// Lists up to `max_violations` (all are counted). An error only when the store cannot be
// read at all; a record that does not parse is a violation (corrupt_record), after which the
// audit stops reading.
absl::StatusOr<::admin::v1::CheckStoreResponse> AuditStore(const storage::Store& store,
                                                           const Clock& clock,
                                                           const CoreOptions& options,
                                                           size_t max_violations);

}  // namespace feed::core
