// kiln_serve: serves .kiln models over the KServe v2 REST and gRPC protocols until SIGINT/SIGTERM.
//
//   kiln_serve --model NAME=FILE.kiln [--model ...] [--host 127.0.0.1] [--port 8000]
//              [--workers N] [--threads N] [--io-threads N] [--max-body-bytes N] [--timeout-ms N]
//              [--max-queue N] [--max-request-bytes N] [--invoke-timeout-ms N] [--jit-cache DIR|off] [--plugin LIB.so]...
//              [--grpc-port N] [--warmup] [--dim NAME=N]... [--warmup-dims NAME=LO:HI]...
//   (kiln_serve --help describes each flag and its default.)
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "embed/flags.h"
#include "embed/runtime.h"
#include "examples/serving/inference.h"
#include "examples/serving/model_repository.h"
#include "examples/serving/server.h"

namespace {

using kiln::serving::ServerOptions;

struct Flags {
  std::vector<kiln::serving::ModelSource> models;
  ServerOptions server;
  kiln::RuntimeOptions runtime;
  std::vector<std::string> warmup_dims;  // --warmup-dims, expanded once --jit-bucketing is known
  kiln::serving::WarmupShapes warmup_check;  // where the flag's syntax is checked
};

constexpr int64_t kMaxBytes = int64_t{1} << 40;

// Declares kiln_serve's flags; Parse fills `f`.
void AddFlags(kiln::FlagParser& flags, Flags* f) {
  flags.AddCustom("--model", "NAME=FILE",
                  "serve FILE (a .kiln executable) as NAME ([A-Za-z0-9_.-]+); at least one", "",
                  true, [f](const std::string& v) -> kiln::Status {
                    ASSIGN_OR_RETURN(kiln::serving::ModelSource source,
                                     kiln::serving::ParseModelFlag(v));
                    f->models.push_back(source);
                    return kiln::Status::Ok();
                  });
  flags.AddString("--host", "ADDR", "address to listen on", &f->server.host);
  flags.AddInt("--port", "N", "REST (HTTP) port to listen on; 0 picks a free one", 0, 65535,
               &f->server.port);
  flags.AddInt("--grpc-port", "N",
               "also serve the KServe v2 gRPC protocol on port N (0 picks a free one); -1: no gRPC",
               -1, 65535, &f->server.grpc_port);
  flags.AddBool("--warmup",
                "before reporting ready (and before a reloaded model is served), warm each model "
                "up on zero inputs at its declared shapes: optimized and specialized code "
                "compiled and waited for, so requests at those shapes compile nothing",
                &f->server.warmup);
  flags.AddSizeMap("--dim",
                   "the value of symbolic dim NAME in --warmup inputs (1 if not given)",
                   &f->server.warmup_dims);
  flags.AddCustom("--warmup-dims", "NAME=LO:HI|NAME=V1,V2,...",
                  "implies --warmup: warm up at each value of symbolic dim NAME listed, or for "
                  "LO:HI at one value of every shape bucket of the range (each power of two and "
                  "one value between two; every value with --jit-bucketing exact), with the "
                  "specialized variants hot shapes get, so requests in the range compile nothing",
                  "", true, [f](const std::string& v) {
                    // Checked now (a bad value exits 2 with the usage); expanded into values
                    // after parsing, when --jit-bucketing is known.
                    RETURN_IF_ERROR(kiln::serving::ParseWarmupDims(
                        v, kiln::jit::Bucketing::kExact, &f->warmup_check));
                    f->warmup_dims.push_back(v);
                    return kiln::Status::Ok();
                  });
  flags.AddInt("--workers", "N",
               "inference threads (REST and gRPC share them and the queue); each request borrows "
               "a VM context of its model",
               1, 1024,
               &f->server.workers, "one per core");
  kiln::AddRuntimeFlags(flags, &f->runtime);
  flags.AddInt("--io-threads", "N", "threads accepting connections and doing every read and write",
               1, 1024, &f->server.io_threads);
  flags.AddInt("--max-queue", "N",
               "inference requests waiting for a busy worker (idle workers take requests at "
               "once); more get 503",
               0, int64_t{1} << 30, &f->server.max_queue);
  flags.AddInt("--max-body-bytes", "N",
               "larger request bodies get 413, larger gRPC messages RESOURCE_EXHAUSTED", 1,
               kMaxBytes,
               &f->server.max_body_bytes, "16 MiB");
  flags.AddInt("--max-request-bytes", "N",
               "tensor bytes one inference request may hold, inputs plus outputs (checked from "
               "the declared shapes before decoding, from the output shapes the inputs imply "
               "before invoking, and after invoking); over it 413 (gRPC RESOURCE_EXHAUSTED) "
               "naming the limit. Also bounds the request body",
               1, kMaxBytes, &f->server.max_request_bytes, "256 MiB");
  flags.AddInt("--timeout-ms", "N",
               "a request must arrive within N ms, an idle keep-alive connection is closed "
               "after it, and a reply must be taken within it",
               1, kMaxBytes, &f->server.timeout_ms);
  flags.AddInt("--max-batch", "N",
               "dynamic batching: run up to N concurrent requests of a model with a symbolic "
               "batch dim (dim 0 of every input and output) as one invocation; needs --workers "
               ">= N; 0 or 1: off",
               0, 4096, &f->server.max_batch);
  flags.AddInt("--batch-timeout-us", "N",
               "dynamic batching: how long the first request of a batch waits for more", 0,
               int64_t{60} * 1000 * 1000, &f->server.batch_timeout_us);
  flags.AddInt("--trim-interval-ms", "N",
               "every N ms return the C library's free heap memory to the system (bounds RSS "
               "under varying shapes); 0: never",
               0, kMaxBytes, &f->server.trim_interval_ms);
  flags.AddInt("--allocator-cache-bytes", "N",
               "tensor memory the runtime's allocator keeps cached for reuse (least recently "
               "released blocks are freed beyond it)",
               1, kMaxBytes, &f->runtime.allocator_cache_bytes, "256 MiB");
  flags.AddInt("--invoke-timeout-ms", "N", "deadline of one model invocation, past it 504; 0: none",
               0, kMaxBytes, &f->server.invoke_timeout_ms);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  // A server's allocator cache: enough for the working sets of a few shapes per worker, not
  // the library's 1 GiB (under random shapes it fills with blocks of every size class).
  flags.runtime.allocator_cache_bytes = size_t{256} << 20;
  flags.server.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kiln::FlagParser parser("kiln_serve", "--model NAME=FILE.kiln [--model ...] [flags]",
                          "Serves .kiln models over the KServe v2 REST protocol (and gRPC with "
                          "--grpc-port) until SIGINT or SIGTERM. Compute threads: --workers "
                          "times --threads.");
  AddFlags(parser, &flags);
  if (std::optional<int> exit = parser.Parse(argc, argv)) return *exit;
  kiln::serving::WarmupShapes shapes;
  for (const std::string& v : flags.warmup_dims) {
    // Checked when parsed: cannot fail now.
    (void)kiln::serving::ParseWarmupDims(v, flags.runtime.dispatch.bucketing, &shapes);
    flags.server.warmup = true;
  }
  flags.server.warmup_values = shapes.values;
  if (flags.models.empty()) {
    std::fprintf(stderr, "kiln_serve: at least one --model NAME=FILE is required\n%s",
                 parser.Usage().c_str());
    return 2;
  }

  // (1) Block SIGINT/SIGTERM before any thread starts, so every thread inherits the mask and
  // the main thread alone receives them (sigwait below): no async-signal-safety concerns.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // (2) One runtime (JIT, vendors, threads, allocator); load and verify every model once.
  // Workers share the executables.
  auto runtime = kiln::Runtime::Create(flags.runtime);
  if (!runtime.ok()) {
    std::fprintf(stderr, "kiln_serve: %s\n", runtime.status().ToString().c_str());
    return 1;
  }
  auto repo = kiln::serving::ModelRepository::Load(flags.models, *runtime);
  if (!repo.ok()) {
    std::fprintf(stderr, "kiln_serve: %s\n", repo.status().ToString().c_str());
    return 1;
  }

  // (3) Listen and serve.
  auto server = kiln::serving::Server::Start(*repo, flags.server);
  if (!server.ok()) {
    std::fprintf(stderr, "kiln_serve: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("kiln_serve: %zu model(s) on http://%s:%d (%d workers, queue %zu)\n",
              (*repo)->models().size(), flags.server.host.c_str(), (*server)->port(),
              flags.server.workers, flags.server.max_queue);
  if ((*server)->grpc_port() >= 0) {
    std::printf("kiln_serve: gRPC on %s:%d\n", flags.server.host.c_str(), (*server)->grpc_port());
  }
  std::fflush(stdout);

  // (4) Wait for a signal, then shut down gracefully.
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("kiln_serve: signal %d, shutting down\n", sig);
  std::fflush(stdout);
  (*server)->Stop();
  auto stats = (*server)->stats();
  std::printf("kiln_serve: served %llu requests (%llu inferences, %llu rejected as overloaded)\n",
              static_cast<unsigned long long>(stats.requests),
              static_cast<unsigned long long>(stats.infer_ok),
              static_cast<unsigned long long>(stats.rejected));
  return 0;
}
