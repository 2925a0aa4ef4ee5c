//===- Placement.cpp - stage placement and micro-batch boundaries ---------===//

#include "scheduling/Schedulers.h"

using namespace conduit::sched;

llvm::Expected<std::vector<int64_t>>
conduit::sched::placeStages(int64_t numStages, int64_t numRanks, Placement placement) {
  if (numRanks < 1 || numStages < numRanks)
    return llvm::createStringError("placement needs at least one stage per rank (" +
                                   std::to_string(numStages) + " stages, " +
                                   std::to_string(numRanks) + " ranks)");
  std::vector<int64_t> rank(numStages);
  if (placement == Placement::Loop) {
    for (int64_t s = 0; s < numStages; ++s)
      rank[s] = s % numRanks;
    return rank;
  }
  if (numStages != 2 * numRanks)
    return llvm::createStringError(
        "the V placement puts exactly two stages on every rank (rank r holds r and 2P-1-r); "
        "it needs stages_per_device = 2, got " +
        std::to_string(numStages) + " stages on " + std::to_string(numRanks) + " ranks");
  for (int64_t r = 0; r < numRanks; ++r) {
    rank[r] = r;
    rank[2 * numRanks - 1 - r] = r;
  }
  return rank;
}

std::vector<int64_t> conduit::sched::equalBoundaries(int64_t count, int64_t size) {
  std::vector<int64_t> bounds(count + 1);
  for (int64_t m = 0; m <= count; ++m)
    bounds[m] = m * size;
  return bounds;
}

std::vector<int64_t> conduit::sched::boundariesFromSizes(const std::vector<int64_t> &sizes) {
  std::vector<int64_t> bounds(sizes.size() + 1, 0);
  for (size_t m = 0; m < sizes.size(); ++m)
    bounds[m + 1] = bounds[m] + sizes[m];
  return bounds;
}
