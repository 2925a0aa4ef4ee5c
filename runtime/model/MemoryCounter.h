//===- MemoryCounter.h - the bytes a rank holds, by what they are for -*- C++ -*-===//
//
// Every buffer an Ops allocates is counted by that Ops's MemoryCounter, under the use its
// caller declared with a MemoryScope (the backend core names the use around each phase:
// parameters, gradient accumulators, a forward's saved activations, a receive slot, ...). The
// counter keeps the live bytes of each use and the highest total, with what made it up at that
// moment, so that a run can be compared with the compiler's memory plan: the uses are the
// plan's categories (passes/PeakMemory.h, MemoryKind), in its order and with its names.
//
// Two figures are kept. Held bytes are what was allocated. Counted bytes are the same, except
// where a scope says that an element counts at another width: the CPU's gradient accumulators
// are doubles, counted at the plan's 4 bytes per gradient, and the float buffer a CPU backward
// fills per sample before adding it to them counts as part of them (0 bytes). docs/runtime.md
// states the rule.
//
// One counter belongs to one Ops, which one thread uses: no locks.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_MEMORYCOUNTER_H
#define CONDUIT_RUNTIME_MODEL_MEMORYCOUNTER_H

#include "runtime/plan/MemoryKinds.h"

#include <array>
#include <cstdint>

namespace conduit::model {

/// What memory is for: the categories of the compiler's memory plan (runtime/plan/MemoryKinds.h).
using MemoryUse = runtime::MemoryKind;
constexpr int kNumMemoryUses = runtime::kNumMemoryKinds;
inline const char *memoryUseName(MemoryUse use) { return runtime::memoryKindName(use); }

/// Gradient accumulators are counted at the width the memory plan gives them.
constexpr int kPlanGradientBytes = static_cast<int>(runtime::kGradientBytes);

/// A rank's memory at its peak. Trivially copyable: ranks send it to rank 0 as bytes.
struct MemoryPeak {
  int64_t countedBytes = 0; ///< the highest counted total
  /// Counted bytes of each use at that moment.
  std::array<int64_t, kNumMemoryUses> atPeak{};
  int64_t heldBytes = 0; ///< the highest total of bytes actually allocated
};

/// One live allocation, as its counter recorded it.
struct MemoryTag {
  MemoryUse use = MemoryUse::Working;
  int64_t held = 0, counted = 0;
};

class MemoryCounter {
public:
  /// Records `elements` of `elementBytes` each, allocated now for the current use.
  MemoryTag allocated(int64_t elements, int64_t elementBytes) {
    MemoryTag tag;
    tag.use = current;
    tag.held = elements * elementBytes;
    tag.counted = countedWidth < 0 ? tag.held : elements * countedWidth;
    live[static_cast<int>(tag.use)] += tag.counted;
    liveCounted += tag.counted;
    liveHeld += tag.held;
    if (liveCounted > highest.countedBytes) {
      highest.countedBytes = liveCounted;
      highest.atPeak = live;
    }
    if (liveHeld > highest.heldBytes)
      highest.heldBytes = liveHeld;
    return tag;
  }
  /// Records that the allocation `tag` was released.
  void released(const MemoryTag &tag) {
    live[static_cast<int>(tag.use)] -= tag.counted;
    liveCounted -= tag.counted;
    liveHeld -= tag.held;
  }

  /// The use allocations are counted under now.
  MemoryUse use() const { return current; }
  /// Counted bytes live now, of `use` and in all.
  int64_t liveBytes(MemoryUse use) const { return live[static_cast<int>(use)]; }
  int64_t liveBytes() const { return liveCounted; }
  int64_t heldBytes() const { return liveHeld; }

  /// The peak since the counter began or since the last resetPeak().
  const MemoryPeak &peak() const { return highest; }
  /// Starts measuring a new peak from what is live now.
  void resetPeak() {
    highest.countedBytes = liveCounted;
    highest.atPeak = live;
    highest.heldBytes = liveHeld;
  }

private:
public:
  /// The use and counted width that new allocations take (what a MemoryScope sets), for code
  /// that switches between computes (BackendCore's paired steps) to keep each one's.
  struct Context {
    MemoryUse use = MemoryUse::Working;
    int countedWidth = -1;
  };
  Context context() const { return {current, countedWidth}; }
  void setContext(Context c) {
    current = c.use;
    countedWidth = c.countedWidth;
  }

private:
  friend class MemoryScope;
  MemoryUse current = MemoryUse::Working;
  int countedWidth = -1; ///< bytes an element counts for; -1: its own
  std::array<int64_t, kNumMemoryUses> live{};
  int64_t liveCounted = 0, liveHeld = 0;
  MemoryPeak highest;
};

/// While it lives, `counter`'s allocations are for `use`, each element counted at
/// `countedWidth` bytes (-1: at its own width); the previous use is restored after.
class MemoryScope {
public:
  MemoryScope(MemoryCounter &counter, MemoryUse use, int countedWidth = -1)
      : counter(counter), use(counter.current), width(counter.countedWidth) {
    counter.current = use;
    counter.countedWidth = countedWidth;
  }
  ~MemoryScope() {
    counter.current = use;
    counter.countedWidth = width;
  }
  MemoryScope(const MemoryScope &) = delete;
  MemoryScope &operator=(const MemoryScope &) = delete;

private:
  MemoryCounter &counter;
  MemoryUse use;
  int width;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_MEMORYCOUNTER_H
