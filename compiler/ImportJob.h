//===- ImportJob.h - job -> pipe IR -----------------------------*- C++ -*-===//
//
// Builds the model-level pipe IR of a validated job: a `pipe.model` in phase `model` holding
// the layer chain and the job's configuration as attributes. This is the one place a job
// (job/JobSpec.h) becomes IR, and so the one place its enums become the dialect's.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_IMPORTJOB_H
#define CONDUIT_COMPILER_IMPORTJOB_H

#include "dialects/pipe/PipeAttrs.h"
#include "job/JobSpec.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cassert>

namespace conduit {

/// The pipe dialect's value for one of the job model's: both spell their values as the job
/// file does.
template <typename DialectEnum, typename JobEnum> DialectEnum toDialect(JobEnum value) {
  std::optional<DialectEnum> converted =
      pipe::symbolizeEnum<DialectEnum>(llvm::StringRef(enumName(value)));
  assert(converted && "the dialect spells every value of the job's enum");
  return *converted;
}

mlir::OwningOpRef<mlir::ModuleOp> importJob(const Job &job, mlir::MLIRContext &context);

} // namespace conduit

#endif // CONDUIT_COMPILER_IMPORTJOB_H
