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
#include "scheduling/MicrobatchSearch.h"

#include <functional>

namespace conduit {

struct VerifiedPlan; // passes/VerifyProgram.h

/// Receives the verified plan of each program (see createConduitVerifyPlan).
using VerifiedPlanSink = std::function<void(VerifiedPlan)>;

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Receives the outcome of each micro-batch search (the method and what it found).
using SearchSink = std::function<void(sched::SearchMethod, const sched::SearchResult &)>;

/// conduit-optimize-microbatches that reports each search's outcome to `sink`.
std::unique_ptr<mlir::Pass>
createConduitOptimizeMicrobatches(ConduitOptimizeMicrobatchesOptions options, SearchSink sink);

/// conduit-verify-plan that hands every verified plan, with its simulated step, to `sink`
/// (the driver reports on the step the verifier simulated instead of simulating it again).
std::unique_ptr<mlir::Pass> createConduitVerifyPlan(VerifiedPlanSink sink);

} // namespace conduit

#endif // CONDUIT_PASSES_PASSES_H
