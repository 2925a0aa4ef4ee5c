//===- ImportJob.h - job -> pipe IR -----------------------------*- C++ -*-===//
//
// Builds the model-level pipe IR of a validated job: a `pipe.model` in phase `model` holding
// the layer chain and the job's configuration as attributes.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_IMPORTJOB_H
#define CONDUIT_COMPILER_IMPORTJOB_H

#include "compiler/JobFile.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace conduit {

mlir::OwningOpRef<mlir::ModuleOp> importJob(const Job &job, mlir::MLIRContext &context);

} // namespace conduit

#endif // CONDUIT_COMPILER_IMPORTJOB_H
