//===- CompileModule.h - a job through the compiler, IR kept ----*- C++ -*-===//
//
// The IR side of CompileJob.h, for conduit-compile's driver and tests that look at the IR:
// imports a job into a context the caller owns, runs the pipeline up to a chosen step, and
// keeps the module. compileJob() is this plus a context of its own, captured diagnostics and
// the step's figures.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_COMPILEMODULE_H
#define CONDUIT_COMPILER_COMPILEMODULE_H

#include "compiler/CompileJob.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Support/Timing.h"
#include "passes/Pipeline.h"
#include "passes/VerifyProgram.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace conduit {

/// What the pipeline left.
struct ModuleCompilation {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The verified plan and its simulated step, when the whole pipeline ran.
  std::optional<VerifiedPlan> verified;
  /// The micro-batch search, when the job asked for one.
  std::optional<std::pair<sched::SearchMethod, sched::SearchResult>> search;
  /// The memory lower bound of a job refused before scheduling (it exceeds the device).
  std::optional<int64_t> refusedLowerBound;
  /// Whether every step up to `until` succeeded.
  bool succeeded = false;
};

/// How far to compile, and what a driver watches on the way.
struct ModuleOptions {
  PipelineStop until = PipelineStop::Plan;
  /// Receives the passes' times (optional).
  mlir::TimingScope *timing = nullptr;
  /// A compile that runs for more than kQuietCompileS says on standard error which pass runs,
  /// at most once a second.
  bool progress = false;
  /// Applies MLIR's pass-manager options of the command line (--mlir-print-ir-after, ...),
  /// which a tool registers with mlir::registerPassManagerCLOptions().
  bool commandLinePassOptions = false;
  /// Whether the verified plan.program holds its instructions as ops (Pipeline.h's planOps):
  /// for printing the IR or looking at it. compileJob() and conduit-compile without
  /// `--emit=mlir` keep them as the verified plan's data only.
  bool planOps = true;
  /// Whether the verified plan's simulated step keeps every instruction's times (Pipeline.h's
  /// simulatedTimes): conduit-compile writing a plan file or its JSON does without.
  bool simulatedTimes = true;
  /// Makes an instrumentation of the caller's for the pass manager (a test's counters).
  std::function<std::unique_ptr<mlir::PassInstrumentation>()> instrument;
};

/// Imports `job` into `context` and runs the pipeline up to `module.until`. Diagnostics go to
/// the context's handlers. A split schedule whose plan the memory plan refuses, where the job
/// leaves `max_deferred_weight_gradients` open, is compiled again deferring fewer weight
/// gradients (CompileOptions::deferFewerToFit): the result is the plan kept, with a warning
/// naming the limit, or the first refusal where none fits.
ModuleCompilation compileModule(const Job &job, mlir::MLIRContext &context,
                                const CompileOptions &options, const ModuleOptions &module = {});

/// A diagnostic's message without MLIR's "'op.name' op " prefix, which means nothing to a user
/// of the tools.
std::string userMessage(const mlir::Diagnostic &diag);

/// Jobs with this many (stage, micro-batch) pairs take seconds to compile: conduit-compile says
/// so before it starts, and compileModule() refuses one whose memory lower bound exceeds the
/// device before scheduling it (MemoryBound.h). Smaller jobs reach the memory plan, whose
/// refusal names the rank, what it holds and the changes that would fit.
constexpr int64_t kManyPairs = int64_t(1) << 18;

/// Whether compileModule() refuses `job`, compiled up to `until`, before scheduling it: a job
/// of kManyPairs or more whose memory lower bound exceeds the device, where the memory plan
/// would run.
bool refusedBeforeScheduling(const Job &job, PipelineStop until);

/// Seconds of compilation after which `progress` lines start.
constexpr double kQuietCompileS = 3;

} // namespace conduit

#endif // CONDUIT_COMPILER_COMPILEMODULE_H
