//===- conduit-compile.cpp - job file -> plan file ------------------------===//
//
// The compiler driver users run: `conduit-compile JOB.json [-o JOB.plan] [--emit=KIND]`. It
// reads and validates the job, builds the pipe IR, runs the compilation pipeline and writes
// what was asked for. Exit codes: 0 success, 1 bad input or a job that cannot be compiled,
// 2 bad command line.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"
#include "runtime/Heap.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

int main(int argc, char **argv) {
  conduit::reserveHugePageHeap();
  llvm::InitLLVM init(argc, argv);
  int code = conduit::runCompiler(argc, argv);
  llvm::outs().flush();
  std::cout.flush();
#if defined(__SANITIZE_ADDRESS__)
  return code;
#else
  // Everything is written: skip tearing down the IR of a large plan, as compilers usually do
  // (sanitizer builds keep the teardown so that leaks stay visible).
  llvm::sys::Process::Exit(code, /*NoCleanup=*/true);
#endif
}
