//===- CompileJob.cpp - one job through the compiler ----------------------===//
//
// compileModule() is the only place the pass pipeline is built for a job; compileJob() runs it
// in a context of the calling thread and turns what it left into plain data. The memory plan
// records every rank's peak before it refuses a plan that does not fit, so a refusal for
// memory says how much would have been needed.
//
// Where a schedule with split backwards does not fit and the job leaves the number of deferred
// weight gradients to the compiler, compileModule() schedules again deferring fewer: the most
// that fits, found by bisection between none and the schedule's own rule (each probe compiled
// only through the memory plan), or none where that step is shorter, with a warning that names
// the limit. Only the kept attempt's diagnostics reach the caller (the first's where nothing
// fits).
//
//===----------------------------------------------------------------------===//

#include "compiler/CompileModule.h"

#include "analysis/MemoryBound.h"
#include "analysis/Units.h"
#include "compiler/ImportJob.h"
#include "compiler/Registration.h"
#include "dialects/pipe/PipeOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "scheduling/Schedulers.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

using namespace conduit;

namespace {

/// Says on standard error which pass is running once a compilation has taken longer than a
/// few seconds (a job with a million (stage, micro-batch) pairs takes minutes), at most once a
/// second, so that a long compile is never silent. Short compiles print nothing.
class ProgressInstrumentation : public mlir::PassInstrumentation {
public:
  void runBeforePass(mlir::Pass *pass, mlir::Operation *) override {
    using namespace std::chrono;
    const auto now = steady_clock::now();
    const double elapsed = duration<double>(now - start).count();
    if (elapsed < kQuietCompileS || now - lastLine < seconds(1))
      return;
    lastLine = now;
    llvm::errs() << "conduit-compile: " << formatSeconds(elapsed) << " so far; running "
                 << pass->getArgument() << "\n";
  }

private:
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point lastLine = start;
};

/// Refuses what refusedBeforeScheduling() says, naming what the job needs; returns the bound,
/// the least the job would need.
std::optional<int64_t> refuseWhatCannotFit(const Job &job, mlir::ModuleOp module,
                                           PipelineStop until) {
  if (!refusedBeforeScheduling(job, until))
    return std::nullopt;
  const ParallelismSpec &par = job.parallelism;
  const MemoryBound bound = memoryLowerBound(job);
  const int64_t device = job.cluster.memoryBytes;
  std::string needs = formatBytes(static_cast<double>(bound.staticBytes)) +
                      " of parameters, gradients and optimizer state";
  std::string advice;
  if (bound.activationBytes > 0) {
    needs += " and " + formatBytes(static_cast<double>(bound.activationBytes)) + " that " +
             runtime::scheduleName(par.schedule) + " keeps for all " +
             std::to_string(par.microbatches) + " micro-batches before their backwards";
    advice = "lower parallelism.microbatches or choose a parallelism.schedule that keeps fewer "
             "(1f1b, depth-first, zb-h1, zbv)";
  }
  if (bound.staticBytes > device / 2)
    advice += std::string(advice.empty() ? "" : "; or ") +
              (par.sharding != runtime::Sharding::Full && par.data > 1
                   ? "set parallelism.sharding \"full\", or raise parallelism.pipeline or "
                     "parallelism.tensor"
                   : "raise parallelism.pipeline or parallelism.tensor");
  if (advice.empty())
    advice = "raise parallelism.pipeline or parallelism.tensor";
  mlir::emitError(module.getLoc())
      << "the ranks need at least " << formatBytes(static_cast<double>(bound.total()))
      << " each on average (" << needs << ") but the device has "
      << formatBytes(static_cast<double>(device)) << " (cluster.memory_bytes), so no plan fits; "
      << advice;
  return bound.total();
}

/// The highest peak the memory plan recorded on a rank of `module`, where it exceeds `device`.
std::optional<int64_t> peakOverDevice(mlir::ModuleOp module, int64_t device) {
  std::optional<int64_t> peak;
  for (pipe::ModelOp model : module.getOps<pipe::ModelOp>())
    for (pipe::RankOp rank : model.getRanks())
      if (std::optional<int64_t> bytes = rank.getPeakMemory())
        peak = std::max(peak.value_or(0), *bytes);
  if (peak && *peak > device)
    return peak;
  return std::nullopt;
}

/// Holds the diagnostics of one attempt at a compile until it is known whether they are the
/// ones to show.
class HeldDiagnostics {
public:
  explicit HeldDiagnostics(mlir::MLIRContext &context)
      : handler(std::in_place, &context, [this](mlir::Diagnostic &diag) {
          held.push_back(std::move(diag));
          return mlir::success();
        }) {}

  /// Stops holding; returns what was held, in order.
  std::vector<mlir::Diagnostic> release() {
    handler.reset();
    return std::move(held);
  }

private:
  std::vector<mlir::Diagnostic> held;
  std::optional<mlir::ScopedDiagnosticHandler> handler;
};

/// One attempt at a compile with the diagnostics it gave.
struct Attempt {
  ModuleCompilation compilation;
  std::vector<mlir::Diagnostic> diagnostics;

  /// Passes the diagnostics on to the context's handlers; returns the compilation.
  ModuleCompilation show(mlir::MLIRContext &context) {
    for (mlir::Diagnostic &diag : diagnostics)
      context.getDiagEngine().emit(std::move(diag));
    return std::move(compilation);
  }
};

/// The MLIR context compileJob() uses on one thread. A context keeps every attribute it ever
/// uniqued, so a fresh one replaces it every so many compiles.
class ThreadContext {
public:
  ThreadContext() { registerDialects(registry); }

  mlir::MLIRContext &next() {
    constexpr int64_t kCompilesPerContext = 64;
    if (compiles++ % kCompilesPerContext == 0) {
      context =
          std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
      context->printOpOnDiagnostic(false);
    }
    return *context;
  }

private:
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> context;
  int64_t compiles = 0;
};

} // namespace

std::string conduit::userMessage(const mlir::Diagnostic &diag) {
  std::string message = diag.str();
  llvm::StringRef text(message);
  if (text.consume_front("'")) {
    auto [op, rest] = text.split("' op ");
    if (!rest.empty())
      return rest.str();
  }
  return message;
}

bool conduit::refusedBeforeScheduling(const Job &job, PipelineStop until) {
  const ParallelismSpec &par = job.parallelism;
  // Only where the memory plan would run (and refuse): a compile stopped earlier, to look at a
  // schedule, goes on.
  if (until < PipelineStop::Communicating || par.numStages() * par.microbatches < kManyPairs)
    return false;
  const int64_t device = job.cluster.memoryBytes;
  return device > 0 && memoryLowerBound(job).total() > device;
}

namespace {

/// The pipeline once over `job` as it stands.
ModuleCompilation compileOnce(const Job &job, mlir::MLIRContext &context,
                              const CompileOptions &options, const ModuleOptions &module) {
  ModuleCompilation result;
  result.module = importJob(job, context);
  if (mlir::failed(mlir::verify(*result.module))) {
    mlir::emitError(result.module->getLoc(), "internal error: the imported IR does not verify");
    return result;
  }
  if (module.until == PipelineStop::Model) {
    result.succeeded = true;
    return result;
  }
  if (std::optional<int64_t> bound = refuseWhatCannotFit(job, *result.module, module.until)) {
    result.refusedLowerBound = bound;
    return result;
  }
  mlir::PassManager pm(&context);
  // Passes keep their IR valid and conduit-verify-plan proves the result, including every
  // rule the plan dialect's verifiers state; verifying the whole module after every pass
  // would cost more than the passes on large plans. conduit-opt and the tests keep the
  // per-pass verification.
  pm.enableVerifier(options.verifyEachPass);
  if (module.commandLinePassOptions && mlir::failed(mlir::applyPassManagerCLOptions(pm)))
    return result;
  if (module.timing)
    pm.enableTiming(*module.timing);
  if (module.progress)
    pm.addInstrumentation(std::make_unique<ProgressInstrumentation>());
  if (module.instrument)
    pm.addInstrumentation(module.instrument());
  PipelineOptions pipeline;
  pipeline.stopAfter = module.until;
  pipeline.importSchedule = options.importSchedule;
  pipeline.overlapAllToAlls = options.overlapAllToAlls;
  pipeline.planOps = module.planOps;
  pipeline.simulatedTimes = module.simulatedTimes;
  pipeline.onVerified = [&](VerifiedPlan verified) { result.verified = std::move(verified); };
  pipeline.searchMethod = sched::searchMethodName(options.searchMethod);
  pipeline.searchSeed = options.searchSeed;
  pipeline.searchBudgetS = options.searchBudgetS;
  pipeline.onSearch = [&](sched::SearchMethod method, const sched::SearchResult &search) {
    result.search = {method, search};
  };
  buildConduitPipeline(pm, pipeline);
  result.succeeded = mlir::succeeded(pm.run(*result.module));
  return result;
}

Attempt attemptCompile(const Job &job, mlir::MLIRContext &context, const CompileOptions &options,
                       const ModuleOptions &module) {
  HeldDiagnostics held(context);
  ModuleCompilation compilation = compileOnce(job, context, options, module);
  return {std::move(compilation), held.release()};
}

} // namespace

ModuleCompilation conduit::compileModule(const Job &job, mlir::MLIRContext &context,
                                         const CompileOptions &options,
                                         const ModuleOptions &module) {
  const ParallelismSpec &par = job.parallelism;
  const int64_t device = job.cluster.memoryBytes;
  // Fewer deferred weight gradients are the compiler's choice where the caller allows it,
  // backwards are split, the job leaves the number open, the schedule is built here (not
  // imported) and the memory plan runs.
  if (!options.deferFewerToFit || !par.splitBackward || par.maxDeferredWeightGradients ||
      !options.importSchedule.empty() || device <= 0 || module.until < PipelineStop::Communicating)
    return compileOnce(job, context, options, module);
  Attempt first = attemptCompile(job, context, options, module);
  std::optional<int64_t> peak = first.compilation.succeeded
                                    ? std::nullopt
                                    : peakOverDevice(*first.compilation.module, device);
  if (!peak)
    return first.show(context);
  // The schedule's own rule did not fit; none deferred is the least memory they can hold.
  const int64_t rule = sched::ownDeferLimit(par.schedule, par.pipeline);
  // Whether a limit fits is known once the memory plan ran; only the plans kept are compiled
  // further.
  Job fewer = job;
  auto compileAt = [&](int64_t limit, PipelineStop until) {
    fewer.parallelism.maxDeferredWeightGradients = limit;
    ModuleOptions upTo = module;
    upTo.until = until;
    return attemptCompile(fewer, context, options, upTo);
  };
  auto fitsAt = [&](int64_t limit) {
    return compileAt(limit, PipelineStop::Communicating).compilation.succeeded;
  };
  if (!fitsAt(0))
    return first.show(context);
  // Memory grows with the limit: the most that fits, by bisection.
  int64_t fits = 0, fails = rule;
  while (fails - fits > 1) {
    const int64_t limit = fits + (fails - fits) / 2;
    if (fitsAt(limit))
      fits = limit;
    else
      fails = limit;
  }
  // The step need not shrink as the limit grows: none deferred where that is faster.
  Attempt best = compileAt(fits, module.until);
  if (fits > 0 && best.compilation.verified) {
    Attempt none = compileAt(0, module.until);
    if (none.compilation.verified && none.compilation.verified->simulation.makespan <
                                         best.compilation.verified->simulation.makespan) {
      best = std::move(none);
      fits = 0;
    }
  }
  ModuleCompilation result = best.show(context);
  if (!result.succeeded)
    return result;
  mlir::emitWarning(result.module->getLoc())
      << "parallelism.max_deferred_weight_gradients: " << runtime::scheduleName(par.schedule)
      << " defers at most " << fits << " weight gradient" << (fits == 1 ? "" : "s")
      << " per rank so that the plan fits; deferring up to " << rule << ", a rank needs "
      << formatBytes(static_cast<double>(*peak)) << " at its peak but the device has "
      << formatBytes(static_cast<double>(device));
  return result;
}

CompiledJob conduit::compileJob(const Job &job, const CompileOptions &options) {
  thread_local ThreadContext threadContext;
  mlir::MLIRContext &context = threadContext.next();
  CompiledJob result;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error) {
      if (result.error.empty())
        result.error = userMessage(diag);
    } else if (diag.getSeverity() == mlir::DiagnosticSeverity::Warning) {
      result.warnings.push_back(userMessage(diag));
    }
    return mlir::success();
  });
  ModuleOptions module;
  module.planOps = false;
  ModuleCompilation compiled = compileModule(job, context, options, module);
  result.search = std::move(compiled.search);
  if (compiled.succeeded && compiled.verified) {
    result.report = analyzeStep(compiled.verified->plan, compiled.verified->simulation);
    result.plan = std::move(compiled.verified->plan);
    result.simulation = std::move(compiled.verified->simulation);
    return result;
  }
  if (std::optional<int64_t> peak = peakOverDevice(*compiled.module, job.cluster.memoryBytes))
    result.refusedPeakBytes = peak;
  else if (compiled.refusedLowerBound)
    result.refusedPeakBytes = compiled.refusedLowerBound;
  if (result.error.empty())
    result.error = "the job does not compile";
  return result;
}
