//===- ExitCodes.h - what Conduit's tools exit with --------------*- C++ -*-===//
//
// One table of exit codes for every tool (conduit-compile, conduit-opt, conduit-run and
// conduit-tune), so that a script can tell a bad command line from a bad input from a failed
// run the same way whichever tool it called. docs/conduit-compile.md and docs/conduit-run.md
// repeat this table; a lit or end-to-end test pins each code.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXITCODES_H
#define CONDUIT_RUNTIME_EXITCODES_H

namespace conduit {

enum ExitCode : int {
  kExitOk = 0,
  /// An input was refused: a job file, a plan, a profile, a checkpoint, a configuration that
  /// does not compile or fit, or a mismatch between a plan and the run it was given to.
  kExitInvalidInput = 1,
  /// The command line itself is wrong: an unknown option, a missing or malformed value.
  kExitUsage = 2,
  /// Execution failed after it started: communication, a silent peer, a non-finite loss.
  kExitFailure = 3,
  /// `conduit-run --fail-at` stopped this rank on purpose (fault-injection tests).
  kExitInjectedFailure = 4,
};

} // namespace conduit

#endif // CONDUIT_RUNTIME_EXITCODES_H
