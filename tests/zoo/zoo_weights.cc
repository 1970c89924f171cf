// Makes the zoo subset's test data (tests/zoo/make_refs.sh runs it):
//   zoo_weights strip IN.onnx OUT.graph.onnx   float weights -> their ranges
//   zoo_weights make DATA_DIR OUT_DIR          per case of DATA_DIR/cases.txt: OUT_DIR/NAME.onnx
//                                              (weights refilled) and OUT_DIR/NAME.in.npy
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "base/allocator.h"
#include "tests/zoo/weights.h"
#include "tools/npy.h"

namespace kiln::zoo {
namespace {

Status ReadModel(const std::string& path, onnx::ModelProto& model) {
  std::ifstream in(path, std::ios::binary);
  if (!in || !model.ParseFromIstream(&in)) return InvalidArgument(path + ": not an ONNX model");
  return Status::Ok();
}

Status WriteModel(const std::string& path, const onnx::ModelProto& model) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out)) return Internal(path + ": write failed");
  return Status::Ok();
}

Status Strip(const std::string& in, const std::string& out) {
  onnx::ModelProto model;
  RETURN_IF_ERROR(ReadModel(in, model));
  ASSIGN_OR_RETURN(int n, StripWeights(model));
  std::printf("%s: %d initializers stripped\n", out.c_str(), n);
  return WriteModel(out, model);
}

Status Make(const std::string& data, const std::string& out) {
  std::ifstream f(data + "/cases.txt");
  std::stringstream text;
  text << f.rdbuf();
  ASSIGN_OR_RETURN(std::vector<Case> cases, ParseCases(text.str()));
  Allocator allocator;
  for (const Case& c : cases) {
    onnx::ModelProto model;
    RETURN_IF_ERROR(ReadModel(data + "/" + c.name + ".graph.onnx", model));
    RETURN_IF_ERROR(FillWeights(model).status());
    RETURN_IF_ERROR(WriteModel(out + "/" + c.name + ".onnx", model));
    ASSIGN_OR_RETURN(Tensor input, MakeInput(c, allocator));
    RETURN_IF_ERROR(WriteNpy(out + "/" + c.name + ".in.npy", input));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace kiln::zoo

int main(int argc, char** argv) {
  std::string cmd = argc == 4 ? argv[1] : "";
  kiln::Status s = cmd == "strip" ? kiln::zoo::Strip(argv[2], argv[3])
                   : cmd == "make" ? kiln::zoo::Make(argv[2], argv[3])
                                   : kiln::InvalidArgument("usage: zoo_weights strip IN OUT | make DATA_DIR OUT_DIR");
  if (!s.ok()) {
    std::fprintf(stderr, "zoo_weights: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
