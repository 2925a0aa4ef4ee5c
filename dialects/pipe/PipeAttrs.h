//===- PipeAttrs.h - pipe enums and attributes ------------------*- C++ -*-===//
//
// The job configuration attributes (parallelism, cluster, training, transformer shape), the
// dialect's enums, and the parse/print helpers their assembly formats use.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_PIPEATTRS_H
#define CONDUIT_DIALECTS_PIPE_PIPEATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/bit.h"

#include "dialects/pipe/PipeEnums.h.inc"

namespace conduit::pipe {

/// A double as an attribute parameter: hashable (attributes are uniqued), compared bitwise,
/// and converting to and from `double` implicitly.
struct F64 {
  F64(double value = 0) : value(value) {}
  operator double() const { return value; }
  bool operator==(const F64 &other) const {
    return llvm::bit_cast<uint64_t>(value) == llvm::bit_cast<uint64_t>(other.value);
  }
  double value;
};
inline llvm::hash_code hash_value(F64 x) {
  return llvm::hash_value(llvm::bit_cast<uint64_t>(x.value));
}

/// Parses a double (integer or float literal).
mlir::FailureOr<F64> parseF64(mlir::AsmParser &parser);
/// Prints a double with enough digits to round-trip exactly, always as a float literal.
void printF64(mlir::AsmPrinter &printer, double value);
/// A layer's weight-gradient FLOPs: `wgrad X`, absent (0) when the layer states none.
mlir::ParseResult parseWeightFlops(mlir::AsmParser &parser, double &value);
void printWeightFlops(mlir::AsmPrinter &printer, mlir::Operation *op, double value);

/// RecomputeModule bits as the list of their names, e.g. ["core_attn", "layernorm"].
mlir::FailureOr<RecomputeModule> parseRecomputeModules(mlir::AsmParser &parser);
void printRecomputeModules(mlir::AsmPrinter &printer, RecomputeModule modules);

/// Parses an enum written as a quoted string, e.g. "1f1b".
template <typename EnumT> mlir::FailureOr<EnumT> parseEnumString(mlir::AsmParser &parser) {
  std::string text;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseString(&text))
    return mlir::failure();
  std::optional<EnumT> value = symbolizeEnum<EnumT>(text);
  if (!value)
    return parser.emitError(loc) << "unknown value \"" << text << "\"";
  return *value;
}

} // namespace conduit::pipe

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.h.inc"

#endif // CONDUIT_DIALECTS_PIPE_PIPEATTRS_H
