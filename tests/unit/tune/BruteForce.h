//===- BruteForce.h - the tuner's search against compiling everything -*- C++ -*-===//
//
// Helpers of the tuner's tests: compile every configuration of a space as conduit-tune
// compiles one, with the bounds the search prunes by (each checked to stay below what the
// configuration compiles to), and compare the search's ranking, best of each schedule and
// Pareto front with what compiling everything gives.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_TUNE_BRUTEFORCE_H
#define CONDUIT_TESTS_UNIT_TUNE_BRUTEFORCE_H

#include "tune/Tune.h"
#include "tune/TuneShapes.h"

#include "compiler/CompileJob.h"
#include "job/JobFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace conduit::test {

/// Compiles `job` as conduit-tune compiles a configuration: split schedules keep their own
/// deferral of weight gradients, which the bounds price.
inline CompiledJob compileAsTheTunerDoes(const Job &job) {
  CompileOptions options;
  options.deferFewerToFit = false;
  return compileJob(job, options);
}

/// One configuration compiled on its own.
struct Compiled {
  size_t index = 0;
  std::string family;
  bool fits = false;
  double stepTimeS = 0;
  int64_t peakMemoryBytes = 0;
  /// The schedule tier's step bound, timed (the tuner's last tier) and not, and the static
  /// tier's (no schedule).
  double boundStepS = 0, untimedBoundStepS = 0, quickBoundStepS = 0;
  /// The schedule tier's memory bound, and the static one (the job alone).
  int64_t boundPeakBytes = 0, staticBoundBytes = 0;
  int64_t pipeline = 0, data = 1, tensor = 1, expert = 1;
  /// The compiled plan's expert all-to-alls left exposed, mean over ranks.
  double exposedAllToAllS = 0;
  /// Its parallelism section, for messages.
  std::string parallelism;
};

inline Json loadJob(const std::string &path) {
  Diagnostics diag(path);
  std::optional<Json> root = loadJsonFile(path, diag);
  EXPECT_TRUE(root) << diag.getError()->str();
  return *root;
}

inline void setMemory(Json &root, int64_t bytes) { root["cluster"]["memory_bytes"] = bytes; }

/// Compiles every configuration of the space with the compiler, checking each one's bounds.
inline std::vector<Compiled> bruteForce(const Json &root, const std::string &path,
                                        const TuneOptions &options) {
  llvm::Expected<Job> model = parseModel(root, path);
  EXPECT_TRUE(static_cast<bool>(model));
  SpaceRequest request = spaceRequest(*model, options, &root);
  std::vector<Dimension> dimensions = dimensionsFor(request);
  std::string why;
  Unlisted unlisted;
  const ConfigurationList configs = listSpace(*model, request, dimensions, why, unlisted);
  EXPECT_FALSE(configs.empty()) << why;
  std::vector<Compiled> out;
  BoundCalculator calculator;
  for (size_t i = 0; i < configs.size(); ++i) {
    Json text = applyConfiguration(root, dimensions, configs[i]);
    Diagnostics diag(path);
    std::optional<Job> job = parseJob(text, path, diag);
    if (!job)
      continue;
    CompiledJob compiled = compileAsTheTunerDoes(*job);
    Compiled c;
    c.index = i;
    c.family = std::string(enumName(job->parallelism.schedule));
    if (compiled.report) {
      c.fits = true;
      c.stepTimeS = compiled.report->stepTimeS;
      c.peakMemoryBytes = compiled.report->peakMemoryBytes;
      c.exposedAllToAllS = compiled.report->exposedAllToAllS;
    } else {
      // Only memory may refuse a configuration the reader accepted and the scheduler can run.
      if (!compiled.refusedPeakBytes)
        continue; // the scheduler refuses it: not a candidate
      c.peakMemoryBytes = *compiled.refusedPeakBytes;
    }
    llvm::Expected<Bounds> bounds = calculator.bounds(*job, "");
    if (!bounds) {
      ADD_FAILURE() << "configuration " << i
                    << " compiles but its bounds fail: " << llvm::toString(bounds.takeError());
      continue;
    }
    EXPECT_LE(calculator.staticMemoryBound(*job), c.peakMemoryBytes) << "configuration " << i;
    EXPECT_LE(bounds->peakMemoryBytes, c.peakMemoryBytes) << "configuration " << i;
    // The bounds without a schedule are below the schedule tier's.
    llvm::Expected<Bounds> quick = calculator.quickBounds(*job, "");
    if (!quick) {
      ADD_FAILURE() << "configuration " << i
                    << " has bounds but no quick bounds: " << llvm::toString(quick.takeError());
      continue;
    }
    EXPECT_LE(quick->stepTimeS, bounds->stepTimeS * (1 + 1e-12)) << "configuration " << i;
    EXPECT_LE(quick->peakMemoryBytes, bounds->peakMemoryBytes) << "configuration " << i;
    // And the untimed schedule tier's below the timed one's.
    llvm::Expected<Bounds> untimed = calculator.bounds(*job, "", /*timed=*/false);
    if (!untimed) {
      ADD_FAILURE() << "configuration " << i << " has timed bounds but no untimed ones: "
                    << llvm::toString(untimed.takeError());
      continue;
    }
    EXPECT_LE(untimed->stepTimeS, bounds->stepTimeS * (1 + 1e-12)) << "configuration " << i;
    c.untimedBoundStepS = untimed->stepTimeS;
    c.quickBoundStepS = quick->stepTimeS;
    if (c.fits) {
      EXPECT_LE(bounds->stepTimeS, c.stepTimeS * (1 + 1e-9))
          << "configuration " << i << " " << writeJson(text["parallelism"], -1);
    }
    c.boundStepS = bounds->stepTimeS;
    c.boundPeakBytes = bounds->peakMemoryBytes;
    c.staticBoundBytes = calculator.staticMemoryBound(*job);
    c.pipeline = job->parallelism.pipeline;
    c.data = job->parallelism.data;
    c.tensor = job->parallelism.tensor;
    c.expert = job->parallelism.expert;
    c.parallelism = writeJson(text["parallelism"], -1);
    out.push_back(c);
  }
  return out;
}

inline bool faster(const Compiled &a, const Compiled &b) {
  return std::make_tuple(a.stepTimeS, a.peakMemoryBytes, a.index) <
         std::make_tuple(b.stepTimeS, b.peakMemoryBytes, b.index);
}

/// The tuner's result against the brute force over the same space.
inline void expectSame(const TuneResult &result, std::vector<Compiled> all, int64_t top,
                       int64_t deviceMemory) {
  std::vector<Compiled> fitting;
  for (const Compiled &c : all)
    if (c.fits)
      fitting.push_back(c);
  std::sort(fitting.begin(), fitting.end(), faster);
  ASSERT_FALSE(fitting.empty());

  // The ranking, entry by entry.
  ASSERT_EQ(result.top.size(), std::min<size_t>(top, fitting.size()));
  for (size_t k = 0; k < result.top.size(); ++k) {
    EXPECT_EQ(result.top[k].index, fitting[k].index) << "rank " << k;
    EXPECT_EQ(result.top[k].figures.stepTimeS, fitting[k].stepTimeS) << "rank " << k;
    EXPECT_EQ(result.top[k].figures.peakMemoryBytes, fitting[k].peakMemoryBytes) << "rank " << k;
    EXPECT_LE(result.top[k].figures.peakMemoryBytes, deviceMemory) << "rank " << k;
  }

  // The best of each schedule.
  std::map<std::string, Compiled> families;
  for (const Compiled &c : fitting)
    families.try_emplace(c.family, c);
  ASSERT_EQ(result.bestPerFamily.size(), families.size());
  for (const TunedConfiguration &f : result.bestPerFamily) {
    ASSERT_TRUE(families.count(f.family)) << f.family;
    EXPECT_EQ(f.index, families[f.family].index) << f.family;
  }

  // The Pareto front: in order of step time, each configuration smaller than all before it.
  std::vector<size_t> front;
  int64_t smallest = INT64_MAX;
  for (const Compiled &c : fitting)
    if (c.peakMemoryBytes < smallest) {
      smallest = c.peakMemoryBytes;
      front.push_back(c.index);
    }
  if (result.paretoSearched) {
    ASSERT_EQ(result.pareto.size(), front.size());
    for (size_t k = 0; k < front.size(); ++k)
      EXPECT_EQ(result.pareto[k].index, front[k]) << "front entry " << k;
  } else {
    EXPECT_TRUE(result.pareto.empty());
  }

  // Every configuration is accounted for once.
  const TuneCounts &n = result.counts;
  EXPECT_EQ(n.invalid + n.infeasibleByBound + n.infeasibleCompiled + n.pruned + n.evaluated +
                n.failed,
            n.configurations);
  EXPECT_LE(n.evaluated, static_cast<int64_t>(fitting.size()));
  EXPECT_TRUE(result.counts.complete);
}

} // namespace conduit::test

#endif // CONDUIT_TESTS_UNIT_TUNE_BRUTEFORCE_H
