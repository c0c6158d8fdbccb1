#include "models/safetensors/safetensors_file.h"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

// The data area is little-endian; copying it byte for byte into ATen tensors is only
// right on a little-endian host (every machine this project targets).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors reader assumes a little-endian host");

namespace sb {
namespace {

// 100 MiB. The reference implementation's limit is 100,000,000 bytes; real headers are
// tens of KB (one ~100-byte entry per tensor), so the difference never matters.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

struct DtypeEntry {
  const char* name;
  at::ScalarType dtype;
};

constexpr DtypeEntry kDtypes[] = {
    {"BF16", at::kBFloat16}, {"F16", at::kHalf},  {"F32", at::kFloat}, {"F64", at::kDouble},
    {"I64", at::kLong},      {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},       {"BOOL", at::kBool},
};

// JSON-quoted, with invalid UTF-8 replaced (names passed to info() are unchecked).
std::string json_quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string range_text(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// nlohmann's parse errors quote the input they stopped at, which may be any bytes:
// keep printable ASCII, write the rest as \xNN.
std::string printable(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// Parses `text` as JSON, rejecting duplicate object keys at any depth: nlohmann keeps
// one of two equal keys silently, which would hide a second entry for a tensor.
nlohmann::json parse_json_without_duplicates(const char* begin, const char* end,
                                             const std::string& where) {
  std::vector<std::set<std::string>> keys_of_open_objects;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::object_start) {
      keys_of_open_objects.emplace_back();
    } else if (event == nlohmann::json::parse_event_t::object_end) {
      keys_of_open_objects.pop_back();
    } else if (event == nlohmann::json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys_of_open_objects.back().insert(key).second) {
        throw std::runtime_error(where + ": header has the key " + json_quoted(key) +
                                 " twice in one object");
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(begin, end, callback);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for numbers beyond double (1e999).
    throw std::runtime_error(where + ": header is not valid JSON: " + printable(e.what()));
  }
}

// "an array of 3", "[4, -1]", "[string, 0]", "object": what a malformed data_offsets
// holds, without dumping arbitrary (possibly deeply nested) JSON.
std::string describe_offsets(const nlohmann::json& offsets) {
  if (!offsets.is_array()) return offsets.type_name();
  if (offsets.size() != 2) return "an array of " + std::to_string(offsets.size());
  std::string out = "[";
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& v = offsets[i];
    out += i ? ", " : "";
    out += v.is_number_integer() ? v.dump() : std::string(v.type_name());
  }
  return out + "]";
}

}  // namespace

bool safetensors_dtype_from_name(const std::string& name, at::ScalarType* dtype) {
  for (const DtypeEntry& entry : kDtypes) {
    if (name == entry.name) {
      *dtype = entry.dtype;
      return true;
    }
  }
  return false;
}

std::string safetensors_dtype_name(at::ScalarType dtype) {
  for (const DtypeEntry& entry : kDtypes) {
    if (dtype == entry.dtype) return entry.name;
  }
  throw std::invalid_argument(std::string("safetensors: dtype ") + c10::toString(dtype) +
                              " is not supported (supported: " + safetensors_supported_dtypes() +
                              ")");
}

std::string safetensors_supported_dtypes() {
  std::string out;
  for (const DtypeEntry& entry : kDtypes)
    out += (out.empty() ? "" : ", ") + std::string(entry.name);
  return out;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.source_ = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error(file.source_ + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(file.source_ + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(file.source_ + ": not a regular file");
  }
  file.size_ = static_cast<size_t>(st.st_size);
  // mmap rejects length 0; parse_header() reports short files, so map only when there
  // is something to map.
  if (file.size_ > 0) {
    void* mapping = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(file.source_ + ": cannot mmap: " + std::strerror(err));
    }
    file.mapping_ = mapping;
  }
  ::close(fd);  // the mapping keeps the file's pages reachable
  file.parse_header();
  return file;
}

SafetensorsFile SafetensorsFile::open_bytes(const std::string& source_name,
                                            const std::string& bytes) {
  SafetensorsFile file;
  file.source_ = source_name;
  file.owned_.assign(bytes.begin(), bytes.end());
  file.size_ = file.owned_.size();
  file.parse_header();
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    release();
    source_ = std::move(other.source_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owned_ = std::move(other.owned_);
    data_start_ = std::exchange(other.data_start_, 0);
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { release(); }

void SafetensorsFile::release() noexcept {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
  mapping_ = nullptr;
}

const uint8_t* SafetensorsFile::bytes() const {
  return mapping_ != nullptr ? static_cast<const uint8_t*>(mapping_) : owned_.data();
}

void SafetensorsFile::parse_header() {
  const std::string& where = source_;
  if (size_ < 8) {
    throw std::runtime_error(where + ": file has " + std::to_string(size_) +
                             " bytes, fewer than the 8-byte header length (truncated or not a "
                             "safetensors file)");
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes()[i];
  if (header_bytes == 0) {
    throw std::runtime_error(where + ": header length is 0 (a header is at least \"{}\")");
  }
  if (header_bytes > kMaxHeaderBytes) {
    throw std::runtime_error(where + ": header length " + std::to_string(header_bytes) +
                             " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                             " bytes (100 MiB)");
  }
  if (header_bytes > size_ - 8) {
    throw std::runtime_error(where + ": header length " + std::to_string(header_bytes) +
                             " is longer than the file, which has " + std::to_string(size_ - 8) +
                             " bytes after the 8-byte length (truncated?)");
  }
  data_start_ = 8 + header_bytes;
  const uint64_t data_bytes = size_ - data_start_;
  const char* text = reinterpret_cast<const char*>(bytes() + 8);
  const nlohmann::json header = parse_json_without_duplicates(text, text + header_bytes, where);
  if (!header.is_object()) {
    throw std::runtime_error(where + ": header is not a JSON object (got " +
                             std::string(header.type_name()) + ")");
  }

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      // null means "no metadata" to the reference implementation too.
      if (entry.is_null()) continue;
      if (!entry.is_object()) {
        throw std::runtime_error(where + ": \"__metadata__\" is not a JSON object (got " +
                                 std::string(entry.type_name()) + ")");
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          throw std::runtime_error(where + ": \"__metadata__\" value of " + json_quoted(key) +
                                   " is not a string (got " + value.type_name() + ")");
        }
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string at_tensor = where + ": tensor " + json_quoted(name) + ": ";
    if (!entry.is_object()) {
      throw std::runtime_error(at_tensor + "entry is not a JSON object (got " +
                               std::string(entry.type_name()) + ")");
    }
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) throw std::runtime_error(at_tensor + "missing key \"" + key + "\"");
    }

    SafetensorsTensorInfo info;
    info.name = name;
    const nlohmann::json& dtype = entry.at("dtype");
    if (!dtype.is_string()) {
      throw std::runtime_error(at_tensor + "\"dtype\" is not a string (got " +
                               std::string(dtype.type_name()) + ")");
    }
    info.dtype_name = dtype.get<std::string>();
    if (!safetensors_dtype_from_name(info.dtype_name, &info.dtype)) {
      throw std::runtime_error(at_tensor + "unknown or unsupported dtype " +
                               json_quoted(info.dtype_name) +
                               " (supported: " + safetensors_supported_dtypes() + ")");
    }

    const nlohmann::json& shape = entry.at("shape");
    if (!shape.is_array()) {
      throw std::runtime_error(at_tensor + "\"shape\" is not an array of integers (got " +
                               std::string(shape.type_name()) + ")");
    }
    for (const nlohmann::json& dim : shape) {
      if (dim.is_number_unsigned()) {
        const uint64_t value = dim.get<uint64_t>();
        if (value > static_cast<uint64_t>(INT64_MAX)) {
          throw std::runtime_error(at_tensor + "dimension " + std::to_string(value) +
                                   " in \"shape\" is too large");
        }
        info.shape.push_back(static_cast<int64_t>(value));
      } else if (dim.is_number_integer()) {
        const int64_t value = dim.get<int64_t>();
        if (value < 0) {
          throw std::runtime_error(at_tensor + "negative dimension " + std::to_string(value) +
                                   " in \"shape\"");
        }
        info.shape.push_back(value);
      } else {
        // Type names only: dumping a value could recurse as deep as the input nests.
        throw std::runtime_error(at_tensor + "\"shape\" is not an array of integers (found " +
                                 std::string(dim.type_name()) + ")");
      }
    }

    const nlohmann::json& offsets = entry.at("data_offsets");
    const auto non_negative_integer = [](const nlohmann::json& v) {
      return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    };
    if (!offsets.is_array() || offsets.size() != 2 || !non_negative_integer(offsets[0]) ||
        !non_negative_integer(offsets[1])) {
      throw std::runtime_error(at_tensor +
                               "\"data_offsets\" is not two non-negative integers (got " +
                               describe_offsets(offsets) + ")");
    }
    info.begin = offsets[0].get<uint64_t>();
    info.end = offsets[1].get<uint64_t>();

    // Element count: zero when any dimension is zero, but the product of the other
    // dimensions must still fit int64_t, as ATen computes it when allocating.
    uint64_t nonzero_product = 1;
    bool has_zero = false;
    for (int64_t dim : info.shape) {
      if (dim == 0) {
        has_zero = true;
      } else if (__builtin_mul_overflow(nonzero_product, static_cast<uint64_t>(dim),
                                        &nonzero_product) ||
                 nonzero_product > static_cast<uint64_t>(INT64_MAX)) {
        throw std::runtime_error(at_tensor + "shape " + shape_text(info.shape) +
                                 " overflows 64-bit element counts");
      }
    }
    info.numel = has_zero ? 0 : static_cast<int64_t>(nonzero_product);
    uint64_t expected_bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(info.numel),
                               static_cast<uint64_t>(c10::elementSize(info.dtype)),
                               &expected_bytes)) {
      throw std::runtime_error(at_tensor + "shape " + shape_text(info.shape) + " of " +
                               info.dtype_name + " overflows 64-bit byte counts");
    }

    if (info.begin > info.end) {
      throw std::runtime_error(at_tensor + "data_offsets " + range_text(info.begin, info.end) +
                               " begin after they end");
    }
    if (info.end > data_bytes) {
      throw std::runtime_error(at_tensor + "data_offsets " + range_text(info.begin, info.end) +
                               " end beyond the data area of " + std::to_string(data_bytes) +
                               " bytes (truncated file?)");
    }
    if (info.end - info.begin != expected_bytes) {
      throw std::runtime_error(
          at_tensor + "size mismatch: data_offsets " + range_text(info.begin, info.end) + " hold " +
          std::to_string(info.end - info.begin) + " bytes but shape " + shape_text(info.shape) +
          " of " + info.dtype_name + " needs " + std::to_string(expected_bytes));
    }
    tensors_.emplace(name, std::move(info));
  }

  // The format requires the ranges, sorted by offset, to tile the data area exactly.
  std::vector<const SafetensorsTensorInfo*> by_offset;
  for (const auto& [name, info] : tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsTensorInfo* a, const SafetensorsTensorInfo* b) {
              return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
            });
  uint64_t covered = 0;
  const SafetensorsTensorInfo* previous = nullptr;
  for (const SafetensorsTensorInfo* info : by_offset) {
    const std::string range = range_text(info->begin, info->end);
    if (info->begin < covered) {
      throw std::runtime_error(where + ": tensor " + json_quoted(info->name) + ": data_offsets " +
                               range + " overlap tensor " + json_quoted(previous->name) + " at " +
                               range_text(previous->begin, previous->end));
    }
    if (info->begin > covered) {
      throw std::runtime_error(
          where + ": tensor " + json_quoted(info->name) + ": data_offsets " + range +
          " leave a gap of " + std::to_string(info->begin - covered) + " unused bytes after " +
          (previous ? "tensor " + json_quoted(previous->name) : std::string("the header")) +
          " (tensors must tile the data area)");
    }
    covered = info->end;
    previous = info;
  }
  if (covered != data_bytes) {
    throw std::runtime_error(where + ": " + std::to_string(data_bytes - covered) +
                             " trailing bytes after the last tensor (the data area has " +
                             std::to_string(data_bytes) + " bytes, the tensors cover " +
                             std::to_string(covered) + ")");
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const { return tensors_.count(name) > 0; }

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw std::runtime_error(source_ + ": no tensor named " + json_quoted(name));
  }
  return it->second;
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsTensorInfo& meta = info(name);
  const uint8_t* src = bytes() + data_start_ + meta.begin;
  const size_t nbytes = static_cast<size_t>(meta.end - meta.begin);
  if (meta.dtype == at::kBool) {
    // ATen assumes bool bytes are 0 or 1; other values make comparisons and sums wrong.
    for (size_t i = 0; i < nbytes; ++i) {
      if (src[i] > 1) {
        throw std::runtime_error(source_ + ": tensor " + json_quoted(name) + ": BOOL element " +
                                 std::to_string(i) + " holds byte " + std::to_string(src[i]) +
                                 " (must be 0 or 1)");
      }
    }
  }
  at::Tensor out = at::empty(meta.shape, at::TensorOptions().dtype(meta.dtype));
  if (nbytes > 0) std::memcpy(out.data_ptr(), src, nbytes);
  return out;
}

}  // namespace sb
