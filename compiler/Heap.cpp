//===- Heap.cpp - a heap in huge pages for the tools' processes ------------===//

#include "compiler/Heap.h"

#include <cstdint>
#include <cstdlib>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

void conduit::reserveHugePageHeap() {
#if !defined(__SANITIZE_ADDRESS__)
  constexpr size_t kReserve = size_t(1) << 30;
  constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
  // Everything but giant blocks comes from the heap (a block of its own would be mapped and
  // faulted in 4 KiB pages), and freed memory stays for reuse instead of being returned and
  // faulted in again.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // The next growth of the heap reserves kReserve more than it needs: one region, advised
  // once. A system that refuses the reservation leaves the heap as it was.
  mallopt(M_TOP_PAD, kReserve);
  void *probe = std::malloc(1 << 20);
  const auto top = reinterpret_cast<uintptr_t>(sbrk(0));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(probe) + kHugePage - 1) & ~(kHugePage - 1);
  if (probe && top > begin)
    madvise(reinterpret_cast<void *>(begin), top - begin, MADV_HUGEPAGE);
  std::free(probe);
  mallopt(M_TOP_PAD, 128 << 10);
#endif
}
