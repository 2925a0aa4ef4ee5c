//===- TuneRanking.h - what the search has ranked so far --------*- C++ -*-===//
//
// The compiled configurations the search keeps (the top K, the best of each schedule, and,
// with the Pareto front asked for, every one that fits) and the test that decides whether a
// candidate is worth compiling: whether its lower bounds could still put it in any of them.
// Tune.cpp's workers share one, under a lock.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNERANKING_H
#define CONDUIT_TUNE_TUNERANKING_H

#include "tune/Tune.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conduit {

/// Relative slack for comparing a bound with a compiled figure: the two sum the same
/// durations in different orders.
constexpr double kBoundSlack = 1e-9;

/// Best first: the objective's figure, then the other, then the enumeration order.
bool better(TuneObjective objective, const TunedConfiguration &a, const TunedConfiguration &b);

/// The bound, or the compiled figure, that the objective ranks by.
double primaryBound(TuneObjective objective, const Bounds &b);
double primaryFigure(TuneObjective objective, const TunedConfiguration &c);

class SearchState {
public:
  SearchState(TuneObjective objective, size_t top, bool pareto)
      : objective(objective), top(top), pareto(pareto) {}

  /// Whether any candidate of these schedules whose bound is `bound` or more could still
  /// matter (a candidate's chances only fall as its bound rises).
  bool anyMatters(double bound, const std::set<std::string_view> &families) const;

  /// Whether a candidate of schedule `family` with these bounds could still enter the top K,
  /// beat the best of its schedule, or reach the Pareto front.
  bool matters(const Bounds &bounds, std::string_view family) const;

  void add(const TunedConfiguration &c);

  TuneObjective objective;
  size_t top;
  bool pareto;
  std::vector<TunedConfiguration> ranked;
  std::map<std::string, TunedConfiguration, std::less<>> familyBest;
  /// Compiled configurations that fit, in compile order.
  std::vector<TunedConfiguration> all;

private:
  /// The staircase of (step, memory): step increasing, memory strictly decreasing.
  void addToFront(double step, int64_t memory);

  std::vector<std::pair<double, int64_t>> front;
};

} // namespace conduit

#endif // CONDUIT_TUNE_TUNERANKING_H
