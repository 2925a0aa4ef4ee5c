//===- Passes.h - Conduit's passes and pipeline -----------------*- C++ -*-===//
//
// Declarations generated from Passes.td, and the compilation pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PASSES_H
#define CONDUIT_PASSES_PASSES_H

#include "dialects/pipe/PipeDialect.h"
#include "dialects/plan/PlanDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "runtime/plan/Plan.h"
#include "scheduling/MicrobatchSearch.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <memory>
#include <vector>

namespace conduit {

struct VerifiedPlan; // passes/VerifyProgram.h

/// Receives the verified plan of each program (see createConduitVerifyPlan).
using VerifiedPlanSink = std::function<void(VerifiedPlan)>;

/// The instructions conduit-lower-to-plan keeps as data instead of ops, for
/// conduit-verify-plan, which takes them: per plan.program, per rank. A compile that only
/// writes the plan file or reports on it never needs the ops, and a large plan is a million.
struct LoweredInstructions {
  llvm::DenseMap<mlir::Operation *, std::vector<std::vector<runtime::Instruction>>> programs;
};

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Receives the outcome of each micro-batch search (the method and what it found).
using SearchSink = std::function<void(sched::SearchMethod, const sched::SearchResult &)>;

/// conduit-optimize-microbatches that reports each search's outcome to `sink`.
std::unique_ptr<mlir::Pass>
createConduitOptimizeMicrobatches(ConduitOptimizeMicrobatchesOptions options, SearchSink sink);

/// conduit-lower-to-plan that leaves each plan.rank empty and puts its instructions in
/// `keep` (null: ops, as the registered pass does).
std::unique_ptr<mlir::Pass> createConduitLowerToPlan(ConduitLowerToPlanOptions options,
                                                     std::shared_ptr<LoweredInstructions> keep);

/// conduit-verify-plan that hands every verified plan, with its simulated step, to `sink`
/// (the driver reports on the step the verifier simulated instead of simulating it again).
/// A program whose instructions `lowered` holds is verified with those, which it takes.
/// Without `times`, the simulated step keeps its makespan but not every instruction's times.
std::unique_ptr<mlir::Pass>
createConduitVerifyPlan(VerifiedPlanSink sink, std::shared_ptr<LoweredInstructions> lowered = {},
                        bool times = true);

} // namespace conduit

#endif // CONDUIT_PASSES_PASSES_H
