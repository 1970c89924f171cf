// The test and load-test HTTP client: asynchronous Beast operations run to completion with a
// deadline on a private io_context (blocking Asio calls cannot time out).
#include "examples/serving/http_client.h"

#include <cctype>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

namespace kiln::serving {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class HttpClient::Impl {
 public:
  explicit Impl(std::chrono::milliseconds timeout) : stream_(ioc_), timeout_(timeout) {}

  // Starts `op` (which calls stream_'s async functions with a handler setting `ec`), and runs
  // the io_context until it completes; tcp_stream's deadline guarantees it does.
  template <typename Op>
  beast::error_code Run(std::chrono::milliseconds timeout, Op op) {
    beast::error_code ec = net::error::would_block;
    stream_.expires_after(timeout);
    op(&ec);
    ioc_.restart();
    ioc_.run();
    return ec;
  }

  Status Connect(const std::string& host, int port) {
    beast::error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (ec) return InvalidArgument("bad address '" + host + "'");
    tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
    ec = Run(timeout_, [&](beast::error_code* out) {
      stream_.async_connect(endpoint, [out](beast::error_code e) { *out = e; });
    });
    if (ec)
      return Internal("connect to " + host + ":" + std::to_string(port) + ": " + ec.message());
    stream_.socket().set_option(tcp::no_delay(true), ec);
    return Status::Ok();
  }

  StatusOr<HttpResponse> Write(const std::string& bytes, bool read_reply) {
    beast::error_code ec = Run(timeout_, [&](beast::error_code* out) {
      net::async_write(stream_, net::buffer(bytes),
                       [out](beast::error_code e, size_t) { *out = e; });
    });
    if (ec) return Failed("write", ec);
    if (!read_reply) return HttpResponse{};
    return Read();
  }

  StatusOr<HttpResponse> Request(const std::string& method, const std::string& target,
                                 const std::string& body, const HttpHeaders& headers) {
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(true);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = body;
    req.prepare_payload();
    beast::error_code ec = Run(timeout_, [&](beast::error_code* out) {
      http::async_write(stream_, req, [out](beast::error_code e, size_t) { *out = e; });
    });
    if (ec) return Failed("write", ec);
    return Read();
  }

  StatusOr<HttpResponse> Read() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(size_t{1} << 30);
    beast::error_code ec = Run(timeout_, [&](beast::error_code* out) {
      http::async_read(stream_, buffer_, parser, [out](beast::error_code e, size_t) { *out = e; });
    });
    if (ec) return Failed("read", ec);
    http::response<http::string_body> res = parser.release();
    HttpResponse r;
    r.status = static_cast<int>(res.result_int());
    r.body = std::move(res.body());
    auto allow = res.find(http::field::allow);
    if (allow != res.end()) r.allow = std::string(allow->value());
    for (const auto& field : res) {
      std::string name(field.name_string());
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      r.headers[name] = std::string(field.value());
    }
    r.keep_alive = res.keep_alive();
    return r;
  }

  void ShutdownWrite() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  bool WaitForClose(std::chrono::milliseconds timeout) {
    char byte;
    while (true) {
      size_t n = 0;
      beast::error_code ec = Run(timeout, [&](beast::error_code* out) {
        stream_.async_read_some(net::buffer(&byte, 1), [out, &n](beast::error_code e, size_t k) {
          *out = e;
          n = k;
        });
      });
      if (ec == beast::error::timeout) return false;
      if (ec) return true;  // EOF or reset: closed
      (void)n;
    }
  }

 private:
  Status Failed(const char* what, beast::error_code ec) {
    if (ec == beast::error::timeout) return DeadlineExceeded(std::string(what) + " timed out");
    return Internal(std::string(what) + ": " + ec.message());
  }

  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::chrono::milliseconds timeout_;
};

StatusOr<std::unique_ptr<HttpClient>> HttpClient::Connect(const std::string& host, int port,
                                                          std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<Impl>(timeout);
  RETURN_IF_ERROR(impl->Connect(host, port));
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

StatusOr<HttpResponse> HttpClient::Request(const std::string& method, const std::string& target,
                                           const std::string& body, const HttpHeaders& headers) {
  return impl_->Request(method, target, body, headers);
}

StatusOr<HttpResponse> HttpClient::SendRaw(const std::string& bytes, bool read_reply) {
  return impl_->Write(bytes, read_reply);
}

void HttpClient::ShutdownWrite() { impl_->ShutdownWrite(); }

bool HttpClient::WaitForClose(std::chrono::milliseconds timeout) {
  return impl_->WaitForClose(timeout);
}

}  // namespace kiln::serving
