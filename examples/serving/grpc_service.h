// kiln_serve's KServe v2 gRPC front end (inference.GRPCInferenceService) over gRPC C++.
#ifndef KILN_EXAMPLES_SERVING_GRPC_SERVICE_H_
#define KILN_EXAMPLES_SERVING_GRPC_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "examples/serving/serving_core.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace kiln::serving {

/// A running gRPC server: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata
/// and ModelInfer. Inference runs on the core's worker pool with the REST limits; errors carry
/// INVALID_ARGUMENT (bad request), NOT_FOUND (model or version), RESOURCE_EXHAUSTED (queue full,
/// message over the size limit), UNAVAILABLE (shutting down), DEADLINE_EXCEEDED (the client's
/// deadline or the invoke timeout) or INTERNAL.
class GrpcServer {
 public:
  /// Listens on host:port (0: an ephemeral port). `core` must outlive the server.
  /// Internal naming the address if it cannot listen.
  static StatusOr<std::unique_ptr<GrpcServer>> Start(ServingCore* core, const std::string& host,
                                                     int port, size_t max_message_bytes);
  /// Shutdown(0).
  ~GrpcServer();
  /// Stops accepting calls and waits up to `grace_ms` for calls in flight, then cancels the
  /// rest. Idempotent.
  void Shutdown(int64_t grace_ms);
  int port() const { return port_; }

  class Impl;

 private:
  GrpcServer(std::unique_ptr<Impl> impl, std::unique_ptr<grpc::Server> server, int port);
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_GRPC_SERVICE_H_
