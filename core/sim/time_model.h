// The time a schedule takes on a device, predicted: compute from FLOPs and a
// device throughput, host transfers (offload, fetch) from a link bandwidth on
// a second stream that overlaps the compute. What it shows is where a fetch
// that started too late stalls the backward that needs it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

struct TimeModel {
  // Defaults: what a current data-centre GPU sustains on float32 matrix
  // products, and a PCIe 4.0 x16 link in practice (docs/memory-model.md).
  static constexpr double kDefaultDeviceFlops = 50e12;       // FLOP/s
  static constexpr double kDefaultLinkBandwidth = 25e9;      // bytes/s, each direction
  // Compress and decompress are memory-bound: bytes read plus bytes written
  // over the device memory's bandwidth (2e12 B/s: an A100's HBM2e; an H100's
  // HBM3 is faster, a consumer GPU slower).
  static constexpr double kDefaultDeviceBandwidth = 2e12;    // bytes/s
  double device_flops = kDefaultDeviceFlops;
  double link_bandwidth = kDefaultLinkBandwidth;
  double device_bandwidth = kDefaultDeviceBandwidth;
};

struct StepTime {
  double compute_s = 0;   // sum of fwd and bwd FLOPs / device_flops
  double convert_s = 0;   // compress and decompress: (bytes read + written) / device_bandwidth, on the compute stream
  double transfer_s = 0;  // sum of offload and fetch bytes / link_bandwidth (on the copy stream)
  double stall_s = 0;     // compute waiting for a fetch that had not finished
  double step_s = 0;      // when both streams are done: compute_s + convert_s + stall_s for a valid schedule
  bool predicted = false; // false: not asked for (SimulateOptions::time was null)
};

// Two in-order streams. Compute runs fwd/bwd (and compress/decompress, kernels
// too) in program order; an instruction starts when the previous compute is
// done and every tensor it reads that a fetch brings back has arrived (the
// wait is stall). The copy stream runs offload
// and fetch in program order; each starts when the copy before it is done and
// the compute stream has reached it (an offload's tensor is then written, a
// fetch's device buffer then allocated); a compressed copy moves at its
// stored size. Frees take no time. `schedule` must
// be valid (simulate() accepted it).
// `stalls`, when given, receives each instruction of the compute stream that
// waited (a fwd/bwd, or a conversion, for a fetch) and how long, in
// program order: where the window marks the step on the timeline.
struct Stall {
  std::size_t instruction = 0;
  double seconds = 0;
};
StepTime predict_step_time(const Model& model, const Schedule& schedule, const TimeModel& time,
                           std::vector<Stall>* stalls = nullptr);

// "12.3 us", "4.56 ms", "1.23 s" for the time model's figures (CLI and window).
std::string format_seconds(double s);

}  // namespace remat
