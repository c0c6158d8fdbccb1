// safetensors reader, writer and checkpoint folders: round trips over every supported
// dtype, one crafted file per corruption the reader must reject (each error names the
// file and the problem), sharded checkpoints and their index errors, tensor-name
// checks, and the fuzz corpus (tests/fuzz/corpus/safetensors) read without crashing.
// The reference `safetensors` package is the oracle in tests/python/test_safetensors_oracle.py.

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/safetensors/safetensors_checkpoint.h"
#include "models/safetensors/safetensors_file.h"
#include "models/safetensors/safetensors_writer.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sb_safetensors_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string le64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (8 * i));
  return out;
}

// A file image: the header's length, the header, the data area.
std::string file_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `action`, expecting std::runtime_error whose message contains every phrase.
template <typename Action>
void expect_runtime_error(Action action, const std::vector<std::string>& phrases) {
  try {
    action();
    ADD_FAILURE() << "no exception; expected one containing \"" << phrases.back() << "\"";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    for (const std::string& phrase : phrases) {
      EXPECT_NE(message.find(phrase), std::string::npos)
          << "message: " << message << "\nmissing: " << phrase;
    }
  }
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir)) out.push_back(entry.path().filename());
  return out;
}

// One tensor of every supported dtype plus the shape edge cases, with values that
// exercise every byte (random data, negative integers, extreme values).
std::vector<std::pair<std::string, at::Tensor>> every_dtype_tensors() {
  at::manual_seed(7);
  return {
      {"bf16", at::randn({3, 5}).to(at::kBFloat16)},
      {"f16", at::randn({4, 2}).to(at::kHalf)},
      {"f32", at::randn({2, 3, 4})},
      {"f64", at::randn({7}, at::kDouble)},
      {"i64", at::randint(-(int64_t{1} << 62), int64_t{1} << 62, {5}, at::kLong)},
      {"i32", at::randint(-(int64_t{1} << 31), (int64_t{1} << 31) - 1, {2, 2}, at::kInt)},
      {"i16", at::randint(-32768, 32767, {6}, at::kShort)},
      {"i8", at::randint(-128, 127, {3, 1}, at::kChar)},
      {"u8", at::randint(0, 255, {9}, at::kByte)},
      {"bool", at::randint(0, 2, {2, 5}, at::kByte).to(at::kBool)},
      {"scalar", at::scalar_tensor(-2.25, at::kDouble)},
      {"empty", at::empty({0, 4}, at::kFloat)},
      {"empty_middle", at::empty({3, 0, 2}, at::kHalf)},
      {"transposed", at::arange(12, at::kInt).reshape({3, 4}).t()},
  };
}

TEST(Safetensors, RoundTripEveryDtypeShapeAndMetadata) {
  TempDir dir;
  const fs::path path = dir / "round_trip.safetensors";
  const auto tensors = every_dtype_tensors();
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "é ✓"}};
  write_safetensors(path, tensors, metadata);
  EXPECT_EQ(files_in(dir.path()), std::vector<fs::path>{"round_trip.safetensors"});

  const std::string raw = read_bytes(path);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ(header_bytes % 8, 0u) << "the header is padded so the data starts 8-byte aligned";

  at::Tensor kept;
  {
    const SafetensorsFile file = SafetensorsFile::open(path);
    std::set<std::string> expected_names;
    for (const auto& [name, t] : tensors) expected_names.insert(name);
    const std::vector<std::string> names = file.names();
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected_names);
    EXPECT_EQ(file.metadata(), metadata);
    uint64_t previous_end = 0;
    for (const auto& [name, t] : tensors) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(file.contains(name));
      const SafetensorsTensorInfo& info = file.info(name);
      EXPECT_EQ(info.dtype, t.scalar_type());
      EXPECT_EQ(info.dtype_name, safetensors_dtype_name(t.scalar_type()));
      EXPECT_EQ(info.shape, t.sizes().vec());
      EXPECT_EQ(info.numel, t.numel());
      EXPECT_EQ(info.begin, previous_end) << "data in the order given";
      previous_end = info.end;
      const at::Tensor read = file.tensor(name);
      EXPECT_EQ(read.scalar_type(), t.scalar_type());
      EXPECT_EQ(read.sizes(), t.sizes());
      EXPECT_TRUE(read.is_contiguous());
      EXPECT_TRUE(at::equal(read, t));
    }
    EXPECT_EQ(previous_end, raw.size() - 8 - header_bytes);
    kept = file.tensor("f32");
  }
  // The tensor is a copy: it stays valid after the file is unmapped.
  EXPECT_TRUE(at::equal(kept, tensors[2].second));

  // open_bytes runs the same parser over the same bytes.
  const SafetensorsFile from_bytes = SafetensorsFile::open_bytes("in-memory", raw);
  EXPECT_EQ(from_bytes.names(), SafetensorsFile::open(path).names());
  EXPECT_TRUE(at::equal(from_bytes.tensor("bf16"), tensors[0].second));
}

TEST(Safetensors, WriterOmitsEmptyMetadataAndWritesEmptyFiles) {
  TempDir dir;
  write_safetensors(dir / "none.safetensors", {});
  EXPECT_EQ(read_bytes(dir / "none.safetensors"), file_bytes("{}      ", ""));
  const SafetensorsFile file = SafetensorsFile::open(dir / "none.safetensors");
  EXPECT_TRUE(file.names().empty());
  EXPECT_TRUE(file.metadata().empty());
}

TEST(Safetensors, WriterRejectsBadInputAndLeavesTheOldFile) {
  TempDir dir;
  const fs::path path = dir / "w.safetensors";
  write_safetensors(path, {{"a", at::ones({2})}});
  const std::string before = read_bytes(path);
  EXPECT_THROW(write_safetensors(path, {{"a", at::ones({2})}, {"a", at::ones({1})}}),
               std::invalid_argument);
  EXPECT_THROW(write_safetensors(path, {{"__metadata__", at::ones({2})}}), std::invalid_argument);
  EXPECT_THROW(write_safetensors(path, {{"c", at::ones({2}, at::kComplexFloat)}}),
               std::invalid_argument);
  EXPECT_THROW(write_safetensors(path, {{"u", at::Tensor()}}), std::invalid_argument);
  EXPECT_THROW(write_safetensors(path, {{std::string("\xff"), at::ones({1})}}),
               std::invalid_argument);
  // A meta tensor has no data: copying it to the CPU fails after the temporary file was
  // created, which must be removed again.
  EXPECT_ANY_THROW(write_safetensors(
      path, {{"a", at::ones({2})}, {"m", at::empty({2}, at::TensorOptions().device(at::kMeta))}}));
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(files_in(dir.path()), std::vector<fs::path>{"w.safetensors"});
  expect_runtime_error([&] { write_safetensors(dir / "no" / "such.safetensors", {}); },
                       {"no/such.safetensors", "cannot create temporary file"});
}

// What the reference implementation accepts too: a header length that is not a
// multiple of 8, an empty tensor at the end offset of another, keys other than dtype,
// shape and data_offsets (ignored), "__metadata__": null.
TEST(Safetensors, AcceptsWhatTheReferenceAccepts) {
  TempDir dir;
  const std::string header =
      R"({"__metadata__":null,"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8],"extra":1},)"
      R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})";
  ASSERT_NE(header.size() % 8, 0u);
  const std::string data = std::string("\x01\x00\xff\xff\x00\x80\x34\x12", 8);
  write_bytes(dir / "ok.safetensors", file_bytes(header, data));
  const SafetensorsFile file = SafetensorsFile::open(dir / "ok.safetensors");
  EXPECT_TRUE(at::equal(file.tensor("a"), at::tensor(std::vector<int16_t>{1, -1, -32768, 0x1234})));
  EXPECT_EQ(file.tensor("e").numel(), 0);
  EXPECT_TRUE(file.metadata().empty());
}

TEST(Safetensors, OpenAndLookupErrorsNameTheFile) {
  TempDir dir;
  const fs::path missing = dir / "absent.safetensors";
  expect_runtime_error([&] { SafetensorsFile::open(missing); }, {missing.string(), "cannot open"});
  expect_runtime_error([&] { SafetensorsFile::open(dir.path()); },
                       {dir.path().string(), "not a regular file"});
  write_safetensors(dir / "one.safetensors", {{"x", at::ones({1})}});
  const SafetensorsFile file = SafetensorsFile::open(dir / "one.safetensors");
  EXPECT_FALSE(file.contains("y"));
  expect_runtime_error([&] { file.info("y"); }, {"one.safetensors", "no tensor named \"y\""});
  expect_runtime_error([&] { file.tensor("y"); }, {"one.safetensors", "no tensor named \"y\""});
}

TEST(Safetensors, BoolBytesOtherThanZeroOrOneAreRejectedOnRead) {
  TempDir dir;
  const std::string header = R"({"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
  write_bytes(dir / "bool.safetensors", file_bytes(header, std::string("\x01\x02\x00", 3)));
  const SafetensorsFile file = SafetensorsFile::open(dir / "bool.safetensors");
  expect_runtime_error([&] { file.tensor("b"); },
                       {"bool.safetensors", "tensor \"b\"", "BOOL element 1 holds byte 2"});
}

// ---- corrupted files: each must be rejected by open() with a specific message ----

struct CorruptCase {
  std::string name;   // also the file name: <name>.safetensors
  std::string bytes;  // the whole file
  std::string phrase;
};

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}

std::vector<CorruptCase> corrupt_cases() {
  const std::string f32x2 = entry("F32", "[2]", "[0,8]");
  const std::string eight(8, '\0');
  return {
      {"shorter_than_length", std::string("\x02\x00\x00", 3),
       "3 bytes, fewer than the 8-byte header length"},
      {"header_length_zero", le64(0) + "{}", "header length is 0"},
      {"header_over_100_mib", le64(100ull * 1024 * 1024 + 1) + "{}",
       "header length 104857601 exceeds the limit of 104857600 bytes (100 MiB)"},
      {"header_longer_than_file", le64(64) + R"({"a":{}})",
       "header length 64 is longer than the file, which has 8 bytes"},
      {"truncated_data", file_bytes(R"({"a":)" + entry("F32", "[4]", "[0,16]") + "}", eight),
       "tensor \"a\": data_offsets [0, 16] end beyond the data area of 8 bytes"},
      {"bad_json", file_bytes(R"({"a": {"dtype": "F32",)", ""), "header is not valid JSON"},
      {"invalid_utf8", file_bytes("{\"\xff\":{}}", ""), "header is not valid JSON"},
      {"not_an_object", file_bytes("[1, 2]", ""), "header is not a JSON object (got array)"},
      {"number_overflow", file_bytes(R"({"a":1e999})", ""),
       "header is not valid JSON: [json.exception.out_of_range.406] number overflow"},
      {"duplicate_name", file_bytes(R"({"a":)" + f32x2 + R"(,"a":)" + f32x2 + "}", eight),
       "header has the key \"a\" twice in one object"},
      {"entry_not_object", file_bytes(R"({"a":5})", ""),
       "tensor \"a\": entry is not a JSON object (got number)"},
      {"missing_dtype", file_bytes(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight),
       "tensor \"a\": missing key \"dtype\""},
      {"missing_shape", file_bytes(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight),
       "tensor \"a\": missing key \"shape\""},
      {"missing_data_offsets", file_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
       "tensor \"a\": missing key \"data_offsets\""},
      {"dtype_not_string",
       file_bytes(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", eight),
       "tensor \"a\": \"dtype\" is not a string (got number)"},
      {"unknown_dtype", file_bytes(R"({"a":)" + entry("F8_E4M3", "[8]", "[0,8]") + "}", eight),
       "tensor \"a\": unknown or unsupported dtype \"F8_E4M3\" (supported: BF16, F16, F32, F64, "
       "I64, I32, I16, "
       "I8, U8, BOOL)"},
      {"shape_not_array", file_bytes(R"({"a":)" + entry("F32", "\"2\"", "[0,8]") + "}", eight),
       "tensor \"a\": \"shape\" is not an array of integers (got string)"},
      {"shape_float", file_bytes(R"({"a":)" + entry("F32", "[2.0]", "[0,8]") + "}", eight),
       "tensor \"a\": \"shape\" is not an array of integers (found number)"},
      {"negative_shape", file_bytes(R"({"a":)" + entry("F32", "[2,-1]", "[0,8]") + "}", eight),
       "tensor \"a\": negative dimension -1 in \"shape\""},
      {"shape_overflow",
       file_bytes(R"({"a":)" + entry("F32", "[4294967296,4294967296]", "[0,8]") + "}", eight),
       "tensor \"a\": shape [4294967296, 4294967296] overflows 64-bit element counts"},
      {"byte_size_overflow",
       file_bytes(R"({"a":)" + entry("F64", "[4611686018427387904]", "[0,8]") + "}", eight),
       "tensor \"a\": shape [4611686018427387904] of F64 overflows 64-bit byte counts"},
      {"offsets_one_value", file_bytes(R"({"a":)" + entry("F32", "[2]", "[8]") + "}", eight),
       "tensor \"a\": \"data_offsets\" is not two non-negative integers (got an array of 1)"},
      {"offsets_negative", file_bytes(R"({"a":)" + entry("F32", "[2]", "[-8,0]") + "}", eight),
       "tensor \"a\": \"data_offsets\" is not two non-negative integers (got [-8, 0])"},
      {"offsets_begin_after_end",
       file_bytes(R"({"a":)" + entry("F32", "[0]", "[8,0]") + "}", eight),
       "tensor \"a\": data_offsets [8, 0] begin after they end"},
      {"offsets_beyond_data", file_bytes(R"({"a":)" + entry("F32", "[2]", "[8,16]") + "}", eight),
       "tensor \"a\": data_offsets [8, 16] end beyond the data area of 8 bytes"},
      {"offsets_huge",
       file_bytes(
           R"({"a":)" + entry("U8", "[1]", "[18446744073709551614,18446744073709551615]") + "}",
           eight),
       "end beyond the data area of 8 bytes"},
      {"size_mismatch", file_bytes(R"({"a":)" + entry("F32", "[3]", "[0,8]") + "}", eight),
       "tensor \"a\": size mismatch: data_offsets [0, 8] hold 8 bytes but shape [3] of F32 needs "
       "12"},
      {"overlap",
       file_bytes(R"({"a":)" + entry("F32", "[2]", "[0,8]") + R"(,"b":)" +
                      entry("F32", "[2]", "[4,12]") + "}",
                  std::string(12, '\0')),
       "tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" at [0, 8]"},
      {"same_range_twice", file_bytes(R"({"a":)" + f32x2 + R"(,"b":)" + f32x2 + "}", eight),
       "tensor \"b\": data_offsets [0, 8] overlap tensor \"a\" at [0, 8]"},
      {"gap",
       file_bytes(R"({"a":)" + entry("F32", "[2]", "[0,8]") + R"(,"b":)" +
                      entry("F32", "[2]", "[12,20]") + "}",
                  std::string(20, '\0')),
       "tensor \"b\": data_offsets [12, 20] leave a gap of 4 unused bytes after tensor \"a\""},
      {"trailing_bytes", file_bytes(R"({"a":)" + f32x2 + "}", std::string(13, '\0')),
       "5 trailing bytes after the last tensor"},
      {"metadata_not_object", file_bytes(R"({"__metadata__":[]})", ""),
       "\"__metadata__\" is not a JSON object (got array)"},
      {"metadata_not_string", file_bytes(R"({"__metadata__":{"step":3}})", ""),
       "\"__metadata__\" value of \"step\" is not a string (got number)"},
  };
}

class SafetensorsCorrupt : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(SafetensorsCorrupt, OpenThrowsNamingTheFileAndTheProblem) {
  const CorruptCase& c = GetParam();
  TempDir dir;
  const fs::path path = dir / (c.name + ".safetensors");
  write_bytes(path, c.bytes);
  expect_runtime_error([&] { SafetensorsFile::open(path); }, {path.string(), c.phrase});
  // The in-memory parser is the same: same message, with the given source name.
  expect_runtime_error([&] { SafetensorsFile::open_bytes("memory:" + c.name, c.bytes); },
                       {"memory:" + c.name, c.phrase});
}

INSTANTIATE_TEST_SUITE_P(Cases, SafetensorsCorrupt, ::testing::ValuesIn(corrupt_cases()),
                         [](const ::testing::TestParamInfo<CorruptCase>& info) {
                           return info.param.name;
                         });

// ---- checkpoint folders ----

// Two shards and an index as HF writes them: a, b in shard 1; c in shard 2.
void write_sharded(const fs::path& dir, const std::string& weight_map) {
  write_safetensors(dir / "model-00001-of-00002.safetensors",
                    {{"a", at::arange(4, at::kFloat)}, {"b", at::ones({2, 2}, at::kLong)}});
  write_safetensors(dir / "model-00002-of-00002.safetensors",
                    {{"c", at::full({3}, 2.5, at::kBFloat16)}});
  write_bytes(dir / "model.safetensors.index.json",
              R"({"metadata": {"total_size": 54}, "weight_map": )" + weight_map + "}");
}

const char* kGoodWeightMap =
    R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors"})";

TEST(SafetensorsCheckpoint, SingleFile) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors", {{"w", at::eye(3)}});
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(checkpoint.names(), std::vector<std::string>{"w"});
  EXPECT_TRUE(at::equal(checkpoint.tensor("w"), at::eye(3)));
  EXPECT_EQ(checkpoint.file_of("w"), (dir / "model.safetensors").string());
}

TEST(SafetensorsCheckpoint, ShardsListedByTheIndex) {
  TempDir dir;
  write_sharded(dir.path(), kGoodWeightMap);
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(checkpoint.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(at::equal(checkpoint.tensor("a"), at::arange(4, at::kFloat)));
  EXPECT_TRUE(at::equal(checkpoint.tensor("b"), at::ones({2, 2}, at::kLong)));
  EXPECT_TRUE(at::equal(checkpoint.tensor("c"), at::full({3}, 2.5, at::kBFloat16)));
  EXPECT_EQ(checkpoint.info("c").dtype, at::kBFloat16);
  EXPECT_EQ(checkpoint.file_of("c"), (dir / "model-00002-of-00002.safetensors").string());
  EXPECT_FALSE(checkpoint.contains("d"));
  expect_runtime_error([&] { checkpoint.tensor("d"); },
                       {dir.path().string(), "checkpoint has no tensor named \"d\""});
}

TEST(SafetensorsCheckpoint, IndexErrors) {
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // weight_map lists a file that does not exist
      {R"({"a": ")" + shard1 + R"(", "b": ")" + shard1 + R"(", "c": "model-00003.safetensors"})",
       "weight_map lists shard \"model-00003.safetensors\" (for tensor \"c\", ...), but"},
      // a listed tensor is not in its shard
      {R"({"a": ")" + shard1 + R"(", "b": ")" + shard1 + R"(", "c": ")" + shard2 + R"(", "d": ")" +
           shard2 + R"("})",
       "weight_map lists tensor \"d\" in \"" + shard2 + "\", but"},
      // a tensor sits in a different shard than listed
      {R"({"a": ")" + shard2 + R"(", "b": ")" + shard1 + R"(", "c": ")" + shard2 + R"("})",
       "weight_map lists tensor \"a\" in \"" + shard2 + "\", but"},
      // a shard holds a tensor the weight_map does not list
      {R"({"a": ")" + shard1 + R"(", "c": ")" + shard2 + R"("})",
       "holds tensor \"b\", which the weight_map does not list"},
      {R"({"a": "../x.safetensors"})", "shards must be plain file names"},
      {R"({"a": 3})", "weight_map entry \"a\" is not a file name string"},
      {R"([])", "\"weight_map\" is not a JSON object (got array)"},
  };
  for (const auto& [weight_map, phrase] : cases) {
    SCOPED_TRACE(weight_map);
    TempDir dir;
    write_sharded(dir.path(), weight_map);
    expect_runtime_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                         {"model.safetensors.index.json", phrase});
  }
}

TEST(SafetensorsCheckpoint, TensorInTwoShards) {
  TempDir dir;
  write_sharded(dir.path(), kGoodWeightMap);
  write_safetensors(dir / "model-00002-of-00002.safetensors",
                    {{"a", at::arange(4, at::kFloat)}, {"c", at::full({3}, 2.5, at::kBFloat16)}});
  expect_runtime_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {"model.safetensors.index.json", "tensor \"a\" is in two shards",
                        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
}

TEST(SafetensorsCheckpoint, FolderErrors) {
  TempDir dir;
  expect_runtime_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {dir.path().string(), "neither model.safetensors nor"});
  expect_runtime_error([&] { SafetensorsCheckpoint::open(dir / "absent"); },
                       {"absent", "no such directory"});
  write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  expect_runtime_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {"model.safetensors.index.json", "missing key \"weight_map\""});
  write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": )");
  expect_runtime_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {"model.safetensors.index.json", "not valid JSON"});
  write_safetensors(dir / "model.safetensors", {});
  expect_runtime_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {dir.path().string(), "ambiguous"});
  // A corrupt shard reports the shard's own problem.
  fs::remove(dir / "model.safetensors.index.json");
  write_bytes(dir / "model.safetensors", "short");
  expect_runtime_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                       {(dir / "model.safetensors").string(), "fewer than the 8-byte"});
}

TEST(SafetensorsCheckpoint, CheckTensorNames) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors", {{"model.norm.weight", at::ones({2})},
                                                {"model.embed_tokens.weight", at::ones({4, 2})}});
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  const std::set<std::string> optional{"lm_head.weight"};
  // lm_head.weight absent but optional.
  EXPECT_NO_THROW(check_tensor_names(
      checkpoint, {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}, optional));
  EXPECT_NO_THROW(
      check_tensor_names(checkpoint, {"model.embed_tokens.weight", "model.norm.weight"}, optional));
  expect_runtime_error(
      [&] {
        check_tensor_names(checkpoint,
                           {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"},
                           optional);
      },
      {dir.path().string(), "missing or unexpected tensor names",
       "missing 1 (model.layers.0.mlp.up_proj.weight)", "unexpected 1 (model.norm.weight)"});
  expect_runtime_error([&] { check_tensor_names(checkpoint, {"model.embed_tokens.weight"}, {}); },
                       {"unexpected 1 (model.norm.weight)"});
}

TEST(SafetensorsCheckpoint, CheckTensorNamesListsAtMostTwentyNames) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors", {});
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  std::vector<std::string> expected;
  for (int i = 0; i < 25; ++i) expected.push_back("w" + std::to_string(100 + i));
  expect_runtime_error([&] { check_tensor_names(checkpoint, expected, {}); },
                       {"missing 25 (w100, w101,", "w119, ... and 5 more)"});
}

// ---- fuzz corpus: valid_* must parse, bad_* must be rejected, nothing may crash ----

TEST(SafetensorsFuzzCorpus, EveryFileParsesOrThrowsRuntimeError) {
  const fs::path corpus = fs::path(SB_SOURCE_DIR) / "tests/fuzz/corpus/safetensors";
  ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
  int valid = 0;
  int bad = 0;
  for (const auto& item : fs::directory_iterator(corpus)) {
    const std::string name = item.path().filename().string();
    SCOPED_TRACE(name);
    bool parsed = false;
    try {
      const SafetensorsFile file = SafetensorsFile::open(item.path());
      for (const std::string& tensor_name : file.names()) file.tensor(tensor_name);
      parsed = true;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(item.path().string()), std::string::npos) << e.what();
    }
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(parsed);
      ++valid;
    } else if (name.rfind("bad_", 0) == 0) {
      EXPECT_FALSE(parsed);
      ++bad;
    }
  }
  EXPECT_GE(valid, 3);
  EXPECT_GE(bad, 10);
}

}  // namespace
}  // namespace sb
