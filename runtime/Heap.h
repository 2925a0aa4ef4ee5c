//===- Heap.h - a heap in huge pages for the tools' processes ---*- C++ -*-===//
//
// A compile of a large plan allocates hundreds of megabytes in small pieces (operations,
// instructions, the simulator's state) and touches each page once. Every first touch of a
// 4 KiB page is a page fault, and on a virtual machine a page fault costs microseconds: on
// the 2-core host of docs/performance.md, faults were half of the compile of the P 64, V 4,
// M 256 job. reserveHugePageHeap() sets the C allocator up so that the heap is one region,
// reserved ahead and never returned, that the kernel may back with 2 MiB pages (transparent
// huge pages, where the system enables them as "madvise" or "always"): 512 times fewer faults.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_HEAP_H
#define CONDUIT_RUNTIME_HEAP_H

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

namespace conduit {

/// Call first thing in main(). Harmless where huge pages are off (the reservation is address
/// space, not memory) and a no-op under the sanitizers, which bring their own allocator.
inline void reserveHugePageHeap() {
#if !defined(__SANITIZE_ADDRESS__)
  constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
  // Blocks up to glibc's largest threshold (32 MiB) come from the heap, not from mappings of
  // their own (faulted in 4 KiB pages), and freed memory stays for reuse instead of being
  // returned and faulted in again.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT32_MAX);
  // The next growth of the heap reserves this much more than it needs, one region advised
  // once: the most the allocator's int takes, or half the machine's memory if less (a
  // reservation beyond the machine's memory could be refused). Growth past it is a region
  // without the advice.
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  const uint64_t half = pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) / 2 : 0;
  const uint64_t reserve = std::min<uint64_t>(std::max<uint64_t>(half, kHugePage), INT32_MAX);
  mallopt(M_TOP_PAD, static_cast<int>(reserve & ~uint64_t(kHugePage - 1)));
  void *probe = std::malloc(1 << 20);
  const auto top = reinterpret_cast<uintptr_t>(sbrk(0));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(probe) + kHugePage - 1) & ~(kHugePage - 1);
  if (probe && top > begin)
    madvise(reinterpret_cast<void *>(begin), top - begin, MADV_HUGEPAGE);
  std::free(probe);
  mallopt(M_TOP_PAD, 128 << 10);
#endif
}

/// Hands the free pages inside the heap back to the system (the heap above is never trimmed
/// by itself): for a process that has freed a large structure it will not build again, before
/// it allocates something as large. The heap's top, the region reserveHugePageHeap() advised,
/// stays: trimming it would leave the heap's later growth in 4 KiB pages, a fault each. A no-op
/// under the sanitizers.
inline void releaseFreedMemory() {
#if !defined(__SANITIZE_ADDRESS__)
  malloc_trim(SIZE_MAX / 2);
#endif
}

} // namespace conduit

#endif // CONDUIT_RUNTIME_HEAP_H
