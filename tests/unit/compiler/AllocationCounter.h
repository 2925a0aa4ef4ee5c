//===- AllocationCounter.h - what the process allocated --------*- C++ -*-===//
//
// Counts of the heap allocations of the whole process, taken by replacing malloc and its
// relatives (AllocationCounter.cpp) in the one test binary that links it. Unlike a time, the
// counts are the same on every machine with the same libraries, so a budget on them catches a
// change that copies a plan once more wherever the suite runs. Sanitizer builds replace malloc
// themselves: there the counter is absent and `available()` is false.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_COMPILER_ALLOCATIONCOUNTER_H
#define CONDUIT_TESTS_UNIT_COMPILER_ALLOCATIONCOUNTER_H

#include <cstdint>

namespace conduit::counting {

struct AllocationCounts {
  int64_t allocations = 0;   ///< calls that returned memory
  int64_t bytes = 0;         ///< bytes they returned (the allocator's usable sizes)
  int64_t liveBytes = 0;     ///< allocated and not yet freed, now
  int64_t peakLiveBytes = 0; ///< the most live bytes since the last resetPeak()
};

/// Whether this build counts (false under the sanitizers).
bool allocationCountingAvailable();

/// The counts so far.
AllocationCounts allocationCounts();

/// Starts a new peak at the bytes live now.
void resetPeakLiveBytes();

} // namespace conduit::counting

#endif // CONDUIT_TESTS_UNIT_COMPILER_ALLOCATIONCOUNTER_H
