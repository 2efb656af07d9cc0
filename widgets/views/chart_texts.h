// The texts a Qt chart draws, as drawn: Qt Charts cuts a label, an axis title
// or a legend entry that finds too little room to "..." without telling its
// caller, so the charts (and their tests) read back what their text items
// hold instead of trusting their own estimate of the room.
#pragma once
#include <QStringList>

QT_BEGIN_NAMESPACE
class QAbstractAxis;
class QChart;
class QGraphicsItem;
QT_END_NAMESPACE

namespace remat {

// The plain text of every visible text item under `root` (a chart, its
// legend), line breaks as '\n'.
QStringList drawn_texts(const QGraphicsItem* root);
// Whether Qt cut the text ("store-..."; also a "…").
bool is_cut(const QString& drawn);
// Lays `chart` out now (not when Qt's posted layout request arrives).
void lay_out_now(QChart* chart);
// Gives `axis` the first of `titles` (longest first: "step memory (GiB)",
// "GiB") that `chart` draws whole at its current size, else the last.
void set_fitting_title(QChart* chart, QAbstractAxis* axis, const QStringList& titles);

}  // namespace remat
