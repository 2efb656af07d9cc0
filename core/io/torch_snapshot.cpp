#include "core/io/torch_snapshot.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>

#include "core/io/atomic_file.h"
#include "core/sim/compression.h"
#include "core/base/errors.h"
#include "core/io/pickle.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"

namespace remat {
namespace {

constexpr uint64_t kBlock = 512;                     // the CUDA caching allocator's rounding
constexpr uint64_t kBase = 0x7f0000000000ULL;        // where the segment starts: looks like a device address
constexpr uint64_t kMaxSnapshotFileBytes = 4ULL << 30;

uint64_t rounded(uint64_t b) { return std::max<uint64_t>(kBlock, (b + kBlock - 1) / kBlock * kBlock); }

// First-fit over one growing segment; freed holes merge with their neighbours.
class Arena {
 public:
  uint64_t allocate(uint64_t size) {
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      if (it->second < size) continue;
      const uint64_t at = it->first, left = it->second - size;
      holes_.erase(it);
      if (left) holes_[at + size] = left;
      return at;
    }
    const uint64_t at = end_;
    end_ += size;
    return at;
  }
  void release(uint64_t at, uint64_t size) {
    auto next = holes_.lower_bound(at);
    if (next != holes_.end() && at + size == next->first) {
      size += next->second;
      next = holes_.erase(next);
    }
    if (next != holes_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        prev->second += size;
        return;
      }
    }
    holes_[at] = size;
  }
  uint64_t size() const { return end_; }

 private:
  std::map<uint64_t, uint64_t> holes_;  // offset -> size
  uint64_t end_ = 0;
};

std::string name_of(const Model& m, int v) { return m.op(v).name.empty() ? "op" + std::to_string(v) : m.op(v).name; }

nlohmann::json frames(const std::string& source, std::size_t instruction, const std::string& label) {
  const int64_t line = instruction == AllocEvent::kBeforeStep ? -1 : static_cast<int64_t>(instruction);
  return nlohmann::json::array({{{"filename", "remat " + source}, {"line", line}, {"name", label}}});
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where, const std::string& origin) {
  if (!j.is_object() || !j.contains(key)) throw InputError(origin + ": " + where + " has no '" + key + "'");
  return j[key];
}

uint64_t uint_field(const nlohmann::json& j, const char* key, const std::string& where, const std::string& origin) {
  const auto& v = field(j, key, where, origin);
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    throw InputError(origin + ": " + where + "/" + key + " is not a non-negative integer");
  return v.get<uint64_t>();
}

// Autograd's engine runs the backward pass: its frames name it (Python's
// torch/autograd/__init__.py backward, the C++ engine's evaluate_function).
bool under_backward(const nlohmann::json& e) {
  if (!e.contains("frames") || !e["frames"].is_array()) return false;
  for (const auto& f : e["frames"]) {
    if (!f.is_object()) continue;
    const std::string name = f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : "";
    const std::string file = f.contains("filename") && f["filename"].is_string() ? f["filename"].get<std::string>() : "";
    if (name == "backward" || name == "_engine_run_backward" || name.find("autograd::Engine") != std::string::npos ||
        name.find("evaluate_function") != std::string::npos ||
        (file.find("torch/autograd") != std::string::npos && name.find("backward") != std::string::npos))
      return true;
  }
  return false;
}

}  // namespace

std::vector<AllocEvent> simulated_allocations(const Model& model, const Schedule& schedule) {
  std::vector<AllocEvent> out;
  ResidentSet rs(model);
  const auto n = static_cast<std::size_t>(model.size());
  // Handles: 4 per op (storage, gradient, aux, compressed copy) and a
  // generation, so that a recomputed tensor is a new allocation.
  std::vector<uint64_t> gen(4 * n, 0);
  auto handle = [&](int v, int what) { return (gen[4 * static_cast<std::size_t>(v) + what] << 32) | (4 * static_cast<uint64_t>(v) + what); };
  auto storage_live = [&](int r) { return rs.holders[static_cast<std::size_t>(r)] > 0; };
  auto emit = [&](bool alloc, int v, int what, uint64_t bytes, std::size_t i, std::string label) {
    if (bytes == 0) return;
    if (alloc) ++gen[4 * static_cast<std::size_t>(v) + what];
    out.push_back({alloc, handle(v, what), bytes, i, std::move(label), -1});
  };
  for (int v = 0; v < model.size(); ++v)
    if (model.storage(v) == v && storage_live(v)) emit(true, v, 0, model.op(v).bytes, AllocEvent::kBeforeStep, "input " + name_of(model, v));

  std::vector<uint8_t> computed(n, 0);
  computed[0] = 1;
  for (std::size_t i = 0; i < schedule.code.size(); ++i) {
    const Instr ins = schedule.code[i];
    const int v = ins.op;
    const int r = model.storage(v);
    const std::string name = name_of(model, v);
    switch (ins.kind) {
      case InstrKind::Fwd: {
        const bool was = storage_live(r), aux_was = rs.aux[static_cast<std::size_t>(v)] != 0;
        const std::string again = computed[static_cast<std::size_t>(v)] ? " (recompute)" : "";
        computed[static_cast<std::size_t>(v)] = 1;
        rs.apply(model, ins);
        if (!was && storage_live(r))
          emit(true, r, 0, model.op(r).bytes, i, "fwd " + name + again + (r != v ? " (storage of " + name_of(model, r) + ")" : ""));
        if (!aux_was && rs.aux[static_cast<std::size_t>(v)]) emit(true, v, 2, model.op(v).aux_bytes, i, "aux " + name + again);
        break;
      }
      case InstrKind::Bwd: {
        // A gradient storage is allocated where G(u) gets one of its own (named
        // u): new, or moved out of one an Add's inputs share; sharing G(v)'s
        // and adding in place allocate nothing.
        std::vector<int32_t> had;  // G(u)'s storage before, -1: none
        for (int u : model.op(v).inputs)
          had.push_back(rs.grad[static_cast<std::size_t>(u)] ? rs.grad_storage[static_cast<std::size_t>(u)] : -1);
        rs.apply(model, ins);
        const auto& ins_of = model.op(v).inputs;
        for (std::size_t k = 0; k < ins_of.size(); ++k) {
          const int u = ins_of[k];
          const bool first = std::find(ins_of.begin(), ins_of.begin() + static_cast<std::ptrdiff_t>(k), u) == ins_of.begin() + static_cast<std::ptrdiff_t>(k);
          if (first && had[k] != u && rs.grad[static_cast<std::size_t>(u)] && rs.grad_storage[static_cast<std::size_t>(u)] == u)
            emit(true, u, 1, model.grad_bytes(u), i, "grad " + name_of(model, u) + " (bwd " + name + ")");
        }
        break;
      }
      case InstrKind::FreeAct: {
        const bool was = storage_live(r);
        rs.apply(model, ins);
        if (was && !storage_live(r)) emit(false, r, 0, model.op(r).bytes, i, to_string(ins, model));
        break;
      }
      case InstrKind::FreeGrad: {  // the storage goes with its last alias
        const int g = rs.grad_storage[static_cast<std::size_t>(v)];
        rs.apply(model, ins);
        if (rs.grad_holders[static_cast<std::size_t>(g)] == 0) emit(false, g, 1, model.grad_bytes(v), i, to_string(ins, model));
        break;
      }
      case InstrKind::FreeAux:
        rs.apply(model, ins);
        emit(false, v, 2, model.op(v).aux_bytes, i, to_string(ins, model));
        break;
      // The device side of the host tier: an offload frees the storage (or
      // the compressed copy) there, a fetch allocates it again (v is an owner: r == v).
      case InstrKind::Offload:
      case InstrKind::Fetch: {
        const bool alloc = ins.kind == InstrKind::Fetch;
        const auto vv = static_cast<std::size_t>(v);
        const uint8_t form = alloc ? static_cast<uint8_t>(rs.host[vv] - 1) : rs.packed[vv];  // 0: A itself
        rs.apply(model, ins);
        if (form) emit(alloc, v, 3, packed_bytes(model.op(v).bytes, static_cast<Packing>(form)), i, to_string(ins, model));
        else emit(alloc, r, 0, model.op(r).bytes, i, to_string(ins, model));
        break;
      }
      case InstrKind::CompressBF16:
      case InstrKind::CompressF16:
      case InstrKind::CompressInt8:
        rs.apply(model, ins);
        emit(true, v, 3, packed_bytes(model.op(v).bytes, packing_of(ins.kind)), i, to_string(ins, model));
        break;
      case InstrKind::Decompress:
        rs.apply(model, ins);
        emit(true, r, 0, model.op(r).bytes, i, to_string(ins, model));
        break;
      case InstrKind::FreePacked: {
        const auto form = static_cast<Packing>(rs.packed[static_cast<std::size_t>(v)]);
        rs.apply(model, ins);
        emit(false, v, 3, packed_bytes(model.op(v).bytes, form), i, to_string(ins, model));
        break;
      }
    }
  }
  return out;
}

nlohmann::json make_torch_snapshot(const std::vector<AllocEvent>& events, const std::string& source) {
  using nlohmann::json;
  struct Live {
    uint64_t addr, size, bytes;
    json frames;
  };
  Arena arena;
  std::unordered_map<uint64_t, Live> live;  // by handle
  json trace = json::array();
  for (const auto& e : events) {
    json entry;
    if (e.alloc) {
      if (live.count(e.handle)) throw InternalError("snapshot: allocation " + std::to_string(e.handle) + " made twice");
      const uint64_t size = rounded(e.bytes);
      const uint64_t addr = kBase + arena.allocate(size);
      Live l{addr, size, e.bytes, frames(source, e.instruction, e.label)};
      entry = {{"action", "alloc"}, {"addr", addr}, {"size", e.bytes}, {"stream", 0}, {"frames", l.frames}};
      if (e.time_us >= 0) entry["time_us"] = e.time_us;
      trace.push_back(entry);
      live.emplace(e.handle, std::move(l));
    } else {
      auto it = live.find(e.handle);
      if (it == live.end()) throw InternalError("snapshot: free of an allocation never made: " + e.label);
      for (const char* action : {"free_requested", "free_completed"}) {
        entry = {{"action", action}, {"addr", it->second.addr}, {"size", e.bytes}, {"stream", 0},
                 {"frames", frames(source, e.instruction, e.label)}};
        if (e.time_us >= 0) entry["time_us"] = e.time_us;
        trace.push_back(entry);
      }
      arena.release(it->second.addr - kBase, it->second.size);
      live.erase(it);
    }
  }
  const uint64_t total = std::max<uint64_t>(arena.size(), kBlock);
  // The segment exists from the start of the trace: PyTorch records it as a
  // segment_alloc (a cudaMalloc) before the first block in it.
  trace.insert(trace.begin(), json{{"action", "segment_alloc"}, {"addr", kBase}, {"size", total}, {"stream", 0},
                                   {"frames", frames(source, AllocEvent::kBeforeStep, "segment")}});

  // The segment as the step leaves it: the blocks still allocated, the gaps inactive.
  std::vector<const Live*> still;
  for (const auto& [h, l] : live) still.push_back(&l);
  std::sort(still.begin(), still.end(), [](const Live* a, const Live* b) { return a->addr < b->addr; });
  json blocks = json::array();
  uint64_t at = kBase, allocated = 0, requested = 0;
  for (const Live* l : still) {
    if (l->addr > at) blocks.push_back({{"address", at}, {"size", l->addr - at}, {"requested_size", 0}, {"state", "inactive"}, {"frames", json::array()}});
    blocks.push_back({{"address", l->addr}, {"size", l->size}, {"requested_size", l->bytes}, {"state", "active_allocated"}, {"frames", l->frames}});
    allocated += l->size;
    requested += l->bytes;
    at = l->addr + l->size;
  }
  if (at < kBase + total) blocks.push_back({{"address", at}, {"size", kBase + total - at}, {"requested_size", 0}, {"state", "inactive"}, {"frames", json::array()}});
  json segment = {{"device", 0},           {"address", kBase},        {"total_size", total},
                  {"allocated_size", allocated}, {"active_size", allocated}, {"requested_size", requested},
                  {"stream", 0},           {"segment_type", "large"}, {"segment_pool_id", json::array({0, 0})},
                  {"is_expandable", false}, {"frames", json::array()}, {"blocks", std::move(blocks)}};
  return {{"segments", json::array({std::move(segment)})}, {"device_traces", json::array({std::move(trace)})}};
}

void check_snapshot_path(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".pickle" && ext != ".pkl" && ext != ".json")
    throw InputError("--memory-snapshot '" + path + "': the file must end in .pickle (PyTorch's format) or .json");
  check_output_path("--memory-snapshot", path, ext, "");
}

void write_torch_snapshot(const nlohmann::json& snapshot, const std::string& path) {
  check_snapshot_path(path);
  const bool json = std::filesystem::path(path).extension() == ".json";
  write_file_atomically(path, [&](std::ostream& out) {
    if (json) out << snapshot.dump() << "\n";
    else out << to_pickle(snapshot);
  });
}

nlohmann::json load_torch_snapshot(const std::string& path) {
  const std::string origin = "snapshot '" + path + "'";
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(origin + ": cannot read it (" + ec.message() + ")");
  if (size > kMaxSnapshotFileBytes) throw InputError(origin + ": " + std::to_string(size) + " bytes is over the limit of 4 GiB");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(size))) throw InputError(origin + ": cannot read it");
  if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) == 0x80) return from_pickle(bytes, origin);
  try {
    return nlohmann::json::parse(bytes);
  } catch (const nlohmann::json::exception&) {
    throw InputError(origin + ": neither a pickle (it would start with byte 0x80) nor JSON");
  }
}

SnapshotCurve snapshot_curve(const nlohmann::json& snap, const std::string& origin, int device) {
  using nlohmann::json;
  SnapshotCurve c;
  if (snap.is_array()) throw InputError(origin + ": a list of segments without a trace (PyTorch before 2.0, or torch.cuda.memory_snapshot()); record with torch.cuda.memory._record_memory_history() and save with _dump_snapshot()");
  if (snap.is_object() && !snap.contains("device_traces"))
    throw InputError(origin + ": no 'device_traces' (a snapshot without the allocation trace); record with "
                     "torch.cuda.memory._record_memory_history() before the step and save with _dump_snapshot()");
  const json& traces = field(snap, "device_traces", "the snapshot", origin);
  const json& segments = field(snap, "segments", "the snapshot", origin);
  if (!traces.is_array() || !segments.is_array()) throw InputError(origin + ": 'device_traces' and 'segments' must be lists");
  if (device < 0) {
    for (std::size_t d = 0; d < traces.size() && device < 0; ++d)
      if (traces[d].is_array() && !traces[d].empty()) device = static_cast<int>(d);
    if (device < 0) throw InputError(origin + ": no device has trace entries (was _record_memory_history() on while the step ran?)");
  } else if (static_cast<std::size_t>(device) >= traces.size()) {
    throw InputError(origin + ": device " + std::to_string(device) + " has no trace (the snapshot has " + std::to_string(traces.size()) + ")");
  }
  c.device = device;
  const json& trace = traces[static_cast<std::size_t>(device)];
  c.trace_entries = trace.size();

  // Allocations made before recording began: still active at the end (blocks
  // of the segments) or freed during it (a free without an alloc).
  std::unordered_map<uint64_t, uint64_t> open;  // addr -> size of allocs seen in the trace
  int64_t before = 0;
  std::vector<int64_t> delta;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const json& e = trace[i];
    const std::string where = "device_traces/" + std::to_string(device) + "/" + std::to_string(i);
    const auto& action = field(e, "action", where, origin);
    if (!action.is_string()) throw InputError(origin + ": " + where + "/action is not a string");
    const std::string a = action.get<std::string>();
    if (a != "alloc" && a != "free_completed") continue;
    const uint64_t addr = uint_field(e, "addr", where, origin), size = uint_field(e, "size", where, origin);
    if (a == "alloc") {
      open[addr] = size;
      delta.push_back(static_cast<int64_t>(size));
    } else {
      if (open.erase(addr) == 0) before += static_cast<int64_t>(size);
      delta.push_back(-static_cast<int64_t>(size));
    }
    c.in_backward.push_back(under_backward(e));
  }
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const json& seg = segments[s];
    const std::string where = "segments/" + std::to_string(s);
    if (seg.contains("device") && seg["device"].is_number_integer() && seg["device"].get<int>() != device) continue;
    c.reserved_end += uint_field(seg, "total_size", where, origin);
    uint64_t addr = seg.contains("address") && seg["address"].is_number_integer() ? seg["address"].get<uint64_t>() : 0;
    const json& blocks = field(seg, "blocks", where, origin);
    if (!blocks.is_array()) throw InputError(origin + ": " + where + "/blocks is not a list");
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const json& blk = blocks[b];
      const std::string bw = where + "/blocks/" + std::to_string(b);
      const uint64_t size = uint_field(blk, "size", bw, origin);
      const auto& state = field(blk, "state", bw, origin);
      if (state == "active_allocated" || state == "active_pending_free") {
        const uint64_t req = blk.contains("requested_size") && blk["requested_size"].is_number_integer() ? blk["requested_size"].get<uint64_t>() : size;
        c.rounding_end += size > req ? size - req : 0;
        // Blocks allocated in the trace and never freed are counted there.
        if (!open.count(addr)) before += static_cast<int64_t>(req);
      }
      addr += size;
    }
  }
  c.initial_active = static_cast<uint64_t>(std::max<int64_t>(before, 0));
  int64_t cur = before;
  c.peak = c.initial_active;
  for (std::size_t i = 0; i < delta.size(); ++i) {
    cur += delta[i];
    c.active.push_back(static_cast<uint64_t>(std::max<int64_t>(cur, 0)));
    if (c.active.back() > c.peak) {
      c.peak = c.active.back();
      c.peak_index = i;
    }
  }
  const auto first_bwd = std::find(c.in_backward.begin(), c.in_backward.end(), 1);
  if (first_bwd != c.in_backward.end()) {
    c.backward_start = static_cast<std::size_t>(first_bwd - c.in_backward.begin());
    c.split = "the first allocation under autograd's backward (from its stack frames)";
  } else if (!c.active.empty()) {
    // No stack frames (recorded with context=None): training steps peak
    // where the forward pass ends.
    c.backward_start = c.peak_index + 1 < c.active.size() ? c.peak_index + 1 : c.peak_index;
    c.split = "the peak (the trace has no stack frames naming the backward pass)";
  }
  return c;
}

}  // namespace remat
