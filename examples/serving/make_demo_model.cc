// make_demo_model: writes the demo models (affine, spin, add .kiln) to a folder, for kiln_serve.
//
//   bazel run //examples/serving:make_demo_model -- /tmp/models
#include <cstdio>
#include <string>

#include "examples/serving/demo_model.h"

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  struct {
    const char* file;
    kiln::StatusOr<std::vector<uint8_t>> (*build)();
  } models[] = {{"affine.kiln", kiln::serving::BuildAffineModel},
                {"spin.kiln", kiln::serving::BuildSpinModel},
                {"add.kiln", kiln::serving::BuildAddModel}};
  for (const auto& m : models) {
    std::string path = dir + "/" + m.file;
    auto bytes = m.build();
    kiln::Status st = bytes.ok() ? kiln::serving::WriteBytes(path, *bytes) : bytes.status();
    if (!st.ok()) {
      std::fprintf(stderr, "make_demo_model: %s: %s\n", path.c_str(), st.ToString().c_str());
      return 1;
    }
    std::printf("wrote %s (%zu bytes)\n", path.c_str(), bytes->size());
  }
  return 0;
}
