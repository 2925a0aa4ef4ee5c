//===- Trace.cpp - Chrome traces of executed plans ------------------------===//

#include "runtime/plan/Trace.h"

#include "runtime/plan/JsonWriter.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace conduit::runtime {

std::string shortName(const Instruction &x) {
  const std::string stageMb = "s" + std::to_string(x.stage) + " mb" + std::to_string(x.microbatch);
  const char *kind = x.kind == Transfer::Activation ? "act " : "grad ";
  const std::string stage = "s" + std::to_string(x.stage);
  switch (x.op) {
  case Op::Forward:
    return "F " + stageMb;
  case Op::Backward:
    return "B " + stageMb;
  case Op::BackwardInput:
    return "I " + stageMb;
  case Op::BackwardWeight:
    return "W " + stageMb;
  case Op::Send:
    return std::string("send ") + kind + stageMb + " -> " + std::to_string(x.peer);
  case Op::Recv:
    return std::string("recv ") + kind + stageMb + " <- " + std::to_string(x.peer);
  case Op::AllGather:
    return "all-gather " + stage;
  case Op::ReduceScatter:
    return "reduce-scatter " + stage;
  case Op::AllReduce:
    return "all-reduce " + stage;
  case Op::OptimizerStep:
    return "optimizer " + stage;
  case Op::Free:
    return "reshard " + stage;
  case Op::TieGrads:
    return "tie " + stage +
           (x.peerStage == x.stage ? std::string() : " + s" + std::to_string(x.peerStage));
  case Op::TensorAllReduce:
    return "tensor all-reduce " + stage;
  case Op::TensorAllGather:
    return "tensor all-gather " + stage;
  case Op::TensorReduceScatter:
    return "tensor reduce-scatter " + stage;
  default:
    return describe(x);
  }
}

namespace {

const char *category(Op op) {
  switch (op) {
  case Op::Forward:
    return "forward";
  case Op::Backward:
    return "backward";
  case Op::BackwardInput:
    return "backward-input";
  case Op::BackwardWeight:
    return "backward-weight";
  case Op::OptimizerStep:
    return "optimizer";
  case Op::Send:
  case Op::Recv:
  case Op::TieGrads:
    return "p2p";
  case Op::AllGather:
    return "all-gather";
  case Op::ReduceScatter:
    return "reduce-scatter";
  case Op::AllReduce:
    return "all-reduce";
  case Op::TensorAllReduce:
  case Op::TensorAllGather:
  case Op::TensorReduceScatter:
    return "tensor";
  default:
    return "other";
  }
}

const char *streamName(int stream) {
  switch (stream) {
  case kComputeStream:
    return "compute";
  case kP2PStream:
    return "point-to-point";
  case kCollectiveStream:
    return "collectives";
  default:
    return "stream";
  }
}

/// Microseconds with nanosecond resolution.
std::string micros(double seconds) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.3f", seconds * 1e6);
  return buffer;
}

} // namespace

void writeChromeTrace(const Plan &plan, const std::vector<std::vector<TraceEvent>> &events,
                      const std::string &title, double stepTimeS, std::ostream &os) {
  os << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"plan\":" << jsonString(title)
     << ",\"step_time_s\":" << stepTimeS << "},\"traceEvents\":[";
  bool first = true;
  auto begin = [&]() -> std::ostream & {
    os << (first ? "\n" : ",\n");
    first = false;
    return os;
  };
  const int32_t ranks = static_cast<int32_t>(plan.ranks.size());
  for (int32_t r = 0; r < ranks; ++r) {
    begin() << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r
            << ",\"args\":{\"name\":\"rank " << r << "\"}}";
    begin() << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << r
            << ",\"args\":{\"sort_index\":" << r << "}}";
    for (int s = 0; s < 3; ++s) {
      begin() << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << r << ",\"tid\":" << s
              << ",\"args\":{\"name\":\"" << streamName(s) << "\"}}";
      begin() << "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << r << ",\"tid\":" << s
              << ",\"args\":{\"sort_index\":" << s << "}}";
    }
  }

  // Sends and receives in program order, per (sender, receiver) pair: the k-th send of a pair
  // arrives at the k-th receive.
  std::map<std::pair<int32_t, int32_t>, std::vector<const TraceEvent *>> sends, recvs;
  for (int32_t r = 0; r < ranks && r < static_cast<int32_t>(events.size()); ++r) {
    std::vector<const TraceEvent *> ordered;
    for (const TraceEvent &e : events[r])
      ordered.push_back(&e);
    std::sort(ordered.begin(), ordered.end(), [](const TraceEvent *a, const TraceEvent *b) {
      return std::tie(a->step, a->instruction) < std::tie(b->step, b->instruction);
    });
    for (const TraceEvent *e : ordered) {
      const Instruction &x = plan.ranks[r].instructions[e->instruction];
      if (x.op == Op::Send)
        sends[{r, x.peer}].push_back(e);
      else if (x.op == Op::Recv)
        recvs[{x.peer, r}].push_back(e);
    }
  }

  for (int32_t r = 0; r < ranks && r < static_cast<int32_t>(events.size()); ++r)
    for (const TraceEvent &e : events[r]) {
      const Instruction &x = plan.ranks[r].instructions[e.instruction];
      if (x.op == Op::Signal || x.op == Op::Wait)
        continue;
      std::ostream &out = begin();
      out << "{\"name\":" << jsonString(shortName(x)) << ",\"cat\":\"" << category(x.op) << "\"";
      if (x.op == Op::Free)
        out << ",\"ph\":\"i\",\"s\":\"t\"";
      else
        out << ",\"ph\":\"X\",\"dur\":" << micros(e.time.end - e.time.start);
      out << ",\"ts\":" << micros(e.time.start) << ",\"pid\":" << r << ",\"tid\":" << int(x.stream)
          << ",\"args\":{\"step\":" << e.step << ",\"instruction\":" << e.instruction
          << ",\"detail\":" << jsonString(describe(x));
      if (e.time.start > e.time.posted)
        out << ",\"waited_us\":" << micros(e.time.start - e.time.posted);
      if (x.bytes)
        out << ",\"bytes\":" << x.bytes;
      out << "}}";
    }

  int64_t flow = 0;
  for (const auto &[pair, list] : sends) {
    const std::vector<const TraceEvent *> &matched = recvs[pair];
    for (size_t k = 0; k < list.size() && k < matched.size(); ++k, ++flow) {
      const Instruction &x = plan.ranks[pair.first].instructions[list[k]->instruction];
      const Instruction &y = plan.ranks[pair.second].instructions[matched[k]->instruction];
      const char *name = x.kind == Transfer::Activation ? "activation" : "gradient";
      begin() << "{\"name\":\"" << name << "\",\"cat\":\"p2p\",\"ph\":\"s\",\"id\":" << flow
              << ",\"ts\":" << micros(list[k]->time.start) << ",\"pid\":" << pair.first
              << ",\"tid\":" << int(x.stream) << "}";
      begin() << "{\"name\":\"" << name
              << "\",\"cat\":\"p2p\",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << flow
              << ",\"ts\":" << micros(matched[k]->time.start) << ",\"pid\":" << pair.second
              << ",\"tid\":" << int(y.stream) << "}";
    }
  }
  os << "\n]}\n";
}

} // namespace conduit::runtime
