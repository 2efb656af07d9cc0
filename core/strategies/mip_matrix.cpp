#include "core/strategies/mip_matrix.h"

#if REMAT_HAVE_MILP
#include <algorithm>
#include <limits>

namespace remat {

int MipMatrix::add_col(double lb, double ub, double obj, bool integer) {
  col_lb_.push_back(lb), col_ub_.push_back(ub), col_obj_.push_back(obj), col_int_.push_back(integer ? 1 : 0);
  binaries_ += integer;
  return static_cast<int>(col_lb_.size()) - 1;
}

void MipMatrix::add_row(const Terms& terms, char sense, double rhs) {
  row_start_.push_back(row_col_.size());
  Terms sorted = terms;  // by column, so that duplicates are neighbours
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i].first == sorted[i - 1].first) row_coef_.back() += sorted[i].second;
    else row_col_.push_back(sorted[i].first), row_coef_.push_back(sorted[i].second);
  }
  row_sense_.push_back(sense), row_rhs_.push_back(rhs);
}

void MipMatrix::load(Cbc_Model* model) const {
  const std::size_t cols = col_lb_.size(), rows = row_start_.size();
  std::vector<CoinBigIndex> start(cols + 1, 0);
  for (int c : row_col_) ++start[static_cast<std::size_t>(c) + 1];
  for (std::size_t c = 0; c < cols; ++c) start[c + 1] += start[c];
  std::vector<int> index(row_col_.size());
  std::vector<double> value(row_col_.size()), row_lb(rows), row_ub(rows);
  std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t from = row_start_[r], to = r + 1 < rows ? row_start_[r + 1] : row_col_.size();
    for (std::size_t k = from; k < to; ++k) {
      const auto at = static_cast<std::size_t>(fill[static_cast<std::size_t>(row_col_[k])]++);
      index[at] = static_cast<int>(r), value[at] = row_coef_[k];
    }
    row_lb[r] = row_sense_[r] == 'L' ? -std::numeric_limits<double>::max() : row_rhs_[r];
    row_ub[r] = row_sense_[r] == 'G' ? std::numeric_limits<double>::max() : row_rhs_[r];
  }
  Cbc_loadProblem(model, static_cast<int>(cols), static_cast<int>(rows), start.data(), index.data(), value.data(),
                  col_lb_.data(), col_ub_.data(), col_obj_.data(), row_lb.data(), row_ub.data());
  for (std::size_t c = 0; c < cols; ++c)
    if (col_int_[c]) Cbc_setInteger(model, static_cast<int>(c));
}

}  // namespace remat
#endif
