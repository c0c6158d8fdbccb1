#include "harness/common/file_checksums.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/errors.h"

namespace sb {

std::string sha256_of_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file.string() + " to checksum it: " + std::strerror(errno));
  const std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
  }
  std::vector<char> buffer(size_t{4} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    if (n > 0 && EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(n)) != 1) {
      throw std::runtime_error("OpenSSL failed while checksumming " + file.string());
    }
  }
  if (in.bad()) throw std::runtime_error("cannot read " + file.string() + " to checksum it");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context.get(), digest, &length) != 1) {
    throw std::runtime_error("OpenSSL failed while checksumming " + file.string());
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    char byte[3];
    std::snprintf(byte, sizeof(byte), "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

std::string checksum_list_text(const ChecksumList& list) {
  std::string text;
  for (const auto& [path, digest] : list) text += digest + "  " + path + "\n";
  return text;
}

ChecksumList parse_checksum_list(const std::string& text, const std::string& file) {
  ChecksumList list;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.empty()) continue;
    const bool well_formed = line.size() > 66 && line.compare(64, 2, "  ") == 0 &&
                             line.find_first_not_of("0123456789abcdef") >= 64;
    if (!well_formed) {
      throw ConfigError(file + ":" + std::to_string(number), "", "is not a \"<sha256>  <file>\" line",
                        "the checkpoint's checksum list is damaged: delete the checkpoint folder to resume from "
                        "an earlier one, or rerun with --force to start afresh");
    }
    list[line.substr(66)] = line.substr(0, 64);
  }
  return list;
}

std::string first_checksum_mismatch(const std::filesystem::path& dir, const ChecksumList& list) {
  for (const auto& [path, digest] : list) {
    const std::filesystem::path file = dir / path;
    std::error_code error;
    if (!std::filesystem::is_regular_file(file, error)) return file.string() + " is missing";
    if (sha256_of_file(file) != digest) return file.string() + " differs from the SHA-256 it was written with";
  }
  return "";
}

}  // namespace sb
