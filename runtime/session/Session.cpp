//===- Session.cpp - one training run of a plan ---------------------------===//

#include "runtime/session/Session.h"

#include "runtime/ExitCodes.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/StageWork.h"
#include "runtime/plan/Trace.h"
#include "runtime/session/Backends.h"
#include "runtime/session/Profile.h"
#include "runtime/session/RankGroup.h"
#include "runtime/session/Reference.h"
#include "runtime/weights/Checkpoint.h"
#include "runtime/weights/HfWeights.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

namespace conduit::runtime {

namespace {

/// What --reference accepts: it trains every replica's samples, one after the other, in one
/// process. It is an oracle for plans of a job, not a way to train one; beyond these it would
/// run for hours (a small GPT trains about 200 samples a second on one core).
constexpr int64_t kMaxReferenceSamplesPerStep = 1 << 16;
constexpr double kMaxReferenceFlops = 1e15;
/// From this much work on, --reference says what it is about to do before it starts.
constexpr double kAnnounceReferenceFlops = 1e11;

/// "conduit-run: rank R: error: ..." on standard error (without the rank when it is alone).
void report(int64_t rank, int64_t ranks, const absl::Status &status) {
  const std::string who = ranks > 1 ? absl::StrCat("rank ", rank, ": ") : "";
  std::fprintf(stderr, "conduit-run: %serror: %s\n", who.c_str(),
               std::string(status.message()).c_str());
  std::fflush(stderr);
}

/// The step line: the loss (the cross-entropy) and, for a mixture of experts, the auxiliary
/// loss beside it, the router z-loss after that when the model has one, and the multi-token
/// prediction modules' loss when it has them.
void printStep(int64_t step, const StepOutcome &outcome) {
  std::printf("step %lld loss %.9g", static_cast<long long>(step),
              static_cast<float>(outcome.loss));
  if (outcome.auxLoss)
    std::printf(" aux_loss %.9g", static_cast<float>(*outcome.auxLoss));
  if (outcome.zLoss)
    std::printf(" z_loss %.9g", static_cast<float>(*outcome.zLoss));
  if (outcome.mtpLoss)
    std::printf(" mtp_loss %.9g", static_cast<float>(*outcome.mtpLoss));
  std::printf("\n");
  std::fflush(stdout);
}

void printInitialised(const std::string &path, int64_t step) {
  if (step > 0)
    std::printf("initialised from %s, continuing after step %lld\n", path.c_str(),
                static_cast<long long>(step));
  else
    std::printf("initialised from %s\n", path.c_str());
  std::fflush(stdout);
}

/// `typicalStep`: the median of rank 0's step times (without the first step when there are
/// more), which a step that something else on the machine disturbed does not move.
void printSummary(const Plan &plan, int64_t steps, int64_t ranks, double seconds,
                  double typicalStep, double loss) {
  // In double: the product of the plan's bounded figures still need not fit in an int64.
  const Config &c = plan.config;
  const double tokens = static_cast<double>(c.batchSamples()) * static_cast<double>(c.data) *
                        static_cast<double>(c.tokensPerSample) * static_cast<double>(steps);
  std::printf("done: %lld steps on %lld ranks in %.3f s (%.4f s per step, median %.4f s, "
              "%.0f tokens/s), final loss %.9g\n",
              static_cast<long long>(steps), static_cast<long long>(ranks), seconds,
              seconds / steps, typicalStep, tokens / seconds, static_cast<float>(loss));
  std::fflush(stdout);
}

template <typename T> std::string bytesOf(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
}
template <typename T> std::vector<T> valuesOf(const std::string &bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

/// The parameters after `step` as DIR/model.safetensors and DIR/config.json (HfWeights.h):
/// rank 0 lays the file out, replica 0 (tensor rank 0) of each pipeline rank writes its
/// stages' tensors into it, and rank 0 moves it into place (every rank calls it together:
/// sharded stages gather, and tensor groups gather their parts into whole tensors).
absl::Status saveParameters(const Plan &plan, Backend &backend, RankGroup &group,
                            RankPosition where, int64_t step, const std::string &dir) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::vector<float>> params, backend.stageParameters());
  CONDUIT_RETURN_IF_ERROR(
      agree(group, group.rank() == 0 ? beginHfModel(plan, dir, step) : absl::OkStatus(),
            "lay out the parameter file"));
  absl::Status written = absl::OkStatus();
  if (where.replica == 0 && where.tensorRank == 0) {
    size_t k = 0;
    for (const Stage &stage : plan.stages)
      if (stage.rank == where.pipelineRank && written.ok())
        written = writeHfLayers(plan, dir, stage.firstLayer, stage.endLayer, params[k++].data());
  }
  CONDUIT_RETURN_IF_ERROR(agree(group, written, "write its parameters"));
  return agree(group, group.rank() == 0 ? finishHfModel(dir) : absl::OkStatus(),
               "complete the parameter file");
}

/// This rank's state at the start of a run from `file` (--init): its part of its stages'
/// parameters (StageLayout: its tensor rank's, its routed experts), or its shards of them,
/// and fresh optimizer state.
absl::StatusOr<std::vector<StageState>> initialStates(const Plan &plan, RankPosition where,
                                                      HfModelFile &file) {
  const Config &c = plan.config;
  const bool sharded = isSharded(c);
  const int64_t width = model::OptimizerConfig::fromPlan(c).stateWidth();
  std::vector<StageState> states;
  for (const Stage &stage : plan.stages) {
    if (stage.rank != where.pipelineRank)
      continue;
    CONDUIT_ASSIGN_OR_RETURN(std::vector<float> whole,
                             readHfLayers(file, plan, stage.firstLayer, stage.endLayer));
    CONDUIT_ASSIGN_OR_RETURN(model::StageLayout layout, rankStageLayout(plan, stage.index, where));
    const ShardLayout shard = ShardLayout::of(layout, c, sharded, where);
    StageState s;
    s.stage = stage.index;
    s.params = shard.shardsOf(layout.part(whole.data())); // padding stays zero
    s.optimizer.assign(width * shard.updatedLen, 0.0f);
    states.push_back(std::move(s));
  }
  return states;
}

/// The measured timeline of replica 0's ranks (tensor rank 0), as a Chrome trace written by
/// rank 0.
absl::Status writeTrace(const Plan &plan, RankGroup &group, RankPosition where,
                        const Executor &executor, double stepTimeS, const std::string &path) {
  const bool shown = where.replica == 0 && where.tensorRank == 0;
  const std::string mine = shown ? bytesOf(executor.events()) : std::string();
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all, group.gatherAtZero(mine));
  if (group.rank() != 0)
    return absl::OkStatus();
  std::vector<std::vector<TraceEvent>> events(plan.config.pipeline);
  for (int64_t r = 0; r < group.size(); ++r) {
    const RankPosition p = RankPosition::of(plan.config, r);
    if (p.replica == 0 && p.tensorRank == 0)
      events[p.pipelineRank] = valuesOf<TraceEvent>(all[r]);
  }
  std::ofstream out(path);
  writeChromeTrace(plan, events, plan.name + " (measured)", stepTimeS, out);
  if (!out)
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

/// Every rank's peak memory beside the plan's prediction, at rank 0 (empty on the others).
absl::StatusOr<std::vector<RankMemory>> gatherMemory(const Plan &plan, RankGroup &group,
                                                     const model::MemoryPeak &mine) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                           group.gatherAtZero(bytesOf(std::vector<model::MemoryPeak>{mine})));
  std::vector<RankMemory> memory;
  for (int64_t r = 0; r < static_cast<int64_t>(all.size()); ++r) {
    std::vector<model::MemoryPeak> peak = valuesOf<model::MemoryPeak>(all[r]);
    if (peak.size() != 1)
      return absl::InternalError(absl::StrCat("rank ", r, " sent no memory figures"));
    RankMemory m;
    m.rank = r;
    m.pipelineRank = RankPosition::of(plan.config, r).pipelineRank;
    m.predictedBytes = plan.ranks[m.pipelineRank].peakMemoryBytes;
    m.measured = peak[0];
    memory.push_back(m);
  }
  return memory;
}

/// Rank 0: every rank's `mine` folded into one by `add(total, theirs)`, starting from T{}
/// (nullopt on the other ranks). Every rank calls it.
template <typename T, typename Add>
absl::StatusOr<std::optional<T>> foldAtZero(RankGroup &group, const T &mine, Add add) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                           group.gatherAtZero(bytesOf(std::vector<T>{mine})));
  if (group.rank() != 0)
    return std::nullopt;
  T total{};
  for (const std::string &bytes : all)
    for (const T &theirs : valuesOf<T>(bytes))
      add(total, theirs);
  return total;
}

/// With expert parallelism or a capacity: every rank's routed load together, at rank 0
/// (nothing at the others, or without either, or when no piece was routed). Every rank calls
/// it.
absl::StatusOr<std::optional<model::RoutedLoad>>
gatherRoutedLoad(const Plan &plan, RankGroup &group, const model::RoutedLoad &mine) {
  if (!plan.transformer || !plan.transformer->isMoe() ||
      (plan.config.expert <= 1 && plan.transformer->capacityFactor <= 0))
    return std::nullopt;
  CONDUIT_ASSIGN_OR_RETURN(
      std::optional<model::RoutedLoad> total,
      foldAtZero(group, mine, [](model::RoutedLoad &total, const model::RoutedLoad &load) {
        total.peak = std::max(total.peak, load.peak);
        total.sum += load.sum;
        total.pieces += load.pieces;
        total.assignments += load.assignments;
        total.dropped += load.dropped;
      }));
  if (!total || (total->pieces == 0 && total->assignments == 0))
    return std::nullopt;
  return total;
}

/// How many routed tokens the busiest expert rank took per piece, over the balanced share,
/// against the plan's bound (Transformer::imbalance); and what a capacity dropped. A line each.
std::string routedLoadLines(const Plan &plan, const model::RoutedLoad &total) {
  std::string lines;
  if (total.pieces > 0)
    lines = absl::StrFormat("experts: the busiest expert rank took %.2fx the balanced share of a "
                            "piece's routed tokens (over %lld pieces); the plan bounds %.2fx\n",
                            total.peak, static_cast<long long>(total.pieces),
                            plan.transformer->imbalance);
  if (total.assignments > 0)
    absl::StrAppend(
        &lines,
        absl::StrFormat("experts: the capacity (model.moe.capacity_factor %g) dropped %lld of "
                        "%lld routed assignments (%.2f%%)\n",
                        plan.transformer->capacityFactor, static_cast<long long>(total.dropped),
                        static_cast<long long>(total.assignments),
                        100.0 * static_cast<double>(total.dropped) /
                            static_cast<double>(total.assignments)));
  return lines;
}

/// Rank 0: the paired steps of every rank together, when the plan hides an all-to-all behind
/// any (nullopt elsewhere and on the other ranks). Every rank calls it.
absl::StatusOr<std::optional<PairedSteps>> gatherPairedSteps(const Plan &plan, RankGroup &group,
                                                             const PairedSteps &mine) {
  if (plan.config.expert <= 1) // nothing to hide: every rank knows it
    return std::nullopt;
  CONDUIT_ASSIGN_OR_RETURN(std::optional<PairedSteps> total,
                           foldAtZero(group, mine, [](PairedSteps &total, const PairedSteps &p) {
                             total.hiding += p.hiding;
                             total.together += p.together;
                           }));
  if (!total || total->hiding == 0)
    return std::nullopt;
  return total;
}

/// "paired steps: 84 of 90 ran their halves together, ...".
std::string pairedStepsLine(const PairedSteps &p, bool overlaps) {
  std::string line =
      absl::StrCat("paired steps: ", p.together, " of ", p.hiding, " ran their halves together");
  if (!overlaps)
    return absl::StrCat(line, ": this run computes them in turn (--profile)");
  absl::StrAppend(&line, ", each computing while the other's all-to-alls were in flight");
  if (p.together < p.hiding)
    absl::StrAppend(&line, "; the other ", p.hiding - p.together,
                    " ran in turn, the second half's input arriving after the first had ended");
  return line;
}

/// "memory: rank 1 peak 3.7 MiB measured (4.9 MiB held), 3.9 MiB predicted (-5.1%)".
void printMemory(const Plan &plan, const std::vector<RankMemory> &memory) {
  for (const RankMemory &m : memory) {
    std::string line = absl::StrCat("memory: rank ", m.rank);
    if (plan.config.data > 1 || plan.config.tensor > 1)
      absl::StrAppend(&line, " (pipeline rank ", m.pipelineRank, ")");
    const double measured = static_cast<double>(m.measured.countedBytes);
    absl::StrAppend(&line, " peak ", formatBytes(measured), " measured");
    if (m.measured.heldBytes != m.measured.countedBytes)
      absl::StrAppend(&line, " (", formatBytes(static_cast<double>(m.measured.heldBytes)),
                      " held)");
    if (m.predictedBytes > 0) {
      const double predicted = static_cast<double>(m.predictedBytes);
      absl::StrAppend(&line, ", ", formatBytes(predicted), " predicted (",
                      absl::StrFormat("%+.1f%%", 100 * (measured - predicted) / predicted), ")");
    } else {
      absl::StrAppend(&line, ", no prediction in the plan");
    }
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

/// Every rank's layer timings, and what rank 0 holds of the rest, written by rank 0.
absl::Status writeProfileAtZero(const Plan &plan, RankGroup &group, const std::string &backend,
                                const std::vector<LayerTiming> &rankTimings,
                                const RunMeasurements &measured, const std::string &path) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all, group.gatherAtZero(bytesOf(rankTimings)));
  if (group.rank() != 0)
    return absl::OkStatus();
  std::vector<LayerTiming> timings;
  for (const std::string &bytes : all)
    for (const LayerTiming &t : valuesOf<LayerTiming>(bytes))
      timings.push_back(t);
  std::ofstream out(path);
  CONDUIT_RETURN_IF_ERROR(writeProfile(plan, backend, timings, measured, out));
  if (!out)
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

/// The executor hook that injects `fault` at `rank`, or none when the fault is elsewhere.
/// A failure sets `injected`; a stall lasts until `stopped()` (never, across processes: the
/// others' MPI_Abort ends this process).
InstructionHook faultHook(const Plan &plan, const std::optional<Fault> &fault, int64_t rank,
                          bool &injected, std::function<bool()> stopped) {
  if (!fault || fault->globalRank != rank)
    return nullptr;
  const Fault f = *fault;
  const int32_t pipelineRank = RankPosition::of(plan.config, rank).pipelineRank;
  return [&plan, f, pipelineRank, &injected, stopped](int64_t step, int64_t index) -> absl::Status {
    if (step != f.step || index != f.instruction)
      return absl::OkStatus();
    std::fprintf(stderr,
                 "conduit-run: rank %lld: injected %s at step %lld, instruction %lld (%s)\n",
                 static_cast<long long>(f.globalRank), f.stall ? "stall" : "failure",
                 static_cast<long long>(step), static_cast<long long>(index),
                 describe(plan.ranks[pipelineRank].instructions[index]).c_str());
    std::fflush(stderr);
    if (!f.stall) {
      injected = true;
      return absl::AbortedError("injected failure");
    }
    while (!stopped())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return absl::AbortedError("another rank of this process failed");
  };
}

/// `status` with `context` in front of its message.
absl::Status within(const std::string &context, const absl::Status &status) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

/// One rank of a run and what it leaves for the end of the run.
struct Rank {
  int64_t id = 0;
  std::unique_ptr<RankGroup> group;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executor> executor;
  bool injected = false;
};

/// How a rank's run ended.
struct Ending {
  int code = kExitOk;
  absl::Status status; ///< what to report
  bool fatal = false;  ///< peers may be blocked on this rank: the job must stop
  bool shared = false; ///< every rank fails the same way: rank 0 alone reports it
};

/// With --save-params, whether the model has Hugging Face names: asked before training, so that
/// a run does not end refusing to write what it trained. Rank 0 warns of what the config.json
/// it will write cannot say.
absl::Status checkSaveParams(const Plan &plan, const SessionOptions &options, int64_t rank) {
  if (options.saveParams.empty())
    return absl::OkStatus();
  if (absl::Status s = hfTensors(plan).status(); !s.ok())
    return s;
  if (rank != 0)
    return absl::OkStatus();
  for (const std::string &omission : hfConfigOmissions(plan))
    std::fprintf(stderr,
                 "conduit-run: warning: %s: --save-params writes a Hugging Face model of type "
                 "\"%s\", whose config.json cannot say %s; Hugging Face's model, and a job on "
                 "that config.json, would compute another function (--init with this plan's "
                 "job reads the file as written)\n",
                 options.plan.c_str(), hfModelType(plan).c_str(), omission.c_str());
  std::fflush(stderr);
  return absl::OkStatus();
}

/// The run loop of one rank: build, resume, step, checkpoint, write the outputs.
Ending runRank(const Plan &plan, const SessionOptions &options, const BackendFactory &backends,
               Rank &rank, const std::function<bool()> &stopped) {
  RankGroup &group = *rank.group;
  absl::StatusOr<std::unique_ptr<Backend>> made =
      backends(rank.id, /*measureLayers=*/!options.profile.empty());
  if (!made.ok())
    return {kExitInvalidInput, made.status(), false, true};
  rank.backend = std::move(*made);
  Backend &backend = *rank.backend;
  if (absl::Status s = backend.validate(plan); !s.ok())
    return {kExitInvalidInput, within(options.plan, s), false, true};
  if (absl::Status s = checkSaveParams(plan, options, rank.id); !s.ok())
    return {kExitInvalidInput, within(options.plan, s), false, true};
  // Other ranks may be waiting for this one in a collective set-up (NCCL's, say).
  if (absl::Status s = backend.initialise(plan); !s.ok())
    return {kExitFailure, s, /*fatal=*/true};

  const RankPosition where = RankPosition::of(plan.config, rank.id);
  int64_t first = 1;
  if (!options.init.empty()) {
    // Every rank checks the same file: rank 0 alone says what is wrong with it.
    absl::StatusOr<HfModelFile> model = openHfModel(plan, options.init);
    if (absl::Status s = agree(group, model.status(), "read " + options.init); !s.ok())
      return {kExitInvalidInput, s, false, /*shared=*/true};
    absl::StatusOr<std::vector<StageState>> states = initialStates(plan, where, *model);
    absl::Status loaded = agree(group, states.status(), "read its parameters");
    if (loaded.ok())
      loaded = backend.restore(*states);
    if (!loaded.ok())
      return {kExitInvalidInput, loaded};
    first = model->step + 1;
    if (group.rank() == 0)
      printInitialised(options.init, model->step);
  }
  if (!options.resume.empty()) {
    absl::StatusOr<LoadedCheckpoint> loaded = readCheckpoint(options.resume, plan, group);
    absl::Status resumed = loaded.ok() ? backend.restore(loaded->states) : loaded.status();
    if (loaded.ok() && !resumed.ok())
      resumed = within(
          absl::StrCat("cannot resume ", options.plan, " from the checkpoint in ", options.resume),
          resumed);
    if (!resumed.ok())
      return {kExitInvalidInput, resumed};
    first = loaded->step + 1;
    if (group.rank() == 0)
      std::printf("resumed from %s after step %lld\n", options.resume.c_str(),
                  static_cast<long long>(loaded->step));
  }

  // A profile times the transport between global ranks 0 and 1, before the steps.
  std::optional<TransportTiming> transport;
  if (!options.profile.empty() && group.size() > 1 && rank.id < 2) {
    absl::StatusOr<TransportTiming> timed = timeTransport(plan, backend, rank.id);
    if (!timed.ok())
      return {kExitFailure, timed.status(), /*fatal=*/true};
    transport = std::move(*timed);
  }

  ExecutorOptions executorOptions;
  executorOptions.peerTimeoutS = options.peerTimeoutS;
  executorOptions.record = !options.trace.empty();
  executorOptions.onInstruction = faultHook(plan, options.fault, rank.id, rank.injected, stopped);
  executorOptions.tensorRank = where.tensorRank;
  if (absl::Status s = group.barrier(); !s.ok())
    return {kExitFailure, s};
  executorOptions.origin = std::chrono::steady_clock::now();
  // The peak memory of the training steps, not of setting up or of what the run writes after.
  backend.resetMemoryPeak();
  rank.executor =
      std::make_unique<Executor>(plan, where.pipelineRank, where.replica, backend, executorOptions);
  Executor &executor = *rank.executor;

  const int64_t last = first + options.steps - 1;
  double loss = 0;
  // Each step's wall time on this rank, and with --profile each step's layer timings: the
  // run's figures are the typical step's (typicalTimings), not the mean's.
  std::vector<double> stepSeconds;
  std::vector<std::vector<LayerTiming>> stepTimings;
  for (int64_t step = first; step <= last; ++step) {
    const auto stepStart = std::chrono::steady_clock::now();
    absl::StatusOr<StepOutcome> outcome = executor.runStep(step);
    if (!outcome.ok()) {
      if (rank.injected)
        return {kExitInjectedFailure, absl::OkStatus()};
      // A diverged loss is the plan's job's doing: say which plan.
      if (absl::IsDataLoss(outcome.status()))
        return {kExitFailure, within(options.plan, outcome.status()), /*fatal=*/true};
      return {kExitFailure, outcome.status(), /*fatal=*/true};
    }
    loss = outcome->loss;
    if (step == first && last > first) {
      backend.clearLayerTimings(); // the first step pays for set-up
    } else {
      stepSeconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - stepStart).count());
      if (!options.profile.empty()) {
        stepTimings.push_back(backend.layerTimings()); // this step's alone: cleared after each
        backend.clearLayerTimings();
      }
    }
    if (group.rank() == 0)
      printStep(step, *outcome);
    const bool due = options.checkpointEvery ? step % options.checkpointEvery == 0 : step == last;
    if (!options.checkpoint.empty() && due) {
      absl::StatusOr<std::vector<StageState>> states = backend.snapshot();
      absl::Status written = states.ok()
                                 ? writeCheckpoint(options.checkpoint, step, plan, group, *states)
                                 : states.status();
      if (!written.ok())
        return {kExitFailure, written};
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - executorOptions.origin)
          .count();
  absl::StatusOr<std::vector<RankMemory>> memory = gatherMemory(plan, group, backend.memoryPeak());
  if (!memory.ok())
    return {kExitFailure, memory.status()};
  absl::StatusOr<std::optional<model::RoutedLoad>> load =
      gatherRoutedLoad(plan, group, backend.routedLoad());
  if (!load.ok())
    return {kExitFailure, load.status()};
  absl::StatusOr<std::optional<PairedSteps>> pairs =
      gatherPairedSteps(plan, group, executor.pairedSteps());
  if (!pairs.ok())
    return {kExitFailure, pairs.status()};
  if (group.rank() == 0) {
    printSummary(plan, options.steps, group.size(), seconds, median(stepSeconds), loss);
    printMemory(plan, *memory);
    if (*load)
      std::printf("%s", routedLoadLines(plan, **load).c_str());
    if (*pairs)
      std::printf("%s\n", pairedStepsLine(**pairs, backend.overlapsPairs()).c_str());
    std::fflush(stdout);
  }
  absl::Status finished = absl::OkStatus();
  if (!options.saveParams.empty())
    finished = saveParameters(plan, backend, group, where, last, options.saveParams);
  if (finished.ok() && !options.trace.empty())
    finished = writeTrace(plan, group, where, executor, seconds / options.steps, options.trace);
  if (finished.ok() && !options.profile.empty())
    finished = writeProfileAtZero(plan, group, backend.name(), typicalTimings(stepTimings),
                                  {*memory, transport, *load}, options.profile);
  if (!finished.ok())
    return {kExitFailure, finished};
  return {};
}

/// One rank per MPI process.
SessionResult runProcess(const Plan &plan, const SessionOptions &options, const MpiWorld &world) {
  absl::StatusOr<BackendFactory> backends = processBackends(options.backend, world);
  if (!backends.ok()) {
    if (world.rank == 0)
      report(world.rank, world.size, backends.status());
    return {kExitInvalidInput};
  }
  auto rank = std::make_unique<Rank>();
  rank->id = world.rank;
  rank->group = std::make_unique<MpiRankGroup>(world);
  const Ending end = runRank(plan, options, *backends, *rank, [] { return false; });
  if (end.code == kExitOk)
    return {};
  if (rank->injected) {
    // A crash shuts nothing down: peers find out as they would from a real one. What the
    // rank holds is left to the process's end.
    if (rank->backend)
      rank->backend->abort();
    rank.release();
    return {kExitInjectedFailure, /*crashed=*/true};
  }
  if (!end.shared || world.rank == 0)
    report(world.rank, world.size, end.status);
  if (end.fatal) {
    // Peers may be blocked on this rank: end the whole job rather than leave them waiting.
    if (rank->backend)
      rank->backend->abort();
    if (world.size > 1)
      MPI_Abort(MPI_COMM_WORLD, kExitFailure);
  }
  return {end.code};
}

/// Every rank of the plan as a thread of this process.
SessionResult runThreads(const Plan &plan, const SessionOptions &options, const MpiWorld &world) {
  const int64_t ranks = plan.config.worldSize();
  if (world.size != 1 || options.ranksPerProcess != ranks) {
    report(world.rank, world.size,
           absl::FailedPreconditionError(absl::StrCat(
               "--ranks-per-process runs the whole plan in one process: the plan has ", ranks,
               " ranks, so start one process with --ranks-per-process=", ranks)));
    return {kExitInvalidInput};
  }
  absl::StatusOr<BackendFactory> backends =
      loopbackBackends(options.backend, plan, options.peerTimeoutS);
  if (!backends.ok()) {
    report(0, 1, backends.status());
    return {kExitInvalidInput};
  }
  LocalRankHub hub(ranks);
  std::vector<Rank> state(ranks);
  std::vector<Ending> ends(ranks);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < ranks; ++r) {
    state[r].id = r;
    state[r].group = hub.member(r);
    threads.emplace_back([&, r] {
      ends[r] = runRank(plan, options, *backends, state[r], [&hub] { return hub.aborted(); });
      if (ends[r].code != kExitOk) {
        // The other ranks stop at once instead of waiting for this one.
        if (state[r].backend)
          state[r].backend->abort();
        hub.abort();
      }
    });
  }
  for (std::thread &t : threads)
    t.join();
  for (int64_t r = 0; r < ranks; ++r)
    if (state[r].injected)
      return {kExitInjectedFailure, /*crashed=*/true};
  // The first failure, not the aborts it caused.
  for (bool aborts : {false, true})
    for (int64_t r = 0; r < ranks; ++r)
      if (ends[r].code != kExitOk && absl::IsAborted(ends[r].status) == aborts) {
        report(r, ranks, ends[r].status);
        return {ends[r].code};
      }
  return {};
}

} // namespace

SessionResult runSession(const Plan &plan, const SessionOptions &options, const MpiWorld &world) {
  if (options.ranksPerProcess > 1)
    return runThreads(plan, options, world);
  return runProcess(plan, options, world);
}

SessionResult runReference(const Plan &plan, const SessionOptions &options, const MpiWorld &world) {
  if (world.size != 1) {
    report(world.rank, world.size,
           absl::FailedPreconditionError("--reference runs in one process"));
    return {kExitInvalidInput};
  }
  // Every replica's samples in one process: say what that costs before starting, and refuse
  // what would not end in reasonable time.
  absl::StatusOr<ReferenceWork> work = Reference::estimate(plan);
  if (!work.ok()) {
    report(0, 1, within(options.plan, work.status()));
    return {kExitInvalidInput};
  }
  const double flops = work->flopsPerStep * static_cast<double>(options.steps);
  const std::string what = absl::StrCat(
      "--reference trains ", work->samplesPerStep, " samples per step (", plan.config.data,
      " replicas x ", plan.config.batchSamples(), ") for ", options.steps,
      " steps in one process: about ", absl::StrFormat("%.3g", flops), " FLOPs");
  if (work->samplesPerStep > kMaxReferenceSamplesPerStep || flops > kMaxReferenceFlops) {
    report(0, 1,
           absl::FailedPreconditionError(absl::StrCat(
               options.plan, ": ", what, "; it accepts at most ", kMaxReferenceSamplesPerStep,
               " samples per step and ", absl::StrFormat("%.0e", kMaxReferenceFlops),
               " FLOPs, beyond which it would run for hours. Run fewer --steps, or compare a "
               "plan of the same model with fewer data-parallel replicas or a smaller batch")));
    return {kExitInvalidInput};
  }
  if (flops > kAnnounceReferenceFlops) {
    std::fprintf(stderr, "conduit-run: %s; this may take a while\n", what.c_str());
    std::fflush(stderr);
  }
  absl::StatusOr<Reference> reference = Reference::create(plan);
  if (!reference.ok()) {
    report(0, 1, within(options.plan, reference.status()));
    return {kExitInvalidInput};
  }
  if (absl::Status s = checkSaveParams(plan, options, 0); !s.ok()) {
    report(0, 1, within(options.plan, s));
    return {kExitInvalidInput};
  }
  int64_t first = 1;
  if (!options.init.empty()) {
    absl::StatusOr<HfModelFile> model = openHfModel(plan, options.init);
    absl::StatusOr<std::vector<float>> values =
        model.ok() ? readHfLayers(*model, plan, 0, static_cast<int64_t>(plan.layers.size()))
                   : model.status();
    absl::Status set = values.ok() ? reference->setParameters(std::move(*values)) : values.status();
    if (!set.ok()) {
      report(0, 1, set);
      return {kExitInvalidInput};
    }
    first = model->step + 1;
    printInitialised(options.init, model->step);
  }
  const int64_t last = first + options.steps - 1;
  const auto start = std::chrono::steady_clock::now();
  double loss = 0;
  for (int64_t step = first; step <= last; ++step) {
    const StepOutcome outcome = reference->step(step);
    loss = outcome.loss;
    printStep(step, outcome);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("done: %lld steps (reference) in %.3f s, final loss %.9g\n",
              static_cast<long long>(options.steps), seconds, static_cast<float>(loss));
  if (!options.saveParams.empty())
    if (absl::Status s =
            writeHfModel(plan, options.saveParams, reference->parameters().data(), last);
        !s.ok()) {
      report(0, 1, s);
      return {kExitFailure};
    }
  return {};
}

} // namespace conduit::runtime
