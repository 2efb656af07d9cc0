#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/io/atomic_file.h"
#include "core/base/errors.h"

using namespace remat;
namespace fs = std::filesystem;

TEST(AtomicFile, WritesWholeFile) {
  const fs::path dir = fs::temp_directory_path() / "remat_atomic_ok";
  fs::create_directories(dir);
  const std::string path = (dir / "out.csv").string();
  write_file_atomically(path, [](std::ostream& o) { o << "a,b\n1,2\n"; });
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(all, "a,b\n1,2\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);  // no temporary left
  fs::remove_all(dir);
}

TEST(AtomicFile, FailureLeavesNothing) {
  const fs::path dir = fs::temp_directory_path() / "remat_atomic_fail";
  fs::create_directories(dir);
  const std::string path = (dir / "out.csv").string();
  EXPECT_THROW(write_file_atomically(path, [](std::ostream& o) {
                 o << "partial";
                 throw std::runtime_error("disk full");
               }),
               InputError);
  EXPECT_TRUE(fs::is_empty(dir));
  try {
    write_file_atomically("/nonexistent-dir/x.csv", [](std::ostream& o) { o << 1; });
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '/nonexistent-dir/x.csv'"), std::string::npos);
  }
  fs::remove_all(dir);
}
