// The Beast server: an acceptor and asynchronous sessions (one strand per connection) on a few
// I/O threads; inference is handed to the worker pool and the reply posted back to the session.
#include "examples/serving/server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "examples/serving/inference.h"
#include "examples/serving/worker_pool.h"

namespace kiln::serving {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Server::Impl {
 public:
  explicit Impl(std::shared_ptr<const ModelRepository> repo, const ServerOptions& options)
      : options_(options), repo_(std::move(repo)), acceptor_(net::make_strand(ioc_)) {}

  Status Listen();
  void StartThreads() {
    for (int i = 0; i < options_.io_threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  void Accept();
  void Stop();

  // Shared with sessions (which never outlive the io_context, hence this object).
  net::io_context ioc_;
  ServerOptions options_;
  std::shared_ptr<const ModelRepository> repo_;
  std::unique_ptr<WorkerPool> pool_;
  InferLimits limits_;
  int port_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<int64_t> pending_replies_{0};  // infer jobs submitted and not yet written
  std::atomic<uint64_t> requests_{0}, infer_ok_{0}, rejected_{0};

 private:
  tcp::acceptor acceptor_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

namespace {

constexpr std::string_view kModelsPrefix = "/v2/models/";

std::chrono::milliseconds Timeout(const ServerOptions& o) {
  return std::chrono::milliseconds(o.timeout_ms);
}

// One connection. All its handlers run on its strand, so members need no locks; a worker
// touches it only by posting the finished reply back to the strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl* server) : stream_(std::move(socket)), server_(server) {}

  void Start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(server_->options_.max_body_bytes);
    parser_->header_limit(16 * 1024);
    // One deadline for the whole request: a client trickling bytes cannot extend it.
    stream_.expires_after(Timeout(server_->options_));
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  // Clients such as curl send "Expect: 100-continue" before a large body and wait (curl: 1 s)
  // for a go-ahead; give it at once. (A body over the limit has already failed here, from its
  // Content-Length, so such a client is refused before it sends the body.)
  void OnHeader(beast::error_code ec, size_t) {
    if (ec) return OnRead(ec, 0);
    auto expect = parser_->get().find(http::field::expect);
    if (expect != parser_->get().end() && beast::iequals(expect->value(), "100-continue")) {
      auto go_ahead = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                         parser_->get().version());
      return http::async_write(stream_, *go_ahead,
                               [self = shared_from_this(), go_ahead](beast::error_code e, size_t) {
                                 if (e) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted) {
      return Close();
    }
    if (ec == http::error::body_limit) {
      version_ = parser_->get().version();
      return Send(ErrorReply(413, "request body larger than " +
                                      std::to_string(server_->options_.max_body_bytes) + " bytes"),
                  false);
    }
    if (ec) {
      // Malformed HTTP: say so if the socket still works, then close.
      if (ec.category() == beast::error_code(http::error::bad_target).category() &&
          ec != http::error::partial_message) {
        version_ = 11;
        return Send(ErrorReply(400, "malformed HTTP request: " + ec.message()), false);
      }
      return Close();
    }
    stream_.expires_never();  // while a worker runs the request, only the reply's write is timed
    ++server_->requests_;
    http::request<http::string_body> req = parser_->release();
    version_ = req.version();
    Route(req);
  }

  void Route(http::request<http::string_body>& req) {
    bool keep = req.keep_alive();
    std::string_view target(req.target().data(), req.target().size());
    target = target.substr(0, target.find('?'));
    bool get = req.method() == http::verb::get;
    auto only_get = [&](Reply ok) {
      if (!get) return SendMethodNotAllowed("GET", keep);
      Send(std::move(ok), keep);
    };
    if (target == "/v2/health/live") return only_get(Reply{200, R"({"live":true})"});
    if (target == "/v2/health/ready") {
      bool ready = server_->ready_;
      return only_get(Reply{ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})"});
    }
    if (target == "/v2" || target == "/v2/") return only_get(Reply{200, ServerMetadata()});
    if (target.substr(0, kModelsPrefix.size()) != kModelsPrefix) {
      return Send(ErrorReply(404, "no route for '" + std::string(target) + "'"), keep);
    }
    std::string_view rest = target.substr(kModelsPrefix.size());
    std::string_view name = rest.substr(0, rest.find('/'));
    std::string_view action = rest.substr(name.size());
    const Model* model = server_->repo_->Find(name);
    if (action != "" && action != "/ready" && action != "/infer") {
      return Send(ErrorReply(404, "no route for '" + std::string(target) + "'"), keep);
    }
    if (model == nullptr) {
      return Send(ErrorReply(404, "unknown model '" + std::string(name) + "'"), keep);
    }
    if (action == "") return only_get(Reply{200, model->MetadataJson()});
    if (action == "/ready") {
      return only_get(Reply{200, R"({"name":)" + JsonString(model->name) + R"(,"ready":true})"});
    }
    if (req.method() != http::verb::post) return SendMethodNotAllowed("POST", keep);
    SubmitInfer(*model, std::move(req.body()), keep);
  }

  void SubmitInfer(const Model& model, std::string body, bool keep) {
    int index = static_cast<int>(&model - server_->repo_->models().data());
    auto shared_body = std::make_shared<std::string>(std::move(body));
    auto self = shared_from_this();
    Server::Impl* server = server_;
    ++server->pending_replies_;
    bool queued =
        server->pool_->TrySubmit([self, server, index, shared_body, keep](WorkerContexts& c) {
          const Model& m = server->repo_->models()[index];
          Reply reply = RunInfer(m, *c.by_model[index], *shared_body, server->limits_);
          if (reply.status == 200) ++server->infer_ok_;
          net::post(self->stream_.get_executor(), [self, reply = std::move(reply), keep]() mutable {
            self->Send(std::move(reply), keep, /*counted=*/true);
          });
        });
    if (!queued) {
      --server->pending_replies_;
      ++server->rejected_;
      Send(ErrorReply(503, server->ready_
                               ? "server overloaded: the inference queue is full (" +
                                     std::to_string(server->options_.max_queue) + " waiting)"
                               : std::string("server shutting down")),
           keep);
    }
  }

  void SendMethodNotAllowed(const char* allow, bool keep) {
    allow_ = allow;
    Send(ErrorReply(405, std::string("method not allowed; use ") + allow), keep);
  }

  // `counted`: this reply finishes an infer job (Stop waits for those).
  void Send(Reply reply, bool keep, bool counted = false) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(reply.status), version_);
    res->set(http::field::server, "kiln_serve");
    res->set(http::field::content_type, "application/json");
    if (!allow_.empty()) res->set(http::field::allow, allow_);
    allow_.clear();
    res->keep_alive(keep);
    res->body() = std::move(reply.body);
    res->prepare_payload();
    stream_.expires_after(Timeout(server_->options_));  // a client that never reads its reply
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, counted](beast::error_code ec, size_t) {
                        self->OnWrite(ec, res->keep_alive(), counted);
                      });
  }

  void OnWrite(beast::error_code ec, bool keep, bool counted) {
    if (counted) --server_->pending_replies_;
    if (ec) return Close();
    if (!keep) return LingeringClose();
    Read();
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  // After refusing a request whose body may still be arriving (413, malformed HTTP): closing
  // with unread input makes the kernel send a reset, which can destroy the reply before the
  // client reads it. So: send FIN, discard input until the client closes (bounded in time
  // and bytes), then close.
  void LingeringClose() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::min(Timeout(server_->options_), std::chrono::milliseconds(2000)));
    Discard(0);
  }

  void Discard(size_t discarded) {
    constexpr size_t kMaxDiscard = size_t{64} << 20;
    if (discarded > kMaxDiscard) return stream_.close();
    stream_.async_read_some(net::buffer(discard_, sizeof(discard_)),
                            [self = shared_from_this(), discarded](beast::error_code ec, size_t n) {
                              if (ec) return self->stream_.close();
                              self->Discard(discarded + n);
                            });
  }

  std::string ServerMetadata() const {
    std::string out;
    JsonWriter w(&out);
    w.BeginObject();
    w.Key("name");
    w.String("kiln");
    w.Key("version");
    w.String("0.1");
    w.Key("extensions");
    w.BeginArray();
    w.EndArray();
    w.Key("models");
    w.BeginArray();
    for (const Model& m : server_->repo_->models()) w.String(m.name);
    w.EndArray();
    w.EndObject();
    return out;
  }

  static std::string JsonString(std::string_view s) {
    std::string out;
    JsonWriter(&out).String(s);
    return out;
  }

  beast::tcp_stream stream_;
  Server::Impl* server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = 11;
  std::string allow_;
  char discard_[4096];
};

}  // namespace

Status Server::Impl::Listen() {
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(options_.host, ec);
  if (ec) return InvalidArgument("bad host address '" + options_.host + "': " + ec.message());
  if (options_.port < 0 || options_.port > 65535) {
    return InvalidArgument("port " + std::to_string(options_.port) + " out of range");
  }
  tcp::endpoint endpoint(address, static_cast<uint16_t>(options_.port));
  std::string where = options_.host + ":" + std::to_string(options_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Internal("cannot listen on " + where + ": " + ec.message());
  port_ = acceptor_.local_endpoint().port();
  work_.emplace(ioc_.get_executor());
  return Status::Ok();
}

void Server::Impl::Accept() {
  // Each connection gets a strand of its own, so sessions run in parallel across I/O threads.
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) std::make_shared<Session>(std::move(socket), this)->Start();
    Accept();  // on transient errors (e.g. out of descriptors) keep accepting
  });
}

void Server::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  ready_ = false;
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
  });
  if (pool_) pool_->Shutdown();  // runs every queued request; replies are posted to sessions
  // Let those replies be written (each write is bounded by timeout_ms).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  while (pending_replies_ > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  work_.reset();
  ioc_.stop();  // closes idle keep-alive connections: their sessions are destroyed with ioc_
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

StatusOr<std::unique_ptr<Server>> Server::Start(std::shared_ptr<const ModelRepository> repo,
                                                const ServerOptions& options) {
  if (repo == nullptr) return InvalidArgument("no model repository");
  if (options.io_threads < 1) return InvalidArgument("io_threads must be >= 1");
  if (options.timeout_ms < 1) return InvalidArgument("timeout_ms must be >= 1");
  if (options.max_json_depth < 1) return InvalidArgument("max_json_depth must be >= 1");
  auto impl = std::make_unique<Impl>(std::move(repo), options);
  impl->limits_.json.max_bytes = options.max_body_bytes;
  impl->limits_.json.max_depth = options.max_json_depth;
  impl->limits_.invoke_timeout = std::chrono::milliseconds(options.invoke_timeout_ms);
  ASSIGN_OR_RETURN(impl->pool_, WorkerPool::Start(impl->repo_, options.workers, options.max_queue));
  RETURN_IF_ERROR(impl->Listen());
  impl->Accept();
  impl->ready_ = true;
  impl->StartThreads();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->port_; }

void Server::Stop() { impl_->Stop(); }

Server::Stats Server::stats() const {
  Stats s;
  s.requests = impl_->requests_;
  s.infer_ok = impl_->infer_ok_;
  s.rejected = impl_->rejected_;
  return s;
}

}  // namespace kiln::serving
