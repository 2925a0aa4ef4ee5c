//===- Registration.cpp - dialect and pass registration -------------------===//

#include "compiler/Registration.h"

#include "dialects/pipe/PipeDialect.h"
#include "dialects/plan/PlanDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"

void conduit::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<pipe::PipeDialect, plan::PlanDialect>();
}

void conduit::registerPasses() {
  registerConduitPasses();
  registerConduitPipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerStripDebugInfoPass();
}
