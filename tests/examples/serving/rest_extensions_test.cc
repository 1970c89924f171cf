// Tests for kiln_serve's REST extensions: the binary tensor extension, /versions/ routes,
// Prometheus /metrics, warm-up, and the repository API (load/unload while requests run).
#define BOOST_TEST_MODULE rest_extensions_test
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "examples/serving/server.h"
#include "tests/examples/serving/serving_test_util.h"

namespace kiln::serving {
namespace {

std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> BytesToFloats(std::string_view bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

const std::vector<float> kX = {1, 2, 3, 4, 5, 6, 7, 8.5f};
const std::vector<float> kB = {0.5f, -1, 2, 0};

// The affine request with x as binary data and b as JSON; `outputs` is the JSON after
// "outputs": (empty: none given). Returns {header JSON + binary, header length}.
std::pair<std::string, size_t> BinaryAffineRequest(const std::string& extra) {
  std::string header =
      R"({"inputs":[{"name":"x","shape":[2,4],"datatype":"FP32","parameters":{"binary_data_size":32}},)"
      R"({"name":"b","shape":[4],"datatype":"FP32","data":[0.5,-1,2,0]}])" +
      extra + "}";
  return {header + FloatBytes(kX), header.size()};
}

HttpResponse PostBinary(HttpClient& c, const std::string& target, const std::string& body,
                        size_t header_length) {
  return Call(c, "POST", target, body,
              {{"Inference-Header-Content-Length", std::to_string(header_length)},
               {"Content-Type", "application/octet-stream"}});
}

// The JSON header and binary tail of a binary reply.
std::pair<Json, std::string> SplitBinaryReply(const HttpResponse& r) {
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  auto it = r.headers.find("inference-header-content-length");
  BOOST_REQUIRE_MESSAGE(it != r.headers.end(), "no Inference-Header-Content-Length");
  BOOST_TEST(r.headers.at("content-type") == "application/octet-stream");
  size_t n = std::stoul(it->second);
  BOOST_REQUIRE(n <= r.body.size());
  auto j = ParseJson(r.body.substr(0, n));
  BOOST_REQUIRE_MESSAGE(j.ok(), r.body.substr(0, n));
  return {std::move(*j), r.body.substr(n)};
}

BOOST_AUTO_TEST_CASE(binary_inputs_and_outputs) {
  auto server = StartServer();
  auto c = Connect(*server);
  // y binary, s as JSON.
  auto [body, len] = BinaryAffineRequest(
      R"(,"outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"s"}])");
  auto [header, tail] = SplitBinaryReply(PostBinary(*c, "/v2/models/affine/infer", body, len));
  const Json& outs = *header.Find("outputs");
  BOOST_REQUIRE(outs.size() == 2u);
  const Json& y = outs.items()[0];
  BOOST_TEST(y.Find("data") == nullptr);
  BOOST_TEST(y.Find("parameters")->Find("binary_data_size")->int_value() == 32);
  std::vector<float> want_y;
  for (size_t i = 0; i < kX.size(); ++i) want_y.push_back(kX[i] + kB[i % 4]);
  BOOST_TEST(BytesToFloats(tail) == want_y, boost::test_tools::per_element());
  BOOST_TEST(Numbers(*outs.items()[1].Find("data")) == std::vector<double>({10, 26.5}),
             boost::test_tools::per_element());

  // binary_data_output: every output raw, in order (y then s).
  auto [body2, len2] = BinaryAffineRequest(R"(,"parameters":{"binary_data_output":true})");
  auto [header2, tail2] = SplitBinaryReply(PostBinary(*c, "/v2/models/affine/infer", body2, len2));
  BOOST_REQUIRE(tail2.size() == 32u + 8u);
  BOOST_TEST(BytesToFloats(tail2.substr(32)) == std::vector<float>({10, 26.5f}),
             boost::test_tools::per_element());

  // A plain JSON request on the same connection still gets a JSON reply.
  std::string json = R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,1,1,1]},)"
                     R"({"name":"b","shape":[4],"datatype":"FP32","data":[0,0,0,0]}]})";
  HttpResponse plain = Call(*c, "POST", "/v2/models/affine/infer", json);
  BOOST_TEST(plain.status == 200);
  BOOST_TEST(plain.headers.count("inference-header-content-length") == 0u);
  BOOST_TEST(plain.headers.at("content-type") == "application/json");
}

// --max-request-bytes (issue 17 finding 8): 413 naming the limit, never 500, over JSON and
// binary REST; the connection stays usable and a request under the limit is served.
BOOST_AUTO_TEST_CASE(request_tensors_over_the_limit_are_413) {
  ServerOptions o = TestOptions();
  o.max_request_bytes = 4096;
  auto server = StartServer(o);
  auto c = Connect(*server);
  auto expect_413 = [&](const HttpResponse& r, const std::string& part) {
    BOOST_TEST(r.status == 413, r.body);
    BOOST_TEST(ErrorOf(r).find("4096 bytes (--max-request-bytes)") != std::string::npos, r.body);
    BOOST_TEST(ErrorOf(r).find(part) != std::string::npos, r.body);
  };
  const std::string b = R"({"name":"b","shape":[4],"datatype":"FP32","data":[0,0,0,0]})";
  // (1) JSON: a declared shape over the limit is refused before its data is decoded.
  expect_413(Call(*c, "POST", "/v2/models/affine/infer",
                  R"({"inputs":[{"name":"x","shape":[1099511627776,4],"datatype":"FP32",)"
                  R"("data":[1]},)" + b + "]}"),
             "inputs[0] 'x': shape [1099511627776, 4] makes the inputs");
  // (2) JSON: x (150 rows, 2400 bytes) fits, but with the y and s it implies (3000 bytes) the
  // request would hold 5416.
  std::string rows;
  for (int k = 0; k < 150 * 4; ++k) rows += k ? ",1" : "1";
  expect_413(Call(*c, "POST", "/v2/models/affine/infer",
                  R"({"inputs":[{"name":"x","shape":[150,4],"datatype":"FP32","data":[)" + rows +
                      "]}," + b + "]}"),
             "model 'affine': the inputs and the outputs they imply are 5416 bytes");
  // (3) Binary: the same request with x as raw data.
  std::string header =
      R"({"inputs":[{"name":"x","shape":[150,4],"datatype":"FP32","parameters":{"binary_data_size":2400}},)" +
      b + "]}";
  expect_413(PostBinary(*c, "/v2/models/affine/infer",
                        header + FloatBytes(std::vector<float>(600, 1.0f)), header.size()),
             "are 5416 bytes");
  // (4) Binary: a declared shape over the limit.
  std::string huge =
      R"({"inputs":[{"name":"x","shape":[4096,4],"datatype":"FP32","parameters":{"binary_data_size":4}},)" +
      b + "]}";
  expect_413(PostBinary(*c, "/v2/models/affine/infer", huge + FloatBytes({1.0f}), huge.size()),
             "shape [4096, 4] makes the inputs 65536 bytes");
  // (5) A body over the limit (it bounds the body too) is refused from its Content-Length.
  {
    auto big = Connect(*server);
    HttpResponse r = Call(*big, "POST", "/v2/models/affine/infer", std::string(5000, ' '));
    BOOST_TEST(r.status == 413);
    BOOST_TEST(ErrorOf(r).find("larger than 4096 bytes (--max-request-bytes)") !=
               std::string::npos, r.body);
  }
  // (6) Under the limit, on the same connection: served.
  auto [body, len] = BinaryAffineRequest(R"(,"parameters":{"binary_data_output":true})");
  auto [reply, tail] = SplitBinaryReply(PostBinary(*c, "/v2/models/affine/infer", body, len));
  BOOST_TEST(tail.size() == 32u + 8u);
}

BOOST_AUTO_TEST_CASE(binary_errors_are_400_naming_the_problem) {
  auto server = StartServer();
  auto c = Connect(*server);
  auto [body, len] = BinaryAffineRequest("");
  struct Case {
    std::string body;
    std::string header_length;
    std::string needle;
  } cases[] = {
      {body.substr(0, body.size() - 4), std::to_string(len), "only 28 bytes of binary data"},
      {body + "xx", std::to_string(len), "2 bytes of binary data that no input"},
      {body, std::to_string(body.size() + 1), "exceeds the body"},
      {body, "12a", "must be a byte count"},
      {body, std::to_string(len - 1), "malformed JSON"},
  };
  for (const Case& k : cases) {
    HttpResponse r = Call(*c, "POST", "/v2/models/affine/infer", k.body,
                          {{"Inference-Header-Content-Length", k.header_length}});
    BOOST_TEST(r.status == 400, k.needle);
    BOOST_TEST(ErrorOf(r).find(k.needle) != std::string::npos, ErrorOf(r));
  }
  // 32 bytes claimed for a [2, 3] FP32 tensor (24 bytes): the size must match the shape.
  std::string header =
      R"({"inputs":[{"name":"x","shape":[2,4],"datatype":"FP32","parameters":{"binary_data_size":24}},)"
      R"({"name":"b","shape":[4],"datatype":"FP32","data":[0.5,-1,2,0]}]})";
  HttpResponse r = PostBinary(*c, "/v2/models/affine/infer", header + FloatBytes(kX).substr(0, 24),
                              header.size());
  BOOST_TEST(r.status == 400);
  BOOST_TEST(ErrorOf(r).find("24 bytes of data, but shape [2, 4] of FP32 needs 32") !=
                 std::string::npos,
             ErrorOf(r));
}

BOOST_AUTO_TEST_CASE(version_routes) {
  auto server = StartServer();
  auto c = Connect(*server);
  HttpResponse meta = Call(*c, "GET", "/v2/models/affine/versions/1");
  BOOST_TEST(meta.status == 200);
  BOOST_TEST(ParseBody(meta).Find("versions")->items()[0].string_value() == "1");
  BOOST_TEST(Call(*c, "GET", "/v2/models/affine/versions/1/ready").status == 200);
  HttpResponse infer = Call(*c, "POST", "/v2/models/spin/versions/1/infer", SpinRequest(10));
  BOOST_REQUIRE_MESSAGE(infer.status == 200, infer.body);
  BOOST_TEST(ParseBody(infer).Find("model_version")->string_value() == "1");
  HttpResponse wrong = Call(*c, "GET", "/v2/models/affine/versions/2");
  BOOST_TEST(wrong.status == 404);
  BOOST_TEST(ErrorOf(wrong) == "model 'affine' has no version '2'");
  BOOST_TEST(Call(*c, "POST", "/v2/models/spin/versions/2/infer", SpinRequest(10)).status == 404);
  BOOST_TEST(Call(*c, "GET", "/v2/models/affine/versions/").status == 404);
  BOOST_TEST(Call(*c, "GET", "/v2/models/affine/versions/1/bogus").status == 404);
}

// The value of the metric line `name{labels}` (labels exactly as rendered), or -1.
double Metric(const std::string& page, const std::string& series) {
  size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + series.size() + 2));
}

BOOST_AUTO_TEST_CASE(prometheus_metrics) {
  auto server = StartServer();
  auto c = Connect(*server);
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(Call(*c, "POST", "/v2/models/spin/infer", SpinRequest(100)).status == 200);
  }
  BOOST_TEST(Call(*c, "POST", "/v2/models/spin/infer", "{").status == 400);
  BOOST_TEST(Call(*c, "POST", "/v2/models/nope/infer", SpinRequest(1)).status == 404);
  // A worker counts itself idle just after its reply is on its way, so the last request's
  // worker may still show busy for a moment: read the page until it is idle (bounded).
  HttpResponse r;
  for (int attempt = 0; attempt < 200; ++attempt) {
    r = Call(*c, "GET", "/metrics");
    BOOST_REQUIRE(r.status == 200);
    if (Metric(r.body, "kiln_busy_workers") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_TEST(r.headers.at("content-type") == "text/plain; version=0.0.4");
  const std::string& page = r.body;
  BOOST_TEST(Metric(page, R"(kiln_inference_requests_total{model="spin",protocol="rest",status="200"})") == 3);
  BOOST_TEST(Metric(page, R"(kiln_inference_requests_total{model="spin",protocol="rest",status="400"})") == 1);
  BOOST_TEST(Metric(page, R"(kiln_inference_requests_total{model="nope",protocol="rest",status="404"})") == 1);
  BOOST_TEST(Metric(page, R"(kiln_inference_request_duration_seconds_count{model="spin"})") == 4);
  BOOST_TEST(Metric(page, R"(kiln_inference_request_duration_seconds_bucket{model="spin",le="+Inf"})") == 4);
  BOOST_TEST(Metric(page, R"(kiln_inference_in_flight{model="spin"})") == 0);
  BOOST_TEST(Metric(page, "kiln_inference_queue_depth") == 0);
  BOOST_TEST(Metric(page, "kiln_busy_workers") == 0);
  // The runtime compiled the spin kernels for the first request (or another test did), and
  // every request called them through shape dispatch.
  BOOST_TEST(Metric(page, "kiln_jit_compilations_total") >= 1);
  BOOST_TEST(Metric(page, "kiln_jit_cache_hits_total") >= 0);  // present
  BOOST_TEST(Metric(page, "kiln_jit_dispatch_specialized_calls_total") +
                 Metric(page, "kiln_jit_dispatch_generic_calls_total") >=
             3);
  BOOST_TEST(Call(*c, "POST", "/metrics").status == 405);
}

// The demo `add` model in a repository with a runtime of its own, so JIT counts are one test's.
std::shared_ptr<ModelRepository> OwnAddModel(const RuntimeOptions& options,
                                             std::shared_ptr<Runtime>* runtime) {
  auto rt = Runtime::Create(options);
  BOOST_REQUIRE(rt.ok());
  *runtime = *rt;
  auto own = ModelRepository::Load({{"add", NewRepository()->Find("add")->path}}, *rt);
  BOOST_REQUIRE(own.ok());
  return *own;
}

BOOST_AUTO_TEST_CASE(warmup_compiles_before_ready) {
  std::shared_ptr<Runtime> runtime;
  auto own = OwnAddModel({}, &runtime);
  ServerOptions o = TestOptions();
  o.warmup = true;
  o.warmup_dims = {{"n", 3}};
  auto server = StartServer(o, own);
  int64_t compiled = runtime->stats().engine.compilations;
  BOOST_TEST(compiled >= 1);
  auto c = Connect(*server);
  BOOST_TEST(Call(*c, "GET", "/v2/health/ready").status == 200);
  std::string req = R"({"inputs":[{"name":"a","shape":[3],"datatype":"FP32","data":[1,2,3]},)"
                    R"({"name":"b","shape":[3],"datatype":"FP32","data":[1,1,1]}]})";
  BOOST_TEST(Call(*c, "POST", "/v2/models/add/infer", req).status == 200);
  BOOST_TEST(runtime->stats().engine.compilations == compiled);  // nothing left to compile
}

BOOST_AUTO_TEST_CASE(warmup_dims_flag_parses_ranges_and_lists) {
  WarmupShapes shapes;
  BOOST_TEST(ParseWarmupDims("seq=1:8", jit::Bucketing::kPowerOfTwo, &shapes).ok());
  BOOST_TEST(ParseWarmupDims("batch=4,1,2,4", jit::Bucketing::kPowerOfTwo, &shapes).ok());
  BOOST_TEST(shapes.values["seq"] == std::vector<int64_t>({1, 2, 3, 4, 7, 8}),
             boost::test_tools::per_element());
  BOOST_TEST(shapes.values["batch"] == std::vector<int64_t>({1, 2, 4}),
             boost::test_tools::per_element());
  for (const char* bad : {"seq=1:8", "x", "=1:2", "x=0:4", "x=4:2", "x=1,,2", "x=a", "x=1:"}) {
    Status st = ParseWarmupDims(bad, jit::Bucketing::kPowerOfTwo, &shapes);
    BOOST_TEST(st.code() == StatusCode::kInvalidArgument, bad);
    BOOST_TEST(st.message().find(bad) != std::string::npos, st.ToString());
  }
  // Points: the product of the lists a model uses; other symbols from dims or 1.
  FunctionSignature sig;
  sig.symbols = {"batch", "seq", "other"};
  shapes.dims = {{"other", 5}};
  auto points = WarmupPoints(sig, shapes);
  BOOST_TEST(points.size() == 18u);
  BOOST_TEST(points.front().at("batch") == 1);
  BOOST_TEST(points.front().at("seq") == 1);
  BOOST_TEST(points.back().at("batch") == 4);
  BOOST_TEST(points.back().at("seq") == 8);
  BOOST_TEST(points.back().at("other") == 5);
}

BOOST_AUTO_TEST_CASE(warmup_over_a_range_leaves_nothing_to_compile_in_it) {
  // No JIT cache, so every kernel the warm-up needs is compiled (not loaded) and counted.
  RuntimeOptions ro;
  ro.jit_cache = RuntimeOptions::kJitCacheOff;
  std::shared_ptr<Runtime> runtime;
  auto own = OwnAddModel(ro, &runtime);
  ServerOptions o = TestOptions();
  o.warmup = true;
  o.warmup_values = {{"n", WarmupBucketValues(1, 40, jit::Bucketing::kPowerOfTwo)}};
  auto server = StartServer(o, own);
  RuntimeStats warm = runtime->stats();
  // Hot shapes were specialized before ready, as requests would have made them.
  BOOST_TEST(warm.dispatch.specializations >= 1);
  BOOST_TEST(warm.dispatch.fast_generics == 0);  // optimized code at once, no first tier
  auto c = Connect(*server);
  BOOST_TEST(Call(*c, "GET", "/v2/health/ready").status == 200);
  for (int n = 1; n <= 40; ++n) {
    std::string a, b;
    for (int i = 0; i < n; ++i) {
      a += (i ? "," : "") + std::to_string(i);
      b += i ? ",0.5" : "0.5";
    }
    std::string req = R"({"inputs":[{"name":"a","shape":[)" + std::to_string(n) +
                      R"(],"datatype":"FP32","data":[)" + a + R"(]},{"name":"b","shape":[)" +
                      std::to_string(n) + R"(],"datatype":"FP32","data":[)" + b + "]}]}";
    HttpResponse r = Call(*c, "POST", "/v2/models/add/infer", req);
    BOOST_REQUIRE(r.status == 200);
    Json body = ParseBody(r);
    const Json* data = body.Find("outputs")->items()[0].Find("data");
    BOOST_REQUIRE(data->items().size() == static_cast<size_t>(n));
    BOOST_TEST(data->items()[n - 1].double_value() == n - 0.5);
  }
  runtime->WaitForBackgroundCompiles();
  RuntimeStats after = runtime->stats();
  BOOST_TEST(after.engine.compilations == warm.engine.compilations);
  BOOST_TEST(after.dispatch.compilations == warm.dispatch.compilations);
  BOOST_TEST(after.dispatch.hits >= warm.dispatch.hits + 40);  // every request specialized
}

BOOST_AUTO_TEST_CASE(context_pool_lends_distinct_contexts_and_reuses_them) {
  auto model = Repository()->Find("spin");
  auto a = model->AcquireContext();
  auto b = model->AcquireContext();
  BOOST_REQUIRE(a.ok() && b.ok());
  Context* pa = &**a;
  BOOST_TEST(pa != &**b);
  *a = ContextLease();  // returned to the pool
  auto again = model->AcquireContext();
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(&**again == pa);
}

std::string IndexState(HttpClient& c, const std::string& name, std::string* version) {
  HttpResponse r = Call(c, "POST", "/v2/repository/index");
  BOOST_REQUIRE(r.status == 200);
  Json j = ParseBody(r);
  for (const Json& e : j.items()) {
    if (e.Find("name")->string_value() != name) continue;
    *version = e.Find("version")->string_value();
    return e.Find("state")->string_value();
  }
  return "";
}

BOOST_AUTO_TEST_CASE(reload_and_unload_keep_requests_in_flight) {
  auto repo = NewRepository();  // this test changes it
  auto server = StartServer(TestOptions(), repo);
  auto c = Connect(*server);
  std::string version;
  BOOST_TEST(IndexState(*c, "spin", &version) == "READY");
  BOOST_TEST(version == "1");

  // A long request on version 1 runs while version 2 is loaded and while spin is unloaded.
  int64_t n = SpinCountFor(1500);
  std::future<HttpResponse> in_flight = std::async(std::launch::async, [&] {
    auto c2 = Connect(*server);
    return Call(*c2, "POST", "/v2/models/spin/infer", SpinRequest(n));
  });
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Metric(Call(*c, "GET", "/metrics").body, "kiln_busy_workers") < 1 &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  BOOST_TEST(Metric(Call(*c, "GET", "/metrics").body, "kiln_busy_workers") == 1);
  HttpResponse load = Call(*c, "POST", "/v2/repository/models/spin/load");
  BOOST_TEST(load.status == 200, load.body);
  BOOST_TEST(IndexState(*c, "spin", &version) == "READY");
  BOOST_TEST(version == "2");
  HttpResponse v2 = Call(*c, "POST", "/v2/models/spin/infer", SpinRequest(10));
  BOOST_REQUIRE_MESSAGE(v2.status == 200, v2.body);
  BOOST_TEST(ParseBody(v2).Find("model_version")->string_value() == "2");
  BOOST_TEST(Call(*c, "POST", "/v2/repository/models/spin/unload").status == 200);
  BOOST_TEST(IndexState(*c, "spin", &version) == "UNAVAILABLE");
  BOOST_TEST(Call(*c, "POST", "/v2/models/spin/infer", SpinRequest(10)).status == 404);
  BOOST_TEST(Call(*c, "GET", "/v2/models/spin/ready").status == 404);

  // The request that started on version 1 finishes on it, with the right answer.
  HttpResponse first = in_flight.get();
  BOOST_REQUIRE_MESSAGE(first.status == 200, first.body);
  Json j = ParseBody(first);
  BOOST_TEST(j.Find("model_version")->string_value() == "1");
  BOOST_TEST(j.Find("outputs")->items()[0].Find("data")->items()[0].int_value() == n * (n - 1) / 2);

  // Loaded again: version 3 serves.
  BOOST_TEST(Call(*c, "POST", "/v2/repository/models/spin/load").status == 200);
  HttpResponse v3 = Call(*c, "POST", "/v2/models/spin/infer", SpinRequest(10));
  BOOST_REQUIRE_MESSAGE(v3.status == 200, v3.body);
  BOOST_TEST(ParseBody(v3).Find("model_version")->string_value() == "3");

  // Errors.
  BOOST_TEST(Call(*c, "POST", "/v2/repository/models/nope/load").status == 404);
  BOOST_TEST(Call(*c, "POST", "/v2/repository/models/nope/unload").status == 404);
  BOOST_TEST(Call(*c, "GET", "/v2/repository/models/spin/load").status == 405);
  BOOST_TEST(Call(*c, "POST", "/v2/repository/models/spin/bogus").status == 404);
}

}  // namespace
}  // namespace kiln::serving
