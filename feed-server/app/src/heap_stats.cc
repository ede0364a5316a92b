#include "heap_stats.h"

#include <dlfcn.h>
#include <malloc.h>

namespace feed::server {
namespace {

// gperftools' C interface (malloc_extension_c.h), present only when tcmalloc is linked in:
// looked up at run time, nullptr otherwise.
template <class Fn>
Fn TcmallocFunction(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

using GetNumericProperty = int (*)(const char* property, size_t* value);
using SetNumericProperty = int (*)(const char* property, size_t value);
using ReleaseFreeMemory = void (*)();

}  // namespace

HeapStats ReadHeapStats() {
  HeapStats stats;
  static const auto property =
      TcmallocFunction<GetNumericProperty>("MallocExtension_GetNumericProperty");
  if (property) {
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
  static const auto set =
      TcmallocFunction<SetNumericProperty>("MallocExtension_SetNumericProperty");
  if (set) set("tcmalloc.max_total_thread_cache_bytes", bytes);
}

void ReleaseFreeHeap() {
  static const auto release =
      TcmallocFunction<ReleaseFreeMemory>("MallocExtension_ReleaseFreeMemory");
  if (release) {
    release();
  } else {
    malloc_trim(0);
  }
}

}  // namespace feed::server
