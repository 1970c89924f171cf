// A minimal blocking HTTP/1.1 keep-alive client (Boost.Beast) for the load test and tests.
#ifndef KILN_EXAMPLES_SERVING_HTTP_CLIENT_H_
#define KILN_EXAMPLES_SERVING_HTTP_CLIENT_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kiln::serving {

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string allow;  // the Allow header, if any
  bool keep_alive = false;
  std::map<std::string, std::string> headers;  // every header, names in lower case
};

/// Extra request headers (name, value); a Content-Type here replaces the JSON default.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

/// One connection. Every call is bounded by `timeout` (DeadlineExceeded past it, and the
/// connection is closed). Not thread-safe: one client per thread.
class HttpClient {
 public:
  /// Internal naming the address if it cannot connect.
  static StatusOr<std::unique_ptr<HttpClient>> Connect(const std::string& host, int port,
                                                       std::chrono::milliseconds timeout);
  ~HttpClient();

  /// Sends one request (Content-Type application/json when `body` is non-empty, plus
  /// `headers`) and reads the reply. Unavailable-style failures (closed connection, timeout)
  /// are errors, not statuses.
  StatusOr<HttpResponse> Request(const std::string& method, const std::string& target,
                                 const std::string& body = "", const HttpHeaders& headers = {});
  /// Writes raw bytes (for malformed or partial requests) and, if `read_reply`, reads one reply.
  StatusOr<HttpResponse> SendRaw(const std::string& bytes, bool read_reply);
  /// Half-closes: no more bytes will be sent.
  void ShutdownWrite();
  /// True once the server closed the connection: reads until EOF or `timeout`.
  bool WaitForClose(std::chrono::milliseconds timeout);

  class Impl;

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_HTTP_CLIENT_H_
