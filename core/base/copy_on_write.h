// A value held out of line and shared until written (copy-on-write), in one
// pointer: what an Op keeps of what most ops do not have (attributes of
// convolutions and views, a view's strides, imported parameter values). A
// default value holds nothing, so a million-op chain pays 8 bytes per field
// instead of the value's own size, and copying a model shares the values.
// The count is atomic: copies of one model may go to different threads (the
// window simulates in a worker). Reads never copy; edit() copies only when
// the value is shared, as a std::string of the old copy-on-write days did.
#pragma once
#include <atomic>
#include <cstdint>
#include <utility>

namespace remat {

template <typename T>
class CopyOnWrite {
 public:
  CopyOnWrite() noexcept = default;
  CopyOnWrite(T value) : node_(new Node{{1}, std::move(value)}) {}  // NOLINT: implicit, like assigning the value
  CopyOnWrite(const CopyOnWrite& o) noexcept : node_(o.node_) {
    if (node_) node_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  CopyOnWrite(CopyOnWrite&& o) noexcept : node_(std::exchange(o.node_, nullptr)) {}
  ~CopyOnWrite() { release(); }

  CopyOnWrite& operator=(const CopyOnWrite& o) noexcept {
    CopyOnWrite(o).swap(*this);
    return *this;
  }
  CopyOnWrite& operator=(CopyOnWrite&& o) noexcept {
    CopyOnWrite(std::move(o)).swap(*this);
    return *this;
  }
  CopyOnWrite& operator=(T value) {
    if (node_ && node_->refs.load(std::memory_order_acquire) == 1) node_->value = std::move(value);
    else CopyOnWrite(std::move(value)).swap(*this);
    return *this;
  }

  const T& operator*() const noexcept { return node_ ? node_->value : kDefault; }
  const T* operator->() const noexcept { return &**this; }

  // The value, for writing: this holder's own (copied first when shared,
  // made from T{} when it held nothing).
  T& edit() {
    if (!node_) node_ = new Node{{1}, T{}};
    else if (node_->refs.load(std::memory_order_acquire) > 1) CopyOnWrite(node_->value).swap(*this);
    return node_->value;
  }
  // Back to the default, holding nothing.
  void reset() noexcept { CopyOnWrite().swap(*this); }

  // Holds a value of its own (possibly equal to T{}, after edit()).
  bool holds() const noexcept { return node_ != nullptr; }
  // Both read the same stored value (a copy not yet written to).
  bool shares_with(const CopyOnWrite& o) const noexcept { return node_ && node_ == o.node_; }

  void swap(CopyOnWrite& o) noexcept { std::swap(node_, o.node_); }

  // Equality is of the values, however they are held.
  friend bool operator==(const CopyOnWrite& a, const CopyOnWrite& b) { return a.node_ == b.node_ || *a == *b; }
  friend bool operator==(const CopyOnWrite& a, const T& b) { return *a == b; }

 private:
  struct Node {
    std::atomic<uint32_t> refs;
    T value;
  };
  void release() noexcept {
    if (node_ && node_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete node_;
    node_ = nullptr;
  }

  // Constant-initialised (constinit, not constexpr: T may hold a shared_ptr,
  // which is not a literal type): read before main() with no order to respect.
  static inline constinit const T kDefault{};
  Node* node_ = nullptr;
};

}  // namespace remat
