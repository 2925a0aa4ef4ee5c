//===- conduit-opt.cpp - the *-opt driver for Conduit's IR ----------------===//
//
// MlirOptMain with Conduit's dialects and passes registered, plus the upstream passes that are
// useful on its IR (canonicalize, cse, symbol-dce, ...).
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  conduit::registerDialects(registry);
  conduit::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Conduit optimizer driver\n", registry));
}
