// The Beast server: an acceptor and asynchronous sessions (one strand per connection) on a few
// I/O threads; inference is handed to the worker pool and the reply posted back to the session.
#include "examples/serving/server.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "examples/serving/grpc_service.h"
#include "examples/serving/rest_infer.h"
#include "examples/serving/serving_core.h"

namespace kiln::serving {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Server::Impl {
 public:
  explicit Impl(std::shared_ptr<ModelRepository> repo, const ServerOptions& options)
      : options_(options), acceptor_(net::make_strand(ioc_)) {
    core_.repo = std::move(repo);
    core_.max_queue = options.max_queue;
  }

  Status Listen();
  /// Starts the housekeeping thread that trims the heap every options_.trim_interval_ms.
  void StartTrimmer();
  void StartThreads() {
    for (int i = 0; i < options_.io_threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  void Accept();
  /// The warm-up run on models before they are served (null without --warmup).
  ModelRepository::Prepare Prepare() const;
  Status WarmUpAll();
  void Stop();

  // Shared with sessions (which never outlive the io_context, hence this object).
  net::io_context ioc_;
  ServerOptions options_;
  ServingCore core_;
  std::unique_ptr<GrpcServer> grpc_;
  int port_ = 0;
  std::atomic<int64_t> pending_replies_{0};  // infer jobs submitted and not yet written
  // Requests read completely and not yet routed (submitted to the pool or answered): Stop waits
  // for them before it shuts the pool, so a request read before Stop is never refused by it.
  std::atomic<int64_t> routing_{0};
  std::atomic<uint64_t> requests_{0}, infer_ok_{0}, rejected_{0};

 private:
  tcp::acceptor acceptor_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
  std::mutex trim_mu_;
  std::condition_variable trim_cv_;
  bool trim_stop_ = false;
  std::thread trimmer_;
};

namespace {

constexpr std::string_view kModelsPrefix = "/v2/models/";
constexpr std::string_view kRepositoryPrefix = "/v2/repository/";
constexpr const char* kHeaderLength = "Inference-Header-Content-Length";

std::chrono::milliseconds Timeout(const ServerOptions& o) {
  return std::chrono::milliseconds(o.timeout_ms);
}

// A request body may hold neither more than --max-body-bytes nor more than a request's
// tensors may (--max-request-bytes).
size_t BodyLimit(const ServerOptions& o) { return std::min(o.max_body_bytes, o.max_request_bytes); }

// "N bytes (--flag)" for the smaller body limit.
std::string BodyLimitText(const ServerOptions& o) {
  bool body = o.max_body_bytes <= o.max_request_bytes;
  return std::to_string(BodyLimit(o)) + " bytes (" +
         (body ? "--max-body-bytes" : "--max-request-bytes") + ")";
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
    parser_->body_limit(BodyLimit(server_->options_));
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
      return Send(ErrorReply(413, "request body larger than " + BodyLimitText(server_->options_)),
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
    Server::Impl* server = server_;
    ++server->routing_;
    ++server->requests_;
    http::request<http::string_body> req = parser_->release();
    version_ = req.version();
    Route(req);
    --server->routing_;
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
    ServingCore& core = server_->core_;
    if (target == "/v2/health/live") return only_get(Reply{200, R"({"live":true})"});
    if (target == "/v2/health/ready") {
      bool ready = core.ready;
      return only_get(Reply{ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})"});
    }
    if (target == "/v2" || target == "/v2/") return only_get(Reply{200, ServerMetadata()});
    if (target == "/metrics") {
      if (!get) return SendMethodNotAllowed("GET", keep);
      content_type_ = "text/plain; version=0.0.4";
      return Send(Reply{200, core.RenderMetrics()}, keep);
    }
    if (target.substr(0, kRepositoryPrefix.size()) == kRepositoryPrefix) {
      return RouteRepository(req.method(), target.substr(kRepositoryPrefix.size()), keep);
    }
    if (target.substr(0, kModelsPrefix.size()) != kModelsPrefix) {
      return Send(ErrorReply(404, "no route for '" + std::string(target) + "'"), keep);
    }
    // NAME[/versions/V][/ready|/infer]
    std::string_view rest = target.substr(kModelsPrefix.size());
    std::string_view name = rest.substr(0, rest.find('/'));
    std::string_view action = rest.substr(name.size());
    std::string_view version;
    constexpr std::string_view kVersions = "/versions/";
    if (action.substr(0, kVersions.size()) == kVersions) {
      std::string_view v = action.substr(kVersions.size());
      version = v.substr(0, v.find('/'));
      action = v.substr(version.size());
      if (version.empty()) action = "?";  // "/versions/" alone is no route
    }
    if (action != "" && action != "/ready" && action != "/infer") {
      return Send(ErrorReply(404, "no route for '" + std::string(target) + "'"), keep);
    }
    std::shared_ptr<const Model> model = core.FindModel(name, version);
    if (model == nullptr) {
      if (action == "/infer") core.metrics.CountOnly(name, "rest", "404");
      bool known = !version.empty() && core.repo->Find(name) != nullptr;
      return Send(ErrorReply(404, known ? "model '" + std::string(name) + "' has no version '" +
                                              std::string(version) + "'"
                                        : "unknown model '" + std::string(name) + "'"),
                  keep);
    }
    if (action == "") return only_get(Reply{200, model->MetadataJson()});
    if (action == "/ready") {
      return only_get(Reply{200, R"({"name":)" + JsonString(model->name) + R"(,"ready":true})"});
    }
    if (req.method() != http::verb::post) return SendMethodNotAllowed("POST", keep);
    std::optional<size_t> header_length;
    auto field = req.find(kHeaderLength);
    if (field != req.end()) {
      header_length = ParseSize(std::string_view(field->value().data(), field->value().size()));
      if (!header_length) {
        return Send(ErrorReply(400, std::string(kHeaderLength) + " must be a byte count, got '" +
                                        std::string(field->value()) + "'"),
                    keep);
      }
    }
    SubmitInfer(std::move(model), std::move(req.body()), header_length, keep);
  }

  // index | models/NAME/load | models/NAME/unload (all POST; index also GET).
  void RouteRepository(http::verb method, std::string_view path, bool keep) {
    ServingCore& core = server_->core_;
    if (path == "index") {
      if (method != http::verb::post && method != http::verb::get) {
        return SendMethodNotAllowed("GET, POST", keep);
      }
      return Send(Reply{200, RepositoryIndex()}, keep);
    }
    constexpr std::string_view kModels = "models/";
    std::string_view rest = path.substr(0, kModels.size()) == kModels
                                ? path.substr(kModels.size())
                                : std::string_view();
    std::string_view name = rest.substr(0, rest.find('/'));
    std::string_view action = rest.substr(name.size());
    if (name.empty() || (action != "/load" && action != "/unload")) {
      return Send(ErrorReply(404, "no route for '/v2/repository/" + std::string(path) + "'"),
                  keep);
    }
    if (method != http::verb::post) return SendMethodNotAllowed("POST", keep);
    // Loading reads and verifies a file and may warm the model up: a worker does it, not
    // this I/O thread.
    Server::Impl* server = server_;
    bool load = action == "/load";
    ++server->pending_replies_;
    auto reply = std::make_shared<Reply>();
    bool queued = core.pool->TrySubmit(
        [server, name = std::string(name), load, reply] {
          ServingCore& c = server->core_;
          Status st =
              load ? c.repo->LoadModel(name, c.prepare) : c.repo->UnloadModel(name);
          *reply = st.ok() ? Reply{200, "{}"}
                           : ErrorReply(st.code() == StatusCode::kNotFound ? 404 : 400,
                                        st.ToString());
        },
        PostReply(reply, keep));
    if (!queued) {
      --server->pending_replies_;
      Send(ErrorReply(503, core.RefusalMessage()), keep);
    }
  }

  void SubmitInfer(std::shared_ptr<const Model> model, std::string body,
                   std::optional<size_t> header_length, bool keep) {
    auto shared_body = std::make_shared<std::string>(std::move(body));
    Server::Impl* server = server_;
    ServingCore& core = server->core_;
    auto start = std::chrono::steady_clock::now();
    core.metrics.Begin(model->name);
    ++server->pending_replies_;
    auto reply = std::make_shared<Reply>();
    bool queued = core.pool->TrySubmit(
        [server, model, shared_body, header_length, start, reply] {
          ServingCore& c = server->core_;
          *reply = RunInfer(
              *model, *shared_body, c.limits,
              [&](const std::vector<Tensor>& inputs,
                  std::chrono::steady_clock::time_point deadline) {
                return c.Invoke(*model, inputs, deadline);
              },
              header_length);
          if (reply->status == 200) ++server->infer_ok_;
          c.metrics.End(model->name, "rest", std::to_string(reply->status), Seconds(start));
        },
        PostReply(reply, keep));
    if (!queued) {
      --server->pending_replies_;
      ++server->rejected_;
      core.metrics.End(model->name, "rest", "503", Seconds(start));
      Send(ErrorReply(503, core.RefusalMessage()), keep);
    }
  }

  // A worker's second step (WorkerPool::TrySubmit's `then`, run once the worker counts as
  // idle): posts the reply a job left in `reply` back to this session's strand.
  WorkerPool::Job PostReply(std::shared_ptr<Reply> reply, bool keep) {
    return [self = shared_from_this(), reply, keep] {
      net::post(self->stream_.get_executor(), [self, reply, keep] {
        self->Send(std::move(*reply), keep, /*counted=*/true);
      });
    };
  }

  static double Seconds(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  static std::optional<size_t> ParseSize(std::string_view s) {
    if (s.empty() || s.size() > 18) return std::nullopt;
    size_t n = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + static_cast<size_t>(c - '0');
    }
    return n;
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
    if (reply.binary_header_length) {
      res->set(http::field::content_type, "application/octet-stream");
      res->set(kHeaderLength, std::to_string(*reply.binary_header_length));
    } else {
      res->set(http::field::content_type,
               content_type_.empty() ? "application/json" : content_type_);
    }
    content_type_.clear();
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
    for (const char* e : {"binary_tensor_data", "model_repository"}) w.String(e);
    w.EndArray();
    w.Key("models");
    w.BeginArray();
    for (const auto& m : server_->core_.repo->models()) w.String(m->name);
    w.EndArray();
    w.EndObject();
    return out;
  }

  // [{"name","version","state","reason"}...] (KServe / Triton repository index).
  std::string RepositoryIndex() const {
    std::string out;
    JsonWriter w(&out);
    w.BeginArray();
    for (const RepositoryEntry& e : server_->core_.repo->Index()) {
      w.BeginObject();
      w.Key("name");
      w.String(e.name);
      w.Key("version");
      w.String(e.version);
      w.Key("state");
      w.String(e.state);
      w.Key("reason");
      w.String(e.reason);
      w.EndObject();
    }
    w.EndArray();
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
  std::string content_type_;  // of the next reply when not JSON
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

void Server::Impl::StartTrimmer() {
  if (options_.trim_interval_ms <= 0) return;
  trimmer_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(trim_mu_);
    while (!trim_cv_.wait_for(lock, std::chrono::milliseconds(options_.trim_interval_ms),
                              [this] { return trim_stop_; })) {
      // Returns whole free pages of every arena (not only the top of the main heap): what the
      // JIT's compilations and the requests' buffers freed. It takes each arena's lock only
      // briefly, and a page trimmed and needed again costs one fault.
      malloc_trim(0);
    }
  });
}

void Server::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(trim_mu_);
    trim_stop_ = true;
  }
  trim_cv_.notify_all();
  if (trimmer_.joinable()) trimmer_.join();
  core_.ready = false;
  // gRPC calls in flight finish first (their jobs need the pool); new ones are refused.
  if (grpc_) grpc_->Shutdown(options_.timeout_ms);
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
  });
  // A request read before this point is submitted to the pool, not refused by its shutdown
  // (server_test's stop_finishes_requests_in_flight once got 503 under TSan in that window).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  while (routing_ > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (core_.pool) core_.pool->Shutdown();  // runs every queued request; replies are posted to sessions
  // Let those replies be written (each write is bounded by timeout_ms).
  deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  while (pending_replies_ > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  work_.reset();
  ioc_.stop();  // closes idle keep-alive connections: their sessions are destroyed with ioc_
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

ModelRepository::Prepare Server::Impl::Prepare() const {
  if (!options_.warmup) return nullptr;
  WarmupShapes shapes{options_.warmup_dims, options_.warmup_values};
  return [shapes](const Model& model) { return WarmUp(model, shapes); };
}

Status Server::Impl::WarmUpAll() {
  if (!core_.prepare) return Status::Ok();
  for (const auto& model : core_.repo->models()) RETURN_IF_ERROR(core_.prepare(*model));
  return Status::Ok();
}

StatusOr<std::unique_ptr<Server>> Server::Start(std::shared_ptr<ModelRepository> repo,
                                                const ServerOptions& options) {
  if (repo == nullptr) return InvalidArgument("no model repository");
  if (options.io_threads < 1) return InvalidArgument("io_threads must be >= 1");
  if (options.timeout_ms < 1) return InvalidArgument("timeout_ms must be >= 1");
  if (options.max_json_depth < 1) return InvalidArgument("max_json_depth must be >= 1");
  auto impl = std::make_unique<Impl>(std::move(repo), options);
  InferLimits& limits = impl->core_.limits;
  limits.json.max_bytes = options.max_body_bytes;
  limits.json.max_depth = options.max_json_depth;
  limits.invoke_timeout = std::chrono::milliseconds(options.invoke_timeout_ms);
  limits.max_request_bytes = options.max_request_bytes;
  if (options.batch_timeout_us < 0) return InvalidArgument("batch_timeout_us must be >= 0");
  impl->core_.prepare = impl->Prepare();
  impl->core_.batching.max_batch = options.max_batch;
  impl->core_.batching.timeout = std::chrono::microseconds(options.batch_timeout_us);
  ASSIGN_OR_RETURN(impl->core_.pool, WorkerPool::Start(options.workers, options.max_queue));
  RETURN_IF_ERROR(impl->Listen());
  if (options.grpc_port >= 0) {
    ASSIGN_OR_RETURN(impl->grpc_, GrpcServer::Start(&impl->core_, options.host, options.grpc_port,
                                                    BodyLimit(options)));
  }
  impl->Accept();
  impl->StartThreads();
  impl->StartTrimmer();
  std::unique_ptr<Server> server(new Server(std::move(impl)));
  // Live but not ready while the first requests' JIT work is done.
  if (Status st = server->impl_->WarmUpAll(); !st.ok()) {
    server->Stop();
    return st;
  }
  server->impl_->core_.ready = true;
  return server;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->port_; }

int Server::grpc_port() const { return impl_->grpc_ ? impl_->grpc_->port() : -1; }

void Server::Stop() { impl_->Stop(); }

Server::Stats Server::stats() const {
  Stats s;
  s.requests = impl_->requests_;
  s.infer_ok = impl_->infer_ok_;
  s.rejected = impl_->rejected_;
  return s;
}

}  // namespace kiln::serving
