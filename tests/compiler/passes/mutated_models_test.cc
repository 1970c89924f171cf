// Robustness of import + shape inference against hostile models: the ONNX backend node tests
// with integer attributes, input dims and constant shape values replaced by extreme values
// (INT64_MIN, -1, 0, huge), and with random byte corruption. Any status is fine; a crash, hang
// or sanitizer report is not (run under --config=asan to check the latter).
#define BOOST_TEST_MODULE mutated_models_test
#include <dirent.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/onnx/importer.h"
#include "compiler/passes/shape_inference.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kExtremes[] = {
    std::numeric_limits<int64_t>::min(), -(int64_t{1} << 40), -2, -1, 0, 1, 3, int64_t{1} << 40,
    std::numeric_limits<int64_t>::max()};

std::string NodeDir() {
  const char* env = std::getenv("KILN_ONNX_TESTDATA");
  return std::string(env ? env : "/usr/share/libonnx-testdata/data") + "/node";
}

std::vector<std::string> Models() {
  std::vector<std::string> out;
  if (DIR* d = opendir(NodeDir().c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n[0] != '.') out.push_back(NodeDir() + "/" + n + "/model.onnx");
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Load(const std::string& path, onnx::ModelProto* m) {
  std::ifstream f(path, std::ios::binary);
  return f && m->ParseFromIstream(&f);
}

// Import and infer; the status is irrelevant, returning at all is the point.
int Run(const std::string& bytes) {
  StatusOr<Graph> g = ImportOnnxBytes(bytes);
  if (!g.ok()) return 0;
  return InferShapes(*g).ok() ? 2 : 1;
}

int64_t Pick(std::mt19937_64& rng) { return kExtremes[rng() % std::size(kExtremes)]; }

// One random mutation: an int/ints attribute, an input dim, or an int64 initializer value.
void Mutate(onnx::ModelProto& m, std::mt19937_64& rng) {
  onnx::GraphProto* g = m.mutable_graph();
  switch (rng() % 3) {
    case 0: {
      if (g->node_size() == 0) return;
      onnx::NodeProto* n = g->mutable_node(static_cast<int>(rng() % g->node_size()));
      if (n->attribute_size() == 0) return;
      onnx::AttributeProto* a = n->mutable_attribute(static_cast<int>(rng() % n->attribute_size()));
      if (a->type() == onnx::AttributeProto::INT) a->set_i(Pick(rng));
      for (int i = 0; i < a->ints_size(); ++i)
        if (rng() % 2) a->set_ints(i, Pick(rng));
      return;
    }
    case 1: {
      if (g->input_size() == 0) return;
      auto* shape = g->mutable_input(static_cast<int>(rng() % g->input_size()))
                        ->mutable_type()
                        ->mutable_tensor_type()
                        ->mutable_shape();
      if (shape->dim_size() == 0) return;
      shape->mutable_dim(static_cast<int>(rng() % shape->dim_size()))
          ->set_dim_value(std::max<int64_t>(Pick(rng), 0));
      return;
    }
    default: {
      // Constant nodes' int64 tensors (shapes, axes, pads, k...).
      for (onnx::NodeProto& n : *g->mutable_node()) {
        for (onnx::AttributeProto& a : *n.mutable_attribute()) {
          if (!a.has_t() || a.t().data_type() != onnx::TensorProto::INT64) continue;
          onnx::TensorProto* t = a.mutable_t();
          for (int i = 0; i < t->int64_data_size(); ++i) t->set_int64_data(i, Pick(rng));
          if (t->has_raw_data() && t->raw_data().size() >= 8) {
            int64_t v = Pick(rng);
            std::memcpy(&(*t->mutable_raw_data())[0], &v, 8);
          }
          return;
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(extreme_values_never_crash) {
  std::vector<std::string> models = Models();
  BOOST_TEST_REQUIRE(models.size() > 900u);
  std::mt19937_64 rng(7);
  int runs = 0, inferred = 0;
  for (const std::string& path : models) {
    onnx::ModelProto original;
    if (!Load(path, &original)) continue;
    for (int round = 0; round < 6; ++round) {
      onnx::ModelProto m = original;
      for (int k = 0; k <= round % 3; ++k) Mutate(m, rng);
      inferred += Run(m.SerializeAsString()) == 2;
      ++runs;
    }
  }
  BOOST_TEST_MESSAGE(runs << " mutated models, " << inferred << " still inferred");
  BOOST_TEST(runs > 5000);
}

BOOST_AUTO_TEST_CASE(random_byte_corruption_never_crashes) {
  std::vector<std::string> models = Models();
  std::mt19937_64 rng(11);
  int runs = 0;
  for (size_t i = 0; i < models.size(); i += 3) {
    std::ifstream f(models[i], std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string good = ss.str();
    if (good.empty()) continue;
    for (int round = 0; round < 4; ++round) {
      std::string bad = good;
      for (int k = 0; k < 1 + round; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
      Run(bad);
      ++runs;
    }
  }
  BOOST_TEST(runs > 1000);
}

}  // namespace
}  // namespace kiln::compiler
