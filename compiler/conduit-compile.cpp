//===- conduit-compile.cpp - job file -> plan file ------------------------===//
//
// The compiler driver users run: `conduit-compile JOB.json [-o JOB.plan] [--emit=KIND]`. It
// reads and validates the job, builds the pipe IR, runs the compilation pipeline and writes
// what was asked for. Exit codes: 0 success, 1 bad input or a job that cannot be compiled,
// 2 bad command line.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  return conduit::runCompiler(argc, argv);
}
