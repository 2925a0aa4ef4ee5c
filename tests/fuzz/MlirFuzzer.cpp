//===- MlirFuzzer.cpp - libFuzzer target: the pipe and plan dialects ------===//
//
// conduit-opt parses IR a developer writes. Any text must end in a module or diagnostics:
// the custom assembly formats of both dialects, their attribute parsers and their verifiers
// run on it (diagnostics are swallowed; a crash, a hang or a sanitizer report is a finding).
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry;
    conduit::registerDialects(*r);
    return r;
  }();
  mlir::MLIRContext context(*registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) { return mlir::success(); });
  // MLIR's lexer stops at a NUL after the buffer, as every file MemoryBuffer reads has one;
  // a std::string keeps that byte in bounds (the raw fuzzer input has none after it).
  const std::string text(reinterpret_cast<const char *>(data), size);
  mlir::ParserConfig config(&context, /*verifyAfterParse=*/true);
  mlir::OwningOpRef<mlir::Operation *> module = mlir::parseSourceString(text, config);
  return 0;
}
