#pragma once
// The current UTC time as text, for what results record (context.json, status.json,
// lock files, report provenance, moved-aside folder names).

#include <string>

namespace sb {

// strftime format, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string utc_timestamp(const char* format);

}  // namespace sb
