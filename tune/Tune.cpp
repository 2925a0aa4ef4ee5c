//===- Tune.cpp - the search of conduit-tune ------------------------------===//

#include "tune/Tune.h"
#include "tune/TuneRanking.h"
#include "tune/TuneShapes.h"

#include "analysis/MemoryBound.h"
#include "analysis/Units.h"
#include "compiler/CompileJob.h"
#include "job/JobFile.h"
#include "job/KeyEditor.h"
#include "runtime/plan/Limits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace conduit;

//===----------------------------------------------------------------------===//
// Job objects
//===----------------------------------------------------------------------===//

Json conduit::applyConfiguration(const Json &root, llvm::ArrayRef<Dimension> dimensions,
                                 const Configuration &config) {
  Json job = root;
  for (const Dimension &dim : dimensions)
    eraseKey(job, dim.key);
  for (std::string_view key : shapeDependentKeys())
    eraseKey(job, key);
  // A key whose way is blocked (a value that is not an object) stays as it was: the reader
  // then reports the job as it is.
  for (const Assignment &a : config)
    setKey(job, a.key, a.value);
  return job;
}

llvm::Expected<Job> conduit::parseModel(const Json &root, const std::string &path) {
  Diagnostics diag(path);
  std::optional<Job> job = parseJobWithoutParallelism(root, path, diag);
  if (!job)
    return llvm::createStringError(diag.getError()->withoutFile());
  return std::move(*job);
}

//===----------------------------------------------------------------------===//
// The search
//===----------------------------------------------------------------------===//

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// A configuration that passed the reader, the scheduler and the memory bounds.
struct Candidate {
  size_t index = 0;
  Bounds bounds;
  /// The schedule's name (enumName's static text).
  std::string_view family;
  int64_t deviceMemory = 0;
  /// Which bounds `bounds` are: quickBounds()' (0), the schedule tier's from the compute-only
  /// execution of the order (1), the schedule tier's with the order timed as the compiler's
  /// simulator times it (2, the tightest and dearest: the collective streams, the computes
  /// slowed beside the collectives, the transfers' delays).
  int tier = 0;
};

/// The values of a configuration's dimensions outside `parallelism`: bounds computed for one
/// are valid only for the same.
std::string contextOf(const Configuration &config) {
  std::string context;
  for (const Assignment &a : config)
    if (!llvm::StringRef(a.key).starts_with("parallelism."))
      context += std::string(a.key) + "=" + displayValue(a.value) + ";";
  return context;
}

/// setKey(section, a.key, a.value) for a key "parallelism.NAME" of `section` ({"parallelism":
/// {...}}), without setKey's cost for a plain ASCII name (which it would store as it is): a
/// search sets a dozen keys for each of a million configurations.
void setParallelismKey(Json &section, const Assignment &a) {
  const std::string_view name = a.key.substr(std::string_view("parallelism.").size());
  Json &parallelism = section["parallelism"];
  const bool plain = !name.empty() && llvm::all_of(name, [](char c) {
    return static_cast<unsigned char>(c) < 0x80 && c != '.';
  });
  if (plain && parallelism.is_object())
    parallelism.get_ref<Json::object_t &>()[std::string(name)] = a.value;
  else
    setKey(section, a.key, a.value);
}

/// "P 8, D 8, V 4, schedule breadth-first, ..." for messages.
std::string describe(llvm::ArrayRef<Dimension> dimensions, const Configuration &config) {
  std::string text;
  for (const Assignment &a : config) {
    auto dim = llvm::find_if(dimensions, [&](const Dimension &d) { return d.key == a.key; });
    text += (text.empty() ? "" : ", ") +
            (dim != dimensions.end() ? dim->column : std::string(a.key)) + " " +
            displayValue(a.value);
  }
  return text;
}

unsigned threadCount(const TuneOptions &options) {
  return options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
}

/// Runs `work(t)` on `threads` threads (the calling thread is one of them) while `report` is
/// called about once a second.
void runParallel(unsigned threads, const std::function<void(unsigned)> &work,
                 const std::function<void()> &report) {
  std::atomic<unsigned> running{threads};
  std::mutex mutex;
  std::condition_variable done;
  std::vector<std::thread> pool;
  auto body = [&](unsigned t) {
    work(t);
    std::lock_guard<std::mutex> lock(mutex);
    if (--running == 0)
      done.notify_all();
  };
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(body, t);
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (!done.wait_for(lock, std::chrono::seconds(1), [&] { return running == 0; }))
      if (report)
        report();
  }
  for (std::thread &thread : pool)
    thread.join();
}

/// Whether a second compile gave exactly the first one's figures.
bool sameFigures(const StepFigures &a, const StepFigures &b) {
  return a.stepTimeS == b.stepTimeS && a.tokensPerS == b.tokensPerS &&
         a.peakMemoryBytes == b.peakMemoryBytes;
}

/// Compiles the job object `job` as the job file at `path` would be; the reader's error is
/// the compile's.
CompiledJob compileObject(const Json &job, const std::string &path) {
  Diagnostics diag(path);
  std::optional<Job> parsed = parseJob(job, path, diag);
  if (!parsed) {
    CompiledJob refused;
    refused.error = diag.getError()->str();
    return refused;
  }
  // Each split schedule with its own deferral of weight gradients (or the job's), as the
  // bounds price it: deferring fewer to fit could make a step shorter than its bound.
  CompileOptions options;
  options.deferFewerToFit = false;
  return compileJob(*parsed, options);
}

/// The fullest rank's peak a compile found: the plan's, or the one that did not fit.
int64_t peakOf(const CompiledJob &c) {
  return c.report ? c.report->peakMemoryBytes : c.refusedPeakBytes.value_or(0);
}

/// The tensor collectives' part of a report's exposed communication: the mean over ranks of
/// what they add to the compute stream.
double tensorShareOf(const PlanReport &report) {
  if (report.ranks.empty())
    return 0;
  double sum = 0;
  for (const RankReport &r : report.ranks)
    sum += r.idle.tensor;
  return sum / static_cast<double>(report.ranks.size());
}

/// Whether a compile failed for another reason than memory.
bool failed(const CompiledJob &c) { return !c.report && !c.refusedPeakBytes; }

std::string nothingFits(int64_t device, int64_t smallest) {
  return "nothing fits: every configuration that compiles needs more than the device's " +
         formatBytes(static_cast<double>(device)) +
         " (cluster.memory_bytes); the smallest needs at least " +
         formatBytes(static_cast<double>(smallest)) +
         ". Use more --gpus, a larger device (cluster.preset), or a smaller model";
}

} // namespace

llvm::Expected<TuneResult> conduit::tune(const Json &file, const std::string &path,
                                         const TuneOptions &requested) {
  const Clock::time_point start = Clock::now();
  // A key outside `parallelism` held at one value (`--fix cluster.memory_bytes=...`) is the
  // job's own: the job with it set, so that the bounds of the space's shapes know it.
  Json root = file;
  TuneOptions options = requested;
  llvm::erase_if(options.restrictions, [&](const Restriction &r) {
    if (r.values.size() != 1 || llvm::StringRef(r.key).starts_with("parallelism."))
      return false;
    return setKey(root, r.key, r.values.front());
  });
  llvm::Expected<Job> model = parseModel(root, path);
  if (!model)
    return model.takeError();
  SpaceRequest request = spaceRequest(*model, options, &root);
  std::vector<Dimension> dimensions = dimensionsFor(request);
  std::string why;
  Unlisted unlisted;
  const ConfigurationList configs = listSpace(*model, request, dimensions, why, unlisted);
  if (configs.empty() && unlisted.shapes > 0)
    return llvm::createStringError(nothingFits(model->cluster.memoryBytes, unlisted.smallestBytes));
  if (configs.empty())
    return llvm::createStringError(why);

  // A key of the starting job that no configuration can fix (a misspelt key, a bad value
  // outside the space) is the job's error, not a reason to refuse each configuration.
  {
    Diagnostics diag(path);
    if (!parseJob(applyConfiguration(root, dimensions, configs[0]), path, diag)) {
      const InputError &error = *diag.getError();
      if (llvm::none_of(builtinDimensions(),
                        [&](const Dimension &d) { return d.key == error.keyPath; }))
        return llvm::createStringError(error.withoutFile());
    }
  }

  TuneResult result;
  result.objective = options.objective;
  result.dimensions = dimensions;
  result.gpus = options.gpus;
  result.globalBatch = options.globalBatch;
  TuneCounts &counts = result.counts;
  counts.configurations = static_cast<int64_t>(configs.size());
  counts.shapesTooLarge = unlisted.shapes;
  if (unlisted.shapes > 0) {
    result.smallestInfeasibleBytes = unlisted.smallestBytes;
    result.deviceMemoryBytes = model->cluster.memoryBytes;
  }
  const unsigned threads = std::min<unsigned>(threadCount(options), configs.size());
  auto say = [&](const std::string &line) {
    if (options.progress && secondsSince(start) >= 1)
      options.progress(line);
  };

  // What the configurations' parallelism sections start from: the job's, without the keys the
  // space owns or that depend on the shape (as applyConfiguration leaves it).
  Json baseSection = Json::object();
  {
    Json start = applyConfiguration(root, dimensions, {});
    if (const Json *section = findKey(start, "parallelism"))
      baseSection["parallelism"] = *section;
    else
      baseSection["parallelism"] = Json::object();
  }

  // Reads a configuration's parallelism section into a job whose model, cluster and training
  // are read: from what the reader made of the last configuration it accepted where only the
  // leaf keys differ (`derived`, where the caller has it already), else through the reader.
  struct LastAccepted {
    std::optional<Configuration> config;
    ParallelismSpec shape;
    /// What the reader makes of `c` where it differs from `config` only in the leaf keys.
    std::optional<ParallelismSpec> leavesOf(const Configuration &c) const {
      return config && sameShape(c, *config) ? withLeaves(shape, c) : std::nullopt;
    }
  };
  auto readParallelism = [&](Job &job, const Configuration &config, LastAccepted &last,
                             std::optional<ParallelismSpec> derived, std::string &error) {
    if (!derived)
      derived = last.leavesOf(config);
    if (derived) {
      job.parallelism = std::move(*derived);
      return true;
    }
    Json section = baseSection;
    for (const Assignment &a : config)
      if (llvm::StringRef(a.key).starts_with("parallelism."))
        setParallelismKey(section, a);
    Diagnostics diag(path);
    if (!parseParallelismFor(job, section["parallelism"], diag)) {
      last.config.reset();
      error = diag.getError()->str();
      return false;
    }
    last.config = config;
    last.shape = job.parallelism;
    return true;
  };

  // Bounds, with no IR: each thread takes a contiguous share, so that configurations sharing
  // a shape (neighbours in the enumeration) share its schedule.
  std::vector<std::vector<Candidate>> shares(threads);
  std::vector<TuneCounts> shareCounts(threads);
  std::vector<std::string> shareInvalid(threads);
  std::vector<int64_t> shareSmallest(threads, 0), shareDevice(threads, 0);
  std::atomic<size_t> bounded{0};
  runParallel(
      threads,
      [&](unsigned t) {
        BoundCalculator calculator;
        bool contextRead = false;
        std::string readContext, contextError;
        std::optional<Job> contextJob;
        LastAccepted accepted;
        StaticBounds staticBounds;
        // The memory lower bounds of MemoryBound.h by what they read of the parallelism
        // section (P, D, T, sequence parallelism, E, sharding, checkpointing, schedule and
        // batch), for the job read last: a search asks the same few thousand many times.
        std::map<
            std::tuple<int64_t, int64_t, int64_t, bool, int64_t, int, int, int, int64_t, int64_t>,
            int64_t>
            memoryBounds;
        auto memoryBound = [&](const Job &job, const ParallelismSpec &par) {
          auto [it, inserted] = memoryBounds.try_emplace(
              std::make_tuple(par.pipeline, par.data, par.tensor, par.sequenceParallel, par.expert,
                              static_cast<int>(par.sharding), checkpointingKey(par),
                              static_cast<int>(par.schedule), par.microbatches, par.microbatchSize),
              0);
          if (inserted)
            it->second = memoryLowerBound(job, par).total();
          return it->second;
        };
        const size_t first = t * configs.size() / threads;
        const size_t last = (t + 1) * configs.size() / threads;
        shares[t].reserve(last - first);
        auto refuse = [&](int64_t bound) {
          ++shareCounts[t].infeasibleByBound;
          if (!shareSmallest[t] || bound < shareSmallest[t])
            shareSmallest[t] = bound;
        };
        // Each configuration read into the same storage, most of it unchanged from the last.
        Configuration config;
        for (size_t i = first; i < last; ++i, ++bounded) {
          configs.read(i, config);
          const std::string context = contextOf(config);
          // The model, cluster and training are read once per context; each configuration's
          // parallelism section alone is read and checked against them, or, where it differs
          // from the last one the reader accepted only in the leaf keys, taken from that one.
          if (!contextRead || context != readContext) {
            Diagnostics diag(path);
            contextJob = parseJobWithoutParallelism(applyConfiguration(root, dimensions, config),
                                                    path, diag);
            contextError = contextJob ? std::string() : diag.getError()->str();
            readContext = context;
            contextRead = true;
            accepted.config.reset();
            memoryBounds.clear();
          }
          std::optional<ParallelismSpec> derived =
              contextJob ? accepted.leavesOf(config) : std::nullopt;
          if (context.empty()) {
            // The model, cluster and training are the starting job's: the static memory bound
            // needs no parse of this configuration.
            const int64_t bound =
                staticBounds.bound(*model, derived ? *derived : staticShape(config));
            if (bound > model->cluster.memoryBytes) {
              shareDevice[t] = model->cluster.memoryBytes;
              refuse(bound);
              continue;
            }
          }
          std::string error = contextError;
          const bool valid = contextJob && readParallelism(*contextJob, config, accepted,
                                                           std::move(derived), error);
          if (!valid) {
            ++shareCounts[t].invalid;
            if (shareInvalid[t].empty())
              shareInvalid[t] = describe(dimensions, config) + ": " + error;
            continue;
          }
          const Job *parsed = &*contextJob;
          const int64_t device = parsed->cluster.memoryBytes;
          shareDevice[t] = device;
          // The static state, and what gpipe and breadth-first keep of every micro-batch
          // (MemoryBound.h): both without a schedule.
          if (int64_t bound = memoryBound(*parsed, parsed->parallelism); bound > device) {
            refuse(bound);
            continue;
          }
          llvm::Expected<Bounds> bounds = calculator.quickBounds(*parsed, context);
          if (!bounds) {
            ++shareCounts[t].invalid;
            std::string message = llvm::toString(bounds.takeError());
            if (shareInvalid[t].empty())
              shareInvalid[t] = describe(dimensions, configs[i]) + ": " + message;
            continue;
          }
          if (bounds->peakMemoryBytes > device) {
            refuse(bounds->peakMemoryBytes);
            continue;
          }
          shares[t].push_back({i, *bounds, enumName(parsed->parallelism.schedule), device});
        }
      },
      [&] {
        say(llvm::formatv("conduit-tune: {0} so far; bounding configurations: {1} of {2}",
                          formatSeconds(secondsSince(start)), bounded.load(), configs.size()));
      });
  std::vector<Candidate> candidates;
  for (unsigned t = 0; t < threads; ++t) {
    candidates.insert(candidates.end(), shares[t].begin(), shares[t].end());
    counts.invalid += shareCounts[t].invalid;
    counts.infeasibleByBound += shareCounts[t].infeasibleByBound;
    if (result.exampleInvalid.empty())
      result.exampleInvalid = shareInvalid[t];
    if (shareSmallest[t] &&
        (!result.smallestInfeasibleBytes || shareSmallest[t] < result.smallestInfeasibleBytes))
      result.smallestInfeasibleBytes = shareSmallest[t];
    if (shareDevice[t])
      result.deviceMemoryBytes = shareDevice[t];
  }
  counts.boundSeconds = secondsSince(start);
  // The order of the bounds, ties in the order of the space (the candidates are in it): the
  // bound and position of each, sorted a part at a time as the search reaches it (most of the
  // order is never needed: see anyMatters()).
  std::vector<std::pair<double, size_t>> byBound(candidates.size());
  std::set<std::string_view> families;
  for (size_t k = 0; k < candidates.size(); ++k) {
    byBound[k] = {primaryBound(options.objective, candidates[k].bounds), k};
    families.insert(candidates[k].family);
  }
  size_t sortedEnd = 0, sortChunk = 4096;
  // The candidate at position `next` of the order, which must exist.
  auto nextInOrder = [&](size_t next) -> const Candidate & {
    if (next == sortedEnd) {
      const size_t end = std::min(byBound.size(), sortedEnd + sortChunk);
      std::nth_element(byBound.begin() + sortedEnd, byBound.begin() + end - 1, byBound.end());
      std::sort(byBound.begin() + sortedEnd, byBound.begin() + end);
      sortedEnd = end;
      sortChunk *= 2;
    }
    return candidates[byBound[next].second];
  };

  // Compile in the order of the bounds, skipping what cannot matter. A candidate comes first
  // with the bounds of quickBounds(); the first time it is reached its schedule is built, and
  // it goes back in the order with the bounds of its compute-only execution; the second time,
  // with its order timed (dearer: the collectives placed for it, its computes slowed beside
  // them, its transfers' delays); and it is compiled when reached again (or skipped, or refused
  // by its memory).
  SearchState state(options.objective, static_cast<size_t>(options.top), options.pareto);
  std::mutex mutex;
  size_t next = 0;
  auto later = [&](const Candidate &a, const Candidate &b) {
    return std::make_pair(primaryBound(options.objective, a.bounds), a.index) >
           std::make_pair(primaryBound(options.objective, b.bounds), b.index);
  };
  // Candidates with the schedule tier's bounds, the least bound on top.
  std::vector<Candidate> scheduled;
  std::string internalError;
  // Per thread: the job a configuration reads as, for the schedule tier.
  struct Reader {
    BoundCalculator calculator;
    bool contextRead = false;
    std::string context, contextError;
    std::optional<Job> job;
    LastAccepted accepted;
  };
  std::vector<Reader> readers(threads);
  auto scheduleBounds = [&](Reader &reader, const Configuration &config, bool timed,
                            std::string &error) -> std::optional<Bounds> {
    const std::string context = contextOf(config);
    if (!reader.contextRead || context != reader.context) {
      Diagnostics diag(path);
      reader.job =
          parseJobWithoutParallelism(applyConfiguration(root, dimensions, config), path, diag);
      reader.contextError = reader.job ? std::string() : diag.getError()->str();
      reader.context = context;
      reader.contextRead = true;
      reader.accepted.config.reset();
    }
    if (!reader.job) {
      error = reader.contextError;
      return std::nullopt;
    }
    if (!readParallelism(*reader.job, config, reader.accepted, std::nullopt, error))
      return std::nullopt;
    llvm::Expected<Bounds> bounds = reader.calculator.bounds(*reader.job, context, timed);
    if (!bounds) {
      error = llvm::toString(bounds.takeError());
      return std::nullopt;
    }
    return *bounds;
  };
  runParallel(
      std::min<unsigned>(threads, std::max<size_t>(candidates.size(), 1)),
      [&](unsigned t) {
        while (true) {
          std::optional<Candidate> taken;
          {
            std::lock_guard<std::mutex> lock(mutex);
            while ((next < candidates.size() || !scheduled.empty()) && internalError.empty()) {
              if (options.budgetS > 0 && secondsSince(start) > options.budgetS) {
                counts.complete = false;
                break;
              }
              // Once no candidate with the next bound or a larger one can matter, none of
              // those left in the order can.
              if (next < candidates.size() &&
                  !state.anyMatters(primaryBound(options.objective, nextInOrder(next).bounds),
                                    families)) {
                counts.pruned += static_cast<int64_t>(candidates.size() - next);
                next = candidates.size();
                continue;
              }
              Candidate candidate;
              if (!scheduled.empty() &&
                  (next == candidates.size() || later(nextInOrder(next), scheduled.front()))) {
                std::pop_heap(scheduled.begin(), scheduled.end(), later);
                candidate = std::move(scheduled.back());
                scheduled.pop_back();
              } else {
                candidate = nextInOrder(next++);
              }
              if (state.matters(candidate.bounds, candidate.family)) {
                taken = std::move(candidate);
                break;
              }
              ++counts.pruned;
            }
          }
          if (!taken)
            return;
          const Candidate *c = &*taken;
          if (c->tier < 2) {
            std::string error;
            std::optional<Bounds> bounds =
                scheduleBounds(readers[t], configs[c->index], c->tier == 1, error);
            std::lock_guard<std::mutex> lock(mutex);
            if (!bounds) {
              ++counts.invalid;
              if (result.exampleInvalid.empty())
                result.exampleInvalid = describe(dimensions, configs[c->index]) + ": " + error;
              continue;
            }
            if (bounds->peakMemoryBytes > c->deviceMemory) {
              ++counts.infeasibleByBound;
              if (!result.smallestInfeasibleBytes ||
                  bounds->peakMemoryBytes < result.smallestInfeasibleBytes)
                result.smallestInfeasibleBytes = bounds->peakMemoryBytes;
              continue;
            }
            // Both are lower bounds; the schedule tier's is the larger, or nearly.
            taken->bounds.stepTimeS = std::max(taken->bounds.stepTimeS, bounds->stepTimeS);
            taken->bounds.peakMemoryBytes =
                std::max(taken->bounds.peakMemoryBytes, bounds->peakMemoryBytes);
            ++taken->tier;
            scheduled.push_back(std::move(*taken));
            std::push_heap(scheduled.begin(), scheduled.end(), later);
            continue;
          }
          const CompiledJob compiled =
              compileObject(applyConfiguration(root, dimensions, configs[c->index]), path);
          std::lock_guard<std::mutex> lock(mutex);
          if (failed(compiled)) {
            ++counts.failed;
            if (result.exampleFailure.empty())
              result.exampleFailure =
                  describe(dimensions, configs[c->index]) + ": " + compiled.error;
            continue;
          }
          const int64_t peak = peakOf(compiled);
          const double step = compiled.report ? compiled.report->stepTimeS : 0;
          const bool stepBelow = compiled.report && step < c->bounds.stepTimeS * (1 - kBoundSlack);
          if (stepBelow || peak < c->bounds.peakMemoryBytes) {
            internalError = llvm::formatv(
                "internal error: the bounds of {0} (step {1}, memory {2}) exceed what it "
                "compiles to (step {3}, memory {4}); the search would not be exact",
                describe(dimensions, configs[c->index]), c->bounds.stepTimeS,
                c->bounds.peakMemoryBytes, step, peak);
            return;
          }
          if (!compiled.report) {
            ++counts.infeasibleCompiled;
            if (!result.smallestInfeasibleBytes || peak < result.smallestInfeasibleBytes)
              result.smallestInfeasibleBytes = peak;
            continue;
          }
          ++counts.evaluated;
          TunedConfiguration tuned;
          tuned.figures = *compiled.report;
          tuned.tensorCommS = tensorShareOf(*compiled.report);
          tuned.config = configs[c->index];
          tuned.family = std::string(c->family);
          tuned.bounds = c->bounds;
          tuned.index = c->index;
          state.add(tuned);
        }
      },
      [&] {
        std::lock_guard<std::mutex> lock(mutex);
        std::string best =
            state.ranked.empty()
                ? std::string()
                : "; best step " + formatSeconds(state.ranked.front().figures.stepTimeS);
        say(llvm::formatv("conduit-tune: {0} so far; {1} of {2} candidates decided, {3} "
                          "compiled{4}",
                          formatSeconds(secondsSince(start)), next, candidates.size(),
                          counts.evaluated + counts.infeasibleCompiled + counts.failed, best));
      });
  if (!internalError.empty())
    return llvm::createStringError(internalError);
  counts.undecided = static_cast<int64_t>(candidates.size() - next + scheduled.size());
  if (counts.undecided > 0)
    counts.complete = false;

  if (state.ranked.empty()) {
    if (counts.infeasibleByBound + counts.infeasibleCompiled + counts.shapesTooLarge > 0)
      return llvm::createStringError(
          nothingFits(result.deviceMemoryBytes, result.smallestInfeasibleBytes));
    if (!counts.complete)
      return llvm::createStringError(
          "--budget ran out before any configuration was compiled; allow more seconds");
    return llvm::createStringError(
        "no configuration compiles; for example " +
        (result.exampleFailure.empty() ? result.exampleInvalid : result.exampleFailure));
  }

  // Each ranked configuration again, from the text of its job object: what --best-job writes
  // must compile to what the table says.
  for (TunedConfiguration &c : state.ranked)
    c.job = applyConfiguration(root, dimensions, c.config);
  std::vector<std::string> mismatch(state.ranked.size());
  std::atomic<size_t> nextCheck{0};
  runParallel(
      std::min<unsigned>(threads, state.ranked.size()),
      [&](unsigned) {
        for (size_t k = nextCheck++; k < state.ranked.size(); k = nextCheck++) {
          TunedConfiguration &c = state.ranked[k];
          Diagnostics diag(path);
          std::optional<Json> reread = parseJsonText(writeJson(c.job), diag);
          CompiledJob again;
          if (reread)
            again = compileObject(*reread, path);
          else
            again.error = diag.getError()->str();
          if (!again.report) {
            mismatch[k] = again.refusedPeakBytes
                              ? "it does not fit the second time (" +
                                    std::to_string(*again.refusedPeakBytes) + " bytes)"
                              : again.error;
            continue;
          }
          if (!sameFigures(c.figures, *again.report))
            mismatch[k] = llvm::formatv("step {0} s and {1} bytes the first time, {2} s and {3} "
                                        "bytes the second",
                                        c.figures.stepTimeS, c.figures.peakMemoryBytes,
                                        again.report->stepTimeS, again.report->peakMemoryBytes);
          if (k == 0)
            result.bestPlan = std::move(again.plan);
        }
      },
      nullptr);
  for (size_t k = 0; k < mismatch.size(); ++k)
    if (!mismatch[k].empty())
      return llvm::createStringError("internal error: re-compiling " +
                                     describe(dimensions, state.ranked[k].config) +
                                     " from its job object did not reproduce it: " + mismatch[k]);

  result.top = state.ranked;
  for (auto &[family, best] : state.familyBest) {
    result.bestPerFamily.push_back(best);
    result.bestPerFamily.back().job = applyConfiguration(root, dimensions, best.config);
  }
  std::sort(result.bestPerFamily.begin(), result.bestPerFamily.end(),
            [&](const auto &a, const auto &b) { return better(options.objective, a, b); });
  // The Pareto front of everything compiled: the search compiled every configuration that
  // could be on it.
  result.paretoSearched = options.pareto;
  std::vector<TunedConfiguration> all = state.all;
  std::sort(all.begin(), all.end(),
            [&](const auto &a, const auto &b) { return better(TuneObjective::Throughput, a, b); });
  for (const TunedConfiguration &c : all)
    if (result.pareto.empty() ||
        c.figures.peakMemoryBytes < result.pareto.back().figures.peakMemoryBytes) {
      result.pareto.push_back(c);
      result.pareto.back().job = applyConfiguration(root, dimensions, c.config);
    }

  if (options.microbatchSearch) {
    Refinement refinement;
    for (const TunedConfiguration &from : result.top) {
      Json job = from.job;
      setKey(job, "parallelism.microbatch_partitions", "auto");
      const CompiledJob searched = compileObject(job, path);
      if (failed(searched)) {
        refinement.skipped = searched.error;
        continue;
      }
      if (!searched.report || !searched.search || searched.search->second.best.empty())
        continue;
      // The cut found, written out, so that the refined job compiles without searching again.
      const Json cuts(searched.search->second.best);
      setKey(job, "parallelism.microbatch_partitions", cuts);
      CompiledJob refined = compileObject(job, path);
      if (failed(refined))
        return llvm::createStringError("internal error: the refined micro-batches of " +
                                       describe(dimensions, from.config) +
                                       " do not compile: " + refined.error);
      if (!refined.report)
        continue;
      refinement.from = from;
      refinement.refined.figures = *refined.report;
      refinement.refined.tensorCommS = tensorShareOf(*refined.report);
      refinement.refined.config = from.config;
      refinement.refined.config.push_back({"parallelism.microbatch_partitions", cuts});
      refinement.refined.job = std::move(job);
      refinement.refined.family = from.family;
      refinement.refined.index = from.index;
      refinement.skipped.clear();
      if (better(options.objective, refinement.refined, result.top.front())) {
        result.bestPlan = std::move(refined.plan);
        refinement.better = true;
      }
      break;
    }
    result.refinement = std::move(refinement);
  }
  counts.seconds = secondsSince(start);
  return result;
}
