//===- PipeOps.h - pipe operations ------------------------------*- C++ -*-===//
//
// Operations of the pipe dialect; see PipeOps.td for their documentation.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_PIPEOPS_H
#define CONDUIT_DIALECTS_PIPE_PIPEOPS_H

#include "dialects/pipe/PipeAttrs.h"
#include "dialects/pipe/PipeDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.h.inc"

namespace conduit::pipe {

/// Whether `op` computes on one micro-batch: forward, backward, backward_input or
/// backward_weight.
inline bool isCompute(mlir::Operation *op) {
  return mlir::isa<ForwardOp, BackwardOp, BackwardInputOp, BackwardWeightOp>(op);
}

/// The (stage, micro-batch) of a compute op.
std::pair<int32_t, int32_t> computeStageAndMicrobatch(mlir::Operation *op);

} // namespace conduit::pipe

#endif // CONDUIT_DIALECTS_PIPE_PIPEOPS_H
