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

namespace conduit {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace conduit

#endif // CONDUIT_PASSES_PASSES_H
