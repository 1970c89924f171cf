// kiln_serve's server: KServe v2 REST over Boost.Beast and gRPC, inference on a worker pool.
#ifndef KILN_EXAMPLES_SERVING_SERVER_H_
#define KILN_EXAMPLES_SERVING_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"
#include "examples/serving/inference.h"
#include "examples/serving/model_repository.h"

namespace kiln::serving {

struct ServerOptions {
  std::string host = "127.0.0.1";
  /// 0: an ephemeral port (see Server::port()).
  int port = 8000;
  /// Inference threads; each owns one VM context per model.
  int workers = 2;
  /// Threads running the acceptor and every connection's (asynchronous) reads and writes.
  int io_threads = 1;
  /// Larger request bodies are refused with 413 (checked against Content-Length before reading).
  size_t max_body_bytes = size_t{16} << 20;
  /// A connection must deliver each whole request within this time, and may sit idle between
  /// requests (keep-alive) at most this long; otherwise it is closed. Writing a reply has the
  /// same bound. Slow or half-closed clients therefore cost a socket, never a worker.
  int64_t timeout_ms = 10000;
  /// Inference requests waiting for a busy worker, at most (idle workers take requests at
  /// once); beyond it requests get 503. 0: only as many requests as idle workers.
  size_t max_queue = 64;
  /// Tensor bytes one inference request may hold, inputs plus outputs (InferLimits); bodies
  /// (and gRPC messages) larger than it are refused too. Over it: 413 / RESOURCE_EXHAUSTED.
  size_t max_request_bytes = InferLimits::kDefaultMaxRequestBytes;
  /// Deadline of one model invocation (0: none); past it the reply is 504.
  int64_t invoke_timeout_ms = 0;
  /// Nesting limit for request JSON.
  int max_json_depth = 64;
  /// KServe v2 gRPC on this port as well (0: an ephemeral one, see Server::grpc_port()); -1: none.
  int grpc_port = -1;
  /// Before reporting ready (and before a reloaded version is served), warm each model up on
  /// zero inputs (WarmUp in inference.h: optimized and specialized code compiled, every
  /// compile waited for), symbolic dims from `warmup_dims` (else 1), at every combination of
  /// the values `warmup_values` lists for some dims (--warmup-dims; ParseWarmupDims).
  bool warmup = false;
  std::map<std::string, int64_t> warmup_dims;
  std::map<std::string, std::vector<int64_t>> warmup_values;
  /// Every this many ms a housekeeping thread returns the C library's free heap memory to the
  /// system (malloc_trim); 0: never. Why: JIT compilations and requests of varying shapes leave
  /// most of glibc's per-thread arenas free but resident, and without trimming the server's RSS
  /// kept growing under random shapes (issue 17, finding 8; examples/serving/README.md).
  int64_t trim_interval_ms = 5000;
  /// Dynamic batching (batcher.h) of models whose inputs and outputs share a symbolic dim 0:
  /// up to `max_batch` requests (<= 1: off) waiting together at most `batch_timeout_us` run as
  /// one invocation. A batch only holds requests that workers are running, so it is at most
  /// `workers` large.
  int max_batch = 0;
  int64_t batch_timeout_us = 500;
};

/// A running server. REST routes (KServe v2): GET /v2/health/live, /v2/health/ready, /v2,
/// /v2/models/{name}[/versions/{v}], .../ready; POST .../infer (JSON, or the binary tensor
/// extension with Inference-Header-Content-Length); GET /metrics (Prometheus); POST
/// /v2/repository/index, /v2/repository/models/{name}/load and .../unload. Errors are JSON
/// {"error": "..."}: 400 bad request, 404 unknown model, version or path, 405 wrong method
/// (with Allow), 413 body or request tensors too large, 503 queue full or shutting down, 504 invoke deadline, 500
/// internal. Connections are HTTP/1.1 keep-alive; one request is in flight per connection at a
/// time. With grpc_port >= 0 the same models are served over gRPC (grpc_service.h).
class Server {
 public:
  /// Binds, listens and starts the I/O threads and the worker pool; with `warmup`, warms every
  /// model up (health/live answers meanwhile) before reporting ready and returning.
  /// InvalidArgument for a bad host or option; Internal naming the address if it cannot
  /// listen; warm-up errors naming the model.
  static StatusOr<std::unique_ptr<Server>> Start(std::shared_ptr<ModelRepository> repo,
                                                 const ServerOptions& options);
  /// Stop().
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The port actually bound (useful with port 0).
  int port() const;
  /// The gRPC port actually bound; -1 without gRPC.
  int grpc_port() const;
  /// Graceful shutdown: stops accepting, reports not ready, finishes the inference requests
  /// already queued and their replies, then closes every connection and joins all threads.
  /// Idempotent; must not be called from a server thread.
  void Stop();

  struct Stats {
    uint64_t requests = 0;  // requests read completely
    uint64_t infer_ok = 0;  // 200 replies to infer
    uint64_t rejected = 0;  // 503 because the queue was full
  };
  Stats stats() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_SERVER_H_
