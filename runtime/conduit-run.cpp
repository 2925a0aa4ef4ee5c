//===- conduit-run.cpp - execute a plan ------------------------------------===//
//
//   mpirun -np P*D conduit-run JOB.plan --backend=cpu|cuda --steps K [--trace FILE]
//          [--profile FILE] [--checkpoint DIR --checkpoint-every K] [--resume DIR]
//          [--init FILE.safetensors] [--save-params DIR]
//   conduit-run JOB.plan --backend=cpu|cuda --ranks-per-process=P*D --steps K   (one process)
//   conduit-run --reference JOB.plan --steps K [--init FILE.safetensors] [--save-params DIR]
//   conduit-run --dump JOB.plan
//
// The driver: parses the command line, reads and verifies the plan file (structure, then
// semantics), and hands the run to the session (runtime/session/Session.h), which holds the run
// loop for MPI and loopback runs (every rank a thread of one process) alike. Exit codes are
// ExitCodes.h's, listed in usage() and docs/conduit-run.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExitCodes.h"
#include "runtime/model/Trainable.h"
#include "runtime/plan/Limits.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanJson.h"
#include "runtime/session/Session.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>

#include <sys/prctl.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace conduit;
using namespace conduit::runtime;

namespace {

const char *usage() {
  return R"(usage: conduit-run PLAN [options]

  --backend=cpu|cuda       the backend (default cpu); run under mpirun -np P*D
  --ranks-per-process=N    run all N = P*D ranks as threads of this one process, without
                           mpirun (on the CPU, or with cuda on one GPU); takes every
                           option below but --reference and --dump
  --steps=N                training steps to run (default 1)
  --reference              train the same job in one process (the oracle)
  --dump                   print the verified plan as JSON and exit
  --trace=FILE             write the measured timeline (Chrome trace format)
  --profile=FILE           write measured per-layer times (the cost model's profile format)
  --checkpoint=DIR         write checkpoints to DIR ...
  --checkpoint-every=K     ... after every K steps (default: only after the last step)
  --resume=DIR             continue from the checkpoint in DIR
  --init=FILE              start from the parameters in FILE (Hugging Face safetensors, as
                           --save-params writes) instead of the seeded initialisation
  --save-params=DIR        write the final parameters as DIR/model.safetensors and
                           DIR/config.json (Hugging Face names: Llama or GPT-2)
  --peer-timeout=SECONDS   a rank that makes no progress this long fails (default 30)
  --fail-at=R:S:I          (tests) global rank R exits at step S, instruction I
  --stall-at=R:S:I         (tests) global rank R stops making progress there

exit codes: 0 success; 1 invalid plan, checkpoint or --init file, or one that does not match
this run; 2 invalid command line; 3 execution failed (communication, a peer that failed or
stalled, a non-finite loss); 4 injected failure (--fail-at)
)";
}

struct Options {
  std::string plan;
  bool reference = false, dump = false, help = false;
  SessionOptions session;
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
  SessionOptions &s = o.session;
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
        return absl::InvalidArgumentError(absl::StrCat(
            "--", name, " expects an integer of at least ", least, ", got \"", v, "\""));
      return absl::OkStatus();
    };
    if (name == "reference" || name == "dump") {
      (name == "reference" ? o.reference : o.dump) = true;
    } else if (name == "backend") {
      CONDUIT_ASSIGN_OR_RETURN(s.backend, take());
      if (s.backend != "cpu" && s.backend != "cuda")
        return absl::InvalidArgumentError(
            absl::StrCat("--backend expects cpu or cuda, got \"", s.backend, "\""));
    } else if (name == "steps") {
      CONDUIT_RETURN_IF_ERROR(integer(s.steps, 1));
      if (s.steps > limits::kMaxSteps)
        return absl::InvalidArgumentError(
            absl::StrCat("--steps expects at most ", limits::kMaxSteps, " steps"));
    } else if (name == "ranks-per-process") {
      CONDUIT_RETURN_IF_ERROR(integer(s.ranksPerProcess, 1));
    } else if (name == "checkpoint-every") {
      CONDUIT_RETURN_IF_ERROR(integer(s.checkpointEvery, 1));
    } else if (name == "trace") {
      CONDUIT_ASSIGN_OR_RETURN(s.trace, take());
    } else if (name == "profile") {
      CONDUIT_ASSIGN_OR_RETURN(s.profile, take());
    } else if (name == "checkpoint") {
      CONDUIT_ASSIGN_OR_RETURN(s.checkpoint, take());
    } else if (name == "resume") {
      CONDUIT_ASSIGN_OR_RETURN(s.resume, take());
    } else if (name == "init") {
      CONDUIT_ASSIGN_OR_RETURN(s.init, take());
    } else if (name == "save-params") {
      CONDUIT_ASSIGN_OR_RETURN(s.saveParams, take());
    } else if (name == "peer-timeout") {
      CONDUIT_ASSIGN_OR_RETURN(std::string v, take());
      if (!absl::SimpleAtod(v, &s.peerTimeoutS) || !(s.peerTimeoutS > 0))
        return absl::InvalidArgumentError(
            absl::StrCat("--peer-timeout expects a positive number of seconds, got \"", v, "\""));
    } else if (name == "fail-at" || name == "stall-at") {
      CONDUIT_ASSIGN_OR_RETURN(std::string v, take());
      absl::StatusOr<Fault> fault = parseFault(v, name == "stall-at");
      if (!fault.ok())
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", fault.status().message()));
      s.fault = *fault;
    } else if (name == "help") {
      o.help = true;
      return o;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
  }
  if (o.plan.empty())
    return absl::InvalidArgumentError("no plan file given");
  s.plan = o.plan;
  if (s.checkpointEvery && s.checkpoint.empty())
    return absl::InvalidArgumentError("--checkpoint-every needs --checkpoint=DIR");
  if (!s.init.empty() && !s.resume.empty())
    return absl::InvalidArgumentError(
        "--init and --resume both say where training starts: give one of them");
  if (o.reference && (!s.checkpoint.empty() || !s.resume.empty() || !s.trace.empty() ||
                      !s.profile.empty() || s.fault || s.ranksPerProcess > 1))
    return absl::InvalidArgumentError("--reference takes --steps, --init and --save-params only");
  return o;
}

#ifndef CONDUIT_RUN_HAS_CUDA
/// conduit-run links no CUDA library (runtime/CMakeLists.txt): a run with --backend=cuda
/// becomes conduit-run-cuda from this binary's folder, with the same arguments, before MPI
/// starts. Returns only where there is none (the session then says this build has no CUDA
/// backend) or it cannot be run.
void becomeCudaRunner(char **argv) {
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0)
    return;
  std::string path(self, static_cast<size_t>(length));
  path = path.substr(0, path.rfind('/') + 1) + "conduit-run-cuda";
  if (access(path.c_str(), X_OK) != 0)
    return;
  execv(path.c_str(), argv);
  std::fprintf(stderr, "conduit-run: error: cannot run %s for --backend=cuda\n", path.c_str());
  std::exit(kExitFailure);
}
#endif

} // namespace

int main(int argc, char **argv) {
#ifndef CONDUIT_RUN_HAS_CUDA
  if (absl::StatusOr<Options> early = parseArguments(argc, argv);
      early.ok() && early->session.backend == "cuda" && !early->dump)
    becomeCudaRunner(argv);
#endif
  // One BLAS thread per process: processes already fill the cores, and results must not
  // depend on the thread count.
  openblas_set_num_threads(1);
#ifdef __GLIBC__
  // Keep freed memory in the process. By default glibc maps each large block apart and gives
  // it back when it is freed, and trims the heap's top: every step then faults the pages of
  // its activations in again, zeroed by the kernel (hundreds a step on a small CPU plan, a
  // tenth of its step), in the computes that raise the step's memory. The plan's buffers
  // reach the same peak every step, so keeping them costs no more than the peak.
  mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest: blocks above it are rare and big
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
  // A rank that waits for a peer sleeps 20 us at a time (Executor.cpp, idleWait); Linux lets
  // such a sleep run 50 us late by default, and each late wake-up delays the transfer it
  // waited for. 1 us of slack keeps the sleeps what they say (CPU plans 5-17% faster).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  absl::StatusOr<MpiWorld> world = MpiWorld::initialise(&argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "conduit-run: error: %s\n", std::string(world.status().message()).c_str());
    return kExitFailure;
  }
  const SessionResult result = [&]() -> SessionResult {
    absl::StatusOr<Options> options = parseArguments(argc, argv);
    if (!options.ok()) {
      if (world->rank == 0)
        std::fprintf(stderr, "conduit-run: error: %s\n\n%s",
                     std::string(options.status().message()).c_str(), usage());
      return {kExitUsage};
    }
    if (options->help) {
      if (world->rank == 0)
        std::cout << usage();
      return {kExitOk};
    }
    // The plan is untrusted input: structure, then semantics, before anything is built and
    // before any communication.
    absl::StatusOr<Plan> plan = readPlanFile(options->plan);
    if (!plan.ok()) {
      if (world->rank == 0)
        std::fprintf(stderr, "conduit-run: error: %s\n",
                     std::string(plan.status().message()).c_str());
      return {kExitInvalidInput};
    }
    if (options->dump) {
      if (world->rank == 0)
        writePlanJson(*plan, std::cout);
      return {kExitOk};
    }
    if (absl::Status fp8 = model::refuseFp8(*plan); !fp8.ok()) {
      if (world->rank == 0)
        std::fprintf(stderr, "conduit-run: error: %s: %s\n", options->plan.c_str(),
                     std::string(fp8.message()).c_str());
      return {kExitInvalidInput};
    }
    if (options->reference)
      return runReference(*plan, options->session, *world);
    return runSession(*plan, options->session, *world);
  }();
  // An injected failure stands for a crash: end now, as a crashed process would, without
  // shutting down communication the other ranks may still be using.
  if (result.crashed)
    std::_Exit(result.exitCode);
  MpiWorld::finalise();
  return result.exitCode;
}
