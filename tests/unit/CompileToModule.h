//===- CompileToModule.h - a job compiled in memory, IR kept ----*- C++ -*-===//
//
// For tests and benchmarks: a parsed job through compileModule() (compiler/CompileModule.h) in
// a context of its own, with the IR verified after every pass, keeping the IR where the
// pipeline stopped and the verified plan when it ran to the end.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_COMPILETOMODULE_H
#define CONDUIT_TESTS_UNIT_COMPILETOMODULE_H

#include "compiler/CompileModule.h"
#include "compiler/Registration.h"
#include "job/JobFile.h"
#include "job/KeyEditor.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>
#include <optional>
#include <string>

namespace conduit {

struct CompiledModule {
  std::unique_ptr<mlir::MLIRContext> context; ///< first: outlives the module
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<VerifiedPlan> verified; ///< when the pipeline ran to the end
  std::string errors;                   ///< the error diagnostics, one per line
  bool ok = false;
};

inline CompiledModule compileToModule(const Job &job, PipelineStop stop = PipelineStop::Plan,
                                      CompileOptions options = {}) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  CompiledModule c;
  c.context = std::make_unique<mlir::MLIRContext>(registry);
  mlir::ScopedDiagnosticHandler handler(c.context.get(), [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      c.errors += d.str() + "\n";
    return mlir::success();
  });
  options.verifyEachPass = true;
  ModuleOptions module;
  module.until = stop;
  ModuleCompilation compiled = compileModule(job, *c.context, options, module);
  c.module = std::move(compiled.module);
  c.verified = std::move(compiled.verified);
  c.ok = compiled.succeeded;
  return c;
}

} // namespace conduit

#endif // CONDUIT_TESTS_UNIT_COMPILETOMODULE_H
