//===- TuneRanking.cpp - what the search has ranked so far ----------------===//

#include "tune/TuneRanking.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <tuple>

using namespace conduit;

bool conduit::better(TuneObjective objective, const TunedConfiguration &a,
                     const TunedConfiguration &b) {
  auto key = [&](const TunedConfiguration &c) {
    return objective == TuneObjective::Throughput
               ? std::make_tuple(c.figures.stepTimeS,
                                 static_cast<double>(c.figures.peakMemoryBytes), c.index)
               : std::make_tuple(static_cast<double>(c.figures.peakMemoryBytes),
                                 c.figures.stepTimeS, c.index);
  };
  return key(a) < key(b);
}

double conduit::primaryBound(TuneObjective objective, const Bounds &b) {
  return objective == TuneObjective::Throughput ? b.stepTimeS
                                                : static_cast<double>(b.peakMemoryBytes);
}

double conduit::primaryFigure(TuneObjective objective, const TunedConfiguration &c) {
  return objective == TuneObjective::Throughput ? c.figures.stepTimeS
                                                : static_cast<double>(c.figures.peakMemoryBytes);
}

bool SearchState::anyMatters(double bound, const std::set<std::string_view> &families) const {
  bound *= 1 - kBoundSlack;
  if (pareto || ranked.size() < top || bound <= primaryFigure(objective, ranked.back()))
    return true;
  return llvm::any_of(families, [&](std::string_view family) {
    auto best = familyBest.find(family);
    return best == familyBest.end() || bound <= primaryFigure(objective, best->second);
  });
}

bool SearchState::matters(const Bounds &bounds, std::string_view family) const {
  const double bound = primaryBound(objective, bounds) * (1 - kBoundSlack);
  if (ranked.size() < top || bound <= primaryFigure(objective, ranked.back()))
    return true;
  auto best = familyBest.find(family);
  if (best == familyBest.end() || bound <= primaryFigure(objective, best->second))
    return true;
  if (!pareto)
    return false;
  // Pareto: some compiled configuration is at least as fast and as small as this one can be.
  auto it = std::upper_bound(
      front.begin(), front.end(), bounds.stepTimeS * (1 - kBoundSlack),
      [](double step, const std::pair<double, int64_t> &p) { return step < p.first; });
  return it == front.begin() || std::prev(it)->second > bounds.peakMemoryBytes;
}

void SearchState::add(const TunedConfiguration &c) {
  auto at = std::upper_bound(ranked.begin(), ranked.end(), c,
                             [&](const auto &a, const auto &b) { return better(objective, a, b); });
  ranked.insert(at, c);
  if (ranked.size() > top)
    ranked.pop_back();
  auto [best, inserted] = familyBest.try_emplace(c.family, c);
  if (!inserted && better(objective, c, best->second))
    best->second = c;
  if (pareto) {
    addToFront(c.figures.stepTimeS, c.figures.peakMemoryBytes);
    all.push_back(c);
  }
}

void SearchState::addToFront(double step, int64_t memory) {
  auto it =
      std::upper_bound(front.begin(), front.end(), step,
                       [](double s, const std::pair<double, int64_t> &p) { return s < p.first; });
  if (it != front.begin() && std::prev(it)->second <= memory)
    return;
  auto end = it;
  while (end != front.end() && end->second >= memory)
    ++end;
  it = front.erase(it, end);
  front.insert(it, {step, memory});
}
