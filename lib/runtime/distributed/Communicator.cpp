// The process group on MPI (Communicator.h): init and finalize, the
// collectives as nonblocking MPI calls on host memory polled under a
// deadline, the arrival notes that name a missing rank, and the check that
// every rank runs the same step graph.
#include "lib/runtime/distributed/Communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "mstep/core/HalfTypes.h"
#include "mstep/core/Hash.h"

#if MSTEP_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // MPI's C API only: the C++ bindings need libmpi_cxx
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

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

/// Process-wide state, guarded by `mu` (MPI calls included).
struct State {
  std::mutex mu;
  bool initialized = false;
  bool finalized = false;
  int rank = 0;
  int world = 1;
  double timeout = 300;
  std::string failure;  // the first collective that failed, for later calls
  uint64_t entered = 0; // collectives this rank entered
#if MSTEP_HAVE_MPI
  MPI_Comm data = MPI_COMM_NULL;   // the collectives
  MPI_Comm notes = MPI_COMM_NULL;  // arrival notes
  MPI_Comm check = MPI_COMM_NULL;  // check_same_graph
  MPI_Op half_ops[2][3] = {};      // [bf16, f16][sum, max, min]
  bool we_initialized_mpi = false;
#endif
};

State& state() {
  static State* s = new State();  // never destroyed: atexit order
  return *s;
}

using Clock = std::chrono::steady_clock;

/// Polls `done` until it returns true or the deadline passes; spins a
/// little, then sleeps briefly, so a waiting rank leaves its core to the
/// others on an oversubscribed machine.
template <typename Done>
bool poll_until(Clock::time_point deadline, Done done) {
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (Clock::now() > deadline) return false;
    if (i < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(i < 1024 ? 20 : 200));
  }
}

Clock::time_point deadline_from_now() {
  return Clock::now() + std::chrono::microseconds(
                            static_cast<int64_t>(state().timeout * 1e6));
}

std::string seconds_text(double s) { return absl::StrCat(s, " s"); }

/// The arrival note a rank sends every peer as it enters a collective.
struct Note {
  uint64_t seq = 0;
  char what[120] = {};
};

std::string note_text(const Note& n) {
  return std::string(n.what, strnlen(n.what, sizeof(n.what)));
}

#if MSTEP_HAVE_MPI

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

absl::Status mpi_check(int code, absl::string_view call, absl::string_view what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", call, " failed: ", mpi_error(code)));
}

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
struct ArrivalNotes {
  std::vector<MPI_Request> requests;  // receives from each peer, then sends
  std::vector<Note> received;         // per peer (own slot unused)
  Note sent;

  /// Under the state's lock.
  void post(State& s, absl::string_view what) {
    const int world = s.world;
    sent.seq = ++s.entered;
    std::memset(sent.what, 0, sizeof(sent.what));
    std::memcpy(sent.what, what.data(), std::min(what.size(), sizeof(sent.what) - 1));
    received.assign(world, Note{});
    requests.assign(2 * world, MPI_REQUEST_NULL);
    for (int p = 0; p < world; ++p) {
      if (p == s.rank) continue;
      MPI_Irecv(&received[p], sizeof(Note), MPI_BYTE, p, 0, s.notes, &requests[p]);
      MPI_Isend(&sent, sizeof(Note), MPI_BYTE, p, 0, s.notes, &requests[world + p]);
    }
  }
  /// Under the state's lock: whether every note went and came.
  bool test() {
    bool done = true;
    for (MPI_Request& r : requests) {
      int flag = 0;
      MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
      done &= flag != 0;
    }
    return done;
  }
  /// The peers whose note did not come.
  std::vector<int> missing(const State& s) const {
    std::vector<int> out;
    for (int p = 0; p < s.world; ++p)
      if (p != s.rank && requests[p] != MPI_REQUEST_NULL) out.push_back(p);
    return out;
  }
  /// The peers whose note came from another collective (another count, or
  /// with `compare_what` another description), described.
  std::vector<std::string> out_of_step(const State& s, bool compare_what) const {
    std::vector<std::string> out;
    for (int p = 0; p < s.world; ++p) {
      if (p == s.rank || requests[p] != MPI_REQUEST_NULL) continue;
      const Note& n = received[p];
      if (n.seq != sent.seq || (compare_what && note_text(n) != note_text(sent)))
        out.push_back(absl::StrCat("rank ", p, " is at its collective #", n.seq, ", ",
                                   note_text(n)));
    }
    return out;
  }
  /// "rank 1 never arrived", or what else kept the transfer.
  std::string who_is_missing(const State& s) const {
    std::vector<int> m = missing(s);
    if (m.empty()) return "every rank arrived but the transfer did not complete";
    return absl::StrCat(m.size() == 1 ? "rank " : "ranks ", absl::StrJoin(m, ", "),
                        " never arrived");
  }
};

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
  MPI_Request op = MPI_REQUEST_NULL;
  ArrivalNotes notes;
  std::vector<std::byte> scratch;
};
#else
struct CollectiveRun::Mpi {};
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
  //    `out` (in place) or the scratch.
  const int64_t in_bytes = static_cast<int64_t>(c_.input.bytes());
  const int64_t count = c_.input.numel();
  if (in_bytes > INT32_MAX)
    return absl::UnimplementedError(
        absl::StrCat(what, ": ", in_bytes, " bytes is more than one MPI call moves (2 GiB)"));
  const MPI_Datatype type = mpi_type(c_.input.dtype);
  int rc = MPI_SUCCESS;
  const char* call = "";
  switch (c_.op) {
    case OpKind::all_reduce:
      std::memmove(out, in, in_bytes);
      call = "MPI_Iallreduce";
      rc = MPI_Iallreduce(MPI_IN_PLACE, out, static_cast<int>(count), type,
                          mpi_op(c_.input.dtype, c_.reduce_op), s.data, &m.op);
      break;
    case OpKind::broadcast:
      std::memmove(out, in, in_bytes);
      call = "MPI_Ibcast";
      rc = MPI_Ibcast(out, static_cast<int>(in_bytes), MPI_BYTE, static_cast<int>(c_.root), s.data,
                      &m.op);
      break;
    case OpKind::all_gather: {
      // Rank r's block lands at r along dim; with blocks before dim
      // (outer > 1) the gathered copies are interleaved at wait().
      const auto [outer, block] = blocks(c_.input, c_.dim);
      std::byte* dst = static_cast<std::byte*>(out);
      if (outer != 1) {
        m.scratch.resize(static_cast<size_t>(in_bytes) * world);
        dst = m.scratch.data();
      }
      std::memcpy(dst + in_bytes * s.rank, in, in_bytes);
      call = "MPI_Iallgather";
      rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst, static_cast<int>(in_bytes),
                          MPI_BYTE, s.data, &m.op);
      break;
    }
    case OpKind::reduce_scatter: {
      // Rank w's part of the input (slice w along dim) made contiguous.
      const auto [outer, block] = blocks(c_.input, c_.dim);
      const int64_t part = block / world;
      m.scratch.resize(in_bytes);
      const std::byte* src = static_cast<const std::byte*>(in);
      for (int w = 0; w < world; ++w)
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(m.scratch.data() + (w * outer + o) * part, src + o * block + w * part, part);
      call = "MPI_Ireduce_scatter_block";
      rc = MPI_Ireduce_scatter_block(m.scratch.data(), out, static_cast<int>(count / world), type,
                                     mpi_op(c_.input.dtype, c_.reduce_op), s.data, &m.op);
      break;
    }
    default:
      return absl::InternalError(absl::StrCat("not a collective: ", op_name(c_.op)));
  }
  if (rc != MPI_SUCCESS) {
    s.failure = absl::StrCat(what, ": ", call, " failed: ", mpi_error(rc));
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
  int done = 0;
  MPI_Test(&mpi_->op, &done, MPI_STATUS_IGNORE);
  done_ = done_ || done != 0;
  return done != 0;
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
  // Poll every request; a request stays MPI_REQUEST_NULL once complete.
  auto all_done = [&] {
    std::lock_guard<std::mutex> lock(s.mu);
    int flag = 0;
    MPI_Test(&m.op, &flag, MPI_STATUS_IGNORE);
    return m.notes.test() && flag != 0;
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
        what, " (collective #", m.notes.sent.seq, " on rank ", s.rank, "): ",
        m.notes.who_is_missing(s), " within ", seconds_text(s.timeout),
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

// ---- the same graph on every rank --------------------------------------------

namespace {

struct Identity {
  uint64_t structure, types, collectives, inputs;
  uint64_t text_bytes;
};

std::string first_line_difference(const std::string& mine, const std::string& theirs,
                                   absl::string_view what, int other_rank) {
  std::vector<std::string> a = absl::StrSplit(mine, '\n', absl::SkipEmpty());
  std::vector<std::string> b = absl::StrSplit(theirs, '\n', absl::SkipEmpty());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i])
      return absl::StrCat("its ", what, " #", i, " is ", b[i], " where rank 0's is ", a[i]);
  return absl::StrCat("it has ", b.size(), " ", what, "s where rank 0 has ", a.size(),
                      b.size() > a.size() ? absl::StrCat(" (its extra one: ", b[a.size()], ")")
                                          : absl::StrCat(" (rank 0's extra one: ", a[b.size()], ")"));
}

}  // namespace

absl::Status check_same_graph(const GraphIdentity& mine) {
  State& s = state();
  const int world = s.world;
  if (world == 1) return absl::OkStatus();
  if (!s.failure.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "an earlier collective failed (", s.failure, "); the process group is unusable"));
#if !MSTEP_HAVE_MPI
  return absl::OkStatus();
#else
  // 1. Every rank's hashes; 2. only when they differ, every rank's text,
  //    from which each rank writes the same message.
  std::string text = mine.collectives + '\0' + mine.inputs;
  Identity me{mine.structure, mine.types, hash_string(mine.collectives), hash_string(mine.inputs),
              text.size()};
  std::vector<Identity> all(world);
  // The first exchange carries arrival notes, so a rank that never comes
  // is named; the second follows only when every rank came to the first.
  const std::string first = mine.collectives.substr(0, mine.collectives.find('\n'));
  const std::string what = absl::StrCat("the step-graph check before ", first);
  ArrivalNotes notes;
  auto gather = [&](auto issue, absl::string_view call, ArrivalNotes* arrivals) -> absl::Status {
    MPI_Request req = MPI_REQUEST_NULL;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (arrivals) arrivals->post(s, what);
      int rc = issue(&req);
      if (rc != MPI_SUCCESS) return mpi_check(rc, call, "mstep: comparing the step graphs");
    }
    bool ok = poll_until(deadline_from_now(), [&] {
      std::lock_guard<std::mutex> lock(s.mu);
      int flag = 0;
      MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      return (!arrivals || arrivals->test()) && flag != 0;
    });
    if (ok) return absl::OkStatus();
    s.failure = absl::StrCat(
        "comparing the step graphs across ranks at their first run, before ", first, " (rank ",
        s.rank, "): ",
        arrivals ? arrivals->who_is_missing(s) : std::string("a rank did not answer"), " within ",
        seconds_text(s.timeout),
        " (MSTEP_DIST_TIMEOUT). A rank that died, hangs or runs another step stalls the others");
    return absl::DeadlineExceededError(s.failure);
  };
  absl::Status st = gather(
      [&](MPI_Request* r) {
        return MPI_Iallgather(&me, sizeof(Identity), MPI_BYTE, all.data(), sizeof(Identity),
                              MPI_BYTE, s.check, r);
      },
      "MPI_Iallgather", &notes);
  if (!st.ok()) return st;
  int differs = -1;
  for (int p = 0; p < world && differs < 0; ++p)
    if (std::memcmp(&all[p], &all[0], sizeof(Identity)) != 0) differs = p;
  if (differs < 0) return absl::OkStatus();

  std::vector<int> sizes(world), offsets(world);
  int total = 0;
  for (int p = 0; p < world; ++p) {
    sizes[p] = static_cast<int>(all[p].text_bytes);
    offsets[p] = total;
    total += sizes[p];
  }
  std::string texts(total, '\0');
  st = gather(
      [&](MPI_Request* r) {
        return MPI_Iallgatherv(text.data(), static_cast<int>(text.size()), MPI_BYTE, texts.data(),
                               sizes.data(), offsets.data(), MPI_BYTE, s.check, r);
      },
      "MPI_Iallgatherv", nullptr);
  if (!st.ok()) return st;
  auto part = [&](int p, int which) {
    std::string t = texts.substr(offsets[p], sizes[p]);
    const size_t cut = t.find('\0');
    return which == 0 ? t.substr(0, cut) : t.substr(cut == std::string::npos ? t.size() : cut + 1);
  };
  const Identity& a = all[0];
  const Identity& b = all[differs];
  std::string how;
  if (a.collectives != b.collectives) {
    how = first_line_difference(part(0, 0), part(differs, 0), "collective", differs);
  } else if (a.inputs != b.inputs) {
    std::vector<std::string> x = absl::StrSplit(part(0, 1), ", ");
    std::vector<std::string> y = absl::StrSplit(part(differs, 1), ", ");
    how = absl::StrCat("it has ", y.size(), " inputs where rank 0 has ", x.size());
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
      if (x[i] != y[i]) {
        how = absl::StrCat("shapes ", y[i], " vs ", x[i], " (its input ", i, " against rank 0's)");
        break;
      }
  } else if (a.types != b.types) {
    how = "the same inputs and collectives, but the types of its intermediate values differ";
  } else {
    how = absl::StrCat("another structure (structural hash ", absl::Hex(b.structure), " vs ",
                       absl::Hex(a.structure), "): an op that runs on one rank only?");
  }
  s.failure = absl::StrCat(
      "rank ", differs, " has another graph than rank 0 at the first run of this step: ", how,
      ". Every rank must run the same step on the same shapes (give each rank an equal share of "
      "the batch)");
  return absl::FailedPreconditionError(s.failure);
#endif
}

}  // namespace mstep::dist
