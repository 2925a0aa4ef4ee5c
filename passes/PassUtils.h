//===- PassUtils.h - what Conduit's passes share ----------------*- C++ -*-===//
//
// Phase gating, and the translation between pipe IR and the scheduling library's problems.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PASSUTILS_H
#define CONDUIT_PASSES_PASSUTILS_H

#include "dialects/pipe/PipeOps.h"
#include "passes/Scheduling/Problems.h"

namespace conduit {

/// Emits "<pass> expects phase '<p>', found '<q>'" on `model` unless its phase is `phase`.
mlir::LogicalResult requirePhase(pipe::ModelOp model, pipe::Phase phase, llvm::StringRef pass);

/// The stage graph of a model in phase `split` or later.
sched::ScheduleProblem buildScheduleProblem(pipe::ModelOp model);

/// The stages of a model, in order.
llvm::SmallVector<pipe::StageOp> getStageList(pipe::ModelOp model);

} // namespace conduit

#endif // CONDUIT_PASSES_PASSUTILS_H
