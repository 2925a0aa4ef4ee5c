//===- Registration.h - dialect and pass registration -----------*- C++ -*-===//
//
// One place that knows every dialect and pass Conduit's tools use.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_REGISTRATION_H
#define CONDUIT_COMPILER_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace conduit {

/// Adds the pipe and plan dialects (and the upstream ones their IR uses) to `registry`.
void registerDialects(mlir::DialectRegistry &registry);

/// Registers Conduit's passes and pipelines, and the upstream passes useful on its IR, for
/// command-line use.
void registerPasses();

} // namespace conduit

#endif // CONDUIT_COMPILER_REGISTRATION_H
