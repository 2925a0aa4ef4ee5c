//===- ToolConsole.cpp - how a Conduit command talks to its user ----------===//

#include "compiler/ToolConsole.h"

#include "runtime/ExitCodes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/WithColor.h"

using namespace conduit;

void ToolConsole::print(llvm::raw_ostream::Colors color, llvm::StringRef severity,
                        const std::string &message) const {
  llvm::WithColor(llvm::errs(), color, /*Bold=*/true) << tool << ": " << severity << ": ";
  llvm::errs() << message << "\n";
}

int ToolConsole::fail(const std::string &message) const {
  print(llvm::raw_ostream::RED, "error", message);
  return kExitInvalidInput;
}

int ToolConsole::usageError(const std::string &message) const {
  print(llvm::raw_ostream::RED, "error", message);
  return kExitUsage;
}

int ToolConsole::writeOutput(const std::string &path,
                             llvm::function_ref<void(llvm::raw_ostream &)> write) const {
  llvm::Error error = llvm::writeToOutput(path.empty() ? "-" : path, [&](llvm::raw_ostream &os) {
    write(os);
    return llvm::Error::success();
  });
  if (error)
    return fail("cannot write " + path + ": " + llvm::toString(std::move(error)));
  return kExitOk;
}
