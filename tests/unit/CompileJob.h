//===- CompileJob.h - a job compiled in memory ------------------*- C++ -*-===//
//
// For tests and benchmarks: a parsed job through Conduit's pass pipeline, without the driver,
// keeping the IR where the pipeline stopped and the verified plan when it ran to the end.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_COMPILEJOB_H
#define CONDUIT_TESTS_UNIT_COMPILEJOB_H

#include "compiler/ImportJob.h"
#include "compiler/Registration.h"
#include "job/JobFile.h"
#include "job/KeyEditor.h"
#include "passes/Pipeline.h"
#include "passes/VerifyProgram.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <optional>
#include <string>

namespace conduit {

struct CompiledJob {
  std::unique_ptr<mlir::MLIRContext> context; ///< first: outlives the module
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<VerifiedPlan> verified; ///< when the pipeline ran to the end
  std::string errors;                   ///< the error diagnostics, one per line
  bool ok = false;
};

inline CompiledJob compileJob(const Job &job, PipelineStop stop = PipelineStop::Plan) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  CompiledJob c;
  c.context = std::make_unique<mlir::MLIRContext>(registry);
  mlir::ScopedDiagnosticHandler handler(c.context.get(), [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      c.errors += d.str() + "\n";
    return mlir::success();
  });
  c.module = importJob(job, *c.context);
  PipelineOptions options;
  options.stopAfter = stop;
  options.onVerified = [&](VerifiedPlan v) { c.verified = std::move(v); };
  mlir::PassManager pm(c.context.get());
  buildConduitPipeline(pm, options);
  c.ok = mlir::succeeded(pm.run(*c.module));
  return c;
}

} // namespace conduit

#endif // CONDUIT_TESTS_UNIT_COMPILEJOB_H
