//===- AllocationCounter.cpp - malloc, counted -----------------------------===//
//
// glibc's allocator under counting wrappers: the executable's malloc, free, calloc, realloc
// and aligned allocations take precedence over the C library's for every library of the
// process (operator new, MLIR's operations, LLVM's allocators all end here). Sizes are the
// allocator's usable sizes, which is what free() can know of a block.
//
//===----------------------------------------------------------------------===//

#include "AllocationCounter.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <malloc.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONDUIT_NO_COUNTING 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CONDUIT_NO_COUNTING 1
#endif

namespace {

std::atomic<int64_t> allocations{0}, bytes{0}, live{0}, peak{0};

} // namespace

namespace conduit::counting {

#ifdef CONDUIT_NO_COUNTING
bool allocationCountingAvailable() { return false; }
#else
bool allocationCountingAvailable() { return true; }
#endif

AllocationCounts allocationCounts() {
  return {allocations.load(), bytes.load(), live.load(), peak.load()};
}

void resetPeakLiveBytes() { peak.store(live.load()); }

} // namespace conduit::counting

#ifndef CONDUIT_NO_COUNTING

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
}

namespace {

void *counted(void *p) {
  if (p) {
    const int64_t size = static_cast<int64_t>(malloc_usable_size(p));
    allocations.fetch_add(1, std::memory_order_relaxed);
    bytes.fetch_add(size, std::memory_order_relaxed);
    const int64_t now = live.fetch_add(size, std::memory_order_relaxed) + size;
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  return p;
}

void released(void *p) {
  if (p)
    live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}

} // namespace

extern "C" {

void *malloc(size_t size) { return counted(__libc_malloc(size)); }

void free(void *p) {
  released(p);
  __libc_free(p);
}

void *calloc(size_t count, size_t size) { return counted(__libc_calloc(count, size)); }

void *realloc(void *p, size_t size) {
  // Counted as a free and an allocation: growing a vector this way is the copy a budget is for.
  const int64_t before = p ? static_cast<int64_t>(malloc_usable_size(p)) : 0;
  void *q = __libc_realloc(p, size);
  if (q || size == 0)
    live.fetch_sub(before, std::memory_order_relaxed);
  return counted(q);
}

void *memalign(size_t alignment, size_t size) { return counted(__libc_memalign(alignment, size)); }

void *aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

int posix_memalign(void **out, size_t alignment, size_t size) {
  void *p = memalign(alignment, size);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}

} // extern "C"

#endif // CONDUIT_NO_COUNTING
