#include "models/tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <optional>
#include <stdexcept>

#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

// Unicode's White_Space property (stable since Unicode 6.3), which is Oniguruma's \s.
constexpr std::string_view kWhiteSpaceMembers =
    "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

// Escaped letters whose meaning is the same in Oniguruma (Ruby syntax, UTF-8) and in
// PCRE2 with UTF + UCP: \d is Nd in both, \p{..} \P{..} name the same properties and
// scripts, the rest are characters or anchors.
bool escape_means_the_same(char c) {
  switch (c) {
    case 'd':
    case 'D':
    case 'p':
    case 'P':
    case 'r':
    case 'n':
    case 't':
    case 'f':
    case 'e':
    case 'a':
    case 'x':
    case 'A':
    case 'z':
    case 'Z':
      return true;
    default:
      return false;
  }
}

[[noreturn]] void reject_construct(std::string_view pattern, size_t pos, const std::string& what) {
  throw std::invalid_argument("regex \"" + std::string(pattern) + "\": " + what + " at offset " +
                              std::to_string(pos) +
                              " means different things in Oniguruma (HF tokenizers) and PCRE2; "
                              "not supported");
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

std::string onig_pattern_to_pcre2(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 == pattern.size()) {
        throw std::invalid_argument("regex \"" + std::string(pattern) + "\" ends with a backslash");
      }
      const char e = pattern[++i];
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpaceMembers;
        } else {
          out += '[';
          out += kWhiteSpaceMembers;
          out += ']';
        }
      } else if (e == 'S') {
        if (in_class) reject_construct(pattern, i - 1, "\\S inside a character class");
        out += "[^";
        out += kWhiteSpaceMembers;
        out += ']';
      } else if (std::isalpha(static_cast<unsigned char>(e)) && !escape_means_the_same(e)) {
        reject_construct(pattern, i - 1, std::string("\\") + e);
      } else {
        // Escaped punctuation, digits (back-references, octal) and the escapes above
        // pass through; \p{L} continues with ordinary characters.
        out += '\\';
        out += e;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') {
        in_class = false;
      } else if (c == '[') {
        reject_construct(pattern, i, "a '[' inside a character class (POSIX or nested class)");
      } else if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
        reject_construct(pattern, i, "&& inside a character class");
      }
      out += c;
      continue;
    }
    out += c;
    if (c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal in both engines, not the class's end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    }
  }
  return out;
}

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(std::string_view onig_pattern) : onig_pattern_(onig_pattern) {
  const std::string translated = onig_pattern_to_pcre2(onig_pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw std::invalid_argument("regex \"" + onig_pattern_ + "\" does not compile (PCRE2 form \"" +
                                translated + "\", offset " + std::to_string(error_offset) +
                                "): " + reinterpret_cast<const char*>(message));
  }
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  // Without JIT support (or on failure) pcre2_match() interprets the same code.
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  compiled_ = std::move(compiled);
}

bool RegexSplitter::jit_compiled() const { return compiled_->jit; }

void RegexSplitter::split_isolated(std::string_view text,
                                   std::vector<std::string_view>& pieces) const {
  if (text.empty()) return;
  pcre2_code* code = compiled_->code;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match_data(
      pcre2_match_data_create_from_pattern(code, nullptr));
  if (!match_data) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());

  size_t search_from = 0;  // where the next search starts
  size_t piece_start = 0;  // start of the text not yet emitted
  std::optional<size_t> last_match_end;
  while (search_from <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK,
                         match_data.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The JIT's fixed stack ran out on a pathological input; the interpreter keeps
      // its backtracking state on the heap and finds the same match.
      rc = pcre2_match(code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       match_data.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw std::runtime_error("regex \"" + onig_pattern_ + "\" failed at byte " +
                               std::to_string(search_from) + ": " +
                               reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (start == end && last_match_end == end) {
      if (search_from == text.size()) break;
      search_from += utf8::sequence_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    search_from = end;
    last_match_end = end;
    if (start > piece_start) pieces.push_back(text.substr(piece_start, start - piece_start));
    if (end > start) pieces.push_back(text.substr(start, end - start));
    piece_start = end;
  }
  if (piece_start < text.size()) pieces.push_back(text.substr(piece_start));
}

}  // namespace sb
