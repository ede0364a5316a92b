#include "heap_stats.h"

#include <dlfcn.h>
#include <malloc.h>

namespace feed::server {
namespace {

// gperftools' C interface (malloc_extension_c.h), present only when tcmalloc is linked in.
using GetNumericProperty = int (*)(const char* property, size_t* value);

GetNumericProperty TcmallocProperty() {
  static const auto fn = reinterpret_cast<GetNumericProperty>(
      dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"));
  return fn;
}

using SetNumericProperty = int (*)(const char* property, size_t value);

using ReleaseFreeMemory = void (*)();

ReleaseFreeMemory TcmallocRelease() {
  static const auto fn =
      reinterpret_cast<ReleaseFreeMemory>(dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  return fn;
}

}  // namespace

HeapStats ReadHeapStats() {
  HeapStats stats;
  if (GetNumericProperty property = TcmallocProperty()) {
    size_t allocated = 0, page_heap_free = 0, central_free = 0, thread_free = 0, transfer_free = 0;
    property("generic.current_allocated_bytes", &allocated);
    property("tcmalloc.pageheap_free_bytes", &page_heap_free);
    property("tcmalloc.central_cache_free_bytes", &central_free);
    property("tcmalloc.thread_cache_free_bytes", &thread_free);
    property("tcmalloc.transfer_cache_free_bytes", &transfer_free);
    stats.allocated_bytes = allocated;
    stats.free_bytes = page_heap_free;
    stats.cached_bytes = central_free + thread_free + transfer_free;
    return stats;
  }
  const struct mallinfo2 info = mallinfo2();
  stats.allocated_bytes = info.uordblks + info.hblkhd;
  stats.free_bytes = info.fordblks;
  return stats;
}

void LimitThreadCaches(size_t bytes) {
  static const auto set = reinterpret_cast<SetNumericProperty>(
      dlsym(RTLD_DEFAULT, "MallocExtension_SetNumericProperty"));
  if (set) set("tcmalloc.max_total_thread_cache_bytes", bytes);
}

void ReleaseFreeHeap() {
  if (ReleaseFreeMemory release = TcmallocRelease()) {
    release();
  } else {
    malloc_trim(0);
  }
}

}  // namespace feed::server
