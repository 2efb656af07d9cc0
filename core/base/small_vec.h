// A vector of trivially copyable values that holds its first N in place: an
// Op's inputs, saved tensors and shape are almost always one to three
// numbers, and a model of a million ops would otherwise spend three heap
// blocks (and their page faults) per op on them. The interface is the part
// of std::vector the code uses; it converts from and to std::vector, so code
// that builds or keeps a std::vector goes on working.
#pragma once
#include <algorithm>
#include <compare>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace remat {

template <typename T, uint32_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T> && N >= 1);

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVec() noexcept {}
  SmallVec(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  SmallVec(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit, like a copy
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  SmallVec(It first, It last) {
    assign(first, last);
  }
  explicit SmallVec(size_type n, const T& value = T()) { resize(n, value); }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { take(o); }
  ~SmallVec() { release(); }

  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> init) {
    assign(init.begin(), init.end());
    return *this;
  }
  SmallVec& operator=(const std::vector<T>& v) {
    assign(v.begin(), v.end());
    return *this;
  }

  // A copy as a std::vector, for code that keeps or passes one.
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: implicit on purpose
  operator std::span<const T>() const noexcept { return {data(), size()}; }   // NOLINT

  template <typename It>
  void assign(It first, It last) {
    const auto n = static_cast<size_type>(std::distance(first, last));
    clear();
    reserve(n);
    T* out = data();
    if (n <= N) {  // a fixed, short loop rather than a call to memmove
      for (uint32_t i = 0; i < N; ++i, ++first)
        if (i < n) out[i] = *first;
    } else {
      std::copy(first, last, out);
    }
    size_ = static_cast<uint32_t>(n);
  }

  T* data() noexcept { return on_heap() ? heap_ : local_; }
  const T* data() const noexcept { return on_heap() ? heap_ : local_; }
  size_type size() const noexcept { return size_; }
  size_type capacity() const noexcept { return cap_; }
  bool empty() const noexcept { return size_ == 0; }

  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  T& operator[](size_type i) noexcept { return data()[i]; }
  const T& operator[](size_type i) const noexcept { return data()[i]; }
  T& at(size_type i) { return i < size_ ? data()[i] : throw std::out_of_range("SmallVec::at"); }
  const T& at(size_type i) const { return i < size_ ? data()[i] : throw std::out_of_range("SmallVec::at"); }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[size_ - 1]; }
  const T& back() const noexcept { return data()[size_ - 1]; }

  void reserve(size_type n) {
    if (n <= cap_) return;
    if (n > UINT32_MAX) throw std::length_error("SmallVec: too many elements");
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    if (size_) std::memcpy(p, data(), size_ * sizeof(T));
    if (on_heap()) ::operator delete(heap_);
    heap_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void push_back(const T& x) {
    if (size_ == cap_) {
      const T copy = x;  // x may live in this vector
      reserve(2 * size_type{cap_});
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = x;
  }
  template <typename... A>
  T& emplace_back(A&&... a) {
    push_back(T(std::forward<A>(a)...));
    return back();
  }
  void pop_back() noexcept { --size_; }
  void clear() noexcept { size_ = 0; }
  void resize(size_type n, const T& value = T()) {
    reserve(n);
    for (size_type i = size_; i < n; ++i) data()[i] = value;
    size_ = static_cast<uint32_t>(n);
  }
  iterator insert(const_iterator pos, const T& x) {
    const auto at = static_cast<size_type>(pos - begin());
    const T copy = x;
    if (size_ == cap_) reserve(2 * size_type{cap_});
    T* p = data();
    std::memmove(p + at + 1, p + at, (size_ - at) * sizeof(T));
    p[at] = copy;
    ++size_;
    return p + at;
  }
  iterator erase(const_iterator first, const_iterator last) {
    const auto a = static_cast<size_type>(first - begin()), b = static_cast<size_type>(last - begin());
    T* p = data();
    std::memmove(p + a, p + b, (size_ - b) * sizeof(T));
    size_ -= static_cast<uint32_t>(b - a);
    return p + a;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }

  friend bool operator==(const SmallVec& a, const SmallVec& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const SmallVec& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend auto operator<=>(const SmallVec& a, const SmallVec& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const noexcept { return cap_ > N; }
  void release() noexcept {
    if (on_heap()) ::operator delete(heap_);
    cap_ = N;
    size_ = 0;
  }
  void take(SmallVec& o) noexcept {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.on_heap()) heap_ = o.heap_;
    else std::memcpy(local_, o.local_, sizeof local_);
    o.cap_ = N;
    o.size_ = 0;
  }

  union {
    T local_[N];
    T* heap_;
  };
  uint32_t size_ = 0;
  uint32_t cap_ = N;  // above N: the elements live in heap_
};

}  // namespace remat
