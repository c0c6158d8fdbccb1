#include "harness/parallel/clock_sync.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "harness/parallel/object_exchange.h"
#include "harness/trace/timeline.h"

namespace sb {
namespace {

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace

double estimate_clock_offset_ms(c10d::Backend& world, bool measure_anyway) {
  const std::vector<std::string> boots = all_gather_strings(world, boot_id());
  const bool one_host = !boots[0].empty() && std::all_of(boots.begin(), boots.end(),
                                                         [&](const std::string& b) { return b == boots[0]; });
  if (one_host && !measure_anyway) return 0.0;
  const int rank = world.getRank();
  std::vector<double> offsets;
  for (int round = 0; round < 7; ++round) {
    world.barrier()->wait();
    const double now = CommonClock::local_now_ms();
    const auto readings = all_gather_doubles(world, {now});
    offsets.push_back(readings[static_cast<size_t>(rank)][0] - readings[0][0]);
  }
  std::nth_element(offsets.begin(), offsets.begin() + 3, offsets.end());
  return offsets[3];
}

}  // namespace sb
