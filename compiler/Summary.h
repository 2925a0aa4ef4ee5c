//===- Summary.h - the readable report of a compilation ---------*- C++ -*-===//
//
// What conduit-compile prints after every compile: the job as understood (model, parallelism,
// cluster, training), so that a user sees every default that was filled in, then the
// decisions the compilation made (stages, schedule).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_SUMMARY_H
#define CONDUIT_COMPILER_SUMMARY_H

#include "job/JobSpec.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/plan/Plan.h"
#include "llvm/Support/raw_ostream.h"

namespace conduit {

/// Total parameters of the model (tied embeddings counted once).
int64_t modelParameters(const Job &job);

/// The job, and what the compilation decided so far in `module`; `plan` is its verified plan
/// (null when the compilation stopped before verification).
void printSummary(const Job &job, mlir::ModuleOp module, const runtime::Plan *plan,
                  llvm::raw_ostream &os);

} // namespace conduit

#endif // CONDUIT_COMPILER_SUMMARY_H
