#include "harness/common/peak_memory.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include <fstream>
#include <sstream>
#include <string>

namespace sb {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A field of /proc/self/status ("VmHWM:") in MiB, negative when it cannot be read.
double status_field_mb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) != 0) continue;
    std::istringstream fields(line.substr(field.size()));
    double kib = -1;
    fields >> kib;  // "VmHWM:   123456 kB"
    return kib < 0 ? -1 : kib / 1024.0;
  }
  return -1;
}

}  // namespace

bool reset_peak_memory(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

PeakMemory read_peak_memory(const c10::Device& device, bool host_reset) {
  PeakMemory peak;
  if (host_reset) peak.host_rss_mb = status_field_mb("VmHWM:");
  if (device.is_cuda()) {
    using c10::CachingAllocator::StatType;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    const auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
    peak.device_allocated_mb = static_cast<double>(stats.allocated_bytes[aggregate].peak) / kMiB;
    peak.device_reserved_mb = static_cast<double>(stats.reserved_bytes[aggregate].peak) / kMiB;
  }
  return peak;
}

double current_rss_mb() { return status_field_mb("VmRSS:"); }

}  // namespace sb
