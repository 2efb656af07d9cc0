#include "core/base/cancel_scope.h"

namespace remat {
namespace {
thread_local const std::atomic<bool>* t_flag = nullptr;
}

CancelScope::CancelScope(const std::atomic<bool>* flag) : previous_(t_flag) { t_flag = flag; }
CancelScope::~CancelScope() { t_flag = previous_; }

bool cancel_requested() { return t_flag && t_flag->load(std::memory_order_relaxed); }

}  // namespace remat
