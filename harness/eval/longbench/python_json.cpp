#include "harness/eval/longbench/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

// ensure_ascii: every code point from U+007F on as a backslash-u escape of four lowercase
// hex digits ("é" -> \u00e9; a surrogate pair above U+FFFF), as Python's json.dumps does
// by default.
void append_python_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (ensure_ascii && c == 0x7F) {  // outside " " .. "~": escaped too
      out += "\\u007f";
      ++i;
      continue;
    }
    if (ensure_ascii && c >= 0x80) {
      const char32_t cp = utf8::decode_next(s, i);
      char buf[16];
      if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += buf;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void append_float(std::string& out, double x) {
  if (std::isnan(x)) {
    out += "NaN";
  } else if (std::isinf(x)) {
    out += x > 0 ? "Infinity" : "-Infinity";
  } else {
    out += python_float_repr(x);
  }
}

void dump(std::string& out, const nlohmann::ordered_json& v, int indent, int level, bool ensure_ascii) {
  using value_t = nlohmann::ordered_json::value_t;
  const bool pretty = indent >= 0;
  auto newline = [&](int lvl) {
    out.push_back('\n');
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.type()) {
    case value_t::null: out += "null"; return;
    case value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case value_t::number_integer: out += std::to_string(v.get<int64_t>()); return;
    case value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); return;
    case value_t::number_float: append_float(out, v.get<double>()); return;
    case value_t::string: append_python_string(out, v.get_ref<const std::string&>(), ensure_ascii); return;
    case value_t::array: {
      if (v.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(level + 1);
        dump(out, item, indent, level + 1, ensure_ascii);
      }
      if (pretty) newline(level);
      out.push_back(']');
      return;
    }
    case value_t::object: {
      if (v.empty()) {
        out += "{}";
        return;
      }
      out.push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(level + 1);
        append_python_string(out, it.key(), ensure_ascii);
        out += ": ";
        dump(out, it.value(), indent, level + 1, ensure_ascii);
      }
      if (pretty) newline(level);
      out.push_back('}');
      return;
    }
    case value_t::binary:
    case value_t::discarded:
      break;
  }
  throw std::invalid_argument("python_json_dumps: value of unsupported JSON type");
}

}  // namespace

double python_round(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  // glibc prints the exact binary value rounded to nearest, ties to even (the default
  // rounding mode), which is the decimal CPython's dtoa produces; strtod then returns
  // the nearest double, as CPython does.
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", ndigits, x);
  return std::strtod(buf, nullptr);
}

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form: "[-]d[.ddd]e[+-]XX".
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  const std::string sci(buf, result.ptr);
  size_t pos = 0;
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    pos = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exponent = std::atoi(sci.c_str() + e + 1);
  // CPython's decpt: value = 0.<digits> x 10^decpt.
  const int decpt = exponent + 1;
  const int n = static_cast<int>(digits.size());
  if (digits == "0") return sign + "0.0";
  if (decpt <= -4 || decpt > 16) {
    std::string mantissa = digits.substr(0, 1);
    if (n > 1) mantissa += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%+03d", decpt - 1);
    return sign + mantissa + exp_buf;
  }
  if (decpt <= 0) return sign + "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  if (decpt >= n) return sign + digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
  return sign + digits.substr(0, static_cast<size_t>(decpt)) + "." +
         digits.substr(static_cast<size_t>(decpt));
}

std::string python_json_dumps(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  dump(out, value, indent, 0, /*ensure_ascii=*/false);
  return out;
}

std::string python_json_dumps_ascii(const nlohmann::ordered_json& value) {
  std::string out;
  dump(out, value, -1, 0, /*ensure_ascii=*/true);
  return out;
}

}  // namespace sb
