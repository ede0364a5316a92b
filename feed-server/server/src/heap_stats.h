// What the process's allocator holds: bytes in live allocations and bytes it keeps free
// (cached for reuse, not yet returned to the OS). Together they tell a leak (allocated
// grows) from an allocator holding on to memory (free grows) when RSS creeps up in a soak.
#pragma once

#include <cstddef>

namespace feed::server {

struct HeapStats {
  size_t allocated_bytes = 0;
  size_t free_bytes = 0;
};

// From tcmalloc's MallocExtension when the process runs on tcmalloc (looked up at run time,
// so the same code serves the glibc build), else from glibc's mallinfo2().
HeapStats ReadHeapStats();

}  // namespace feed::server
