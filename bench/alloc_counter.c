/* A counting allocator for the heap-per-RPC figure: LD_PRELOAD it into a process built
 * without tcmalloc (feed-server-glibc) and it adds up every byte requested from malloc,
 * calloc, realloc and the aligned allocators, then writes "bytes=N calls=M" to the file
 * named by ALLOC_COUNTER_OUT when the process exits. Counting only: it forwards to glibc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static atomic_ullong g_bytes, g_calls;

void* malloc(size_t n) {
  atomic_fetch_add_explicit(&g_bytes, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t k, size_t n) {
  atomic_fetch_add_explicit(&g_bytes, k * n, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  return __libc_calloc(k, n);
}
void* realloc(void* p, size_t n) {
  atomic_fetch_add_explicit(&g_bytes, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  atomic_fetch_add_explicit(&g_bytes, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void** out, size_t a, size_t n) {
  *out = memalign(a, n);
  return *out ? 0 : 12;
}

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("ALLOC_COUNTER_OUT");
  if (!path) return;
  FILE* f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "bytes=%llu calls=%llu\n", (unsigned long long)atomic_load(&g_bytes),
          (unsigned long long)atomic_load(&g_calls));
  fclose(f);
}
