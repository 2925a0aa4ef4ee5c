//===- SafeTensorsTest.cpp - the safetensors reader and writer -------------===//
//
// Writing and reading back, and every refusal of the reader with its message: header bounds,
// truncated files, JSON that is invalid or not UTF-8, structure (keys, types, nesting) and
// meaning (byte counts, offsets out of range, overlapping or leaving gaps), dtypes.
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/SafeTensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace conduit::runtime {
namespace {

namespace fs = std::filesystem;

std::string temporaryPath(const std::string &name) {
  return (fs::path(testing::TempDir()) / ("safetensors-" + name)).string();
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A file of the header `json` followed by `data`.
std::string fileOf(const std::string &json, const std::string &data) {
  const uint64_t n = json.size();
  return std::string(reinterpret_cast<const char *>(&n), sizeof n) + json + data;
}

/// The message of parsing `json` over `dataBytes` bytes of data (empty when it is accepted).
std::string refusal(const std::string &json, uint64_t dataBytes) {
  absl::StatusOr<SafeTensorsHeader> h = parseSafeTensorsHeader(json, dataBytes, "f.safetensors");
  return h.ok() ? std::string() : std::string(h.status().message());
}

TEST(SafeTensorsTest, WritesAndReadsBack) {
  const std::string path = temporaryPath("roundtrip");
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1.5f, 0.25f};
  ASSERT_TRUE(writeSafeTensors(path, {{"a.weight", {2, 3}}, {"b", {2}}}, {a.data(), b.data()},
                               {{"format", "pt"}})
                  .ok());
  const std::string bytes = readBytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data section starts 8-byte aligned";
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ(bytes.size(), 8 + n + 8 * sizeof(float));

  absl::StatusOr<SafeTensorsReader> reader = SafeTensorsReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const SafeTensorsHeader &h = reader->header();
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  const TensorEntry *ta = h.find("a.weight");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dtype, "F32");
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta->begin, 0u);
  EXPECT_EQ(ta->end, 24u);
  std::vector<float> got(6), gotB(2);
  ASSERT_TRUE(reader->readFloats(*ta, got.data()).ok());
  ASSERT_TRUE(reader->readFloats(*h.find("b"), gotB.data()).ok());
  EXPECT_EQ(got, a);
  EXPECT_EQ(gotB, b);
  EXPECT_EQ(h.find("c"), nullptr);
}

TEST(SafeTensorsTest, WriterRefusesDuplicateAndReservedNames) {
  EXPECT_FALSE(layoutSafeTensors({{"a", {1}}, {"a", {1}}}, {}).ok());
  EXPECT_FALSE(layoutSafeTensors({{"__metadata__", {1}}}, {}).ok());
  EXPECT_FALSE(layoutSafeTensors({{"big", {int64_t(1) << 62, 4}}}, {}).ok());
}

TEST(SafeTensorsTest, ReadsBf16AndF16AsFloat) {
  // 1.5 and -2 in BF16 (the top halves of their float32 bits), then 1, 2^-24 (the smallest
  // subnormal), -inf and 65504 in F16.
  const uint16_t bf16[] = {0x3fc0, 0xc000};
  const uint16_t f16[] = {0x3c00, 0x0001, 0xfc00, 0x7bff};
  const std::string json = R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
                           R"("h":{"dtype":"F16","shape":[2,2],"data_offsets":[4,12]}})";
  const std::string path = temporaryPath("half");
  writeBytes(path, fileOf(json, std::string(reinterpret_cast<const char *>(bf16), 4) +
                                    std::string(reinterpret_cast<const char *>(f16), 8)));
  absl::StatusOr<SafeTensorsReader> reader = SafeTensorsReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> b(2), h(4);
  ASSERT_TRUE(reader->readFloats(*reader->header().find("b"), b.data()).ok());
  ASSERT_TRUE(reader->readFloats(*reader->header().find("h"), h.data()).ok());
  EXPECT_EQ(b, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], std::ldexp(1.0f, -24));
  EXPECT_EQ(h[2], -INFINITY);
  EXPECT_EQ(h[3], 65504.0f);
}

// The FP8 formats of OCP FP8 (DeepSeek-V3's weights are F8_E4M3): every E4M3 byte against its
// definition (bias 7, subnormals below 2^-6, no infinities, 0x7f and 0xff NaN), and E5M2, the
// top byte of an F16.
TEST(SafeTensorsTest, ReadsFp8) {
  std::string bytes;
  for (int b = 0; b < 256; ++b)
    bytes.push_back(static_cast<char>(b));
  const uint8_t e5m2[] = {0x3c, 0xc0, 0x7b, 0x01};
  bytes.append(reinterpret_cast<const char *>(e5m2), 4);
  const std::string path = temporaryPath("fp8");
  writeBytes(path, fileOf(R"({"a":{"dtype":"F8_E4M3","shape":[16,16],"data_offsets":[0,256]},)"
                          R"("b":{"dtype":"F8_E5M2","shape":[4],"data_offsets":[256,260]}})",
                          bytes));
  absl::StatusOr<SafeTensorsReader> reader = SafeTensorsReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> a(256), b(4);
  ASSERT_TRUE(reader->readFloats(*reader->header().find("a"), a.data()).ok());
  ASSERT_TRUE(reader->readFloats(*reader->header().find("b"), b.data()).ok());
  for (int byte = 0; byte < 256; ++byte) {
    const int sign = byte >> 7, exponent = (byte >> 3) & 15, mantissa = byte & 7;
    if (exponent == 15 && mantissa == 7) {
      EXPECT_TRUE(std::isnan(a[byte])) << byte;
      continue;
    }
    const double magnitude = exponent == 0 ? mantissa / 8.0 * std::ldexp(1.0, -6)
                                           : (1 + mantissa / 8.0) * std::ldexp(1.0, exponent - 7);
    EXPECT_EQ(a[byte], static_cast<float>(sign ? -magnitude : magnitude)) << byte;
  }
  EXPECT_EQ(a[0x38], 1.0f);
  EXPECT_EQ(a[0x7e], 448.0f); // the largest
  EXPECT_EQ(a[0xfe], -448.0f);
  EXPECT_EQ(a[0x01], std::ldexp(1.0f, -9)); // the smallest subnormal
  EXPECT_EQ(b, (std::vector<float>{1.0f, -2.0f, 57344.0f, std::ldexp(1.0f, -16)}));
}

TEST(SafeTensorsTest, RefusesOtherDTypesWhenRead) {
  const std::string path = temporaryPath("int");
  writeBytes(path, fileOf(R"({"i":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", "abcd"));
  absl::StatusOr<SafeTensorsReader> reader = SafeTensorsReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> out(1);
  absl::Status s = reader->readFloats(*reader->header().find("i"), out.data());
  EXPECT_NE(
      s.message().find(
          "tensor \"i\" has dtype I32; conduit-run reads F32, BF16, F16, F8_E4M3 and F8_E5M2"),
      std::string::npos)
      << s;
}

TEST(SafeTensorsTest, BoundsTheHeaderAndRefusesTruncatedFiles) {
  const std::string path = temporaryPath("bounds");
  auto openMessage = [&](const std::string &bytes) {
    writeBytes(path, bytes);
    absl::StatusOr<SafeTensorsReader> r = SafeTensorsReader::open(path);
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_NE(openMessage("abc").find("fewer than the 8 of its header length"), std::string::npos);
  uint64_t huge = kMaxSafeTensorsHeaderBytes + 1;
  EXPECT_NE(openMessage(std::string(reinterpret_cast<const char *>(&huge), 8) + "{}")
                .find("a safetensors header has at most 104857600"),
            std::string::npos);
  uint64_t longer = 100;
  EXPECT_NE(openMessage(std::string(reinterpret_cast<const char *>(&longer), 8) + "{}")
                .find("is truncated: its header length is 100 bytes, but only 2 follow"),
            std::string::npos);
  // A whole header whose data was cut short.
  const std::string json = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NE(openMessage(fileOf(json, "1234")).find("lie beyond the data section's 4 bytes"),
            std::string::npos);
  EXPECT_NE(openMessage(fileOf(json, "123456789"))
                .find("the data section has 9 bytes; its "
                      "tensors cover 8"),
            std::string::npos);
  EXPECT_EQ(openMessage(fileOf(json, "12345678")), "");
  absl::StatusOr<SafeTensorsReader> missing = SafeTensorsReader::open(path + ".none");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
}

TEST(SafeTensorsTest, RefusesInvalidJson) {
  EXPECT_NE(refusal("{\"a\": ", 0).find("the header is not valid JSON"), std::string::npos);
  EXPECT_NE(refusal("", 0).find("the header is not valid JSON"), std::string::npos);
  // A name that is not UTF-8.
  EXPECT_NE(refusal("{\"\xff\xfe\": {}}", 0).find("the header is not valid JSON"),
            std::string::npos);
  EXPECT_NE(refusal("[1, 2]", 0).find("the header is not a JSON object"), std::string::npos);
  EXPECT_NE(refusal(std::string(100, '[') + std::string(100, ']'), 0).find("nests arrays"),
            std::string::npos);
  EXPECT_EQ(refusal("{}   ", 0), "") << "trailing spaces pad a header";
}

TEST(SafeTensorsTest, RefusesBadStructure) {
  const std::string t = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  EXPECT_NE(refusal("{" + t + "," + t + "}", 4).find("names \"a\" twice"), std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"dtype":"F16"}})", 4)
                .find("names \"dtype\" twice"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":[1]})", 4).find("tensor \"a\": not an object"), std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1]}})", 4)
                .find("it needs dtype, shape and data_offsets"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4)
                .find("unknown dtype \"F33\""),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)
                .find("shape is not an array of non-negative integers"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4)
                .find("shape is not an array of non-negative integers"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", 4)
                .find("shape is not an array of at most 8"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4)
                .find("data_offsets is not [BEGIN, END]"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4)
                .find("data_offsets is not [BEGIN, END]"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4)
                .find("unknown key \"x\""),
            std::string::npos);
  EXPECT_NE(refusal(R"({"__metadata__":{"k":1}})", 0).find("__metadata__ \"k\" is not a string"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"__metadata__":[]})", 0).find("__metadata__ is not an object"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4)
                .find("a tensor has an empty name"),
            std::string::npos);
}

TEST(SafeTensorsTest, RefusesOffsetsThatDoNotTileTheData) {
  EXPECT_NE(
      refusal(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)
          .find("tensor \"a\": data_offsets [0, 8] hold 8 bytes; its dtype and shape need 12"),
      std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[4611686018427387904, 4],)"
                    R"("data_offsets":[0,8]}})",
                    8)
                .find("need more than 2^63"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    12)
                .find("tensors \"a\" and \"b\" overlap"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                    12)
                .find("bytes 4 to 8 of the data section belong to no tensor"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)
                .find("bytes 0 to 4 of the data section belong to no tensor"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,)"
                    R"(18446744073709551616]}})",
                    8)
                .find("data_offsets is not"),
            std::string::npos)
      << "2^64 is not an offset";
  // Empty tensors take no bytes and may sit anywhere in the order.
  EXPECT_EQ(refusal(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                    R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                    4),
            "");
}

} // namespace
} // namespace conduit::runtime
