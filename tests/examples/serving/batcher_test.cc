// Tests for examples/serving/batcher: concurrent requests of the demo `add` model (a[n] + b[n])
// run as one stacked invocation, each gets its own rows back, and a request that contradicts
// itself gets its own error while the others still succeed.
#define BOOST_TEST_MODULE batcher_test
#include "examples/serving/batcher.h"

#include <boost/test/unit_test.hpp>
#include <thread>
#include <vector>

#include "examples/serving/inference.h"
#include "tests/examples/serving/serving_test_util.h"
#include "vm/context.h"

namespace kiln::serving {
namespace {

Tensor Floats(const std::vector<float>& v) {
  auto t = Tensor::Allocate(DefaultAllocator(), DType::kF32, Shape{static_cast<int64_t>(v.size())});
  BOOST_REQUIRE(t.ok());
  std::copy(v.begin(), v.end(), t->data_as<float>());
  return *t;
}

std::vector<float> Values(const Tensor& t) {
  std::vector<float> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = t.data_as<float>()[i];
  return v;
}

BOOST_AUTO_TEST_CASE(batchable_models) {
  BOOST_TEST(IsBatchable(Repository()->Find("add")->signature()));
  BOOST_TEST(!IsBatchable(Repository()->Find("affine")->signature()));  // b: FP32[4]
  BOOST_TEST(!IsBatchable(Repository()->Find("spin")->signature()));    // a scalar
}

// Runs `requests` concurrently through one batcher (max batch = their number, a generous
// timeout so the batch fills), returning each result.
std::vector<StatusOr<std::vector<Tensor>>> RunTogether(
    Batcher& batcher, const std::vector<std::vector<Tensor>>& requests) {
  std::vector<StatusOr<std::vector<Tensor>>> results(requests.size(), Internal("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = batcher.Run(requests[i], std::chrono::steady_clock::time_point::max());
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

BOOST_AUTO_TEST_CASE(concurrent_requests_run_as_one_batch) {
  auto model = NewRepository()->Find("add");
  Batcher batcher(*model, BatchOptions{4, std::chrono::seconds(20)});
  std::vector<std::vector<Tensor>> requests;
  for (int k = 0; k < 4; ++k) {
    std::vector<float> a, b;
    for (int i = 0; i <= k; ++i) {  // 1, 2, 3 and 4 rows
      a.push_back(10.0f * k + i);
      b.push_back(0.5f * i);
    }
    requests.push_back({Floats(a), Floats(b)});
  }
  auto results = RunTogether(batcher, requests);
  for (size_t k = 0; k < results.size(); ++k) {
    BOOST_REQUIRE_MESSAGE(results[k].ok(), results[k].status().ToString());
    BOOST_REQUIRE(results[k]->size() == 1u);
    std::vector<float> want;
    for (size_t i = 0; i <= k; ++i) want.push_back(10.0f * k + i + 0.5f * i);
    BOOST_TEST(Values((*results[k])[0]) == want, boost::test_tools::per_element());
  }
  // The batch filled (4 requests) before the timeout: one invocation for all of them.
  BOOST_TEST(batcher.stats().batches == 1u);
  BOOST_TEST(batcher.stats().requests == 4u);
  BOOST_TEST(batcher.stats().most_queued == 4u);
}

// The requests below never stack (two contradict themselves, and the third stacks with neither),
// so every batch but the first is one taken from fewer than max_batch waiting requests: each waits
// out the timeout. A short one keeps the test quick; the attempt is repeated until the three
// were waiting together when the first batch was taken (most_queued), which is the case tested.
BOOST_AUTO_TEST_CASE(a_bad_request_gets_its_own_error) {
  auto model = NewRepository()->Find("add");
  // Requests 0 and 1 contradict themselves (a and b disagree on n); stacked together they
  // would total 5 rows each way, which must not pair rows across requests.
  std::vector<std::vector<Tensor>> requests = {
      {Floats({1, 2, 3}), Floats({1, 1})},
      {Floats({5, 6}), Floats({1, 1, 1})},
      {Floats({7}), Floats({2})},
  };
  bool met = false;
  for (int attempt = 0; attempt < 20 && !met; ++attempt) {
    Batcher batcher(*model, BatchOptions{3, std::chrono::milliseconds(200)});
    auto results = RunTogether(batcher, requests);
    BOOST_TEST(!results[0].ok());
    BOOST_TEST(!results[1].ok());
    BOOST_TEST(results[0].status().code() == StatusCode::kInvalidArgument);
    BOOST_TEST(results[1].status().code() == StatusCode::kInvalidArgument);
    BOOST_REQUIRE_MESSAGE(results[2].ok(), results[2].status().ToString());
    BOOST_TEST(Values((*results[2])[0]) == std::vector<float>({9}),
               boost::test_tools::per_element());
    BOOST_TEST(batcher.stats().batches == 0u);  // nothing stacked
    met = batcher.stats().most_queued == 3u;
  }
  BOOST_TEST(met, "the three requests were never waiting together in 20 attempts");
}

BOOST_AUTO_TEST_CASE(server_batches_rest_requests) {
  ServerOptions o = TestOptions();
  o.workers = 4;
  o.max_batch = 4;
  o.batch_timeout_us = 2000;
  auto server = StartServer(o, NewRepository());
  std::vector<std::thread> threads;
  std::vector<int> status(8, 0);
  std::vector<std::string> body(8);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      auto c = Connect(*server);
      std::string v = std::to_string(k);
      HttpResponse r = Call(*c, "POST", "/v2/models/add/infer",
                            R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[)" +
                                v + "," + v + R"(]},{"name":"b","shape":[2],"datatype":"FP32",)"
                                R"("data":[1,2]}]})");
      status[k] = r.status;
      body[k] = r.body;
    });
  }
  for (std::thread& t : threads) t.join();
  // Whether requests met in a batch depends on timing; that the counters are exported does not.
  auto c = Connect(*server);
  std::string page = Call(*c, "GET", "/metrics").body;
  BOOST_TEST(page.find("\nkiln_batches_total{model=\"add\"} ") != std::string::npos, page);
  BOOST_TEST(page.find("\nkiln_batched_requests_total{model=\"add\"} ") != std::string::npos);
  for (int k = 0; k < 8; ++k) {
    BOOST_REQUIRE_MESSAGE(status[k] == 200, body[k]);
    Json j = ParseBody(HttpResponse{200, body[k]});
    BOOST_TEST(Numbers(*j.Find("outputs")->items()[0].Find("data")) ==
                   std::vector<double>({k + 1.0, k + 2.0}),
               boost::test_tools::per_element());
  }
}

}  // namespace
}  // namespace kiln::serving
