// A read-only list of strategy runs owned elsewhere (the document keeps each
// run on the heap beside its resident index, which points into its schedule,
// so runs are never copied or moved once simulated). Indexable and iterable
// like the std::vector<StrategyRun> it stands for, which converts to it.
#pragma once
#include <cstddef>
#include <iterator>
#include <vector>

#include "core/analysis/comparison.h"

namespace remat {

class RunList {
 public:
  RunList() = default;
  RunList(const std::vector<StrategyRun>& runs) {  // NOLINT: implicit, views the vector
    for (const StrategyRun& r : runs) runs_.push_back(&r);
  }
  explicit RunList(std::vector<const StrategyRun*> runs) : runs_(std::move(runs)) {}

  std::size_t size() const { return runs_.size(); }
  bool empty() const { return runs_.empty(); }
  const StrategyRun& operator[](std::size_t i) const { return *runs_[i]; }
  const StrategyRun& front() const { return *runs_.front(); }

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = StrategyRun;
    using difference_type = std::ptrdiff_t;
    using pointer = const StrategyRun*;
    using reference = const StrategyRun&;
    explicit iterator(std::vector<const StrategyRun*>::const_iterator it) : it_(it) {}
    reference operator*() const { return **it_; }
    pointer operator->() const { return *it_; }
    iterator& operator++() { ++it_; return *this; }
    iterator operator++(int) { iterator t = *this; ++it_; return t; }
    bool operator==(const iterator& o) const { return it_ == o.it_; }

   private:
    std::vector<const StrategyRun*>::const_iterator it_;
  };
  iterator begin() const { return iterator(runs_.begin()); }
  iterator end() const { return iterator(runs_.end()); }

  // A copy, for core's exporters that take the vector (JSON, CSV).
  std::vector<StrategyRun> copy() const {
    std::vector<StrategyRun> out;
    out.reserve(runs_.size());
    for (const StrategyRun* r : runs_) out.push_back(*r);
    return out;
  }

 private:
  std::vector<const StrategyRun*> runs_;
};

}  // namespace remat
