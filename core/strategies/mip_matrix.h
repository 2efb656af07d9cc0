// A mixed-integer program's columns and rows, built once and handed to CBC
// whole: the MILP over general schedules (milp_schedule.cpp) and its
// residency bound (residency_bound.cpp) share it. Only in builds with CBC.
#pragma once
#if REMAT_HAVE_MILP
#include <cstdint>
#include <utility>
#include <vector>

#include <Cbc_C_Interface.h>

namespace remat {

class MipMatrix {
 public:
  using Terms = std::vector<std::pair<int, double>>;

  int add_col(double lb, double ub, double obj, bool integer);
  // A column named twice in `terms` gets one coefficient, their sum: the
  // matrix loaded column by column must not hold duplicate entries.
  void add_row(const Terms& terms, char sense, double rhs);
  // A term for a column that may not exist (col < 0: a variable fixed at 0).
  static void term(Terms& t, int col, double coef) {
    if (col >= 0) t.emplace_back(col, coef);
  }

  int binaries() const { return binaries_; }
  int rows() const { return static_cast<int>(row_start_.size()); }
  int64_t columns() const { return static_cast<int64_t>(col_lb_.size()); }
  int64_t nonzeros() const { return static_cast<int64_t>(row_col_.size()); }

  // The whole matrix in one call, column by column: CBC 2.10's C interface
  // drops coefficients when rows are added one at a time (a row x0 - x3 <= 0
  // arrived as x0 <= 0).
  void load(Cbc_Model* model) const;

 private:
  std::vector<double> col_lb_, col_ub_, col_obj_;
  std::vector<char> col_int_;
  int binaries_ = 0;
  std::vector<std::size_t> row_start_;
  std::vector<int> row_col_;
  std::vector<double> row_coef_, row_rhs_;
  std::vector<char> row_sense_;
};

}  // namespace remat
#endif
