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

#ifndef CONDUIT_COMPILER_HEAP_H
#define CONDUIT_COMPILER_HEAP_H

namespace conduit {

/// Call first thing in main(). Harmless where huge pages are off (the reservation is address
/// space, not memory) and a no-op under the sanitizers, which bring their own allocator.
void reserveHugePageHeap();

} // namespace conduit

#endif // CONDUIT_COMPILER_HEAP_H
