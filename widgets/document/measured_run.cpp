#include "widgets/document/measured_run.h"

#include <QCoreApplication>

namespace remat {

QString backend_label(const QString& backend) {
  if (backend.isEmpty() || backend == "cpu") return QCoreApplication::translate("RunController", "the CPU");
  return backend.startsWith("cuda: ")
             ? QCoreApplication::translate("RunController", "the GPU (%1)").arg(backend.mid(6))
             : backend;
}

}  // namespace remat
