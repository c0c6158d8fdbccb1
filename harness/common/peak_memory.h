#pragma once
// The peak memory of this process over an interval (a training iteration): reset at its
// start, read at its end (records.jsonl `peak_rss_mb`, `peak_gpu_allocated_mb`,
// `peak_gpu_reserved_mb`; docs/metrics.md).
//   host: the resident set's high-water mark, VmHWM of /proc/self/status, after writing
//         "5" to /proc/self/clear_refs (Linux: resets the mark to the current RSS)
//   CUDA: the caching allocator's peak allocated and reserved bytes on the device
//         (torch.cuda.max_memory_allocated / max_memory_reserved), reset likewise
// A figure that cannot be measured as an interval's peak (no /proc, a reset refused)
// is left unknown (negative), never replaced by the lifetime peak.

#include <c10/core/Device.h>

namespace sb {

struct PeakMemory {
  double host_rss_mb = -1;          // MiB; negative when unknown
  double device_allocated_mb = -1;  // MiB; negative on the CPU
  double device_reserved_mb = -1;
};

// Starts an interval: resets the high-water marks. Returns whether the host mark could
// be reset (read_peak_memory reports the host peak only then).
bool reset_peak_memory(const c10::Device& device);
PeakMemory read_peak_memory(const c10::Device& device, bool host_reset);

// This process's resident set now (VmRSS), MiB; negative when it cannot be read.
double current_rss_mb();

}  // namespace sb
