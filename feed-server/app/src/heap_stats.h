// What the process's allocator holds: bytes in live allocations and bytes it keeps free
// (cached for reuse, not yet returned to the OS). Together they tell a leak (allocated
// grows) from an allocator holding on to memory (free grows) when RSS creeps up in a soak.
#pragma once

#include <cstddef>

namespace feed::server {

struct HeapStats {
  size_t allocated_bytes = 0;
  // Whole free pages, which ReleaseFreeHeap() can give back to the OS.
  size_t free_bytes = 0;
  // Small freed objects kept in tcmalloc's per-thread and central caches (bounded by
  // tcmalloc's own limits; 0 on glibc).
  size_t cached_bytes = 0;
};

// From tcmalloc's MallocExtension when the process runs on tcmalloc (looked up at run time,
// so the same code serves the glibc build), else from glibc's mallinfo2().
HeapStats ReadHeapStats();

// Returns the allocator's free pages to the OS (tcmalloc's ReleaseFreeMemory, glibc's
// malloc_trim).
void ReleaseFreeHeap();

// Caps tcmalloc's per-thread caches, all threads together, at `bytes` (no-op on glibc).
void LimitThreadCaches(size_t bytes);

}  // namespace feed::server
