// C11 threads, mutexes and condition variables for ThreadSanitizer builds
// (FEED_SANITIZE=thread), linked into every executable of that build only.
//
// librdkafka uses <threads.h>. glibc implements it without calling the public pthread
// symbols, and gcc 12's TSan runtime intercepts none of the C11 functions: librdkafka's
// threads were unknown to TSan (they crashed in its allocator on their first malloc) and its
// locks invisible (every hand-over of a consumed message to our thread looked like a race).
// These definitions (an executable's take precedence over libc's) route each C11 call to
// its pthread counterpart, which TSan intercepts, exactly as glibc maps them: thrd_t is a
// pthread_t, mtx_t and cnd_t have the layout of pthread_mutex_t and pthread_cond_t, and a
// C11 thread's int result travels as the pthread's void* result.
#include <pthread.h>
#include <threads.h>

#include <cerrno>
#include <cstdint>
#include <ctime>
#include <new>

namespace {

int FromErrno(int error) {
  switch (error) {
    case 0:
      return thrd_success;
    case ENOMEM:
      return thrd_nomem;
    case ETIMEDOUT:
      return thrd_timedout;
    case EBUSY:
      return thrd_busy;
    default:
      return thrd_error;
  }
}

pthread_mutex_t* AsPthread(mtx_t* m) { return reinterpret_cast<pthread_mutex_t*>(m); }
pthread_cond_t* AsPthread(cnd_t* c) { return reinterpret_cast<pthread_cond_t*>(c); }

struct ThreadStart {
  thrd_start_t function;
  void* argument;
};

void* RunC11Thread(void* start) {
  ThreadStart s = *static_cast<ThreadStart*>(start);
  delete static_cast<ThreadStart*>(start);
  return reinterpret_cast<void*>(static_cast<intptr_t>(s.function(s.argument)));
}

}  // namespace

extern "C" int thrd_create(thrd_t* thread, thrd_start_t function, void* argument) {
  auto* start = new (std::nothrow) ThreadStart{function, argument};
  if (start == nullptr) return thrd_nomem;
  int error = pthread_create(thread, nullptr, RunC11Thread, start);
  if (error == 0) return thrd_success;
  delete start;
  return error == EAGAIN ? thrd_nomem : thrd_error;
}

extern "C" int thrd_join(thrd_t thread, int* result) {
  void* value = nullptr;
  if (pthread_join(thread, &value) != 0) return thrd_error;
  if (result != nullptr) *result = static_cast<int>(reinterpret_cast<intptr_t>(value));
  return thrd_success;
}

extern "C" int thrd_detach(thrd_t thread) {
  return pthread_detach(thread) == 0 ? thrd_success : thrd_error;
}

extern "C" int mtx_init(mtx_t* mutex, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  switch (type) {
    case mtx_plain:
    case mtx_timed:
      break;
    case mtx_plain | mtx_recursive:
    case mtx_timed | mtx_recursive:
      pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
      break;
    default:
      pthread_mutexattr_destroy(&attr);
      return thrd_error;
  }
  int error = pthread_mutex_init(AsPthread(mutex), &attr);
  pthread_mutexattr_destroy(&attr);
  return FromErrno(error);
}

extern "C" int mtx_lock(mtx_t* mutex) { return FromErrno(pthread_mutex_lock(AsPthread(mutex))); }

extern "C" int mtx_trylock(mtx_t* mutex) {
  return FromErrno(pthread_mutex_trylock(AsPthread(mutex)));
}

extern "C" int mtx_timedlock(mtx_t* __restrict mutex, const struct timespec* __restrict until) {
  return FromErrno(pthread_mutex_timedlock(AsPthread(mutex), until));
}

extern "C" int mtx_unlock(mtx_t* mutex) {
  return FromErrno(pthread_mutex_unlock(AsPthread(mutex)));
}

extern "C" void mtx_destroy(mtx_t* mutex) { pthread_mutex_destroy(AsPthread(mutex)); }

extern "C" int cnd_init(cnd_t* cond) {
  return FromErrno(pthread_cond_init(AsPthread(cond), nullptr));
}

extern "C" int cnd_signal(cnd_t* cond) { return FromErrno(pthread_cond_signal(AsPthread(cond))); }

extern "C" int cnd_broadcast(cnd_t* cond) {
  return FromErrno(pthread_cond_broadcast(AsPthread(cond)));
}

extern "C" int cnd_wait(cnd_t* cond, mtx_t* mutex) {
  return FromErrno(pthread_cond_wait(AsPthread(cond), AsPthread(mutex)));
}

extern "C" int cnd_timedwait(cnd_t* __restrict cond, mtx_t* __restrict mutex,
                             const struct timespec* __restrict until) {
  return FromErrno(pthread_cond_timedwait(AsPthread(cond), AsPthread(mutex), until));
}

extern "C" void cnd_destroy(cnd_t* cond) { pthread_cond_destroy(AsPthread(cond)); }
