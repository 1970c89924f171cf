// The KServe v2 gRPC service: synchronous handlers on gRPC's threads; ModelInfer hands its work
// to the shared worker pool (so REST and gRPC share one queue bound) and waits for it.
#include "examples/serving/grpc_service.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstring>
#include <future>
#include <limits>

#include "examples/serving/grpc_predict_v2.grpc.pb.h"
#include "examples/serving/tensor_json.h"

namespace kiln::serving {

namespace {

using Clock = std::chrono::steady_clock;

grpc::StatusCode GrpcCodeOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    default:
      return grpc::StatusCode::INTERNAL;
  }
}

// The gRPC code's name as the metrics label.
const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    default:
      return "INTERNAL";
  }
}

grpc::Status ToGrpc(const Status& st) {
  return grpc::Status(GrpcCodeOf(st.code()), st.message());
}

// Typed elements `values` (a repeated field of type Src) into a new tensor of `dtype`; each
// value must be representable in the element type Dst.
template <typename Dst, typename Src>
StatusOr<Tensor> FromTyped(const google::protobuf::RepeatedField<Src>& values, DType dtype,
                           const Shape& shape, const std::string& where) {
  ASSIGN_OR_RETURN(int64_t n, shape.CheckedNumElements());
  if (values.size() != n) {
    return InvalidArgument(where + ": " + std::to_string(values.size()) +
                           " elements in 'contents', but shape " + shape.ToString() + " has " +
                           std::to_string(n));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DefaultAllocator(), dtype, shape));
  Dst* out = t.data_as<Dst>();
  for (int64_t i = 0; i < n; ++i) {
    Src v = values.Get(static_cast<int>(i));
    if constexpr (std::is_integral_v<Dst> && !std::is_same_v<Dst, Src>) {
      if (v < static_cast<Src>(std::numeric_limits<Dst>::min()) ||
          v > static_cast<Src>(std::numeric_limits<Dst>::max())) {
        return InvalidArgument(where + ": element " + std::to_string(i) + " (" +
                               std::to_string(v) + ") is out of range for " +
                               KServeDatatype(dtype));
      }
    }
    out[i] = static_cast<Dst>(v);
  }
  return t;
}

// A typed-contents input: the field matching `dtype` (FP16 and BF16 have none: raw only).
StatusOr<Tensor> DecodeTyped(const inference::InferTensorContents& c, DType dtype,
                             const Shape& shape, const std::string& where) {
  switch (dtype) {
    case DType::kF32:
      return FromTyped<float>(c.fp32_contents(), dtype, shape, where);
    case DType::kF64:
      return FromTyped<double>(c.fp64_contents(), dtype, shape, where);
    case DType::kI8:
      return FromTyped<int8_t>(c.int_contents(), dtype, shape, where);
    case DType::kI16:
      return FromTyped<int16_t>(c.int_contents(), dtype, shape, where);
    case DType::kI32:
      return FromTyped<int32_t>(c.int_contents(), dtype, shape, where);
    case DType::kI64:
      return FromTyped<int64_t>(c.int64_contents(), dtype, shape, where);
    case DType::kU8:
      return FromTyped<uint8_t>(c.uint_contents(), dtype, shape, where);
    case DType::kU16:
      return FromTyped<uint16_t>(c.uint_contents(), dtype, shape, where);
    case DType::kU32:
      return FromTyped<uint32_t>(c.uint_contents(), dtype, shape, where);
    case DType::kU64:
      return FromTyped<uint64_t>(c.uint64_contents(), dtype, shape, where);
    case DType::kBool:
      return FromTyped<bool>(c.bool_contents(), dtype, shape, where);
    default:
      return InvalidArgument(where + ": " + KServeDatatype(dtype) +
                             " has no typed contents; send it in raw_input_contents");
  }
}

StatusOr<Shape> ShapeOf(const google::protobuf::RepeatedField<int64_t>& dims,
                        const std::string& where) {
  if (dims.size() > kMaxRank) {
    return InvalidArgument(where + ": 'shape' has rank " + std::to_string(dims.size()) +
                           ", more than " + std::to_string(kMaxRank));
  }
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument(where + ": 'shape' must be non-negative integers");
  }
  auto shape = Shape::Make(dims.data(), dims.size());
  if (!shape.ok()) return shape.status().WithContext(where);
  return shape;
}

// The request's inputs in parameter order (raw or typed contents, never both).
StatusOr<std::vector<Tensor>> DecodeInputs(const inference::ModelInferRequest& req,
                                           const FunctionSignature& sig,
                                           const InferLimits& limits) {
  bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != req.inputs_size()) {
    return InvalidArgument(std::to_string(req.raw_input_contents_size()) +
                           " raw_input_contents for " + std::to_string(req.inputs_size()) +
                           " inputs");
  }
  InputBinder binder(sig, &limits);
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& in = req.inputs(i);
    std::string where = "inputs[" + std::to_string(i) + "]";
    ASSIGN_OR_RETURN(int p, binder.Bind(in.name(), &where));
    ASSIGN_OR_RETURN(DType dtype, binder.CheckDatatype(p, in.datatype(), where));
    ASSIGN_OR_RETURN(Shape shape, ShapeOf(in.shape(), where));
    RETURN_IF_ERROR(binder.CheckShape(p, shape, where));
    if (raw) {
      if (in.has_contents() && in.contents().ByteSizeLong() > 0) {
        return InvalidArgument(where + ": both 'contents' and raw_input_contents");
      }
      ASSIGN_OR_RETURN(Tensor t,
                       DecodeRawTensorData(req.raw_input_contents(i), dtype, shape, where));
      binder.Set(p, std::move(t));
    } else {
      ASSIGN_OR_RETURN(Tensor t, DecodeTyped(in.contents(), dtype, shape, where));
      binder.Set(p, std::move(t));
    }
  }
  return binder.Finish();
}

// Decode, invoke, encode (outputs raw). Runs on a worker.
Status RunInfer(const ServingCore& core, const Model& model,
                const inference::ModelInferRequest& req, Clock::time_point deadline,
                inference::ModelInferResponse* resp) {
  const FunctionSignature& sig = model.signature();
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, DecodeInputs(req, sig, core.limits));
  std::vector<int> selected;
  for (int i = 0; i < req.outputs_size(); ++i) {
    ASSIGN_OR_RETURN(int r,
                     FindOutput(sig, req.outputs(i).name(), "outputs[" + std::to_string(i) + "]"));
    selected.push_back(r);
  }
  if (req.outputs_size() == 0) {
    for (size_t r = 0; r < sig.results.size(); ++r) selected.push_back(static_cast<int>(r));
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> outputs, core.Invoke(model, inputs, deadline));
  resp->set_model_name(model.name);
  resp->set_model_version(model.version);
  resp->set_id(req.id());
  for (int r : selected) {
    const Tensor& t = outputs[r];
    auto* out = resp->add_outputs();
    out->set_name(sig.results[r].name);
    out->set_datatype(KServeDatatype(t.dtype()));
    for (int d = 0; d < t.rank(); ++d) out->add_shape(t.dim(d));
    AppendRawTensorData(t, resp->add_raw_output_contents());
  }
  return Status::Ok();
}

void FillTensorMetadata(const std::vector<ValueSpec>& specs,
                        google::protobuf::RepeatedPtrField<
                            inference::ModelMetadataResponse::TensorMetadata>* out) {
  for (const ValueSpec& v : specs) {
    auto* t = out->Add();
    t->set_name(v.name);
    t->set_datatype(KServeDatatype(v.dtype));
    for (const DimSpec& d : v.shape) t->add_shape(d.fixed() ? d.value : -1);
  }
}

}  // namespace

class GrpcServer::Impl final : public inference::GRPCInferenceService::Service {
 public:
  explicit Impl(ServingCore* core) : core_(core) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* resp) override {
    resp->set_live(true);
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* resp) override {
    resp->set_ready(core_->ready);
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* req,
                          inference::ModelReadyResponse* resp) override {
    resp->set_ready(core_->ready && core_->FindModel(req->name(), req->version()) != nullptr);
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* resp) override {
    resp->set_name("kiln");
    resp->set_version("0.1");
    for (const char* e : kExtensions) resp->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* req,
                             inference::ModelMetadataResponse* resp) override {
    std::shared_ptr<const Model> model = core_->FindModel(req->name(), req->version());
    if (model == nullptr) return NotFoundStatus(req->name(), req->version());
    resp->set_name(model->name);
    resp->add_versions(model->version);
    resp->set_platform("kiln");
    FillTensorMetadata(model->signature().params, resp->mutable_inputs());
    FillTensorMetadata(model->signature().results, resp->mutable_outputs());
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* req,
                          inference::ModelInferResponse* resp) override {
    auto start = Clock::now();
    std::shared_ptr<const Model> model = core_->FindModel(req->model_name(), req->model_version());
    if (model == nullptr) {
      grpc::Status st = NotFoundStatus(req->model_name(), req->model_version());
      core_->metrics.CountOnly(req->model_name(), "grpc", GrpcCodeName(st.error_code()));
      return st;
    }
    core_->metrics.Begin(model->name);
    grpc::Status st = Infer(context, model, *req, resp);
    core_->metrics.End(model->name, "grpc", GrpcCodeName(st.error_code()),
                       std::chrono::duration<double>(Clock::now() - start).count());
    return st;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext*, const inference::RepositoryIndexRequest* req,
                               inference::RepositoryIndexResponse* resp) override {
    if (!req->repository_name().empty()) return UnknownRepository(req->repository_name());
    for (const RepositoryEntry& e : core_->repo->Index()) {
      if (req->ready() && e.state != "READY") continue;
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return grpc::Status::OK;
  }

  // Runs on this gRPC thread (not a worker): loading reads a file and may warm the model up,
  // which a synchronous handler may do without holding up inference.
  grpc::Status RepositoryModelLoad(grpc::ServerContext*,
                                   const inference::RepositoryModelLoadRequest* req,
                                   inference::RepositoryModelLoadResponse*) override {
    if (!req->repository_name().empty()) return UnknownRepository(req->repository_name());
    if (!req->parameters().empty()) return NoParameters("RepositoryModelLoad");
    return ToRepositoryStatus(core_->repo->LoadModel(req->model_name(), core_->prepare));
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext*,
                                     const inference::RepositoryModelUnloadRequest* req,
                                     inference::RepositoryModelUnloadResponse*) override {
    if (!req->repository_name().empty()) return UnknownRepository(req->repository_name());
    if (!req->parameters().empty()) return NoParameters("RepositoryModelUnload");
    return ToRepositoryStatus(core_->repo->UnloadModel(req->model_name()));
  }

  // As REST's /v2 lists them.
  static constexpr const char* kExtensions[] = {"binary_tensor_data", "model_repository"};

 private:
  static grpc::Status NotFoundStatus(const std::string& name, const std::string& version) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "unknown model '" + name + "'" +
                            (version.empty() ? "" : " version '" + version + "'"));
  }

  static grpc::Status UnknownRepository(const std::string& name) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "unknown repository '" + name + "' (kiln_serve has one, named '')");
  }
  static grpc::Status NoParameters(const char* rpc) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        std::string(rpc) + ": kiln_serve takes no parameters");
  }
  // NotFound stays NOT_FOUND; any other failure (a file that does not load) is the
  // request's: INVALID_ARGUMENT, as REST answers 400.
  static grpc::Status ToRepositoryStatus(const Status& st) {
    if (st.ok()) return grpc::Status::OK;
    return grpc::Status(st.code() == StatusCode::kNotFound ? grpc::StatusCode::NOT_FOUND
                                                           : grpc::StatusCode::INVALID_ARGUMENT,
                        st.ToString());
  }

  // The earlier of the invoke timeout and the client's deadline.
  Clock::time_point Deadline(grpc::ServerContext* context) const {
    Clock::time_point deadline = InvokeDeadline(core_->limits);
    auto client = context->deadline();
    if (client < std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
      auto left = client - std::chrono::system_clock::now();
      deadline = std::min(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(left));
    }
    return deadline;
  }

  grpc::Status Infer(grpc::ServerContext* context, std::shared_ptr<const Model> model,
                     const inference::ModelInferRequest& req,
                     inference::ModelInferResponse* resp) {
    Clock::time_point deadline = Deadline(context);
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> result = done->get_future();
    // This handler waits for the job whenever it was queued (the job itself stops at the
    // deadline), so the job may use the request and response in place.
    ServingCore* core = core_;
    // The promise is fulfilled in the second step, once the worker counts as idle, so the
    // client's next call finds it free (WorkerPool::TrySubmit).
    auto status = std::make_shared<Status>();
    bool queued = core_->pool->TrySubmit(
        [core, model, &req, resp, deadline, status] {
          *status = Clock::now() >= deadline
                        ? DeadlineExceeded("model '" + model->name +
                                           "': the deadline passed while the request was queued")
                        : RunInfer(*core, *model, req, deadline, resp);
        },
        [done, status] { done->set_value(std::move(*status)); });
    if (!queued) {
      return grpc::Status(core_->ready ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                       : grpc::StatusCode::UNAVAILABLE,
                          core_->RefusalMessage());
    }
    Status st = result.get();
    if (!st.ok()) {
      resp->Clear();
      return ToGrpc(st);
    }
    return grpc::Status::OK;
  }

  ServingCore* core_;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl, std::unique_ptr<grpc::Server> server, int port)
    : impl_(std::move(impl)), server_(std::move(server)), port_(port) {}

GrpcServer::~GrpcServer() { Shutdown(0); }

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(ServingCore* core,
                                                       const std::string& host, int port,
                                                       size_t max_message_bytes) {
  if (port < 0 || port > 65535) {
    return InvalidArgument("gRPC port " + std::to_string(port) + " out of range");
  }
  auto impl = std::make_unique<Impl>(core);
  // IPv6 literals need brackets in a gRPC target.
  std::string address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                        std::to_string(port);
  int selected = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &selected);
  builder.RegisterService(impl.get());
  int limit = static_cast<int>(std::min<size_t>(max_message_bytes, INT32_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(INT32_MAX);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || selected == 0) {
    return Internal("cannot listen for gRPC on " + address);
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl), std::move(server), selected));
}

void GrpcServer::Shutdown(int64_t grace_ms) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  server_->Wait();
  server_.reset();
}

}  // namespace kiln::serving

