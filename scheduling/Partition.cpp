//===- Partition.cpp - exact min-max partition of a layer chain -----------===//
//
// Finds T*, the smallest possible cost of the slowest stage, by bisection over the bit
// patterns of non-negative doubles with a greedy feasibility probe. The probe is exact for
// this problem (segment costs grow with the segment, so packing each stage as full as possible
// needs the fewest stages), and it compares the same prefix-sum differences the result is
// measured with, so the search finds T* itself, not an approximation. A second pass then
// places the boundaries: each stage is sized as close as possible to an even share of what
// remains, without exceeding T* and without leaving more than the remaining stages can carry.
// O(L log) for the search, O(L + S log L) for the placement.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

#include "llvm/ADT/bit.h"

#include <algorithm>
#include <cmath>

using namespace conduit::sched;

namespace {

class PrefixSums {
public:
  explicit PrefixSums(const std::vector<double> &costs) : sums(costs.size() + 1, 0.0) {
    for (size_t i = 0; i < costs.size(); ++i)
      sums[i + 1] = sums[i] + costs[i];
  }
  /// Cost of layers [i, j).
  double operator()(int64_t i, int64_t j) const { return sums[j] - sums[i]; }
  int64_t layers() const { return static_cast<int64_t>(sums.size()) - 1; }
  const std::vector<double> &values() const { return sums; }

private:
  std::vector<double> sums;
};

/// One past the last layer a stage starting at `i` can take without exceeding `limit`
/// (at least i + 1: a stage always takes one layer).
int64_t farthestEnd(const PrefixSums &prefix, int64_t i, double limit) {
  // Largest j with s[j] - s[i] <= limit: binary search on the prefix sums. The subtraction is
  // monotone in j, so comparing it directly keeps the probe consistent with the cost.
  int64_t lo = i + 1, hi = prefix.layers();
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (prefix(i, mid) <= limit)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// Stages the greedy packing needs under `limit`, or S+1 as soon as it exceeds S.
int64_t stagesNeeded(const PrefixSums &prefix, double limit, int64_t maxStages) {
  int64_t count = 0;
  for (int64_t i = 0; i < prefix.layers(); i = farthestEnd(prefix, i, limit))
    if (++count > maxStages)
      break;
  return count;
}

double fromBits(uint64_t bits) { return llvm::bit_cast<double>(bits); }
uint64_t toBits(double value) { return llvm::bit_cast<uint64_t>(value); }

} // namespace

llvm::Expected<Partition> conduit::sched::partitionMinMax(const PartitionProblem &problem) {
  if (Violation v = problem.check())
    return llvm::createStringError(*v);
  if (problem.tailLayers > 1) {
    // The tail as one layer of its summed cost; the last stage then ends at the chain's end.
    PartitionProblem joined{
        {problem.layerCosts.begin(), problem.layerCosts.begin() + problem.cuttableLayers() - 1},
        problem.numStages};
    double tail = 0;
    for (size_t l = joined.layerCosts.size(); l < problem.layerCosts.size(); ++l)
      tail += problem.layerCosts[l];
    joined.layerCosts.push_back(tail);
    llvm::Expected<Partition> partition = partitionMinMax(joined);
    if (partition)
      partition->bounds.back() = static_cast<int64_t>(problem.layerCosts.size());
    return partition;
  }
  const PrefixSums prefix(problem.layerCosts);
  const int64_t layers = prefix.layers();
  const int64_t stages = problem.numStages;

  // Bisection over doubles: lo is infeasible (or -1), hi feasible. Non-negative doubles order
  // like their bit patterns, so halving the bit interval reaches adjacent values in at most
  // 64 steps.
  double maxLayer = *std::max_element(problem.layerCosts.begin(), problem.layerCosts.end());
  uint64_t hi = toBits(prefix(0, layers));
  uint64_t lo = toBits(maxLayer);
  if (stagesNeeded(prefix, maxLayer, stages) <= stages) {
    hi = lo;
  } else {
    while (hi - lo > 1) {
      uint64_t mid = lo + (hi - lo) / 2;
      if (stagesNeeded(prefix, fromBits(mid), stages) <= stages)
        hi = mid;
      else
        lo = mid;
    }
  }
  const double best = fromBits(hi);

  // minStages[i]: fewest stages for layers [i, L) under `best` (greedy from the left is
  // optimal for every suffix too).
  std::vector<int64_t> minStages(layers + 1, 0);
  for (int64_t i = layers - 1; i >= 0; --i)
    minStages[i] = 1 + minStages[farthestEnd(prefix, i, best)];

  Partition partition;
  partition.bounds.reserve(stages + 1);
  partition.bounds.push_back(0);
  for (int64_t s = 0; s < stages - 1; ++s) {
    int64_t i = partition.bounds.back();
    int64_t left = stages - s; // stages still to place, this one included
    // Feasible ends: every remaining stage keeps a layer, this stage stays under `best`, and
    // the rest fits in left - 1 stages. minStages is non-increasing, so the feasible ends form
    // one interval [lowEnd, highEnd].
    int64_t highEnd = std::min(farthestEnd(prefix, i, best), layers - (left - 1));
    int64_t lowEnd = i + 1;
    {
      int64_t a = i + 1, b = highEnd;
      while (a < b) {
        int64_t mid = a + (b - a) / 2;
        if (minStages[mid] <= left - 1)
          b = mid;
        else
          a = mid + 1;
      }
      lowEnd = a;
    }
    // Aim at an even share of what remains.
    double target = prefix(i, layers) / static_cast<double>(left);
    const std::vector<double> &sums = prefix.values();
    int64_t j =
        std::lower_bound(sums.begin() + lowEnd, sums.begin() + highEnd + 1, sums[i] + target) -
        sums.begin();
    j = std::clamp<int64_t>(j, lowEnd, highEnd);
    if (j > lowEnd && std::fabs(prefix(i, j - 1) - target) <= std::fabs(prefix(i, j) - target))
      --j;
    partition.bounds.push_back(j);
  }
  partition.bounds.push_back(layers);
  return partition;
}
