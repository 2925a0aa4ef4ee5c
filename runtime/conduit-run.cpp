//===- conduit-run.cpp - execute a plan ------------------------------------===//
//
//   mpirun -np P*D conduit-run JOB.plan --backend=cpu|cuda --steps K [--trace FILE]
//          [--profile FILE] [--checkpoint DIR --checkpoint-every K] [--resume DIR]
//   conduit-run JOB.plan --backend=cuda --ranks-per-process=P*D --steps K   (one GPU)
//   conduit-run --reference JOB.plan --steps K
//   conduit-run --dump JOB.plan
//
// Verifies the plan file (structure, then semantics), checks that this run can execute it
// (world size, backend, model), builds this process's part of the model and runs the rank
// program once per step. Rank 0 prints "step K loss L" per step and a summary; --reference
// trains the same job in one process and prints the same lines. Exit codes are listed in
// usage() and docs/conduit-run.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Profile.h"
#include "runtime/Reference.h"
#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/exec/Executor.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanJson.h"
#include "runtime/plan/Trace.h"

#if CONDUIT_HAVE_CUDA
#include "runtime/backend/cuda/CudaBackend.h"
#include "runtime/backend/cuda/LoopbackTransport.h"
#include "runtime/backend/cuda/NcclTransport.h"

#include <thread>
#endif

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

using namespace conduit::runtime;
namespace fs = std::filesystem;

namespace {

enum ExitCode {
  kExitOk = 0,
  kExitInvalidInput = 1, ///< the plan, a checkpoint, or a mismatch with this run
  kExitUsage = 2,
  kExitFailure = 3, ///< execution failed: communication, a silent peer, a non-finite loss
};

const char *usage() {
  return R"(usage: conduit-run PLAN [options]

  --backend=cpu|cuda       the backend (default cpu); run under mpirun -np P*D
  --ranks-per-process=N    (cuda) run all N = P*D ranks as threads of this process on one
                           GPU (testing whole pipelines on a single device)
  --steps=N                training steps to run (default 1)
  --reference              train the same job in one process (the oracle)
  --dump                   print the verified plan as JSON and exit
  --trace=FILE             write the measured timeline (Chrome trace format)
  --profile=FILE           write measured per-layer times (the cost model's profile format)
  --checkpoint=DIR         write checkpoints to DIR ...
  --checkpoint-every=K     ... after every K steps (default: only after the last step)
  --resume=DIR             continue from the checkpoint in DIR
  --save-params=DIR        write the final parameters, one <layer>.f32 file per layer
  --peer-timeout=SECONDS   a rank that makes no progress this long fails (default 30)
  --fail-at=R:S:I          (tests) global rank R exits at step S, instruction I
  --stall-at=R:S:I         (tests) global rank R stops making progress there

exit codes: 0 success; 1 invalid plan or checkpoint, or one that does not match this run;
2 invalid command line; 3 execution failed (communication, a peer that failed or stalled,
a non-finite loss); 4 injected failure (--fail-at)
)";
}

struct Options {
  std::string plan;
  std::string backend = "cpu";
  int64_t steps = 1;
  bool reference = false, dump = false;
  std::string trace, profile, checkpoint, resume, saveParams;
  int64_t checkpointEvery = 0, ranksPerProcess = 1;
  double peerTimeoutS = 30;
  std::optional<Fault> fault;
};

absl::StatusOr<Fault> parseFault(const std::string &text, bool stall) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  Fault f;
  f.stall = stall;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &f.globalRank) ||
      !absl::SimpleAtoi(parts[1], &f.step) || !absl::SimpleAtoi(parts[2], &f.instruction))
    return absl::InvalidArgumentError(
        absl::StrCat("expected RANK:STEP:INSTRUCTION, got \"", text, "\""));
  return f;
}

absl::StatusOr<Options> parseArguments(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      if (!o.plan.empty())
        return absl::InvalidArgumentError(absl::StrCat("a second plan file: ", arg));
      o.plan = arg;
      continue;
    }
    std::string name = arg.substr(2), value;
    bool hasValue = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    auto take = [&]() -> absl::StatusOr<std::string> {
      if (hasValue)
        return value;
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      return std::string(argv[++i]);
    };
    auto integer = [&](int64_t &out, int64_t least) -> absl::Status {
      CONDUIT_ASSIGN_OR_RETURN(std::string v, take());
      if (!absl::SimpleAtoi(v, &out) || out < least)
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " expects an integer of at least ", least, ", got \"", v, "\""));
      return absl::OkStatus();
    };
    if (name == "reference" || name == "dump") {
      (name == "reference" ? o.reference : o.dump) = true;
    } else if (name == "backend") {
      CONDUIT_ASSIGN_OR_RETURN(o.backend, take());
      if (o.backend != "cpu" && o.backend != "cuda")
        return absl::InvalidArgumentError(
            absl::StrCat("--backend expects cpu or cuda, got \"", o.backend, "\""));
    } else if (name == "steps") {
      CONDUIT_RETURN_IF_ERROR(integer(o.steps, 1));
    } else if (name == "ranks-per-process") {
      CONDUIT_RETURN_IF_ERROR(integer(o.ranksPerProcess, 1));
    } else if (name == "checkpoint-every") {
      CONDUIT_RETURN_IF_ERROR(integer(o.checkpointEvery, 1));
    } else if (name == "trace") {
      CONDUIT_ASSIGN_OR_RETURN(o.trace, take());
    } else if (name == "profile") {
      CONDUIT_ASSIGN_OR_RETURN(o.profile, take());
    } else if (name == "checkpoint") {
      CONDUIT_ASSIGN_OR_RETURN(o.checkpoint, take());
    } else if (name == "resume") {
      CONDUIT_ASSIGN_OR_RETURN(o.resume, take());
    } else if (name == "save-params") {
      CONDUIT_ASSIGN_OR_RETURN(o.saveParams, take());
    } else if (name == "peer-timeout") {
      CONDUIT_ASSIGN_OR_RETURN(std::string v, take());
      if (!absl::SimpleAtod(v, &o.peerTimeoutS) || !(o.peerTimeoutS > 0))
        return absl::InvalidArgumentError(
            absl::StrCat("--peer-timeout expects a positive number of seconds, got \"", v, "\""));
    } else if (name == "fail-at" || name == "stall-at") {
      CONDUIT_ASSIGN_OR_RETURN(std::string v, take());
      absl::StatusOr<Fault> fault = parseFault(v, name == "stall-at");
      if (!fault.ok())
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", fault.status().message()));
      o.fault = *fault;
    } else if (name == "help") {
      std::cout << usage();
      std::exit(kExitOk);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
  }
  if (o.plan.empty())
    return absl::InvalidArgumentError("no plan file given");
  if (o.checkpointEvery && o.checkpoint.empty())
    return absl::InvalidArgumentError("--checkpoint-every needs --checkpoint=DIR");
  if (o.ranksPerProcess > 1 && o.backend != "cuda")
    return absl::InvalidArgumentError("--ranks-per-process needs --backend=cuda");
  if (o.ranksPerProcess > 1 && (!o.checkpoint.empty() || !o.resume.empty() || o.fault))
    return absl::InvalidArgumentError(
        "--ranks-per-process takes --steps, --trace, --profile, --save-params and "
        "--peer-timeout; checkpoints and fault injection need one process per rank");
  if (o.reference && (!o.checkpoint.empty() || !o.resume.empty() || !o.trace.empty() ||
                      !o.profile.empty() || o.fault))
    return absl::InvalidArgumentError(
        "--reference takes --steps and --save-params only");
  return o;
}

/// "conduit-run: error: ..." on standard error; with the rank when there are several.
void report(const MpiWorld &world, const absl::Status &status) {
  std::fprintf(stderr, "conduit-run: %serror: %s\n",
               world.size > 1 ? absl::StrCat("rank ", world.rank, ": ").c_str() : "",
               std::string(status.message()).c_str());
  std::fflush(stderr);
}

void printStep(int64_t step, double loss) {
  std::printf("step %lld loss %.9g\n", static_cast<long long>(step), static_cast<float>(loss));
  std::fflush(stdout);
}

/// Every process's bytes, at rank 0 (every process calls it together).
absl::StatusOr<std::vector<std::string>> gatherAtZero(const MpiWorld &world,
                                                      const std::string &mine) {
  int size = static_cast<int>(mine.size());
  std::vector<int> sizes(world.size), offsets(world.size);
  CONDUIT_MPI(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < world.size; ++r) {
    offsets[r] = total;
    total += sizes[r];
  }
  std::string all(world.rank == 0 ? total : 0, '\0');
  CONDUIT_MPI(MPI_Gatherv(mine.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(),
                          MPI_BYTE, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  if (world.rank == 0)
    for (int r = 0; r < world.size; ++r)
      out.push_back(all.substr(offsets[r], sizes[r]));
  return out;
}

template <typename T> std::string bytesOf(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
}
template <typename T> std::vector<T> valuesOf(const std::string &bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

absl::Status writeLayerFiles(const std::string &dir, const conduit::model::LayerChain<float> &chain,
                             const float *params) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  for (size_t i = 0; i < chain.size(); ++i) {
    const int64_t begin = chain.offset(i), end = chain.offset(i + 1);
    std::ofstream out(fs::path(dir) / (chain.name(i) + ".f32"), std::ios::binary);
    out.write(reinterpret_cast<const char *>(params + begin),
              static_cast<std::streamsize>((end - begin) * sizeof(float)));
    if (!out)
      return absl::UnavailableError(absl::StrCat("cannot write the parameters of ", chain.name(i)));
  }
  return absl::OkStatus();
}

int runReference(const Plan &plan, const Options &options, const MpiWorld &world) {
  if (world.size != 1) {
    report(world, absl::FailedPreconditionError("--reference runs in one process"));
    return kExitInvalidInput;
  }
  absl::StatusOr<Reference> reference = Reference::create(plan);
  if (!reference.ok()) {
    report(world, reference.status());
    return kExitInvalidInput;
  }
  const auto start = std::chrono::steady_clock::now();
  double loss = 0;
  for (int64_t step = 1; step <= options.steps; ++step) {
    loss = reference->step(step);
    printStep(step, loss);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("done: %lld steps (reference) in %.3f s, final loss %.9g\n",
              static_cast<long long>(options.steps), seconds, static_cast<float>(loss));
  if (!options.saveParams.empty())
    if (absl::Status s = writeLayerFiles(options.saveParams, reference->model(),
                                         reference->parameters().data());
        !s.ok()) {
      report(world, s);
      return kExitFailure;
    }
  return kExitOk;
}

/// The parameters of the stages of `pipelineRank` (in stage order), one file per layer.
absl::Status writeStageParameters(const Plan &plan, int32_t pipelineRank,
                                  const std::vector<std::vector<float>> &params,
                                  const std::string &dir) {
  CONDUIT_ASSIGN_OR_RETURN(conduit::model::GptShape shape, conduit::model::GptShape::fromPlan(plan));
  conduit::model::CpuOps<float> ops; // names and offsets only; nothing is computed
  size_t k = 0;
  for (const Stage &stage : plan.stages) {
    if (stage.rank != pipelineRank)
      continue;
    CONDUIT_ASSIGN_OR_RETURN(auto chain, conduit::model::LayerChain<float>::build(
                                             plan, shape, stage.firstLayer, stage.endLayer, ops));
    CONDUIT_RETURN_IF_ERROR(writeLayerFiles(dir, chain, params[k++].data()));
  }
  return absl::OkStatus();
}

/// The final parameters of every stage, written by replica 0.
absl::Status saveParameters(const Plan &plan, Backend &backend, RankPosition where,
                            const std::string &dir) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::vector<float>> params, backend.stageParameters());
  if (where.replica != 0)
    return absl::OkStatus();
  return writeStageParameters(plan, where.pipelineRank, params, dir);
}

/// The measured timeline of each pipeline rank (replica 0's), as a Chrome trace.
absl::Status writeTraceFile(const Plan &plan, const std::vector<std::vector<TraceEvent>> &events,
                            double stepTimeS, const std::string &path) {
  std::ofstream out(path);
  writeChromeTrace(plan, events, plan.name + " (measured)", stepTimeS, out);
  if (!out)
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

/// The measured timeline of replica 0's ranks, written by rank 0.
absl::Status writeTrace(const Plan &plan, const MpiWorld &world, RankPosition where,
                        const Executor &executor, double stepTimeS, const std::string &path) {
  std::string mine = where.replica == 0 ? bytesOf(executor.events()) : std::string();
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all, gatherAtZero(world, mine));
  if (world.rank != 0)
    return absl::OkStatus();
  std::vector<std::vector<TraceEvent>> events(plan.config.pipeline);
  for (int r = 0; r < world.size; ++r) {
    RankPosition p = RankPosition::of(plan.config, r);
    if (p.replica == 0)
      events[p.pipelineRank] = valuesOf<TraceEvent>(all[r]);
  }
  return writeTraceFile(plan, events, stepTimeS, path);
}

absl::Status writeProfileFile(const Plan &plan, const std::string &backend,
                              const std::vector<LayerTiming> &timings, const std::string &path) {
  std::ofstream out(path);
  CONDUIT_RETURN_IF_ERROR(writeProfile(plan, backend, timings, out));
  if (!out)
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

/// Every rank's layer timings, written by rank 0.
absl::Status writeProfileAtZero(const Plan &plan, const MpiWorld &world, const Backend &backend,
                                const std::string &path) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                           gatherAtZero(world, bytesOf(backend.layerTimings())));
  if (world.rank != 0)
    return absl::OkStatus();
  std::vector<LayerTiming> timings;
  for (const std::string &bytes : all)
    for (const LayerTiming &t : valuesOf<LayerTiming>(bytes))
      timings.push_back(t);
  return writeProfileFile(plan, backend.name(), timings, path);
}

void printSummary(const Plan &plan, int64_t steps, int64_t ranks, double seconds, double loss) {
  const double tokens = static_cast<double>(plan.config.batchSamples() * plan.config.data *
                                            plan.config.tokensPerSample * steps);
  std::printf("done: %lld steps on %lld ranks in %.3f s (%.4f s per step, %.0f tokens/s), "
              "final loss %.9g\n",
              static_cast<long long>(steps), static_cast<long long>(ranks), seconds,
              seconds / steps, tokens / seconds, static_cast<float>(loss));
  std::fflush(stdout);
}

#if CONDUIT_HAVE_CUDA
/// This process's device: its place among the processes of its node.
absl::StatusOr<int> localDevice() {
  CONDUIT_ASSIGN_OR_RETURN(int count, conduit::cuda::CudaBackend::deviceCount());
  MPI_Comm node;
  CONDUIT_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 0;
  absl::Status ranked = mpiStatus(MPI_Comm_rank(node, &local), "MPI_Comm_rank", __FILE__, __LINE__);
  MPI_Comm_free(&node);
  CONDUIT_RETURN_IF_ERROR(ranked);
  return local % count;
}

/// Every rank of the plan as a thread of this process, on device 0, through the loopback
/// transport: whole pipelines on one GPU.
int runLoopback(const Plan &plan, const Options &options, const MpiWorld &world) {
  const int64_t ranks = plan.config.worldSize();
  if (world.size != 1 || options.ranksPerProcess != ranks) {
    report(world, absl::FailedPreconditionError(absl::StrCat(
                      "--ranks-per-process runs the whole plan in one process: the plan has ",
                      ranks, " ranks, so start one process with --ranks-per-process=", ranks)));
    return kExitInvalidInput;
  }
  conduit::cuda::LoopbackHub hub(plan, options.peerTimeoutS);
  struct Rank {
    std::unique_ptr<conduit::cuda::CudaBackend> backend;
    std::unique_ptr<Executor> executor;
    std::vector<std::vector<float>> params;
    absl::Status status;
    bool invalid = false; ///< failed validation, not execution
  };
  std::vector<Rank> state(ranks);
  ExecutorOptions executorOptions;
  executorOptions.peerTimeoutS = options.peerTimeoutS;
  executorOptions.record = !options.trace.empty();
  double loss = 0;
  std::chrono::steady_clock::time_point first, last;
  auto run = [&](int64_t r) -> absl::Status {
    Rank &mine = state[r];
    mine.backend = std::make_unique<conduit::cuda::CudaBackend>(
        r, ranks, /*device=*/0, /*measureLayers=*/!options.profile.empty(),
        [&hub, r](const Plan &) -> absl::StatusOr<std::unique_ptr<Transport>> {
          return hub.transport(r);
        });
    if (absl::Status s = mine.backend->validate(plan); !s.ok()) {
      mine.invalid = true;
      return s;
    }
    CONDUIT_RETURN_IF_ERROR(mine.backend->initialise(plan));
    const RankPosition where = RankPosition::of(plan.config, r);
    mine.executor = std::make_unique<Executor>(plan, where.pipelineRank, where.replica,
                                               *mine.backend, executorOptions);
    for (int64_t step = 1; step <= options.steps; ++step) {
      if (r == 0 && step == 1)
        first = std::chrono::steady_clock::now();
      CONDUIT_ASSIGN_OR_RETURN(StepOutcome outcome, mine.executor->runStep(step));
      if (step == 1 && options.steps > 1)
        mine.backend->clearLayerTimings(); // the first step pays for set-up
      if (r == 0) {
        loss = outcome.loss;
        printStep(step, loss);
      }
    }
    if (r == 0)
      last = std::chrono::steady_clock::now();
    if (!options.saveParams.empty()) {
      CONDUIT_ASSIGN_OR_RETURN(mine.params, mine.backend->stageParameters());
    }
    return absl::OkStatus();
  };
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      state[r].status = run(r);
      if (!state[r].status.ok())
        hub.abort(); // the other ranks stop at once instead of waiting for this one
    });
  for (std::thread &t : threads)
    t.join();
  // The first failure, not the aborts it caused.
  for (bool aborts : {false, true})
    for (int64_t r = 0; r < ranks; ++r)
      if (!state[r].status.ok() && absl::IsAborted(state[r].status) == aborts) {
        report(world, absl::Status(state[r].status.code(),
                                   absl::StrCat("rank ", r, ": ", state[r].status.message())));
        return state[r].invalid ? kExitInvalidInput : kExitFailure;
      }
  const double seconds = std::chrono::duration<double>(last - first).count();
  printSummary(plan, options.steps, ranks, seconds, loss);

  absl::Status finished = absl::OkStatus();
  std::vector<std::vector<TraceEvent>> events(plan.config.pipeline);
  std::vector<LayerTiming> timings;
  for (int64_t r = 0; r < ranks && finished.ok(); ++r) {
    const RankPosition where = RankPosition::of(plan.config, r);
    for (const LayerTiming &t : state[r].backend->layerTimings())
      timings.push_back(t);
    if (where.replica != 0)
      continue;
    events[where.pipelineRank] = state[r].executor->events();
    if (!options.saveParams.empty())
      finished = writeStageParameters(plan, where.pipelineRank, state[r].params,
                                      options.saveParams);
  }
  if (finished.ok() && !options.trace.empty())
    finished = writeTraceFile(plan, events, seconds / options.steps, options.trace);
  if (finished.ok() && !options.profile.empty())
    finished = writeProfileFile(plan, "cuda", timings, options.profile);
  if (!finished.ok()) {
    report(world, finished);
    return kExitFailure;
  }
  return kExitOk;
}
#endif

/// The backend of this process, or an error that says why it cannot be had.
absl::StatusOr<std::unique_ptr<Backend>> makeBackend(const Options &options,
                                                     const MpiWorld &world) {
  const bool measure = !options.profile.empty();
  if (options.backend == "cpu")
    return std::make_unique<CpuBackend>(world, measure);
#if CONDUIT_HAVE_CUDA
  CONDUIT_ASSIGN_OR_RETURN(int device, localDevice());
  return std::make_unique<conduit::cuda::CudaBackend>(
      world.rank, world.size, device, measure,
      [world](const Plan &plan) -> absl::StatusOr<std::unique_ptr<Transport>> {
        return conduit::cuda::NcclTransport::create(plan, world);
      });
#else
  return absl::UnimplementedError(
      "this conduit-run was built without the CUDA backend; use --backend=cpu");
#endif
}

int runPlan(const Plan &plan, const Options &options, const MpiWorld &world) {
#if CONDUIT_HAVE_CUDA
  if (options.ranksPerProcess > 1)
    return runLoopback(plan, options, world);
#endif
  absl::StatusOr<std::unique_ptr<Backend>> made = makeBackend(options, world);
  if (!made.ok()) {
    if (world.rank == 0)
      report(world, made.status());
    return kExitInvalidInput;
  }
  Backend &backend = **made;
  if (absl::Status s = backend.validate(plan); !s.ok()) {
    if (world.rank == 0)
      report(world, s);
    return kExitInvalidInput;
  }
  if (absl::Status s = backend.initialise(plan); !s.ok()) {
    report(world, s);
    // Other processes may be waiting for this one in a collective set-up (NCCL's, say).
    backend.abort();
    if (world.size > 1)
      MPI_Abort(MPI_COMM_WORLD, kExitFailure);
    return kExitFailure;
  }
  const RankPosition where = RankPosition::of(plan.config, world.rank);
  int64_t first = 1;
  if (!options.resume.empty()) {
    absl::StatusOr<LoadedCheckpoint> loaded = readCheckpoint(options.resume, plan, world);
    absl::Status resumed = loaded.ok() ? backend.restore(loaded->states) : loaded.status();
    if (!resumed.ok()) {
      report(world, resumed);
      return kExitInvalidInput;
    }
    first = loaded->step + 1;
    if (world.rank == 0)
      std::printf("resumed from %s after step %lld\n", options.resume.c_str(),
                  static_cast<long long>(loaded->step));
  }

  ExecutorOptions executorOptions;
  executorOptions.peerTimeoutS = options.peerTimeoutS;
  executorOptions.fault = options.fault;
  executorOptions.record = !options.trace.empty();
  MPI_Barrier(MPI_COMM_WORLD);
  executorOptions.origin = std::chrono::steady_clock::now();
  Executor executor(plan, where.pipelineRank, where.replica, backend, executorOptions);

  const int64_t last = first + options.steps - 1;
  double loss = 0;
  for (int64_t step = first; step <= last; ++step) {
    absl::StatusOr<StepOutcome> outcome = executor.runStep(step);
    if (!outcome.ok()) {
      report(world, outcome.status());
      // Peers may be blocked on this rank: end the whole job rather than leave them waiting.
      backend.abort();
      MPI_Abort(MPI_COMM_WORLD, kExitFailure);
      return kExitFailure;
    }
    loss = outcome->loss;
    if (step == first && last > first)
      backend.clearLayerTimings(); // the first step pays for set-up
    if (world.rank == 0)
      printStep(step, loss);
    const bool due = options.checkpointEvery ? step % options.checkpointEvery == 0 : step == last;
    if (!options.checkpoint.empty() && due) {
      absl::StatusOr<std::vector<StageState>> states = backend.snapshot();
      absl::Status written = states.ok()
                                 ? writeCheckpoint(options.checkpoint, step, plan, world, *states)
                                 : states.status();
      if (!written.ok()) {
        report(world, written);
        return kExitFailure;
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - executorOptions.origin)
          .count();
  if (world.rank == 0)
    printSummary(plan, options.steps, world.size, seconds, loss);
  absl::Status finished = absl::OkStatus();
  if (!options.saveParams.empty())
    finished = saveParameters(plan, backend, where, options.saveParams);
  if (finished.ok() && !options.trace.empty())
    finished = writeTrace(plan, world, where, executor, seconds / options.steps, options.trace);
  if (finished.ok() && !options.profile.empty())
    finished = writeProfileAtZero(plan, world, backend, options.profile);
  if (!finished.ok()) {
    report(world, finished);
    return kExitFailure;
  }
  return kExitOk;
}

} // namespace

int main(int argc, char **argv) {
  // One BLAS thread per process: processes already fill the cores, and results must not
  // depend on the thread count.
  openblas_set_num_threads(1);
  absl::StatusOr<MpiWorld> world = MpiWorld::initialise(&argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "conduit-run: error: %s\n", std::string(world.status().message()).c_str());
    return kExitFailure;
  }
  int code = [&]() -> int {
    absl::StatusOr<Options> options = parseArguments(argc, argv);
    if (!options.ok()) {
      if (world->rank == 0)
        std::fprintf(stderr, "conduit-run: error: %s\n\n%s",
                     std::string(options.status().message()).c_str(), usage());
      return kExitUsage;
    }
    // The plan is untrusted input: structure, then semantics, before anything is built and
    // before any communication.
    absl::StatusOr<Plan> plan = readPlanFile(options->plan);
    if (!plan.ok()) {
      if (world->rank == 0)
        std::fprintf(stderr, "conduit-run: error: %s\n",
                     std::string(plan.status().message()).c_str());
      return kExitInvalidInput;
    }
    if (options->dump) {
      if (world->rank == 0)
        writePlanJson(*plan, std::cout);
      return kExitOk;
    }
    if (options->reference)
      return runReference(*plan, *options, *world);
    return runPlan(*plan, *options, *world);
  }();
  MpiWorld::finalise();
  return code;
}
