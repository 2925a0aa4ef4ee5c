//===- SafeTensors.cpp - the safetensors file format ----------------------===//

#include "runtime/weights/SafeTensors.h"
#include "runtime/weights/UntrustedJson.h"

#include "runtime/plan/Limits.h"

#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

namespace fs = std::filesystem;

namespace conduit::runtime {

namespace {

using Json = nlohmann::json;

constexpr struct {
  const char *name;
  int64_t bytes;
} kDTypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
               {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
               {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};

/// The deepest nesting of arrays and objects in `json`, outside strings, or kMaxJsonNesting + 1
/// once it passes kMaxJsonNesting.
int nesting(std::string_view json) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : json) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
    if (deepest > kMaxJsonNesting)
      break;
  }
  return deepest;
}

/// A non-negative JSON integer, or nothing.
std::optional<uint64_t> naturalOf(const Json &value) {
  if (value.is_number_unsigned())
    return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0)
    return static_cast<uint64_t>(value.get<int64_t>());
  return std::nullopt;
}

/// The F8_E4M3 value `b` as a float (the "fn" format of OCP FP8: bias 7, no infinities,
/// S.1111.111 the only NaN, 448 the largest).
float e4m3ToFloat(uint8_t b) {
  const int exponent = (b >> 3) & 0xf, mantissa = b & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7)
    magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -9); // subnormal: m / 8 · 2^-6
  else
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return b & 0x80 ? -magnitude : magnitude;
}

/// The F16 value `h` as a float.
float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13); // infinity or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign; // zero
  } else {
    // Subnormal: normalise.
    exponent = 113;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

} // namespace

int64_t TensorEntry::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d; // checked by the parser, or built from checked shapes
  return n;
}

const TensorEntry *SafeTensorsHeader::find(std::string_view name) const {
  if (byName.size() == tensors.size() && !tensors.empty()) {
    const auto found = byName.find(name);
    return found == byName.end() || found->second >= tensors.size() ||
                   tensors[found->second].name != name
               ? nullptr
               : &tensors[found->second];
  }
  for (const TensorEntry &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

void SafeTensorsHeader::indexNames() {
  byName.clear();
  for (size_t i = 0; i < tensors.size(); ++i)
    byName.emplace(tensors[i].name, i);
}

int64_t safeTensorsDTypeBytes(std::string_view dtype) {
  for (const auto &d : kDTypes)
    if (dtype == d.name)
      return d.bytes;
  return 0;
}

absl::StatusOr<nlohmann::json> parseUntrustedJson(std::string_view text, const std::string &path,
                                                  std::string_view what, int depth) {
  auto bad = [&](const std::string &why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::string(what), why));
  };
  if (nesting(text) > kMaxJsonNesting)
    return bad(absl::StrCat(" nests arrays and objects more than ", kMaxJsonNesting,
                            " deep; its format nests ", depth));
  Json root;
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  Json::parser_callback_t noteKeys = [&](int, Json::parse_event_t event, Json &parsed) {
    if (event == Json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == Json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == Json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    root = Json::parse(text.begin(), text.end(), noteKeys);
  } catch (const Json::exception &e) {
    return bad(absl::StrCat(" is not valid JSON (", e.what(), ")"));
  }
  if (!duplicate.empty())
    return bad(absl::StrCat(" names \"", duplicate, "\" twice"));
  return root;
}

absl::StatusOr<SafeTensorsHeader> parseSafeTensorsHeader(std::string_view json, uint64_t dataBytes,
                                                         const std::string &path) {
  auto bad = [&](const std::string &why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  // Structure: a JSON object, each key once.
  CONDUIT_ASSIGN_OR_RETURN(Json root, parseUntrustedJson(json, path, "the header", 3));
  if (!root.is_object())
    return bad("the header is not a JSON object");

  SafeTensorsHeader header;
  for (const auto &[name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        return bad("__metadata__ is not an object of strings");
      for (const auto &[key, text] : value.items()) {
        if (!text.is_string())
          return bad(absl::StrCat("__metadata__ \"", key, "\" is not a string"));
        header.metadata[key] = text.get<std::string>();
      }
      continue;
    }
    auto badTensor = [&](const std::string &why) {
      return bad(absl::StrCat("tensor \"", name, "\": ", why));
    };
    if (name.empty())
      return bad("a tensor has an empty name");
    if (!value.is_object())
      return badTensor("not an object with dtype, shape and data_offsets");
    for (const auto &[key, unused] : value.items())
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        return badTensor(absl::StrCat("unknown key \"", key, "\""));
    TensorEntry t;
    t.name = name;
    const auto dtype = value.find("dtype"), shape = value.find("shape"),
               offsets = value.find("data_offsets");
    if (dtype == value.end() || shape == value.end() || offsets == value.end())
      return badTensor("it needs dtype, shape and data_offsets");
    if (!dtype->is_string() || !safeTensorsDTypeBytes(dtype->get<std::string>()))
      return badTensor(absl::StrCat("unknown dtype ",
                                    dtype->dump(-1, ' ', false, Json::error_handler_t::replace)));
    t.dtype = dtype->get<std::string>();
    if (!shape->is_array() || shape->size() > kMaxTensorRank)
      return badTensor(absl::StrCat("shape is not an array of at most ", kMaxTensorRank,
                                    " non-negative integers"));
    for (const Json &d : *shape) {
      std::optional<uint64_t> n = naturalOf(d);
      if (!n || *n > static_cast<uint64_t>(INT64_MAX))
        return badTensor("shape is not an array of non-negative integers");
      t.shape.push_back(static_cast<int64_t>(*n));
    }
    std::optional<uint64_t> begin, end;
    if (offsets->is_array() && offsets->size() == 2) {
      begin = naturalOf((*offsets)[0]);
      end = naturalOf((*offsets)[1]);
    }
    if (!begin || !end || *begin > *end)
      return badTensor("data_offsets is not [BEGIN, END] with 0 <= BEGIN <= END");
    t.begin = *begin;
    t.end = *end;
    header.tensors.push_back(std::move(t));
  }

  // Meaning: each tensor's bytes match its dtype and shape, and the tensors tile the data.
  for (const TensorEntry &t : header.tensors) {
    std::optional<int64_t> bytes = safeTensorsDTypeBytes(t.dtype);
    for (int64_t d : t.shape)
      bytes = bytes ? limits::checkedMul(*bytes, d) : std::nullopt;
    if (!bytes || static_cast<uint64_t>(*bytes) != t.end - t.begin)
      return bad(absl::StrCat("tensor \"", t.name, "\": data_offsets [", t.begin, ", ", t.end,
                              "] hold ", t.end - t.begin, " bytes; its dtype and shape need ",
                              bytes ? absl::StrCat(*bytes) : std::string("more than 2^63")));
    if (t.end > dataBytes)
      return bad(absl::StrCat("tensor \"", t.name, "\": data_offsets [", t.begin, ", ", t.end,
                              "] lie beyond the data section's ", dataBytes,
                              " bytes (is the file truncated?)"));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry &a, const TensorEntry &b) {
              return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
            });
  uint64_t covered = 0;
  const TensorEntry *previous = nullptr;
  for (const TensorEntry &t : header.tensors) {
    if (t.begin < covered)
      return bad(absl::StrCat("tensors \"", previous->name, "\" and \"", t.name,
                              "\" overlap in the data section"));
    if (t.begin > covered)
      return bad(absl::StrCat("bytes ", covered, " to ", t.begin,
                              " of the data section belong to no tensor"));
    covered = t.end;
    previous = &t;
  }
  if (covered != dataBytes)
    return bad(
        absl::StrCat("the data section has ", dataBytes, " bytes; its tensors cover ", covered));
  header.dataStart = 8 + json.size();
  header.indexNames();
  return header;
}

absl::StatusOr<SafeTensorsLayout>
layoutSafeTensors(const std::vector<TensorSpec> &tensors,
                  const std::map<std::string, std::string> &metadata) {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  if (!metadata.empty())
    root["__metadata__"] = metadata;
  std::vector<uint64_t> begins;
  uint64_t at = 0;
  for (const TensorSpec &t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || root.contains(t.name))
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write a tensor named \"", t.name, "\" (empty, reserved or twice)"));
    std::optional<int64_t> bytes = int64_t(sizeof(float));
    for (int64_t d : t.shape)
      bytes = bytes && d >= 0 ? limits::checkedMul(*bytes, d) : std::nullopt;
    if (!bytes || static_cast<uint64_t>(*bytes) > static_cast<uint64_t>(INT64_MAX) - at)
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", t.name, "\" does not fit in a safetensors file"));
    root[t.name] = {{"dtype", "F32"},
                    {"shape", t.shape},
                    {"data_offsets", {at, at + static_cast<uint64_t>(*bytes)}}};
    begins.push_back(at);
    at += static_cast<uint64_t>(*bytes);
  }
  std::string json = root.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  json.append((8 - json.size() % 8) % 8, ' ');
  SafeTensorsLayout layout;
  const uint64_t length = json.size();
  layout.prefix.assign(reinterpret_cast<const char *>(&length), sizeof length);
  layout.prefix += json;
  for (uint64_t begin : begins)
    layout.fileOffsets.push_back(layout.prefix.size() + begin);
  layout.fileBytes = layout.prefix.size() + at;
  return layout;
}

absl::Status writeSafeTensors(const std::string &path, const std::vector<TensorSpec> &tensors,
                              const std::vector<const float *> &values,
                              const std::map<std::string, std::string> &metadata) {
  if (values.size() != tensors.size())
    return absl::InternalError("writeSafeTensors: one value pointer per tensor");
  CONDUIT_ASSIGN_OR_RETURN(SafeTensorsLayout layout, layoutSafeTensors(tensors, metadata));
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(layout.prefix.data(), static_cast<std::streamsize>(layout.prefix.size()));
    for (size_t i = 0; i < tensors.size(); ++i) {
      const uint64_t end = i + 1 < tensors.size() ? layout.fileOffsets[i + 1] : layout.fileBytes;
      out.write(reinterpret_cast<const char *>(values[i]),
                static_cast<std::streamsize>(end - layout.fileOffsets[i]));
    }
    out.flush();
    if (!out)
      return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error)
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", temporary, " to ", path, ": ", error.message()));
  return absl::OkStatus();
}

absl::Status writeFloatsAt(const std::string &path, uint64_t offset, const float *values,
                           int64_t count) {
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  out.seekp(static_cast<std::streamoff>(offset));
  out.write(reinterpret_cast<const char *>(values),
            static_cast<std::streamsize>(count * sizeof(float)));
  out.flush();
  if (!out)
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<SafeTensorsReader> SafeTensorsReader::open(const std::string &path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error)
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", error.message()));
  SafeTensorsReader reader;
  reader.file = path;
  reader.in = std::make_unique<std::ifstream>(path, std::ios::binary);
  uint64_t length = 0;
  if (size < sizeof length)
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a safetensors file: it has ",
                                                   size,
                                                   " bytes, fewer than the 8 of its "
                                                   "header length"));
  if (!reader.in->read(reinterpret_cast<char *>(&length), sizeof length))
    return absl::UnavailableError(absl::StrCat("cannot read ", path));
  if (length > kMaxSafeTensorsHeaderBytes)
    return absl::InvalidArgumentError(absl::StrCat(path, ": the header length is ", length,
                                                   " bytes; a safetensors header has "
                                                   "at most ",
                                                   kMaxSafeTensorsHeaderBytes,
                                                   " (is this a safetensors file?)"));
  if (length > size - sizeof length)
    return absl::InvalidArgumentError(absl::StrCat(path, " is truncated: its header length is ",
                                                   length, " bytes, but only ",
                                                   size - sizeof length, " follow"));
  std::string json(length, '\0');
  if (!reader.in->read(json.data(), static_cast<std::streamsize>(length)))
    return absl::UnavailableError(absl::StrCat("cannot read ", path));
  CONDUIT_ASSIGN_OR_RETURN(reader.parsed,
                           parseSafeTensorsHeader(json, size - sizeof length - length, path));
  return reader;
}

absl::Status SafeTensorsReader::readFloats(const TensorEntry &tensor, float *out) {
  const int64_t width = safeTensorsDTypeBytes(tensor.dtype);
  const bool fp8 = tensor.dtype == "F8_E4M3" || tensor.dtype == "F8_E5M2";
  if (tensor.dtype != "F32" && tensor.dtype != "BF16" && tensor.dtype != "F16" && !fp8)
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": tensor \"", tensor.name, "\" has dtype ", tensor.dtype,
                     "; conduit-run reads F32, BF16, F16, F8_E4M3 and F8_E5M2"));
  const int64_t n = tensor.elements();
  in->clear();
  in->seekg(static_cast<std::streamoff>(parsed.dataStart + tensor.begin));
  if (width == 4) {
    in->read(reinterpret_cast<char *>(out), static_cast<std::streamsize>(n * width));
  } else if (fp8) {
    std::vector<uint8_t> bytes(n);
    in->read(reinterpret_cast<char *>(bytes.data()), static_cast<std::streamsize>(n));
    for (int64_t i = 0; i < n; ++i) // E5M2 is the top byte of an F16
      out[i] = tensor.dtype == "F8_E4M3" ? e4m3ToFloat(bytes[i])
                                         : halfToFloat(static_cast<uint16_t>(bytes[i] << 8));
  } else {
    std::vector<uint16_t> half(n);
    in->read(reinterpret_cast<char *>(half.data()), static_cast<std::streamsize>(n * width));
    for (int64_t i = 0; i < n; ++i) {
      if (tensor.dtype == "F16") {
        out[i] = halfToFloat(half[i]);
      } else {
        const uint32_t bits = uint32_t(half[i]) << 16;
        std::memcpy(&out[i], &bits, sizeof bits);
      }
    }
  }
  if (!*in)
    return absl::UnavailableError(
        absl::StrCat("cannot read tensor \"", tensor.name, "\" of ", file));
  return absl::OkStatus();
}

} // namespace conduit::runtime
