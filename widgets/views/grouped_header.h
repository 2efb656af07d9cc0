// A table header with a band above the column titles naming groups of
// columns ("Predicted" over the simulator's, "Measured" over the run's), so
// that the Comparison tab reads as prediction beside measurement.
#pragma once
#include <QHeaderView>
#include <QString>
#include <vector>

namespace remat {

class GroupedHeader : public QHeaderView {
  Q_OBJECT
 public:
  struct Group {
    QString name;
    std::vector<int> sections;  // logical indices, shown side by side
  };
  explicit GroupedHeader(QWidget* parent = nullptr);
  void setGroups(std::vector<Group> groups);
  const std::vector<Group>& groups() const { return groups_; }
  // The group band's rectangle of group i in the header's coordinates (empty when none is shown).
  QRect groupRect(int i) const;
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* e) override;
  void paintSection(QPainter* p, const QRect& rect, int logicalIndex) const override;

 private:
  int bandHeight() const;
  std::vector<Group> groups_;
};

}  // namespace remat
