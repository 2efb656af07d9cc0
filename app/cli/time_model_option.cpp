#include <cstdio>

#include "app/cli/commands.h"
#include "core/base/spec_parse.h"

namespace remat::cli {

void add_time_model_options(CLI::App* cmd, TimeModelFlags& flags) {
  char flops[32], link[32], memory[32];
  std::snprintf(flops, sizeof flops, "%g", TimeModel::kDefaultDeviceFlops);
  std::snprintf(link, sizeof link, "%g", TimeModel::kDefaultLinkBandwidth);
  std::snprintf(memory, sizeof memory, "%g", TimeModel::kDefaultDeviceBandwidth);
  cmd->add_option("--device-flops", flags.device_flops,
                  std::string("Time model: the device's throughput in FLOP/s (25e12, 50T; default ") + flops +
                      "): each fwd/bwd takes its FLOPs over it");
  cmd->add_option("--link-bandwidth", flags.link_bandwidth,
                  std::string("Time model: the host link's bandwidth in bytes/s, each direction (16e9, 25G; "
                              "default ") +
                      link + "): each offload/fetch takes its bytes over it, on a copy stream beside the compute");
  cmd->add_option("--device-bandwidth", flags.device_bandwidth,
                  std::string("Time model: the device memory's bandwidth in bytes/s (3.35e12, 2T; default ") + memory +
                      "): each compress/decompress takes the bytes it reads and writes over it");
}

TimeModel time_model_of(const TimeModelFlags& flags) {
  TimeModel t;
  if (!flags.device_flops.empty()) t.device_flops = parse_rate(flags.device_flops, "--device-flops");
  if (!flags.link_bandwidth.empty()) t.link_bandwidth = parse_rate(flags.link_bandwidth, "--link-bandwidth");
  if (!flags.device_bandwidth.empty()) t.device_bandwidth = parse_rate(flags.device_bandwidth, "--device-bandwidth");
  return t;
}

}  // namespace remat::cli
