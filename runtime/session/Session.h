//===- Session.h - one training run of a plan -------------------*- C++ -*-===//
//
// The run loop of conduit-run, written once for every way ranks are run: one rank per MPI
// process, or every rank of the plan as a thread of this process (loopback, on the CPU or on
// one GPU). For each rank: make its backend, check that it can run the plan, build the rank's
// stages, start from a Hugging Face safetensors file or resume from a checkpoint, run the
// steps (rank 0 prints each step's loss), write checkpoints, then a summary and the final
// parameters (safetensors), trace and profile. Ranks coordinate through a RankGroup; what
// differs between MPI and threads is only how ranks are started and how a failure stops the
// others (MPI_Abort, or aborting the in-process hubs).
//
// Fault injection (tests) is an executor hook: at the chosen rank, step and instruction it
// either fails the rank (the run ends with kExitInjectedFailure, and the caller should end
// the process at once, as a crash would) or stalls it until the others give up on it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_SESSION_SESSION_H
#define CONDUIT_RUNTIME_SESSION_SESSION_H

#include "runtime/exec/Mpi.h"
#include "runtime/plan/Plan.h"

#include <optional>
#include <string>

namespace conduit::runtime {

/// A fault to inject: at `step` (1-based), when global rank `globalRank` reaches
/// `instruction`.
struct Fault {
  int64_t globalRank = 0, step = 1, instruction = 0;
  bool stall = false; ///< stop making progress instead of failing
};

struct SessionOptions {
  /// The plan file, for messages.
  std::string plan;
  std::string backend = "cpu";
  /// Ranks run as threads of this process; 1: one rank per MPI process.
  int64_t ranksPerProcess = 1;
  int64_t steps = 1;
  std::string trace, profile, checkpoint, resume, saveParams;
  /// A safetensors file of the model's parameters to start from instead of the seeded
  /// initialisation (HfWeights.h).
  std::string init;
  /// Checkpoint after every this many steps; 0: after the last step only.
  int64_t checkpointEvery = 0;
  double peerTimeoutS = 30;
  std::optional<Fault> fault;
};

/// How a run ended.
struct SessionResult {
  /// An exit code of ExitCodes.h.
  int exitCode = 0;
  /// An injected failure stands for a crash: the process should end now, without shutting
  /// down communication its peers may still be using.
  bool crashed = false;
};

/// Runs `plan` as `options` say, as the process `world` of the job. Errors are reported on
/// standard error; the result says how the process should exit.
SessionResult runSession(const Plan &plan, const SessionOptions &options, const MpiWorld &world);

/// Trains `plan` in one process without pipeline or data parallelism (the oracle) and prints
/// the same lines as a session.
SessionResult runReference(const Plan &plan, const SessionOptions &options, const MpiWorld &world);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_SESSION_SESSION_H
