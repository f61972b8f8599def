// The process group on MPI (Communicator.h): init and finalize, and the
// collectives as nonblocking MPI calls on host memory (several per
// collective above the per-call limit: CallSlices.h) polled under a
// deadline. The shared state and arrival notes are in ProcessGroup.h, the
// same-graph check in SameGraphCheck.cpp.
#include "lib/runtime/distributed/Communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/runtime/distributed/CallSlices.h"
#include "lib/runtime/distributed/ProcessGroup.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::dist {

absl::string_view reduce_name(int64_t code) {
  switch (static_cast<ReduceCode>(code)) {
    case ReduceCode::sum: return "sum";
    case ReduceCode::mean: return "mean";
    case ReduceCode::max: return "max";
    case ReduceCode::min: return "min";
  }
  return "?";
}

Collective Collective::of(const GraphNode& node, const TensorType& input) {
  Collective c;
  c.op = node.op;
  c.reduce_op = attr_int_or(node.attrs, AttrName::reduce_op, 0);
  c.root = attr_int_or(node.attrs, AttrName::root, 0);
  c.dim = attr_int_or(node.attrs, AttrName::dim, 0);
  c.world_size = attr_int_or(node.attrs, AttrName::world_size, 1);
  c.input = input;
  c.result = node.results.empty() ? input : node.results[0];
  return c;
}

std::string Collective::describe() const {
  if (!label.empty()) return label;
  std::string what;
  switch (op) {
    case OpKind::all_reduce: what = absl::StrCat("(", reduce_name(reduce_op), ")"); break;
    case OpKind::reduce_scatter:
      what = absl::StrCat("(", reduce_name(reduce_op), ", dim ", dim, ")");
      break;
    case OpKind::all_gather: what = absl::StrCat("(dim ", dim, ")"); break;
    case OpKind::broadcast: what = absl::StrCat("(root ", root, ")"); break;
    default: break;
  }
  return absl::StrCat("mstep.", op_name(op), what, " ", input.to_string());
}

std::string collective_signature(const TraceGraph& graph) {
  std::vector<std::string> lines;
  for (const GraphNode& n : graph.nodes)
    if (op_family(n.op) == OpFamily::collective)
      lines.push_back(Collective::of(n, graph.type_of(n.operands[0])).describe());
  return absl::StrJoin(lines, "\n");
}

int64_t recorded_world_size(const TraceGraph& graph) {
  for (const GraphNode& n : graph.nodes)
    if (op_family(n.op) == OpFamily::collective)
      return Collective::of(n, graph.type_of(n.operands[0])).world_size;
  return 0;
}

namespace {

#if MSTEP_HAVE_MPI

template <typename T, int kOp>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = a[i], y = b[i];
    b[i] = T(kOp == 0 ? x + y : kOp == 1 ? std::max(x, y) : std::min(x, y));
  }
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
    case DType::boolean: return MPI_C_BOOL;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(DType d, int64_t reduce) {
  const int k = reduce == 2 ? 1 : reduce == 3 ? 2 : 0;  // sum and mean add
  if (d == DType::bf16 || d == DType::f16) return state().half_ops[d == DType::f16][k];
  if (d == DType::boolean) return k == 2 ? MPI_LAND : MPI_LOR;
  return k == 1 ? MPI_MAX : k == 2 ? MPI_MIN : MPI_SUM;
}

/// The arrival notes of one collective (or graph check): posted as a rank
/// enters it, tested with it, read when it ends or times out.
#endif  // MSTEP_HAVE_MPI

/// Divides `n` elements of `dtype` at `p` by `by` (the mean after a sum).
void divide(void* p, DType dtype, int64_t n, int by) {
  auto run = [&]<typename T>(T*) {
    T* v = static_cast<T*>(p);
    for (int64_t i = 0; i < n; ++i) v[i] = T(static_cast<float>(v[i]) / by);
  };
  switch (dtype) {
    case DType::f32: run(static_cast<float*>(nullptr)); break;
    case DType::bf16: run(static_cast<BFloat16*>(nullptr)); break;
    case DType::f16: run(static_cast<Float16*>(nullptr)); break;
    case DType::f64: {
      double* v = static_cast<double*>(p);
      for (int64_t i = 0; i < n; ++i) v[i] /= by;
      break;
    }
    default: break;  // the API allows mean on floating dtypes only
  }
}

/// Elements before `dim` (the blocks a gather or scatter along `dim`
/// interleaves) and the bytes of one block.
std::pair<int64_t, int64_t> blocks(const TensorType& t, int64_t dim) {
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.shape.dims()[d];
  return {outer, outer == 0 ? 0 : static_cast<int64_t>(t.bytes()) / outer};
}

}  // namespace

// ---- init and the world ------------------------------------------------------

bool is_initialized() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().initialized;
}
int rank() { return state().rank; }
int world_size() { return state().world; }

absl::Status check_recorded_world(int64_t recorded, absl::string_view what) {
  const int world = world_size();
  if (recorded == 0 || recorded == world) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      what, " was captured in a world of ", recorded, " processes (its collectives run on ",
      recorded, " ranks) but this process is in a world of ", world, "; run it under mpirun -np ",
      recorded, " after mstep::distributed::init(), or capture the step again in a world of ",
      world));
}
double timeout_seconds() { return state().timeout; }

namespace {
absl::StatusOr<int> parse_env_int(absl::string_view name, const std::string& text) {
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "mstep::distributed::init: ", name, "=", text, " is not a non-negative integer"));
  return v;
}
}  // namespace

#if MSTEP_HAVE_MPI
/// MSTEP_RANK / MSTEP_WORLD_SIZE, when set, against MPI's rank and size.
absl::Status check_launch(const RuntimeOptions& options, int rank, int world) {
  if (!options.dist_rank.empty()) {
    absl::StatusOr<int> r = parse_env_int("MSTEP_RANK", options.dist_rank);
    if (!r.ok()) return r.status();
    if (*r != rank)
      return absl::InvalidArgumentError(absl::StrCat(
          "mstep::distributed::init: MSTEP_RANK=", *r, " but MPI says this process is rank ",
          rank, " of ", world,
          "; unset MSTEP_RANK under mpirun, or launch so that the two agree"));
  }
  if (!options.dist_world_size.empty()) {
    absl::StatusOr<int> w = parse_env_int("MSTEP_WORLD_SIZE", options.dist_world_size);
    if (!w.ok()) return w.status();
    if (*w != world)
      return absl::InvalidArgumentError(absl::StrCat(
          "mstep::distributed::init: MSTEP_WORLD_SIZE=", *w, " but MPI's world has ", world,
          " processes; start ", *w, " ranks (mpirun -np ", *w,
          ") or unset MSTEP_WORLD_SIZE"));
  }
  return absl::OkStatus();
}
#endif

absl::Status init(const RuntimeOptions& options) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.initialized) return absl::OkStatus();
  if (s.finalized)
    return absl::FailedPreconditionError(
        "mstep::distributed::init: called after finalize(); MPI cannot be started twice in one "
        "process");
  s.timeout = options.dist_timeout_s;
  s.max_call_bytes = options.dist_max_call_bytes;
#if !MSTEP_HAVE_MPI
  return absl::FailedPreconditionError(
      "mstep::distributed::init: this mstep was built without MPI; install libopenmpi-dev "
      "(scripts/setup.sh) and rebuild, or run with one process");
#else
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS)
      return absl::InternalError(
          absl::StrCat("mstep::distributed::init: MPI_Init_thread failed: ", mpi_error(rc)));
    s.we_initialized_mpi = true;
  }
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // A launcher other than mpirun may state the rank and size; they must be
  // MPI's, or the job was started wrongly (then MPI is left again).
  absl::Status launch = check_launch(options, rank, world);
  if (!launch.ok()) {
    if (s.we_initialized_mpi) MPI_Finalize();
    s.finalized = true;
    return launch;
  }
  for (MPI_Comm* c : {&s.data, &s.notes, &s.check}) {
    MPI_Comm_dup(MPI_COMM_WORLD, c);
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
  }
  MPI_Op_create(&half_reduce<BFloat16, 0>, 1, &s.half_ops[0][0]);
  MPI_Op_create(&half_reduce<BFloat16, 1>, 1, &s.half_ops[0][1]);
  MPI_Op_create(&half_reduce<BFloat16, 2>, 1, &s.half_ops[0][2]);
  MPI_Op_create(&half_reduce<Float16, 0>, 1, &s.half_ops[1][0]);
  MPI_Op_create(&half_reduce<Float16, 1>, 1, &s.half_ops[1][1]);
  MPI_Op_create(&half_reduce<Float16, 2>, 1, &s.half_ops[1][2]);
  s.rank = rank;
  s.world = world;
  s.initialized = true;
  return absl::OkStatus();
#endif
}

absl::Status finalize() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.initialized) return absl::OkStatus();
  if (!s.failure.empty()) {
    lock.unlock();
    std::fprintf(stderr,
                 "mstep::distributed::finalize: rank %d aborts the job: a collective failed (%s)\n",
                 s.rank, s.failure.c_str());
    abort(1);
  }
#if MSTEP_HAVE_MPI
  for (auto& ops : s.half_ops)
    for (MPI_Op& op : ops) MPI_Op_free(&op);
  for (MPI_Comm* c : {&s.data, &s.notes, &s.check}) MPI_Comm_free(c);
  if (s.we_initialized_mpi) MPI_Finalize();
#endif
  s.initialized = false;
  s.finalized = true;
  s.rank = 0;
  s.world = 1;
  return absl::OkStatus();
}

void abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#if MSTEP_HAVE_MPI
  if (state().initialized) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

absl::Status barrier() {
  Collective c;
  c.op = OpKind::all_reduce;
  c.world_size = world_size();
  c.input = c.result = TensorType{Shape{1}, DType::i32};
  c.label = "mstep::distributed::barrier";
  int32_t one = 1, total = 0;
  absl::Status s = run_collective(c, &one, &total);
  if (!s.ok()) return s;
  if (total != world_size())
    return absl::InternalError(absl::StrCat("mstep::distributed::barrier: ", total, " of ",
                                            world_size(), " ranks counted"));
  return absl::OkStatus();
}

// ---- collectives -------------------------------------------------------------

#if MSTEP_HAVE_MPI
struct CollectiveRun::Mpi {
  std::vector<MPI_Request> calls;  // one per slice (CallSlices.h)
  ArrivalNotes notes;
  std::vector<std::byte> scratch;
};
#else
struct CollectiveRun::Mpi {};
#endif

#if MSTEP_HAVE_MPI
namespace {
/// ", 2 of 5 MPI calls done" for a sliced collective, else nothing.
std::string slices_done(const std::vector<MPI_Request>& calls) {
  if (calls.size() < 2) return "";
  const auto done = std::count(calls.begin(), calls.end(), MPI_REQUEST_NULL);
  return absl::StrCat(", ", done, " of ", calls.size(), " MPI calls done");
}
}  // namespace
#endif

CollectiveRun::CollectiveRun(Collective c) : c_(std::move(c)), mpi_(std::make_unique<Mpi>()) {}
CollectiveRun::~CollectiveRun() {
  // After a failure the peers may never come: leave the requests.
  if (in_flight_ && state().failure.empty()) (void)wait();
}

absl::Status run_collective(const Collective& c, const void* in, void* out) {
  CollectiveRun run(c);
  absl::Status s = run.start(in, out);
  if (!s.ok()) return s;
  return run.wait();
}

absl::Status CollectiveRun::start(const void* in, void* out) {
  State& s = state();
  const int world = s.world;
  if (c_.world_size != world)
    return absl::FailedPreconditionError(absl::StrCat(
        c_.describe(), ": recorded in a world of ", c_.world_size, " processes but runs in a world of ",
        world,
        "; call mstep::distributed::init() before recording collectives, and replay a "
        "captured step in the world it was captured in"));
  if (!s.failure.empty())
    return absl::FailedPreconditionError(
        absl::StrCat(c_.describe(), ": an earlier collective failed (", s.failure,
                     "); the process group is unusable, end the job"));
  if (in_flight_) return absl::InternalError(c_.describe() + ": started twice");
  if (world == 1) {  // the identity
    if (out != in) std::memmove(out, in, c_.input.bytes());
    return absl::OkStatus();
  }
#if !MSTEP_HAVE_MPI
  return absl::InternalError("collective without MPI in a world > 1");
#else
  std::lock_guard<std::mutex> lock(s.mu);
  Mpi& m = *mpi_;
  const std::string what = c_.describe();
  // 1. Arrival notes: tell every peer we are here, and listen for theirs.
  m.notes.post(s, what);
  // 2. The collective itself, nonblocking, on memory it owns until wait():
  //    `out` (in place) or the scratch; one call per slice (CallSlices.h),
  //    all outstanding at once.
  const int64_t in_bytes = static_cast<int64_t>(c_.input.bytes());
  const int64_t count = c_.input.numel();
  const int64_t elem = static_cast<int64_t>(element_size(c_.input.dtype));
  const MPI_Datatype type = mpi_type(c_.input.dtype);
  std::byte* const out_bytes = static_cast<std::byte*>(out);
  // reduce_scatter slices each rank's part; the others the whole input.
  const CallSlices slices = CallSlices::of(
      c_.op == OpKind::reduce_scatter ? count / world : count, elem, s.max_call_bytes);
  m.calls.assign(slices.count(), MPI_REQUEST_NULL);
  int rc = MPI_SUCCESS;
  const char* call = "";
  int64_t k = 0;  // the slice being issued
  switch (c_.op) {
    case OpKind::all_reduce:
      std::memmove(out, in, in_bytes);
      call = "MPI_Iallreduce";
      for (; k < slices.count() && rc == MPI_SUCCESS; ++k)
        rc = MPI_Iallreduce(MPI_IN_PLACE, out_bytes + slices.offset(k) * elem,
                            static_cast<int>(slices.size(k)), type,
                            mpi_op(c_.input.dtype, c_.reduce_op), s.data, &m.calls[k]);
      break;
    case OpKind::broadcast:
      std::memmove(out, in, in_bytes);
      call = "MPI_Ibcast";
      for (; k < slices.count() && rc == MPI_SUCCESS; ++k)
        rc = MPI_Ibcast(out_bytes + slices.offset(k) * elem,
                        static_cast<int>(slices.size(k) * elem), MPI_BYTE,
                        static_cast<int>(c_.root), s.data, &m.calls[k]);
      break;
    case OpKind::all_gather: {
      // Rank r's block lands at r along dim; with blocks before dim
      // (outer > 1) the gathered copies are interleaved at wait().
      const auto [outer, block] = blocks(c_.input, c_.dim);
      std::byte* dst = out_bytes;
      if (outer != 1) {
        m.scratch.resize(static_cast<size_t>(in_bytes) * world);
        dst = m.scratch.data();
      }
      std::memcpy(dst + in_bytes * s.rank, in, in_bytes);
      // Slice k of every rank's input: its bytes, then a stride of a whole
      // input to the next rank's (the extent), so each rank's slice lands
      // in its own block.
      call = "MPI_Iallgather";
      for (; k < slices.count() && rc == MPI_SUCCESS; ++k) {
        MPI_Datatype slice = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
        MPI_Type_contiguous(static_cast<int>(slices.size(k) * elem), MPI_BYTE, &slice);
        MPI_Type_create_resized(slice, 0, static_cast<MPI_Aint>(in_bytes), &strided);
        MPI_Type_commit(&strided);
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst + slices.offset(k) * elem, 1,
                            strided, s.data, &m.calls[k]);
        // Freed types stay valid for the calls already issued on them.
        MPI_Type_free(&strided);
        MPI_Type_free(&slice);
      }
      break;
    }
    case OpKind::reduce_scatter: {
      // Rank w's part of the input (slice w along dim), packed slice by
      // slice (CallSlices::pack).
      const auto [outer, block] = blocks(c_.input, c_.dim);
      const int64_t part = block / world;  // bytes of rank w's share of one block
      m.scratch.resize(in_bytes);
      const std::byte* src = static_cast<const std::byte*>(in);
      for (int w = 0; w < world; ++w)
        for (int64_t o = 0; o < outer; ++o)
          slices.pack(m.scratch.data(), src + o * block + w * part, elem, world, w,
                      o * (part / elem), part / elem);
      call = "MPI_Ireduce_scatter_block";
      for (; k < slices.count() && rc == MPI_SUCCESS; ++k)
        rc = MPI_Ireduce_scatter_block(
            m.scratch.data() + world * slices.offset(k) * elem, out_bytes + slices.offset(k) * elem,
            static_cast<int>(slices.size(k)), type, mpi_op(c_.input.dtype, c_.reduce_op), s.data,
            &m.calls[k]);
      break;
    }
    default:
      return absl::InternalError(absl::StrCat("not a collective: ", op_name(c_.op)));
  }
  if (rc != MPI_SUCCESS) {
    s.failure = absl::StrCat(what, ": ", call, " failed", slices.count() > 1 ?
                             absl::StrCat(" (slice ", k, " of ", slices.count(), ")") : "", ": ",
                             mpi_error(rc));
    return absl::InternalError(s.failure);
  }
  out_ = out;
  in_flight_ = true;
  done_ = false;
  return absl::OkStatus();
#endif
}

bool CollectiveRun::progress() {
  if (!in_flight_) return true;
#if MSTEP_HAVE_MPI
  std::lock_guard<std::mutex> lock(state().mu);
  const bool done = test_requests(mpi_->calls);
  done_ = done_ || done;
  return done;
#else
  return true;
#endif
}

absl::Status CollectiveRun::wait() {
  if (!in_flight_) return absl::OkStatus();
  in_flight_ = false;
  ++waits_;
  waits_found_done_ += done_;
  done_ = false;
#if !MSTEP_HAVE_MPI
  return absl::OkStatus();
#else
  State& s = state();
  // After a failure the peers may never come: do not wait out the timeout
  // once more.
  if (!s.failure.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        c_.describe(), ": an earlier collective failed (", s.failure, ")"));
  Mpi& m = *mpi_;
  const int world = s.world;
  const std::string what = c_.describe();
  // Poll every request, every slice's included; a request stays
  // MPI_REQUEST_NULL once complete.
  auto all_done = [&] {
    std::lock_guard<std::mutex> lock(s.mu);
    const bool calls_done = test_requests(m.calls);
    return m.notes.test() && calls_done;
  };
  const bool finished = poll_until(deadline_from_now(), all_done);
  // Peers whose note came with another collective are out of step, be the
  // transfer done or not: their sums would be wrong.
  std::vector<std::string> other = m.notes.out_of_step(s, /*compare_what=*/true);
  if (!other.empty()) {
    s.failure = absl::StrCat(what, ": the ranks are out of step: rank ", s.rank,
                             " is at its collective #", m.notes.sent.seq, ", ", what, ", while ",
                             absl::StrJoin(other, "; "),
                             ". Every rank must run the same collectives in the same order");
    return absl::FailedPreconditionError(s.failure);
  }
  if (!finished) {
    s.failure = absl::StrCat(
        what, " (collective #", m.notes.sent.seq, " on rank ", s.rank, slices_done(m.calls),
        "): ", m.notes.who_is_missing(s), " within ", seconds_text(s.timeout),
        " (MSTEP_DIST_TIMEOUT). A rank that died, hangs or skips a collective stalls the others; "
        "check that every rank runs the same steps");
    return absl::DeadlineExceededError(s.failure);
  }
  // 3. Finish: interleave gathered blocks, divide a mean.
  if (c_.op == OpKind::all_gather && !m.scratch.empty()) {
    const auto [outer, block] = blocks(c_.input, c_.dim);
    const int64_t in_bytes = static_cast<int64_t>(c_.input.bytes());
    std::byte* dst = static_cast<std::byte*>(out_);
    for (int64_t o = 0; o < outer; ++o)
      for (int w = 0; w < world; ++w)
        std::memcpy(dst + (o * world + w) * block, m.scratch.data() + w * in_bytes + o * block,
                    block);
  }
  if (static_cast<ReduceCode>(c_.reduce_op) == ReduceCode::mean &&
      (c_.op == OpKind::all_reduce || c_.op == OpKind::reduce_scatter))
    divide(out_, c_.result.dtype, c_.result.numel(), world);
  return absl::OkStatus();
#endif
}

}  // namespace mstep::dist
