//===- ScheduleRules.h - rules on a schedule's shape, written once -*- C++ -*-===//
//
// Rules that more than one layer checks: the job-file reader, which points the user at the key
// to change, and the scheduling library, whose schedulers refuse what breaks them. Both sit
// above the plan's folder, so the rules live here, header-only and free of MLIR, as the limits
// of Limits.h do.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_SCHEDULERULES_H
#define CONDUIT_RUNTIME_PLAN_SCHEDULERULES_H

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <optional>
#include <string>

namespace conduit::runtime {

/// Whether `schedule` always splits backwards into input and weight gradients.
inline bool isZeroBubble(Schedule schedule) {
  return schedule == Schedule::ZeroBubbleH1 || schedule == Schedule::InterleavedZeroBubble ||
         schedule == Schedule::ZeroBubbleV || schedule == Schedule::DualPipeV;
}

/// Whether `schedule` groups micro-batches (depth-first's group size applies).
inline bool isInterleaved(Schedule schedule) {
  return schedule == Schedule::DepthFirst || schedule == Schedule::InterleavedZeroBubble;
}

/// Depth-first's rules on grouping M micro-batches by N on P ranks, which Megatron-LM enforces
/// too: M >= P, P <= N <= M, and a last group of at least P micro-batches when N does not
/// divide M. The violation says which quantity to change and what would work.
struct GroupingViolation {
  enum Rule { TooFewMicrobatches, GroupSize } rule;
  std::string message;
};

inline std::optional<GroupingViolation> checkDepthFirstGrouping(int64_t microbatches, int64_t ranks,
                                                                int64_t groupSize) {
  const int64_t m = microbatches, n = groupSize;
  if (m < ranks)
    return GroupingViolation{
        GroupingViolation::TooFewMicrobatches,
        "depth-first needs at least as many micro-batches as pipeline ranks (M = " +
            std::to_string(m) + " < P = " + std::to_string(ranks) +
            "); use M >= " + std::to_string(ranks) + ", or breadth-first, which accepts any M"};
  if (n < ranks || n > m)
    return GroupingViolation{GroupingViolation::GroupSize,
                             "the depth-first group size must lie between the pipeline size " +
                                 std::to_string(ranks) + " and the number of micro-batches " +
                                 std::to_string(m) + ", got " + std::to_string(n)};
  if (int64_t rest = m % n; rest != 0 && rest < ranks)
    return GroupingViolation{
        GroupingViolation::GroupSize,
        "grouping " + std::to_string(m) + " micro-batches by " + std::to_string(n) +
            " leaves a last group of " + std::to_string(rest) + ", fewer than the " +
            std::to_string(ranks) +
            " pipeline ranks, which stalls the pipeline (Megatron-LM rejects it too); use a "
            "group size that divides " +
            std::to_string(m) + " or leaves at least " + std::to_string(ranks)};
  return std::nullopt;
}

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_SCHEDULERULES_H
