// load_test: M inference requests from C concurrent keep-alive connections against kiln_serve,
// every reply checked against a plain C++ reference; prints throughput and latency percentiles.
//
//   load_test [--requests 2000] [--connections 8] [--batch 4] [--workers 2] [--io-threads 1]
//             [--max-seconds 60] [--port N  (use a running server with the affine model;
//             default: start one in-process on an ephemeral port)]
// Exit status 0 only if every request got a correct 200 reply within the time limit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "embed/flags.h"
#include "examples/serving/demo_model.h"
#include "examples/serving/http_client.h"
#include "examples/serving/json.h"
#include "examples/serving/server.h"

namespace {

using kiln::Status;
using kiln::serving::Json;
using kiln::serving::JsonWriter;

struct Config {
  int64_t requests = 2000;
  int connections = 8;
  int batch = 4;
  int workers = 2;
  int io_threads = 1;
  double max_seconds = 60;
  int port = 0;  // 0: in-process server
};

constexpr int kWidth = 4;  // the affine model's row width

// Request `r`'s inputs: small integers, so x + b and the row sums are exact in f32 and the
// reply must match the reference bit for bit.
float XValue(int64_t r, int i, int j) {
  return static_cast<float>((r * 7 + i * kWidth + j) % 23 - 11);
}
float BValue(int64_t r, int j) { return static_cast<float>((r + j) % 5) * 0.5f; }

std::string MakeRequest(int64_t r, int batch) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("id");
  w.String(std::to_string(r));
  w.Key("inputs");
  w.BeginArray();
  w.BeginObject();
  w.Key("name");
  w.String("x");
  w.Key("datatype");
  w.String("FP32");
  w.Key("shape");
  w.BeginArray();
  w.Int(batch);
  w.Int(kWidth);
  w.EndArray();
  w.Key("data");
  w.BeginArray();
  for (int i = 0; i < batch; ++i) {
    for (int j = 0; j < kWidth; ++j) w.Float(XValue(r, i, j));
  }
  w.EndArray();
  w.EndObject();
  w.BeginObject();
  w.Key("name");
  w.String("b");
  w.Key("datatype");
  w.String("FP32");
  w.Key("shape");
  w.BeginArray();
  w.Int(kWidth);
  w.EndArray();
  w.Key("data");
  w.BeginArray();
  for (int j = 0; j < kWidth; ++j) w.Float(BValue(r, j));
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return out;
}

// "" if `body` is the right reply to request `r`, else what is wrong.
std::string CheckReply(int64_t r, int batch, const std::string& body) {
  auto reply = kiln::serving::ParseJson(body);
  if (!reply.ok()) return "unparsable reply: " + reply.status().message();
  const Json* id = reply->Find("id");
  if (id == nullptr || !id->is_string() || id->string_value() != std::to_string(r))
    return "wrong id";
  const Json* outputs = reply->Find("outputs");
  if (outputs == nullptr || !outputs->is_array() || outputs->size() != 2)
    return "expected 2 outputs";
  for (const Json& out : outputs->items()) {
    const Json* name = out.Find("name");
    const Json* data = out.Find("data");
    if (name == nullptr || !name->is_string() || data == nullptr || !data->is_array()) {
      return "malformed output";
    }
    bool is_y = name->string_value() == "y";
    size_t want_n = is_y ? batch * kWidth : batch;
    if (data->size() != want_n) return "output '" + name->string_value() + "' has wrong size";
    for (int i = 0; i < batch; ++i) {
      float row = 0;
      for (int j = 0; j < kWidth; ++j) {
        row += XValue(r, i, j);
        if (is_y) {
          const Json& v = data->items()[i * kWidth + j];
          if (!v.is_number() ||
              static_cast<float>(v.double_value()) != XValue(r, i, j) + BValue(r, j)) {
            return "y[" + std::to_string(i) + "," + std::to_string(j) + "] is wrong";
          }
        }
      }
      if (!is_y) {
        const Json& v = data->items()[i];
        if (!v.is_number() || static_cast<float>(v.double_value()) != row) {
          return "s[" + std::to_string(i) + "] is wrong";
        }
      }
    }
  }
  return "";
}

// Declares load_test's flags; Parse fills `c`.
void AddFlags(kiln::FlagParser& flags, Config* c) {
  flags.AddInt("--requests", "N", "inference requests to send", 1, int64_t{1} << 40, &c->requests);
  flags.AddInt("--connections", "N", "concurrent keep-alive connections (client threads)", 1, 4096,
               &c->connections);
  flags.AddInt("--batch", "N", "rows of x per request", 1, 1 << 20, &c->batch);
  flags.AddInt("--workers", "N", "inference threads of the in-process server", 1, 1024,
               &c->workers);
  flags.AddInt("--io-threads", "N", "I/O threads of the in-process server", 1, 1024,
               &c->io_threads);
  flags.AddCustom("--max-seconds", "S", "fail if the requests take longer than S seconds", "60",
                  false, [c](const std::string& v) -> Status {
                    char* end = nullptr;
                    c->max_seconds = std::strtod(v.c_str(), &end);
                    if (v.empty() || *end != '\0' || !(c->max_seconds > 0)) {
                      return kiln::InvalidArgument("wants a positive number, got '" + v + "'");
                    }
                    return Status::Ok();
                  });
  flags.AddInt("--port", "N",
               "send to a running server with the affine model on this port (0: start one "
               "in-process on an ephemeral port)",
               0, 65535, &c->port);
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::min(sorted.size() - 1, i == 0 ? 0 : i - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  kiln::FlagParser flags("load_test", "[flags]",
                         "Sends value-checked inference requests to kiln_serve and prints "
                         "throughput and latency percentiles; exits 0 only if every request got "
                         "a correct 200 reply within --max-seconds.");
  AddFlags(flags, &cfg);
  if (std::optional<int> exit = flags.Parse(argc, argv)) return *exit;

  // (1) A server: in-process on an ephemeral port with the affine demo model, or a running one.
  std::unique_ptr<kiln::serving::Server> server;
  int port = cfg.port;
  if (port == 0) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string path = std::string(tmp ? tmp : "/tmp") + "/load_test_affine.kiln";
    auto bytes = kiln::serving::BuildAffineModel();
    Status st = bytes.ok() ? kiln::serving::WriteBytes(path, *bytes) : bytes.status();
    auto runtime = kiln::Runtime::Create();
    if (st.ok() && !runtime.ok()) st = runtime.status();
    if (!st.ok()) {
      std::fprintf(stderr, "load_test: %s\n", st.ToString().c_str());
      return 1;
    }
    auto repo = kiln::serving::ModelRepository::Load({{"affine", path}}, *runtime);
    if (!repo.ok()) {
      std::fprintf(stderr, "load_test: %s\n", repo.status().ToString().c_str());
      return 1;
    }
    kiln::serving::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.workers = cfg.workers;
    so.io_threads = cfg.io_threads;
    so.max_queue = static_cast<size_t>(cfg.connections) * 2;  // never 503 in this test
    auto s = kiln::serving::Server::Start(*repo, so);
    if (!s.ok()) {
      std::fprintf(stderr, "load_test: %s\n", s.status().ToString().c_str());
      return 1;
    }
    server = std::move(*s);
    port = server->port();
  }
  std::printf("(1) server on 127.0.0.1:%d: %lld requests, %d connections, batch %d, %d workers\n",
              port, static_cast<long long>(cfg.requests), cfg.connections, cfg.batch, cfg.workers);

  // (2) One warm-up request: the first call of each kernel JIT-compiles it (reported apart,
  // so the percentiles below are steady state).
  {
    auto client = kiln::serving::HttpClient::Connect("127.0.0.1", port, std::chrono::seconds(30));
    auto t0 = std::chrono::steady_clock::now();
    auto res = client.ok() ? (*client)->Request("POST", "/v2/models/affine/infer",
                                                MakeRequest(cfg.requests, cfg.batch))
                           : kiln::StatusOr<kiln::serving::HttpResponse>(client.status());
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::string problem = !res.ok()            ? res.status().ToString()
                          : res->status != 200 ? "HTTP " + std::to_string(res->status)
                                               : CheckReply(cfg.requests, cfg.batch, res->body);
    if (!problem.empty()) {
      std::fprintf(stderr, "load_test: warm-up request failed: %s\n", problem.c_str());
      return 1;
    }
    std::printf("(2) warm-up request (JIT compiles the kernels): %.3f ms\n", ms);
  }

  // (3) C client threads, each with one keep-alive connection, take request numbers in turn.
  std::atomic<int64_t> next{0}, ok{0};
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::vector<std::string> failures;
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::duration<double>(cfg.max_seconds);
  std::vector<std::thread> clients;
  for (int c = 0; c < cfg.connections; ++c) {
    clients.emplace_back([&] {
      std::vector<double> mine;
      auto fail = [&](const std::string& what) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(what);
      };
      auto client = kiln::serving::HttpClient::Connect("127.0.0.1", port, std::chrono::seconds(30));
      if (!client.ok()) return fail(client.status().ToString());
      for (int64_t r = next++; r < cfg.requests; r = next++) {
        if (std::chrono::steady_clock::now() > deadline) return fail("time limit reached");
        std::string body = MakeRequest(r, cfg.batch);
        auto t0 = std::chrono::steady_clock::now();
        auto res = (*client)->Request("POST", "/v2/models/affine/infer", body);
        auto t1 = std::chrono::steady_clock::now();
        if (!res.ok()) return fail("request " + std::to_string(r) + ": " + res.status().ToString());
        if (res->status != 200) {
          fail("request " + std::to_string(r) + ": HTTP " + std::to_string(res->status) + " " +
               res->body);
          continue;
        }
        std::string problem = CheckReply(r, cfg.batch, res->body);
        if (!problem.empty()) {
          fail("request " + std::to_string(r) + ": " + problem);
          continue;
        }
        ++ok;
        mine.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : clients) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (server) server->Stop();

  // (4) Report.
  std::sort(latencies_ms.begin(), latencies_ms.end());
  std::printf("(3) %lld/%lld correct replies in %.3f s: %.0f req/s\n",
              static_cast<long long>(ok.load()), static_cast<long long>(cfg.requests), seconds,
              ok.load() / seconds);
  std::printf("(4) latency ms: p50 %.3f  p99 %.3f  max %.3f\n", Percentile(latencies_ms, 50),
              Percentile(latencies_ms, 99), latencies_ms.empty() ? 0.0 : latencies_ms.back());
  for (size_t i = 0; i < failures.size() && i < 10; ++i) {
    std::fprintf(stderr, "load_test: FAILED %s\n", failures[i].c_str());
  }
  if (ok.load() != cfg.requests) {
    std::fprintf(stderr, "load_test: %lld of %lld requests failed or were lost\n",
                 static_cast<long long>(cfg.requests - ok.load()),
                 static_cast<long long>(cfg.requests));
    return 1;
  }
  return 0;
}
