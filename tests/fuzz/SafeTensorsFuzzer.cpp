//===- SafeTensorsFuzzer.cpp - libFuzzer target: the safetensors reader ----===//
//
// A file given to conduit-run --init is untrusted input. The input is a whole file, read as
// SafeTensorsReader::open reads one: the 8-byte header length, bounded before anything is
// read, the JSON header, then the data. The header parser must refuse any bytes with a message
// and never crash, overflow or allocate more than the input holds; what it accepts must tile
// the data section exactly. An accepted header is then checked against the tensors of a small
// GPT-2 (checkHfTensors), as --init checks it.
//
// The seeds (testdata/fuzz/safetensors): what `conduit-run --reference --save-params` writes
// for that model (1 block, hidden 4, 2 heads, seq 2, vocab 8; bias all, untied), the same
// tensors as BF16, and variants that are refused: truncated, offsets that overlap, a shape
// that does not match its bytes, an extra I64 tensor, a key given twice, a name that is not
// UTF-8, a header length of 2^40.
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/HfWeights.h"
#include "runtime/weights/SafeTensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

using namespace conduit::runtime;

namespace {

/// The seeds' model: a 1-block GPT-2 of hidden size 4, 2 heads, FFN 16, sequence 2, vocab 8.
const std::vector<HfTensor> &expected() {
  static const std::vector<HfTensor> tensors = [] {
    Transformer t;
    t.numLayers = 1;
    t.hiddenSize = 4;
    t.numHeads = 2;
    t.numKvHeads = 2;
    t.ffnHiddenSize = 16;
    t.seqLength = 2;
    t.vocabSize = 8;
    Plan plan;
    plan.transformer = t;
    plan.layers = {
        {"embedding", LayerKind::Embedding, (8 + 2) * 4},
        {"block.0", LayerKind::Block, 4 * 4 + 4 * 12 + 12 + 16 + 4 + 4 * 16 + 16 + 64 + 4},
        {"head", LayerKind::Head, 2 * 4 + 4 * 8}};
    absl::StatusOr<std::vector<HfTensor>> made = hfTensors(plan);
    if (!made.ok()) // the harness's own model: not a finding
      std::abort();
    return *made;
  }();
  return tensors;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t length = 0;
  if (size < sizeof length)
    return 0;
  std::memcpy(&length, data, sizeof length);
  if (length > kMaxSafeTensorsHeaderBytes || length > size - sizeof length)
    return 0; // refused before the header is read
  const std::string_view json(reinterpret_cast<const char *>(data) + sizeof length, length);
  const uint64_t dataBytes = size - sizeof length - length;
  absl::StatusOr<SafeTensorsHeader> header = parseSafeTensorsHeader(json, dataBytes, "fuzz");
  if (!header.ok()) {
    if (header.status().message().empty())
      std::abort(); // every refusal says why
    return 0;
  }
  // What is accepted tiles the data section: sorted, contiguous, each tensor its dtype's bytes.
  uint64_t covered = 0;
  for (const TensorEntry &t : header->tensors) {
    if (t.begin != covered || t.end < t.begin ||
        static_cast<uint64_t>(safeTensorsDTypeBytes(t.dtype) * t.elements()) != t.end - t.begin)
      std::abort();
    covered = t.end;
  }
  if (covered != dataBytes || header->dataStart != sizeof length + length)
    std::abort();
  (void)checkHfTensors(*header, expected(), "fuzz");
  return 0;
}
