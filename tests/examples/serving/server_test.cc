// Tests for examples/serving/server: a real server on an ephemeral loopback port, real HTTP
// requests, models built here with vm/builder.h and run by JIT kernels.
#define BOOST_TEST_MODULE server_test
#include "examples/serving/server.h"

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "examples/serving/demo_model.h"
#include "examples/serving/http_client.h"
#include "examples/serving/json.h"
#include "tests/examples/serving/serving_test_util.h"
#include "vm/context.h"

namespace kiln::serving {
namespace {

// Inputs for the affine model: x[i][j] = i * 4 + j - 5 (exact in f32), b = [0.5, -1, 2, 0].
std::string AffineRequest(int64_t batch, const std::string& extra = "") {
  std::string data;
  for (int64_t k = 0; k < batch * 4; ++k) data += (k ? "," : "") + std::to_string(k - 5);
  return R"({"id":"req-1","inputs":[{"name":"x","shape":[)" + std::to_string(batch) +
         R"(,4],"datatype":"FP32","data":[)" + data +
         R"(]},{"name":"b","shape":[4],"datatype":"FP32","data":[0.5,-1,2,0]}])" + extra + "}";
}

void CheckAffineReply(const HttpResponse& r, int64_t batch, bool only_s = false) {
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  Json j = ParseBody(r);
  BOOST_TEST(j.Find("model_name")->string_value() == "affine");
  BOOST_TEST(j.Find("id")->string_value() == "req-1");
  const Json& outputs = *j.Find("outputs");
  BOOST_REQUIRE(outputs.size() == (only_s ? 1u : 2u));
  const double b[4] = {0.5, -1, 2, 0};
  std::vector<double> want_y, want_s;
  for (int64_t i = 0; i < batch; ++i) {
    double row = 0;
    for (int j = 0; j < 4; ++j) {
      double x = static_cast<double>(i * 4 + j - 5);
      want_y.push_back(x + b[j]);
      row += x;
    }
    want_s.push_back(row);
  }
  for (const Json& out : outputs.items()) {
    std::string name = out.Find("name")->string_value();
    BOOST_TEST(out.Find("datatype")->string_value() == "FP32");
    std::vector<double> shape = Numbers(*out.Find("shape"));
    if (name == "y") {
      BOOST_TEST(!only_s);
      BOOST_TEST(shape == (std::vector<double>{static_cast<double>(batch), 4}),
                 boost::test_tools::per_element());
      BOOST_TEST(Numbers(*out.Find("data")) == want_y, boost::test_tools::per_element());
    } else {
      BOOST_TEST(name == "s");
      BOOST_TEST(shape == std::vector<double>{static_cast<double>(batch)},
                 boost::test_tools::per_element());
      BOOST_TEST(Numbers(*out.Find("data")) == want_s, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(health_and_metadata) {
  auto server = StartServer();
  auto c = Connect(*server);
  HttpResponse live = Call(*c, "GET", "/v2/health/live");
  BOOST_TEST(live.status == 200);
  BOOST_TEST(ParseBody(live).Find("live")->bool_value());
  HttpResponse ready = Call(*c, "GET", "/v2/health/ready");
  BOOST_TEST(ready.status == 200);
  BOOST_TEST(ParseBody(ready).Find("ready")->bool_value());
  BOOST_TEST(ready.keep_alive);

  Json meta = ParseBody(Call(*c, "GET", "/v2"));
  BOOST_TEST(meta.Find("name")->string_value() == "kiln");
  BOOST_TEST(meta.Find("models")->size() == 3u);

  HttpResponse affine = Call(*c, "GET", "/v2/models/affine");
  BOOST_TEST(affine.status == 200);
  BOOST_TEST(affine.body == R"({"name":"affine","versions":["1"],"platform":"kiln",)"
                            R"("inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]},)"
                            R"({"name":"b","datatype":"FP32","shape":[4]}],)"
                            R"("outputs":[{"name":"y","datatype":"FP32","shape":[-1,4]},)"
                            R"({"name":"s","datatype":"FP32","shape":[-1]}]})");
  Json spin = ParseBody(Call(*c, "GET", "/v2/models/spin"));
  const Json& n = spin.Find("inputs")->items()[0];
  BOOST_TEST(n.Find("datatype")->string_value() == "INT64");
  BOOST_TEST(n.Find("shape")->size() == 0u);

  HttpResponse model_ready = Call(*c, "GET", "/v2/models/add/ready");
  BOOST_TEST(model_ready.status == 200);
  BOOST_TEST(ParseBody(model_ready).Find("ready")->bool_value());
  BOOST_TEST(ParseBody(model_ready).Find("name")->string_value() == "add");
}

BOOST_AUTO_TEST_CASE(infer_returns_correct_values) {
  auto server = StartServer();
  auto c = Connect(*server);
  // Several requests on one keep-alive connection, batch sizes varying (symbolic dim).
  for (int64_t batch : {1, 3, 17, 2}) {
    BOOST_TEST_CONTEXT("batch " << batch) {
      CheckAffineReply(Call(*c, "POST", "/v2/models/affine/infer", AffineRequest(batch)), batch);
    }
  }
  // Only the requested outputs; a query string is ignored.
  CheckAffineReply(Call(*c, "POST", "/v2/models/affine/infer?x=1",
                        AffineRequest(2, R"(,"outputs":[{"name":"s"}])")),
                   2, /*only_s=*/true);
  // Nested data lists are flattened row-major.
  HttpResponse nested =
      Call(*c, "POST", "/v2/models/affine/infer",
           R"({"id":"req-1","inputs":[{"name":"x","shape":[2,4],"datatype":"FP32",)"
           R"("data":[[-5,-4,-3,-2],[-1,0,1,2]]},)"
           R"({"name":"b","shape":[4],"datatype":"FP32","data":[0.5,-1,2,0]}]})");
  CheckAffineReply(nested, 2);
  // INT64 scalars; the total overflows int32, so the reply must keep all 64 bits.
  HttpResponse spin = Call(*c, "POST", "/v2/models/spin/infer", SpinRequest(70000));
  BOOST_REQUIRE_MESSAGE(spin.status == 200, spin.body);
  Json spin_json = ParseBody(spin);
  const Json& total = spin_json.Find("outputs")->items()[0];
  BOOST_TEST(total.Find("datatype")->string_value() == "INT64");
  BOOST_TEST(total.Find("data")->items()[0].int_value() == int64_t{70000} * 69999 / 2);
  BOOST_TEST(ParseBody(spin).Find("id") == nullptr);  // no id given, none echoed
  HttpResponse add =
      Call(*c, "POST", "/v2/models/add/infer",
           R"({"inputs":[{"name":"b","shape":[3],"datatype":"FP32","data":[0.25,1e10,-7]},)"
           R"({"name":"a","shape":[3],"datatype":"FP32","data":[1,2,3]}]})");
  BOOST_REQUIRE_MESSAGE(add.status == 200, add.body);
  std::vector<double> want = {1.25, static_cast<double>(1e10f + 2.0f), -4};
  BOOST_TEST(Numbers(*ParseBody(add).Find("outputs")->items()[0].Find("data")) == want,
             boost::test_tools::per_element());
}

struct BadRequest {
  const char* model;
  std::string body;
  const char* fragment;
};

BOOST_AUTO_TEST_CASE(bad_requests_are_400_with_a_reason) {
  const std::string b = R"({"name":"b","shape":[4],"datatype":"FP32","data":[1,2,3,4]})";
  const std::string x = R"({"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]})";
  const std::vector<BadRequest> cases = {
      {"affine", "{\"inputs\": [", "malformed JSON: JSON byte 12"},
      {"affine", "", "malformed JSON"},
      {"affine", "[]", "must be a JSON object"},
      {"affine", "{}", "missing 'inputs'"},
      {"affine", R"({"inputs":{}})", "'inputs' must be a list"},
      {"affine", R"({"id":7,"inputs":[]})", "'id' must be a string"},
      {"affine", R"({"inputs":[3]})", "inputs[0] must be an object"},
      {"affine", R"({"inputs":[{"shape":[4],"datatype":"FP32","data":[1,2,3,4]}]})",
       "inputs[0]: missing 'name'"},
      {"affine", R"({"inputs":[{"name":"b","shape":[4],"data":[1,2,3,4]}]})",
       "inputs[0] 'b': missing 'datatype'"},
      {"affine", R"({"inputs":[{"name":"b","datatype":"FP32","data":[1,2,3,4]}]})",
       "inputs[0] 'b': missing 'shape'"},
      {"affine", R"({"inputs":[{"name":"b","shape":[4],"datatype":"FP32"}]})",
       "inputs[0] 'b': missing 'data'"},
      {"affine", R"({"inputs":[{"name":"b","shape":[4],"datatype":"FP64","data":[1,2,3,4]}]})",
       "datatype FP64 but the model expects FP32"},
      {"affine", R"({"inputs":[{"name":"b","shape":[4],"datatype":"FLOAT","data":[1,2,3,4]}]})",
       "unknown datatype 'FLOAT'"},
      {"affine", R"({"inputs":[{"name":"b","shape":[4],"datatype":"FP32","data":[1,2,3]}]})",
       "'data' has 3 elements but shape [4] needs 4"},
      {"affine", R"({"inputs":[{"name":"b","shape":[-1],"datatype":"FP32","data":[1]}]})",
       "non-negative integers"},
      {"affine", R"({"inputs":[{"name":"b","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]}]})",
       "shape [2, 2] contradicts the model's [4]"},
      {"affine",
       R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[1,2,3]},)" + b + "]}",
       "shape [1, 3] contradicts the model's [-1, 4]"},
      {"affine", R"({"inputs":[{"name":"b","shape":[4],"datatype":"FP32","data":[1,2,"x",4]}]})",
       "inputs[0] 'b': data[2] is the string \"x\""},
      {"affine", R"({"inputs":[{"name":"z","shape":[1],"datatype":"FP32","data":[1]}]})",
       "inputs[0] 'z': unknown input (the model has 'x', 'b')"},
      {"affine", R"({"inputs":[)" + b + "]}", "missing input 'x'"},
      {"affine", R"({"inputs":[)" + b + "," + x + "," + b + "]}",
       "inputs[2] 'b': given more than once"},
      {"affine", R"({"inputs":[)" + b + "," + x + R"(],"outputs":[{"name":"q"}]})",
       "outputs[0]: unknown output 'q' (the model has 'y', 's')"},
      {"affine", R"({"inputs":[)" + b + "," + x + R"(],"outputs":"y"})",
       "'outputs' must be a list"},
      {"spin", R"({"inputs":[{"name":"n","shape":[],"datatype":"INT64","data":[1.5]}]})",
       "data[0] is not an integer"},
      {"spin", R"({"inputs":[{"name":"n","shape":[],"datatype":"INT64","data":[1e19]}]})",
       "out of range"},
      // Symbolic dims agreeing across inputs are checked by the VM: its InvalidArgument is a 400.
      {"add",
       R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]},)"
       R"({"name":"b","shape":[3],"datatype":"FP32","data":[1,2,3]}]})",
       "model 'add': INVALID_ARGUMENT"},
      {"affine", std::string(100, '[') + std::string(100, ']'), "nesting deeper than 64"},
  };
  auto server = StartServer();
  auto c = Connect(*server);
  for (const BadRequest& bad : cases) {
    BOOST_TEST_CONTEXT(bad.model << ": " << bad.body) {
      HttpResponse r =
          Call(*c, "POST", std::string("/v2/models/") + bad.model + "/infer", bad.body);
      BOOST_TEST(r.status == 400);
      std::string error = ErrorOf(r);
      BOOST_TEST(error.find(bad.fragment) != std::string::npos, error);
      BOOST_TEST(r.keep_alive);  // a bad request does not cost the connection
    }
  }
  // The connection still serves good requests afterwards.
  CheckAffineReply(Call(*c, "POST", "/v2/models/affine/infer", AffineRequest(2)), 2);
}

BOOST_AUTO_TEST_CASE(unknown_models_and_paths_are_404) {
  auto server = StartServer();
  auto c = Connect(*server);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"POST", "/v2/models/nope/infer"},
      {"GET", "/v2/models/nope"},
      {"GET", "/v2/models/nope/ready"},
      {"GET", "/v2/models/affine/bogus"},
      {"GET", "/v3"},
      {"GET", "/"},
      {"GET", "/v2/health"},
      {"GET", "/v2/models/"},
  };
  for (const auto& [method, target] : cases) {
    BOOST_TEST_CONTEXT(method << " " << target) {
      HttpResponse r = Call(*c, method, target, method == "POST" ? AffineRequest(1) : "");
      BOOST_TEST(r.status == 404);
      BOOST_TEST(!ErrorOf(r).empty());
    }
  }
  BOOST_TEST(ErrorOf(Call(*c, "POST", "/v2/models/nope/infer", "{}")) == "unknown model 'nope'");
}

BOOST_AUTO_TEST_CASE(wrong_methods_are_405_with_allow) {
  auto server = StartServer();
  auto c = Connect(*server);
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"GET", "/v2/models/affine/infer", "POST"},
      {"PUT", "/v2/models/affine/infer", "POST"},
      {"POST", "/v2/health/live", "GET"},
      {"DELETE", "/v2/models/affine", "GET"},
      {"POST", "/v2", "GET"},
      {"POST", "/v2/models/affine/ready", "GET"},
  };
  for (const auto& [method, target, allow] : cases) {
    BOOST_TEST_CONTEXT(method << " " << target) {
      HttpResponse r = Call(*c, method, target);
      BOOST_TEST(r.status == 405);
      BOOST_TEST(r.allow == allow);
      BOOST_TEST(ErrorOf(r).find("method not allowed") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(bodies_over_the_limit_are_413) {
  ServerOptions o = TestOptions();
  o.max_body_bytes = 1000;
  auto server = StartServer(o);
  {  // A whole request that is too large.
    auto c = Connect(*server);
    HttpResponse r = Call(*c, "POST", "/v2/models/affine/infer", AffineRequest(200));
    BOOST_TEST(r.status == 413);
    BOOST_TEST(ErrorOf(r).find("larger than 1000 bytes") != std::string::npos);
    BOOST_TEST(!r.keep_alive);
  }
  {  // Refused from the Content-Length alone, before any body byte is sent.
    auto c = Connect(*server);
    auto r = c->SendRaw(
        "POST /v2/models/affine/infer HTTP/1.1\r\nHost: x\r\n"
        "Content-Length: 1000000000\r\n\r\n",
        /*read_reply=*/true);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    BOOST_TEST(r->status == 413);
  }
  {  // Just under the limit is served.
    auto c = Connect(*server);
    CheckAffineReply(Call(*c, "POST", "/v2/models/affine/infer", AffineRequest(2)), 2);
  }
}

BOOST_AUTO_TEST_CASE(expect_100_continue_gets_a_go_ahead) {
  auto server = StartServer();
  auto c = Connect(*server);
  std::string body = AffineRequest(2);
  auto go = c->SendRaw(
      "POST /v2/models/affine/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n",
      /*read_reply=*/true);
  BOOST_REQUIRE_MESSAGE(go.ok(), go.status().ToString());
  BOOST_TEST(go->status == 100);
  auto r = c->SendRaw(body, /*read_reply=*/true);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CheckAffineReply(*r, 2);
}

BOOST_AUTO_TEST_CASE(malformed_http_is_400) {
  auto server = StartServer();
  auto c = Connect(*server);
  auto r = c->SendRaw("THIS IS NOT HTTP\r\n\r\n", /*read_reply=*/true);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(r->status == 400);
  BOOST_TEST(ErrorOf(*r).find("malformed HTTP request") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(full_queue_is_503) {
  // One worker and one queue slot; each spin request keeps the worker busy for a while, so of
  // five simultaneous requests two (one running, one queued) are accepted, three refused.
  ServerOptions o = TestOptions();
  o.workers = 1;
  o.max_queue = 1;
  auto server = StartServer(o);
  const int64_t n = SpinCountFor(300);
  constexpr int kClients = 5;
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(Connect(*server));
  std::vector<HttpResponse> replies(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto r = clients[i]->Request("POST", "/v2/models/spin/infer", SpinRequest(n));
      if (r.ok()) replies[i] = std::move(*r);
    });
  }
  for (std::thread& t : threads) t.join();
  int ok = 0, overloaded = 0;
  for (const HttpResponse& r : replies) {
    if (r.status == 200) {
      ++ok;
      BOOST_TEST(ParseBody(r).Find("outputs")->items()[0].Find("data")->items()[0].int_value() ==
                 n * (n - 1) / 2);
    } else {
      BOOST_TEST(r.status == 503);
      BOOST_TEST(ErrorOf(r).find("server overloaded") != std::string::npos);
      BOOST_TEST(r.keep_alive);
      ++overloaded;
    }
  }
  BOOST_TEST(ok == 2);
  BOOST_TEST(overloaded == kClients - 2);
  BOOST_TEST(server->stats().rejected == static_cast<uint64_t>(overloaded));
  // Once the queue drains, the same connections are served again.
  HttpResponse again = Call(*clients[0], "POST", "/v2/models/spin/infer", SpinRequest(10));
  BOOST_TEST(again.status == 200);
}

// A worker counts as idle before its reply leaves, so with no queue at all a client's next
// request on the same connection (sent the moment the reply arrives) still finds it free.
BOOST_AUTO_TEST_CASE(sequential_requests_with_no_queue_are_never_refused) {
  ServerOptions o = TestOptions();
  o.workers = 1;
  o.max_queue = 0;
  auto server = StartServer(o);
  auto c = Connect(*server);
  for (int i = 0; i < 300; ++i) {
    HttpResponse r = Call(*c, "POST", "/v2/models/affine/infer", AffineRequest(1));
    BOOST_REQUIRE_MESSAGE(r.status == 200, "request " << i << ": " << r.status << " " << r.body);
  }
  BOOST_TEST(server->stats().rejected == 0u);
}

// Order of events, not wall-clock bounds: every request on a fresh connection is answered while
// the stalled connections are still open (one of them then completes its request and gets its
// reply), and the stalled and idle connections are closed afterwards. A server whose worker
// waited on a slow client would answer only after that client was dropped. The timeout is long
// enough for ten requests on a loaded 2-core machine (or under TSan); the 30 s waits only catch
// hangs.
BOOST_AUTO_TEST_CASE(slow_and_half_closed_clients_do_not_block_others) {
  ServerOptions o = TestOptions();
  o.workers = 1;  // if a slow client held the worker, nothing else could run
  o.timeout_ms = 5000;
  auto server = StartServer(o);
  // Half a request (headers promise 500 body bytes, one is sent), then silence.
  const std::string partial =
      "POST /v2/models/affine/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{";
  std::vector<std::unique_ptr<HttpClient>> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(Connect(*server));
    BOOST_REQUIRE(slow.back()->SendRaw(partial, /*read_reply=*/false).ok());
  }
  auto half_headers = Connect(*server);
  BOOST_REQUIRE(half_headers->SendRaw("GET /v2/health/live HTTP/1.1\r\nHo", false).ok());
  auto half_closed = Connect(*server);
  BOOST_REQUIRE(half_closed->SendRaw(partial, false).ok());
  half_closed->ShutdownWrite();
  auto silent = Connect(*server);  // connects and never sends a byte

  auto c = Connect(*server);
  for (int i = 0; i < 10; ++i) {
    CheckAffineReply(Call(*c, "POST", "/v2/models/affine/infer", AffineRequest(3)), 3);
    BOOST_TEST(Call(*c, "GET", "/v2/health/live").status == 200);
  }
  // The first slow client was still connected: the rest of its 500-byte body (the request
  // padded with spaces) is answered.
  std::string body = AffineRequest(3);
  BOOST_REQUIRE(body.size() <= 500 && body[0] == '{');
  body.resize(500, ' ');
  auto late = slow[0]->SendRaw(body.substr(1), /*read_reply=*/true);
  BOOST_REQUIRE_MESSAGE(late.ok(), "the stalled connection was dropped before the others were "
                                   "served: " << late.status().ToString());
  CheckAffineReply(*late, 3);

  // The server drops every stalled connection after timeout_ms...
  const auto kHang = milliseconds(30000);
  BOOST_TEST(half_closed->WaitForClose(kHang));
  for (size_t i = 1; i < slow.size(); ++i) BOOST_TEST(slow[i]->WaitForClose(kHang));
  BOOST_TEST(half_headers->WaitForClose(kHang));
  BOOST_TEST(silent->WaitForClose(kHang));
  // ... and idle keep-alive connections too, while new connections are served.
  BOOST_TEST(c->WaitForClose(kHang));
  BOOST_TEST(slow[0]->WaitForClose(kHang));
  auto fresh = Connect(*server);
  BOOST_TEST(Call(*fresh, "GET", "/v2/health/ready").status == 200);
}

BOOST_AUTO_TEST_CASE(invoke_deadline_is_504) {
  ServerOptions o = TestOptions();
  o.invoke_timeout_ms = 50;
  auto server = StartServer(o);
  auto c = Connect(*server);
  auto start = Clock::now();
  HttpResponse r = Call(*c, "POST", "/v2/models/spin/infer", SpinRequest(int64_t{1} << 40));
  BOOST_TEST(r.status == 504);
  BOOST_TEST(ErrorOf(r).find("DEADLINE_EXCEEDED") != std::string::npos, r.body);
  BOOST_TEST(MsSince(start) < 30000);  // catches a hang only; the 504 itself shows the deadline
  BOOST_TEST(Call(*c, "POST", "/v2/models/spin/infer", SpinRequest(5)).status == 200);
}

BOOST_AUTO_TEST_CASE(concurrent_clients_on_two_io_threads) {
  ServerOptions o = TestOptions();
  o.io_threads = 2;
  auto server = StartServer(o);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto c = HttpClient::Connect("127.0.0.1", server->port(), milliseconds(30000));
      if (!c.ok()) return;
      for (int i = 0; i < 25; ++i) {
        int64_t n = t * 1000 + i;
        auto r = (*c)->Request("POST", "/v2/models/spin/infer", SpinRequest(n));
        if (!r.ok() || r->status != 200) continue;
        auto j = ParseJson(r->body);
        if (j.ok() && j->Find("outputs")->items()[0].Find("data")->items()[0].int_value() ==
                          n * (n - 1) / 2) {
          ++good;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  BOOST_TEST(good.load() == 100);
  BOOST_TEST(server->stats().infer_ok == 100u);
}

BOOST_AUTO_TEST_CASE(stop_finishes_requests_in_flight) {
  auto server = StartServer();
  auto c = Connect(*server);
  const int64_t n = SpinCountFor(400);
  HttpResponse reply;
  std::thread client([&] {
    auto r = c->Request("POST", "/v2/models/spin/infer", SpinRequest(n));
    if (r.ok()) reply = std::move(*r);
  });
  // Stop only once the server has read the request (order of events, not a sleep): from then on
  // it is in flight and must be finished. 30 s only catches a hang.
  auto read_by = Clock::now() + milliseconds(30000);
  while (server->stats().requests < 1 && Clock::now() < read_by) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  BOOST_REQUIRE(server->stats().requests >= 1);
  int port = server->port();
  server->Stop();
  client.join();
  BOOST_TEST(reply.status == 200);
  if (reply.status == 200) {
    BOOST_TEST(ParseBody(reply).Find("outputs")->items()[0].Find("data")->items()[0].int_value() ==
               n * (n - 1) / 2);
  }
  BOOST_TEST(!HttpClient::Connect("127.0.0.1", port, milliseconds(1000)).ok());
  server->Stop();  // idempotent
}

BOOST_AUTO_TEST_CASE(start_errors) {
  ServerOptions o = TestOptions();
  o.host = "not an address";
  auto bad_host = Server::Start(Repository(), o);
  BOOST_REQUIRE(!bad_host.ok());
  BOOST_TEST(bad_host.status().message().find("bad host address") != std::string::npos);
  auto first = StartServer();
  o = TestOptions();
  o.port = first->port();
  o.workers = 1;
  // SO_REUSEADDR does not allow two listeners on one port.
  auto taken = Server::Start(Repository(), o);
  BOOST_REQUIRE(!taken.ok());
  BOOST_TEST(taken.status().message().find("cannot listen on 127.0.0.1:") != std::string::npos);
  o = TestOptions();
  o.workers = 0;
  BOOST_TEST(!Server::Start(Repository(), o).ok());
}

BOOST_AUTO_TEST_CASE(model_flags) {
  auto ok = ParseModelFlag("resnet-50.v2=/models/r.kiln");
  BOOST_REQUIRE(ok.ok());
  BOOST_TEST(ok->name == "resnet-50.v2");
  BOOST_TEST(ok->path == "/models/r.kiln");
  for (const char* bad : {"noequals", "=file", "name=", "a/b=file", "a b=file"}) {
    BOOST_TEST(!ParseModelFlag(bad).ok(), bad);
  }
  auto missing = ModelRepository::Load({{"m", "/nonexistent/file.kiln"}}, TestRuntime());
  BOOST_REQUIRE(!missing.ok());
  BOOST_TEST(missing.status().message().find("model 'm' (/nonexistent/file.kiln)") == 0u);
  const Model& affine = *Repository()->Find("affine");
  auto dup = ModelRepository::Load({{"m", affine.path}, {"m", affine.path}}, TestRuntime());
  BOOST_REQUIRE(!dup.ok());
  BOOST_TEST(dup.status().message().find("duplicate model name") != std::string::npos);
  auto no_runtime = ModelRepository::Load({{"m", affine.path}}, nullptr);
  BOOST_REQUIRE(!no_runtime.ok());
  BOOST_TEST(no_runtime.status().message().find("need a runtime") != std::string::npos);
}

}  // namespace
}  // namespace kiln::serving
