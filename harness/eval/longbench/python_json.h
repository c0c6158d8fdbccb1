#pragma once
// JSON text and numbers exactly as CPython writes them, for files that upstream
// LongBench writes with Python (result.json, prediction lines), so that ours compare
// byte for byte:
//   python_round(x, n)       round(x, n): the double nearest to x correctly rounded to n
//                            decimals (ties of the exact binary value to even)
//   python_float_repr(x)     repr(x): the shortest digits that round-trip; "1.0", "0.0001",
//                            "1e-05", "1e+16" as CPython switches to exponents
//   python_json_dumps(v, i)  json.dumps(v, ensure_ascii=False, indent=i): i < 0 is one
//                            line with ", " and ": "; otherwise "," and ": " with i spaces
//                            per level. NaN and infinities are written NaN / Infinity /
//                            -Infinity, as Python's json module does (not strict JSON).
//   python_json_dumps_ascii(v)  json.dumps(v): one line, ensure_ascii=True ("é" written
//                            as the six characters \u00e9), what RULER's files hold
// Objects keep their order (nlohmann::ordered_json), as Python dicts do.

#include <nlohmann/json.hpp>

#include <string>

namespace sb {

double python_round(double x, int ndigits);
std::string python_float_repr(double x);
std::string python_json_dumps(const nlohmann::ordered_json& value, int indent = -1);
std::string python_json_dumps_ascii(const nlohmann::ordered_json& value);

}  // namespace sb
