//===- SafeTensors.h - the safetensors file format --------------*- C++ -*-===//
//
// Hugging Face's safetensors format, on its own (HfWeights.h says which tensors Conduit writes
// and reads): an 8-byte little-endian header length N, N bytes of JSON
//
//   {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"KEY": "VALUE", ...}}
//
// then the tensors' raw little-endian bytes, BEGIN and END counted from the end of the header.
// The writer lays tensors out in the order given, contiguously, and pads the header with
// spaces to a multiple of 8 bytes (as the reference implementation does). A file is untrusted
// input: the reader bounds the header before reading it, parses it with a JSON library, checks
// its structure (known keys and types, integer shapes and offsets), then its meaning (each
// tensor's byte count matches its dtype and shape; the tensors tile the data section exactly,
// without gaps or overlaps) before any tensor is read, and reads a tensor with one bounded
// read.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_WEIGHTS_SAFETENSORS_H
#define CONDUIT_RUNTIME_WEIGHTS_SAFETENSORS_H

#include "runtime/Status.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::runtime {

/// The largest header a reader accepts (the reference implementation's bound).
constexpr uint64_t kMaxSafeTensorsHeaderBytes = uint64_t(100) << 20;
/// The most dimensions a tensor may have.
constexpr size_t kMaxTensorRank = 8;

/// One tensor of a header.
struct TensorEntry {
  std::string name;
  std::string dtype; ///< "F32", "BF16", ...: one of the format's names
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; ///< bytes, from the start of the data section
  int64_t elements() const;
};

struct SafeTensorsHeader {
  std::vector<TensorEntry> tensors; ///< in data order
  std::map<std::string, std::string> metadata;
  /// Where the data section starts in the file: 8 + the header's length.
  uint64_t dataStart = 0;
  /// The tensor named `name`, or null: by the index of names when indexNames() built it for
  /// the tensors as they are (a model of a hundred thousand tensors), else by a search.
  const TensorEntry *find(std::string_view name) const;
  /// Builds find()'s index of names; the parser calls it, and whoever changes `tensors` after.
  void indexNames();

private:
  std::map<std::string, size_t, std::less<>> byName;
};

/// Bytes of one element of the format's dtype `dtype`; 0 when the format has no such dtype.
int64_t safeTensorsDTypeBytes(std::string_view dtype);

/// Parses and checks the JSON header `json` of a file whose data section (what follows the
/// header) holds `dataBytes` bytes. `path` names the file in messages.
absl::StatusOr<SafeTensorsHeader> parseSafeTensorsHeader(std::string_view json, uint64_t dataBytes,
                                                         const std::string &path);

/// A tensor to write: float32 values of `shape`, in row-major order.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

/// Where everything of a file of float32 tensors goes.
struct SafeTensorsLayout {
  /// What precedes the data section: the 8-byte length and the JSON header, padded with
  /// spaces to a multiple of 8 bytes.
  std::string prefix;
  std::vector<uint64_t> fileOffsets; ///< where each tensor's data starts in the file
  uint64_t fileBytes = 0;
};
/// The layout of a file of float32 tensors `tensors`, contiguous in this order, with
/// `metadata`; an error for duplicate or reserved names and sizes beyond 2^63 bytes.
absl::StatusOr<SafeTensorsLayout>
layoutSafeTensors(const std::vector<TensorSpec> &tensors,
                  const std::map<std::string, std::string> &metadata);

/// Writes a whole file at once: `values[i]` holds tensor i's elements. Written to a temporary
/// name and renamed.
absl::Status writeSafeTensors(const std::string &path, const std::vector<TensorSpec> &tensors,
                              const std::vector<const float *> &values,
                              const std::map<std::string, std::string> &metadata = {});

/// Writes `count` floats at byte `offset` of the existing file `path` (several writers may
/// fill one file laid out by layoutSafeTensors, each its own tensors).
absl::Status writeFloatsAt(const std::string &path, uint64_t offset, const float *values,
                           int64_t count);

/// A safetensors file opened for reading: its header is checked on open, tensors are read on
/// demand.
class SafeTensorsReader {
public:
  static absl::StatusOr<SafeTensorsReader> open(const std::string &path);

  const SafeTensorsHeader &header() const { return parsed; }
  const std::string &path() const { return file; }
  /// Reads `tensor` (an entry of header()) as floats into `out`, which holds its elements:
  /// F32 as it is, BF16, F16 and the FP8 formats (F8_E4M3, F8_E5M2) converted; other dtypes
  /// are refused.
  absl::Status readFloats(const TensorEntry &tensor, float *out);

private:
  std::string file;
  SafeTensorsHeader parsed;
  std::unique_ptr<std::ifstream> in;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_WEIGHTS_SAFETENSORS_H
