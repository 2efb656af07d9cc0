// The tensors an instruction reads: exactly what the validator requires to be
// resident, so every read of a valid schedule is resident when it runs.
#include <algorithm>

#include <gtest/gtest.h>

#include "core/sim/instr_reads.h"
#include "core/model/presets.h"
#include "core/sim/resident_index.h"
#include "core/strategies/registry.h"

namespace remat {
namespace {

TEST(TensorsRead, ChainDenseReadsItsInputForwardAndBothEndsBackward) {
  const Model m = make_preset("chain:16");
  EXPECT_EQ(tensors_read(m, {InstrKind::Fwd, 5}), (std::vector<TensorRef>{{4, false}}));
  // Dense's backward reads its saved tensors (as op_rules declares) and G(a5).
  std::vector<TensorRef> expected;
  for (int s : m.op(5).saved) expected.push_back({s, false});
  expected.push_back({5, true});
  EXPECT_EQ(tensors_read(m, {InstrKind::Bwd, 5}), expected);
  // The loss has no gradient tensor: its backward reads only what it saved.
  for (const TensorRef& t : tensors_read(m, {InstrKind::Bwd, m.loss()})) EXPECT_FALSE(t.grad);
  EXPECT_TRUE(tensors_read(m, {InstrKind::FreeAct, 5}).empty());
  EXPECT_TRUE(tensors_read(m, {InstrKind::FreeGrad, 5}).empty());
  // A compress reads A(v); a decompress reads C(v), the compressed copy.
  EXPECT_EQ(tensors_read(m, {InstrKind::CompressInt8, 5}), (std::vector<TensorRef>{{5, false}}));
  EXPECT_EQ(tensors_read(m, {InstrKind::Decompress, 5}), (std::vector<TensorRef>{{5, false, false, true}}));
  EXPECT_TRUE(tensors_read(m, {InstrKind::FreePacked, 5}).empty());
}

TEST(TensorsRead, ABackwardWithPrivateSavedTensorsReadsItsAux) {
  const Model m = make_preset("gpt:1:64:4:16:2:bf16:100");
  int checked = 0;
  for (int v = 0; v < m.size(); ++v) {
    const auto reads = tensors_read(m, {InstrKind::Bwd, v});
    const bool readsAux = std::find(reads.begin(), reads.end(), TensorRef{v, false, true}) != reads.end();
    EXPECT_EQ(readsAux, m.op(v).aux_bytes > 0) << m.op(v).name;
    checked += readsAux;
    EXPECT_TRUE(tensors_read(m, {InstrKind::FreeAux, v}).empty());
  }
  EXPECT_GE(checked, 3);  // ln1, ln2, lnf at least
}

TEST(TensorsRead, NoTensorIsListedTwice) {
  const Model m = make_preset("transformer:1:8:2:1");
  for (int v = 0; v < m.size(); ++v) {
    const auto reads = tensors_read(m, {InstrKind::Fwd, v});
    for (std::size_t i = 0; i < reads.size(); ++i)
      for (std::size_t j = i + 1; j < reads.size(); ++j) EXPECT_FALSE(reads[i] == reads[j]);
  }
}

TEST(TensorsRead, EveryReadOfAValidScheduleIsResident) {
  // gpt: has views (reshape, transpose) and aux (LayerNorm's statistics).
  for (const char* model : {"chain:16", "transformer:2:8:2:1", "mlp:4", "gpt:1:64:4:16:2:bf16:100"}) {
    const Model m = make_preset(model);
    for (const char* spec : {"store-all", "recompute-all", "sqrt", "sqrt+compress:bf16"}) {
      SCOPED_TRACE(std::string(model) + " " + spec);
      const Schedule s = make_strategy(spec)->schedule(m);
      const ResidentIndex index(m, s);
      for (std::size_t t = 0; t < s.code.size(); ++t) {
        const auto resident = index.resident_at(t);
        for (const TensorRef& r : tensors_read(m, s.code[t]))
          ASSERT_NE(std::find(resident.begin(), resident.end(), r), resident.end())
              << "step " << t << " reads " << (r.grad ? "G" : r.aux ? "aux" : r.packed ? "C" : "A") << r.op;
      }
    }
  }
}

}  // namespace
}  // namespace remat
