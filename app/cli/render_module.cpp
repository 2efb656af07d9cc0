#include "app/cli/render_module.h"

#include "core/base/errors.h"
#include "core/base/module_loader.h"

namespace remat::cli {

const RenderModule& render_module() {
#ifdef REMAT_RENDER_MODULE_BUILD_PATH  // app/CMakeLists.txt, in the GUI build
  static const ModuleSpec spec{kRenderModuleFile, kRenderModuleEntry, "REMAT_RENDER_MODULE",
                               REMAT_RENDER_MODULE_BUILD_PATH, REMAT_MODULE_INSTALL_DIR, "the picture module"};
  std::string why;
  const auto entry = reinterpret_cast<RenderModuleEntry>(open_module(spec, &why));
  if (!entry) throw InputError("pictures need the Qt renderer: " + why);
  const RenderModule* m = entry(render_module_abi().c_str());
  if (!m) throw InputError("pictures need the Qt renderer: the picture module was built from another version of remat; "
                           "rebuild or reinstall both");
  return *m;
#else
  throw InputError("pictures need the GUI build (Qt); this remat was built without it (REMAT_BUILD_GUI=OFF)");
#endif
}

}  // namespace remat::cli
