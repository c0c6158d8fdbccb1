#pragma once
// nlohmann writes a NaN or infinite double as null. Records and rank reports may carry
// such values (a diverged loss, coverage over NaN scores), so their readers take null
// back as NaN instead of failing on "type must be number, but is null".

#include <nlohmann/json.hpp>

#include <limits>
#include <vector>

namespace sb {

inline double json_number_or_nan(const nlohmann::json& value) {
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// An array of numbers (null as NaN); absent or null: empty.
inline std::vector<double> json_numbers_or_nan(const nlohmann::json& array) {
  std::vector<double> values;
  if (!array.is_array()) {
    if (!array.is_null()) throw nlohmann::json::type_error::create(302, "expected an array of numbers", &array);
    return values;
  }
  for (const nlohmann::json& v : array) values.push_back(json_number_or_nan(v));
  return values;
}

// `key` of `object` as json_numbers_or_nan, or of rows of them.
inline std::vector<double> json_numbers_at(const nlohmann::json& object, const char* key) {
  return object.contains(key) ? json_numbers_or_nan(object[key]) : std::vector<double>{};
}
inline std::vector<std::vector<double>> json_number_rows_at(const nlohmann::json& object, const char* key) {
  std::vector<std::vector<double>> rows;
  if (!object.contains(key)) return rows;
  for (const nlohmann::json& row : object[key]) rows.push_back(json_numbers_or_nan(row));
  return rows;
}

}  // namespace sb
