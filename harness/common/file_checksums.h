#pragma once
// SHA-256 checksums of a folder's files, in the format of coreutils' sha256sum
// ("<64 hex digits>  <path relative to the folder>" per line), so that a user can check
// a checkpoint by hand: cd <checkpoint> && sha256sum -c checksums.sha256.

#include <filesystem>
#include <map>
#include <string>

namespace sb {

// relative path -> lowercase hex digest
using ChecksumList = std::map<std::string, std::string>;

// Streams the file through OpenSSL's SHA-256. Throws std::runtime_error naming the file.
std::string sha256_of_file(const std::filesystem::path& file);

std::string checksum_list_text(const ChecksumList& list);
// ConfigError naming the file and line when a line is not "<hex>  <path>".
ChecksumList parse_checksum_list(const std::string& text, const std::string& file);

// Checks every listed file of `dir` against the list; returns a description of the first
// that is missing or differs ("model-00001-of-00002.safetensors: its SHA-256 differs ..."),
// empty when all match.
std::string first_checksum_mismatch(const std::filesystem::path& dir, const ChecksumList& list);

}  // namespace sb
