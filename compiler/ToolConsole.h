//===- ToolConsole.h - how a Conduit command talks to its user --*- C++ -*-===//
//
// conduit-compile and conduit-tune print "TOOL: severity: message" on standard error, exit
// with 1 for input they cannot use and 2 for a command line that does not make sense, and
// write their output whole or not at all.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_TOOLCONSOLE_H
#define CONDUIT_COMPILER_TOOLCONSOLE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace conduit {

class ToolConsole {
public:
  explicit ToolConsole(llvm::StringRef tool) : tool(tool) {}

  /// "TOOL: severity: message", the prefix in `color`.
  void print(llvm::raw_ostream::Colors color, llvm::StringRef severity,
             const std::string &message) const;
  /// An input that cannot be compiled or written: prints the error, returns exit code 1.
  int fail(const std::string &message) const;
  /// A command line that does not make sense: prints the error, returns exit code 2.
  int usageError(const std::string &message) const;
  /// Writes `write`'s output to `path` (standard output for "" or "-"), whole or not at all;
  /// returns the exit code.
  int writeOutput(const std::string &path,
                  llvm::function_ref<void(llvm::raw_ostream &)> write) const;

private:
  llvm::StringRef tool;
};

} // namespace conduit

#endif // CONDUIT_COMPILER_TOOLCONSOLE_H
