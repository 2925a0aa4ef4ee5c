//===- conduit-run.cpp - execute a plan ------------------------------------===//
//
//   mpirun -np P*D conduit-run JOB.plan --backend=cpu --steps K [--trace FILE]
//          [--profile FILE] [--checkpoint DIR --checkpoint-every K] [--resume DIR]
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
#include "runtime/cpu/CpuBackend.h"
#include "runtime/exec/Executor.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanJson.h"
#include "runtime/plan/Trace.h"

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
  int64_t checkpointEvery = 0;
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

/// The final parameters of every stage, one file per layer, written by replica 0.
absl::Status saveParameters(const Plan &plan, Backend &backend, RankPosition where,
                            const std::string &dir) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::vector<float>> params, backend.stageParameters());
  if (where.replica != 0)
    return absl::OkStatus();
  CONDUIT_ASSIGN_OR_RETURN(conduit::model::GptShape shape, conduit::model::GptShape::fromPlan(plan));
  conduit::model::CpuOps<float> ops; // names and offsets only; nothing is computed
  size_t k = 0;
  for (const Stage &stage : plan.stages) {
    if (stage.rank != where.pipelineRank)
      continue;
    CONDUIT_ASSIGN_OR_RETURN(auto chain, conduit::model::LayerChain<float>::build(
                                             plan, shape, stage.firstLayer, stage.endLayer, ops));
    CONDUIT_RETURN_IF_ERROR(writeLayerFiles(dir, chain, params[k++].data()));
  }
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
  std::ofstream out(path);
  writeChromeTrace(plan, events, plan.name + " (measured)", stepTimeS, out);
  if (!out)
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status writeProfileFile(const Plan &plan, const MpiWorld &world, const Backend &backend,
                              const std::string &path) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                           gatherAtZero(world, bytesOf(backend.layerTimings())));
  if (world.rank != 0)
    return absl::OkStatus();
  std::vector<LayerTiming> timings;
  for (const std::string &bytes : all)
    for (const LayerTiming &t : valuesOf<LayerTiming>(bytes))
      timings.push_back(t);
  std::ofstream out(path);
  CONDUIT_RETURN_IF_ERROR(writeProfile(plan, backend.name(), timings, out));
  if (!out)
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

int runPlan(const Plan &plan, const Options &options, const MpiWorld &world) {
  if (options.backend == "cuda") {
    report(world, absl::UnimplementedError(
                      "this conduit-run was built without the CUDA backend; use --backend=cpu"));
    return kExitInvalidInput;
  }
  CpuBackend backend(world, /*measureLayers=*/!options.profile.empty());
  if (absl::Status s = backend.validate(plan); !s.ok()) {
    if (world.rank == 0)
      report(world, s);
    return kExitInvalidInput;
  }
  if (absl::Status s = backend.initialise(plan); !s.ok()) {
    report(world, s);
    return kExitFailure;
  }
  const RankPosition where = backend.position();
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
      MPI_Abort(MPI_COMM_WORLD, kExitFailure);
      return kExitFailure;
    }
    loss = outcome->loss;
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
  if (world.rank == 0) {
    const double tokens = static_cast<double>(plan.config.batchSamples() * plan.config.data *
                                              plan.config.tokensPerSample * options.steps);
    std::printf("done: %lld steps on %d processes in %.3f s (%.4f s per step, %.0f tokens/s), "
                "final loss %.9g\n",
                static_cast<long long>(options.steps), world.size, seconds,
                seconds / options.steps, tokens / seconds, static_cast<float>(loss));
    std::fflush(stdout);
  }
  absl::Status finished = absl::OkStatus();
  if (!options.saveParams.empty())
    finished = saveParameters(plan, backend, where, options.saveParams);
  if (finished.ok() && !options.trace.empty())
    finished = writeTrace(plan, world, where, executor, seconds / options.steps, options.trace);
  if (finished.ok() && !options.profile.empty())
    finished = writeProfileFile(plan, world, backend, options.profile);
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
