#include "harness/eval/longbench/jieba_hmm.h"

#include <cctype>
#include <cstdlib>
#include <stdexcept>

#include "harness/common/atomic_file.h"
#include "harness/eval/longbench/python_text.h"

namespace sb {
namespace {

// finalseg's MIN_FLOAT: the log probability of an unseen emission or transition.
constexpr double kMinFloat = -3.14e100;

// A value of the literal files: a number or a dict with string keys.
struct PyLiteral {
  bool is_dict = false;
  double number = 0;
  std::vector<std::pair<std::u32string, PyLiteral>> items;
};

// Reads `P=<literal>` from one of finalseg's prob_*.py files.
class PyLiteralReader {
 public:
  PyLiteralReader(std::string text, std::string file) : text_(std::move(text)), file_(std::move(file)) {}

  PyLiteral read_assignment_of_p() {
    size_t at = 0;
    while (true) {
      at = text_.find("P=", at);
      if (at == std::string::npos) fail("no `P=` assignment");
      if (at == 0 || text_[at - 1] == '\n') break;
      at += 2;
    }
    pos_ = at + 2;
    PyLiteral value = read_value();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the literal");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) line += text_[i] == '\n';
    throw std::runtime_error(file_ + ":" + std::to_string(line) + ": " + problem +
                             " (expected jieba 0.42.1's finalseg table format)");
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  void expect(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  PyLiteral read_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of file");
    if (text_[pos_] == '{') return read_dict();
    return read_number();
  }

  PyLiteral read_dict() {
    expect('{');
    PyLiteral dict;
    dict.is_dict = true;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return dict;
    }
    while (true) {
      std::u32string key = read_string();
      expect(':');
      dict.items.emplace_back(std::move(key), read_value());
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == '}') {
          ++pos_;
          return dict;
        }
        continue;
      }
      expect('}');
      return dict;
    }
  }

  char32_t read_hex(size_t digits) {
    if (pos_ + digits > text_.size()) fail("truncated escape");
    const std::string hex = text_.substr(pos_, digits);
    char* end = nullptr;
    const unsigned long value = std::strtoul(hex.c_str(), &end, 16);
    if (end != hex.c_str() + digits) fail("bad escape \\" + hex);
    pos_ += digits;
    return static_cast<char32_t>(value);
  }

  std::u32string read_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a string key");
    const char quote = text_[pos_++];
    std::string raw;  // UTF-8 of the characters, escapes resolved
    std::u32string out;
    auto flush_raw = [&]() {
      out += utf8_to_u32(raw, file_);
      raw.clear();
    };
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        raw.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      flush_raw();
      switch (e) {
        case 'u': out.push_back(read_hex(4)); break;
        case 'U': out.push_back(read_hex(8)); break;
        case 'x': out.push_back(read_hex(2)); break;
        case 'n': out.push_back(U'\n'); break;
        case 't': out.push_back(U'\t'); break;
        case 'r': out.push_back(U'\r'); break;
        case '\\': case '\'': case '"': out.push_back(static_cast<char32_t>(e)); break;
        default: fail(std::string("unsupported escape \\") + e);
      }
    }
    flush_raw();
    return out;
  }

  PyLiteral read_number() {
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '-' || text_[pos_] == '+' || text_[pos_] == '.' ||
                                   text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
    }
    const std::string token = text_.substr(start, pos_ - start);
    char* end = nullptr;
    PyLiteral value;
    value.number = std::strtod(token.c_str(), &end);
    if (token.empty() || end != token.c_str() + token.size()) fail("expected a number");
    return value;
  }

  std::string text_, file_;
  size_t pos_ = 0;
};

int state_index(const std::u32string& name, const std::string& file) {
  static const std::u32string kNames[] = {U"B", U"E", U"M", U"S"};
  for (int i = 0; i < 4; ++i) {
    if (name == kNames[i]) return i;
  }
  throw std::runtime_error(file + ": unknown HMM state \"" + u32_to_utf8(name) + "\"");
}

PyLiteral read_table(const std::filesystem::path& dir, const std::string& name) {
  const std::filesystem::path path = dir / name;
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error(path.string() + " is missing (jieba's finalseg tables)");
  }
  PyLiteral value = PyLiteralReader(read_file(path), path.string()).read_assignment_of_p();
  if (!value.is_dict) throw std::runtime_error(path.string() + ": P is not a dict");
  return value;
}

bool is_han(char32_t c) { return c >= 0x4E00 && c <= 0x9FD5; }
bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Length of the match of ([a-zA-Z0-9]+(?:\.\d+)?%?) at text[i], 0 when none.
size_t skip_pattern_match(const std::u32string& text, size_t i) {
  size_t j = i;
  while (j < text.size() && is_ascii_alnum(text[j])) ++j;
  if (j == i) return 0;
  if (j + 1 < text.size() && text[j] == U'.' && is_python_decimal(text[j + 1])) {
    j += 2;
    while (j < text.size() && is_python_decimal(text[j])) ++j;
  }
  if (j < text.size() && text[j] == U'%') ++j;
  return j - i;
}

}  // namespace

JiebaHmm JiebaHmm::load(const std::filesystem::path& finalseg_dir) {
  JiebaHmm hmm;
  const std::string start_file = (finalseg_dir / "prob_start.py").string();
  const std::string trans_file = (finalseg_dir / "prob_trans.py").string();
  const std::string emit_file = (finalseg_dir / "prob_emit.py").string();
  hmm.start_.fill(kMinFloat);
  for (auto& row : hmm.trans_) row.fill(kMinFloat);
  for (const auto& [state, p] : read_table(finalseg_dir, "prob_start.py").items) {
    if (p.is_dict) throw std::runtime_error(start_file + ": expected numbers");
    hmm.start_[state_index(state, start_file)] = p.number;
  }
  for (const auto& [from, row] : read_table(finalseg_dir, "prob_trans.py").items) {
    if (!row.is_dict) throw std::runtime_error(trans_file + ": expected a dict per state");
    for (const auto& [to, p] : row.items) {
      hmm.trans_[state_index(from, trans_file)][state_index(to, trans_file)] = p.number;
    }
  }
  for (const auto& [state, row] : read_table(finalseg_dir, "prob_emit.py").items) {
    if (!row.is_dict) throw std::runtime_error(emit_file + ": expected a dict per state");
    auto& emit = hmm.emit_[state_index(state, emit_file)];
    for (const auto& [ch, p] : row.items) {
      if (ch.size() != 1) throw std::runtime_error(emit_file + ": emission keys must be one character");
      emit[ch[0]] = p.number;
    }
  }
  return hmm;
}

std::vector<std::u32string> JiebaHmm::cut_han(const std::u32string& text) const {
  enum { B = 0, E = 1, M = 2, S = 3 };
  // finalseg's PrevStatus: the states each state may follow.
  static constexpr int kPrev[4][2] = {{E, S}, {B, M}, {M, B}, {S, E}};
  const size_t n = text.size();
  auto emission = [&](int state, char32_t c) {
    const auto it = emit_[state].find(c);
    return it == emit_[state].end() ? kMinFloat : it->second;
  };
  std::vector<std::array<double, 4>> v(n);
  std::vector<std::array<int, 4>> back(n);
  for (int y = 0; y < kStates; ++y) v[0][y] = start_[y] + emission(y, text[0]);
  for (size_t t = 1; t < n; ++t) {
    for (int y = 0; y < kStates; ++y) {
      const double em = emission(y, text[t]);
      // Python: max((V[t-1][y0] + trans[y0][y] + em, y0) for y0 in PrevStatus[y]);
      // equal probabilities go to the alphabetically larger state.
      double best = 0;
      int best_state = -1;
      for (int y0 : kPrev[y]) {
        const double p = v[t - 1][y0] + trans_[y0][y] + em;
        if (best_state < 0 || p > best || (p == best && y0 > best_state)) {
          best = p;
          best_state = y0;
        }
      }
      v[t][y] = best;
      back[t][y] = best_state;
    }
  }
  int state = (v[n - 1][S] > v[n - 1][E] || v[n - 1][S] == v[n - 1][E]) ? S : E;
  std::vector<int> path(n);
  for (size_t t = n; t-- > 0;) {
    path[t] = state;
    if (t > 0) state = back[t][state];
  }
  std::vector<std::u32string> words;
  size_t begin = 0, next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (path[i] == B) {
      begin = i;
    } else if (path[i] == E) {
      words.push_back(text.substr(begin, i + 1 - begin));
      next = i + 1;
    } else if (path[i] == S) {
      words.push_back(text.substr(i, 1));
      next = i + 1;
    }
  }
  if (next < n) words.push_back(text.substr(next));
  return words;
}

std::vector<std::u32string> JiebaHmm::cut(const std::u32string& text) const {
  std::vector<std::u32string> words;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    if (is_han(text[i])) {
      while (j < text.size() && is_han(text[j])) ++j;
      for (auto& w : cut_han(text.substr(i, j - i))) words.push_back(std::move(w));
      i = j;
      continue;
    }
    while (j < text.size() && !is_han(text[j])) ++j;
    // A non-Han block: matches of the skip pattern and the text between them, each kept.
    const std::u32string block = text.substr(i, j - i);
    size_t k = 0, gap_start = 0;
    while (k < block.size()) {
      const size_t len = skip_pattern_match(block, k);
      if (len == 0) {
        ++k;
        continue;
      }
      if (k > gap_start) words.push_back(block.substr(gap_start, k - gap_start));
      words.push_back(block.substr(k, len));
      k += len;
      gap_start = k;
    }
    if (block.size() > gap_start) words.push_back(block.substr(gap_start));
    i = j;
  }
  return words;
}

}  // namespace sb
