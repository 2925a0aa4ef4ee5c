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

#endif // CONDUIT_DIALECTS_PIPE_PIPEOPS_H
