#include "core/model/op.h"

#include <array>
#include <limits>

#include "core/base/errors.h"

namespace remat {
namespace {

#define REMAT_OP_KIND_NAME(Kind, ...) #Kind,
constexpr std::array<std::string_view, kOpKindCount> kKindNames = {
    REMAT_OP_KINDS(REMAT_OP_KIND_NAME, REMAT_OP_KIND_NAME)};
#undef REMAT_OP_KIND_NAME
constexpr std::array<std::string_view, 5> kDTypeNames = {"f32", "f16", "bf16", "i32", "i64"};
constexpr std::array<std::string_view, 3> kActNames = {"none", "relu", "tanh"};

template <typename E, std::size_t N>
bool parse_enum(const std::array<std::string_view, N>& names, std::string_view s, E& out) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == s) {
      out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view kind_name(OpKind k) { return kKindNames[static_cast<std::size_t>(k)]; }
bool parse_kind(std::string_view s, OpKind& out) { return parse_enum(kKindNames, s, out); }
std::string_view dtype_name(DType d) { return kDTypeNames[static_cast<std::size_t>(d)]; }
bool parse_dtype(std::string_view s, DType& out) { return parse_enum(kDTypeNames, s, out); }
std::string_view activation_name(Activation a) { return kActNames[static_cast<std::size_t>(a)]; }
bool parse_activation(std::string_view s, Activation& out) { return parse_enum(kActNames, s, out); }

uint64_t dtype_size(DType d) {
  switch (d) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F32:
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 4;
}

bool is_integer(DType d) { return d == DType::I32 || d == DType::I64; }

int64_t Op::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t Op::logical_bytes() const { return tensor_bytes(shape, dtype); }

uint64_t tensor_bytes(std::span<const int64_t> shape, DType dtype) {
  // 2^48 bytes is far beyond any device; anything larger is a typo or an attack.
  constexpr uint64_t kMax = uint64_t{1} << 48;
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) throw InputError("negative dimension " + std::to_string(d));
    if (d != 0 && n > kMax / static_cast<uint64_t>(d))
      throw InputError("tensor too large (over 2^48 bytes)");
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

ConstValues causal_mask_values(int64_t seq) {
  auto m = std::make_shared<std::vector<float>>(static_cast<std::size_t>(seq * seq), 0.0f);
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = i + 1; j < seq; ++j) (*m)[static_cast<std::size_t>(i * seq + j)] = 1.0f;
  return ConstValues{std::move(m)};
}

bool is_causal_mask(const std::vector<int64_t>& shape, const ConstValues& c) {
  if (shape.size() < 2 || c.empty()) return false;
  const int64_t seq = shape.back();
  if (shape[shape.size() - 2] != seq || static_cast<int64_t>(c.size()) != seq * seq) return false;
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = 0; j < seq; ++j)
      if ((c.data()[i * seq + j] != 0.0f) != (j > i)) return false;
  return true;
}

}  // namespace remat
