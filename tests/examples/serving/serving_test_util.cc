// Shared helpers of the kiln_serve tests: the demo models, a server on a loopback port, HTTP calls.
#include "tests/examples/serving/serving_test_util.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>

#include "examples/serving/demo_model.h"
#include "vm/context.h"

namespace kiln::serving {

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

namespace {

std::shared_ptr<const Runtime>& TestRuntimeSlot() {
  static std::shared_ptr<const Runtime> runtime;
  return runtime;
}

// Waits for the test runtime's background compiles when the test module ends, before the
// process exits: a compile still running while static destructors run can crash inside LLVM
// (a test binary did, with SIGSEGV, after "No errors detected"), as embed/runtime.h warns.
struct FinishBackgroundCompiles {
  ~FinishBackgroundCompiles() {
    if (TestRuntimeSlot()) TestRuntimeSlot()->WaitForBackgroundCompiles();
  }
};
BOOST_TEST_GLOBAL_FIXTURE(FinishBackgroundCompiles);

}  // namespace

// One runtime (JIT, vendors, allocator) for the whole test binary, as in kiln_serve.
std::shared_ptr<const Runtime> TestRuntime() {
  static const bool created = [] {
    auto r = Runtime::Create();
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    TestRuntimeSlot() = std::shared_ptr<const Runtime>(*r);
    return true;
  }();
  (void)created;
  return TestRuntimeSlot();
}

std::shared_ptr<ModelRepository> NewRepository() {
  static const std::vector<ModelSource> sources = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string dir = tmp ? tmp : "/tmp";
    std::vector<ModelSource> sources;
    struct {
      const char* name;
      StatusOr<std::vector<uint8_t>> (*build)();
    } models[] = {{"affine", BuildAffineModel}, {"spin", BuildSpinModel}, {"add", BuildAddModel}};
    for (const auto& m : models) {
      std::string path = dir + "/" + m.name + ".kiln";
      auto bytes = m.build();
      BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
      BOOST_REQUIRE(WriteBytes(path, *bytes).ok());
      sources.push_back({m.name, path});
    }
    return sources;
  }();
  auto r = ModelRepository::Load(sources, TestRuntime());
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *r;
}

std::shared_ptr<ModelRepository> Repository() {
  static std::shared_ptr<ModelRepository> repo = NewRepository();
  return repo;
}

// A spin `n` that keeps a worker busy for about `ms` on this machine (sanitizer builds are
// many times slower, so fixed counts would make timing-based tests flaky).
int64_t SpinCountFor(int ms) {
  static const double per_ms = [] {
    const Model& spin = *Repository()->Find("spin");
    auto ctx = Context::Create(spin.exe);
    BOOST_REQUIRE(ctx.ok());
    int64_t n = 20000;
    Tensor input = Tensor::Wrap(&n, DType::kI64, Shape());
    BOOST_REQUIRE((*ctx)->Invoke(spin.function, {input}).ok());  // compiles the kernels
    auto start = Clock::now();
    BOOST_REQUIRE((*ctx)->Invoke(spin.function, {input}).ok());
    double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return n / std::max(elapsed, 1e-3);
  }();
  return std::max<int64_t>(1000, static_cast<int64_t>(per_ms * ms));
}

ServerOptions TestOptions() {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.workers = 2;
  o.timeout_ms = 5000;
  return o;
}

std::unique_ptr<Server> StartServer(const ServerOptions& options,
                                    std::shared_ptr<ModelRepository> repo) {
  auto s = Server::Start(repo ? std::move(repo) : Repository(), options);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  return std::move(*s);
}

// The client's per-operation timeout only catches hangs: 30 s, because one 70,000-iteration spin
// request under TSan on a busy 2-core machine took over 10 s.
std::unique_ptr<HttpClient> Connect(const Server& server, milliseconds timeout) {
  auto c = HttpClient::Connect("127.0.0.1", server.port(), timeout);
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  return std::move(*c);
}

HttpResponse Call(HttpClient& c, const std::string& method, const std::string& target,
                  const std::string& body, const HttpHeaders& headers) {
  auto r = c.Request(method, target, body, headers);
  BOOST_REQUIRE_MESSAGE(r.ok(), method << " " << target << ": " << r.status().ToString());
  return std::move(*r);
}

Json ParseBody(const HttpResponse& r) {
  auto j = ParseJson(r.body);
  BOOST_REQUIRE_MESSAGE(j.ok(), "reply is not JSON: " << r.body);
  return std::move(*j);
}

// The error message of a {"error": "..."} reply.
std::string ErrorOf(const HttpResponse& r) {
  Json j = ParseBody(r);
  const Json* e = j.Find("error");
  BOOST_REQUIRE_MESSAGE(e != nullptr && e->is_string() && j.size() == 1,
                        "not an error reply: " << r.body);
  return e->string_value();
}

std::vector<double> Numbers(const Json& list) {
  std::vector<double> v;
  for (const Json& x : list.items()) v.push_back(x.double_value());
  return v;
}

std::string SpinRequest(int64_t n) {
  return R"({"inputs":[{"name":"n","shape":[],"datatype":"INT64","data":[)" + std::to_string(n) +
         "]}]}";
}

}  // namespace kiln::serving
