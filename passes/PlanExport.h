//===- PlanExport.h - plan.program -> the plan file's data ------*- C++ -*-===//
//
// The plan dialect and the plan file hold the same information; this converts the former into
// the runtime's in-memory form, which the writer serialises and the verifier and simulator
// read, and a rank's instructions back into ops (the lowering produces instructions, and ops
// only where the IR is wanted). Instruction i of rank r corresponds to the i-th op of that
// plan.rank, so positions in the plan data map back to ops for diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PLANEXPORT_H
#define CONDUIT_PASSES_PLANEXPORT_H

#include "dialects/pipe/PipeOps.h"
#include "dialects/plan/PlanOps.h"
#include "mlir/IR/Builders.h"
#include "runtime/plan/Plan.h"

namespace conduit {

/// The plan file's transformer section of `t`.
runtime::Transformer exportTransformer(pipe::TransformerAttr t);

/// The plan of `program`: its header, and each plan.rank's ops as instructions.
runtime::Plan exportPlan(plan::ProgramOp program);

/// The ops of `instructions`, appended at `b`'s insertion point (a plan.rank's body): the
/// inverse of exportPlan's, so that exporting them again gives the same instructions.
void importInstructions(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<runtime::Instruction> instructions);

/// The ops of each plan.rank, in order: instruction i of rank r is ops[r][i].
std::vector<std::vector<mlir::Operation *>> planInstructionOps(plan::ProgramOp program);

} // namespace conduit

#endif // CONDUIT_PASSES_PLANEXPORT_H
