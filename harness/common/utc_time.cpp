#include "harness/common/utc_time.h"

#include <ctime>

namespace sb {

std::string utc_timestamp(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), format, &tm);
  return buffer;
}

}  // namespace sb
