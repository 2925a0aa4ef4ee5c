//===- MicrobatchSearch.h - searching micro-batch cuts ----------*- C++ -*-===//
//
// UMPIPE's question (Unequal Microbatches-Based Pipeline Parallelism, IEEE TPDS 2025): when
// every pipeline stage may cut the batch into its own micro-batch sizes, which cuts give the
// shortest step? Small micro-batches fill and drain the pipeline sooner; large ones amortise
// the fixed cost of each launch; stages of different speeds want different cuts. The searches
// here score candidates with StepTimeEvaluator.h.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_SCHEDULING_MICROBATCHSEARCH_H
#define CONDUIT_SCHEDULING_MICROBATCHSEARCH_H

#include "scheduling/StepTimeEvaluator.h"

#include <functional>
#include <vector>

namespace conduit::sched {

enum class SearchMethod {
  Greedy,  ///< local greedy: move samples between neighbouring micro-batches while it helps
  DP,      ///< greedy dynamic programming: stage by stage, the best cut from a family
  Genetic, ///< DGAP-style dual-chromosome genetic algorithm
  Descent, ///< ours: multi-start coordinate descent with per-stage neighbourhoods
};

struct SearchOptions {
  SearchMethod method = SearchMethod::Descent;
  uint64_t seed = 1;
  /// Stop and return the best so far after this long (seconds; 0: no limit).
  double timeBudgetS = 0;
  /// Most micro-batches a stage may use (0: one per sample).
  int64_t maxMicrobatches = 0;
  /// The partition the job would use without a search (every stage the same cut).
  std::vector<int64_t> baseline;
  /// Called about once a second on long searches: (candidates evaluated, best step time).
  std::function<void(int64_t, double)> progress;
};

struct SearchResult {
  Partitions best;
  double stepTime = 0;
  double baselineStepTime = 0;
  int64_t evaluated = 0;
  double seconds = 0;
};

SearchResult searchPartitions(StepTimeEvaluator &evaluator, const SearchOptions &options);

/// "greedy", "dp", "genetic", "descent".
const char *searchMethodName(SearchMethod method);

} // namespace conduit::sched

#endif // CONDUIT_SCHEDULING_MICROBATCHSEARCH_H
