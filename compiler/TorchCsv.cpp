//===- TorchCsv.cpp - PyTorch pipelining action lists ---------------------===//

#include "compiler/TorchCsv.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <map>
#include <set>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

llvm::Expected<std::string> conduit::writeTorchCsv(const runtime::Plan &plan) {
  for (const runtime::Stage &stage : plan.stages)
    if (stage.samples != plan.stages.front().samples)
      return llvm::createStringError(
          "PyTorch's action lists number micro-batches globally and cannot express stages "
          "that cut the batch differently");
  const bool fsdp = plan.config.sharding == runtime::Sharding::Full && plan.config.data > 1;
  std::string out;
  for (const runtime::RankProgram &rank : plan.ranks) {
    // The last backward of each stage, where PyTorch puts REDUCE_GRAD.
    std::map<int32_t, size_t> lastBackward;
    for (size_t i = 0; i < rank.instructions.size(); ++i)
      if (rank.instructions[i].op == Op::Backward)
        lastBackward[rank.instructions[i].stage] = i;
    std::vector<std::string> cells;
    for (size_t i = 0; i < rank.instructions.size(); ++i) {
      const Instruction &x = rank.instructions[i];
      std::string s = std::to_string(x.stage), m = std::to_string(x.microbatch);
      bool activation = x.kind == runtime::Transfer::Activation;
      switch (x.op) {
      case Op::Forward:
        cells.push_back(s + "F" + m);
        break;
      case Op::Backward:
        cells.push_back(s + "B" + m);
        if (lastBackward[x.stage] == i && plan.config.data > 1)
          cells.push_back(s + "REDUCE_GRAD");
        break;
      case Op::Send:
        cells.push_back(s + (activation ? "SEND_F" : "SEND_B") + m);
        break;
      case Op::Recv:
        cells.push_back(s + (activation ? "RECV_F" : "RECV_B") + m);
        break;
      case Op::AllGather:
        if (fsdp) // the all-gathers of optimizer and gradient sharding have no PyTorch action
          cells.push_back(s + "UNSHARD");
        break;
      case Op::Free:
        cells.push_back(s + "RESHARD");
        break;
      default: // reductions are written at the last backward; optimizer steps, events: none
        break;
      }
    }
    out += llvm::join(cells, ",") + "\n";
  }
  return out;
}

namespace {

/// Parses "12F3" into (stage 12, forward, micro-batch 3).
bool parseAction(llvm::StringRef cell, sched::Action &action, std::string &problem) {
  size_t digits = cell.find_first_not_of("0123456789");
  if (digits == 0 || digits == llvm::StringRef::npos || digits + 1 >= cell.size()) {
    problem = "expected an action like 0F3 or 1B2";
    return false;
  }
  char kind = cell[digits];
  llvm::StringRef stage = cell.take_front(digits), mb = cell.drop_front(digits + 1);
  if (kind == 'I' || kind == 'W') {
    problem = "split backwards (I and W) are not supported; use full backwards (B)";
    return false;
  }
  unsigned s = 0, m = 0;
  if ((kind != 'F' && kind != 'B') || stage.getAsInteger(10, s) || mb.getAsInteger(10, m) ||
      s > (1u << 26) || m > (1u << 26)) {
    problem = "expected a compute action like 0F3 or 1B2 (a compute-only schedule)";
    return false;
  }
  action = {kind == 'F' ? sched::ActionKind::Forward : sched::ActionKind::Backward,
            static_cast<int32_t>(s), static_cast<int32_t>(m)};
  return true;
}

} // namespace

llvm::Expected<ImportedSchedule> conduit::readTorchCsv(llvm::StringRef text, int64_t numStages) {
  ImportedSchedule result;
  result.stageRank.assign(numStages, -1);
  std::vector<std::set<int32_t>> forwards(numStages), backwards(numStages);
  llvm::SmallVector<llvm::StringRef> rows;
  text.rtrim("\r\n").split(rows, '\n');
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<sched::Action> &order = result.schedule.ranks.emplace_back();
    llvm::SmallVector<llvm::StringRef> cells;
    rows[r].rtrim('\r').split(cells, ',');
    for (size_t c = 0; c < cells.size(); ++c) {
      llvm::StringRef cell = cells[c].trim();
      if (cell.empty())
        continue; // an idle step
      auto where = [&] {
        return "row " + std::to_string(r + 1) + ", column " + std::to_string(c + 1) + " (\"" +
               cell.str() + "\"): ";
      };
      sched::Action action;
      std::string problem;
      if (!parseAction(cell, action, problem))
        return llvm::createStringError(where() + problem);
      if (action.stage >= numStages)
        return llvm::createStringError(where() + "stage " + std::to_string(action.stage) +
                                       " does not exist; the job has " +
                                       std::to_string(numStages) + " stages");
      int64_t &rank = result.stageRank[action.stage];
      if (rank >= 0 && rank != static_cast<int64_t>(r))
        return llvm::createStringError(where() + "stage " + std::to_string(action.stage) +
                                       " also appears on row " + std::to_string(rank + 1) +
                                       "; a stage lives on one rank");
      rank = static_cast<int64_t>(r);
      std::set<int32_t> &seen =
          action.kind == sched::ActionKind::Forward ? forwards[action.stage] : backwards[action.stage];
      if (!seen.insert(action.mb).second)
        return llvm::createStringError(where() + "appears twice");
      order.push_back(action);
    }
  }
  for (int64_t s = 0; s < numStages; ++s) {
    if (result.stageRank[s] < 0)
      return llvm::createStringError("stage " + std::to_string(s) + " has no action");
    if (s == 0)
      result.numMicrobatches = static_cast<int64_t>(forwards[0].size());
    auto complete = [&](const std::set<int32_t> &mbs) {
      return static_cast<int64_t>(mbs.size()) == result.numMicrobatches &&
             (mbs.empty() || *mbs.rbegin() == result.numMicrobatches - 1);
    };
    if (!complete(forwards[s]) || !complete(backwards[s]))
      return llvm::createStringError(
          "stage " + std::to_string(s) + " does not have one forward and one backward for each "
          "of the micro-batches 0.." + std::to_string(result.numMicrobatches - 1));
  }
  return result;
}
