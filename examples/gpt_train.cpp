// gpt_train: a character-level GPT trained on a small text that ships with
// the repo (examples/data/sonnets.txt, public-domain Shakespeare).
//
// The whole step (forward, backward, gradient clipping, AdamW update) is
// recorded lazily and cut by one mark_step(), so it compiles once and is
// then served from the graph cache. The learning rate follows a warmup +
// cosine schedule through a device scalar, so changing it never
// recompiles. Batches hold variable-length windows, right-padded; padded
// targets are -100 (ignore_index).
//
//   gpt_train [--steps N] [--batch B] [--seq S] [--dim D] [--layers L]
//             [--heads H] [--lr LR] [--text FILE] [--seed N] [--dropout P]
//             [--explicit-attention 1]   (attention written out; the compiler
//                                         fuses it back into mstep.sdpa)
//             [--mode lazy|replay|graphed|cacher] [--samples 0]
//             [--device cpu|ref|neuron]   (default cpu)   [--vocab N] (pad the vocabulary)
//             [--autocast bf16|f16]   (matmuls and attention in bf16 or f16, f32 master weights)
//             [--clip C]   (clip_grad_norm_ max norm, default 1.0; 0: no clipping)
//             [--save step.mstep]   (--mode replay: write the captured step for mstep-run)
//             [--padding 0]   (full-length windows, no valid_seq_len: the
//                              like-for-like peer benchmark, bench/peers.sh)
//             [--ddp] [--bucket-mb MB] [--first-bucket-mb MB]
//                             (data parallel under mpirun: each rank
//                              trains on --batch windows of its own, picked by a
//                              DistributedSampler over the text's start positions;
//                              gradients averaged by nn::DistributedDataParallel in
//                              buckets of MB MiB, default 25, the first one of
//                              --first-bucket-mb MiB when given; rank 0 prints the
//                              global loss and the tokens/s of all ranks)
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 ./build/examples/gpt_train --ddp
//
// Modes: lazy traces every step; replay captures one step (after one lazy
// warmup step) into an mstep::Graph and replays it from static batch
// tensors; graphed runs the model through make_graphed_callable (forward
// and backward graphs, loss and optimizer lazy); cacher through a
// ModuleCacher. Each prints step time and host time per step (the step's
// wall time minus the time inside compiled executables).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <time.h>
#include <unistd.h>

#include "examples/models/DeviceFlag.h"
#include "examples/models/GptMini.h"
#include "examples/models/SimulatedStep.h"
#include "mstep/mstep.h"
#include "mstep/runtime/CustomOp.h"  // cpu_thread_count

using namespace mstep;

namespace {

/// Seconds since this process was exec'd (from /proc/self/stat; 10 ms
/// resolution), so start-up figures include loading the libraries.
double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat");
  std::string field;
  for (int i = 0; i < 22 && stat >> field; ++i) {
  }
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const double start = std::strtod(field.c_str(), nullptr) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return now.tv_sec + now.tv_nsec * 1e-9 - start;
}

struct Args {
  int64_t steps = 300, batch = 16, seq = 64, dim = 64, layers = 2, heads = 4;
  int64_t vocab = 0;  // pads the model's vocabulary to this size (benchmarks)
  double lr = 6e-3;
  uint64_t seed = 0;
  double dropout = 0.0;
  bool explicit_attention = false;
  std::string mode = "lazy";
  std::string device = "cpu";
  std::optional<DType> autocast; // --autocast bf16|f16
  bool samples = true;
  double clip = 1.0;    // 0: no clipping
  bool padding = true;  // false: every window is seq long, no valid_seq_len
  std::string text = MSTEP_EXAMPLES_DATA_DIR "/sonnets.txt";
  std::string save;  // --mode replay: write the captured step here (Graph::save)
  bool ddp = false;  // data parallel over mstep::distributed's ranks
  double bucket_mb = 25;
  double first_bucket_mb = 0;  // 0: bucket_mb
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag.rfind("--mode=", 0) == 0) {
      a.mode = flag.substr(7);
      continue;
    }
    if (flag == "--ddp") {
      a.ddp = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gpt_train: %s needs a value\n", flag.c_str());
      std::exit(2);
    }
    const char* v = argv[++i];
    if (flag == "--steps") a.steps = std::atoll(v);
    else if (flag == "--batch") a.batch = std::atoll(v);
    else if (flag == "--seq") a.seq = std::atoll(v);
    else if (flag == "--dim") a.dim = std::atoll(v);
    else if (flag == "--layers") a.layers = std::atoll(v);
    else if (flag == "--heads") a.heads = std::atoll(v);
    else if (flag == "--vocab") a.vocab = std::atoll(v);
    else if (flag == "--lr") a.lr = std::atof(v);
    else if (flag == "--seed") a.seed = std::strtoull(v, nullptr, 10);
    else if (flag == "--text") a.text = v;
    else if (flag == "--dropout") a.dropout = std::atof(v);
    else if (flag == "--explicit-attention") a.explicit_attention = std::atoi(v) != 0;
    else if (flag == "--mode") a.mode = v;
    else if (flag == "--device") a.device = v;
    else if (flag == "--save") a.save = v;
    else if (flag == "--samples") a.samples = std::atoi(v) != 0;
    else if (flag == "--clip") a.clip = std::atof(v);
    else if (flag == "--padding") a.padding = std::atoi(v) != 0;
    else if (flag == "--bucket-mb") a.bucket_mb = std::atof(v);
    else if (flag == "--first-bucket-mb") a.first_bucket_mb = std::atof(v);
    else if (flag == "--autocast") {
      if (std::string(v) != "bf16" && std::string(v) != "f16") {
        std::fprintf(stderr, "gpt_train: --autocast takes bf16 or f16, got %s\n", v);
        std::exit(2);
      }
      a.autocast = std::string(v) == "f16" ? DType::f16 : DType::bf16;
    }
    else {
      std::fprintf(stderr, "gpt_train: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (!a.padding && (a.mode == "graphed" || a.mode == "cacher")) {
    std::fprintf(stderr, "gpt_train: --padding 0 works in lazy and replay modes (%s mode takes the "
                         "lengths as a graph input); drop --padding 0 or use --mode replay\n",
                 a.mode.c_str());
    std::exit(2);
  }
  if (a.ddp && a.mode != "lazy" && a.mode != "replay") {
    std::fprintf(stderr, "gpt_train: --ddp works in lazy and replay modes, not %s\n", a.mode.c_str());
    std::exit(2);
  }
  if (a.mode != "lazy" && a.mode != "replay" && a.mode != "graphed" && a.mode != "cacher") {
    std::fprintf(stderr, "gpt_train: unknown --mode %s (use lazy, replay, graphed or cacher)\n",
                 a.mode.c_str());
    std::exit(2);
  }
  if (!examples::parse_device(a.device)) {
    std::fprintf(stderr, "gpt_train: unknown --device %s (use %s)\n", a.device.c_str(),
                 examples::device_choices().c_str());
    std::exit(2);
  }
  return a;
}

/// The characters of the text and their ids (sorted, so the vocabulary
/// does not depend on the order the characters first appear).
struct CharCodec {
  explicit CharCodec(const std::string& text) {
    std::vector<bool> seen(256, false);
    for (unsigned char c : text) seen[c] = true;
    id_of.assign(256, -1);
    for (int c = 0; c < 256; ++c)
      if (seen[c]) id_of[c] = static_cast<int64_t>(chars.size()), chars.push_back(char(c));
  }
  int64_t vocab() const { return static_cast<int64_t>(chars.size()); }
  std::string chars;
  std::vector<int64_t> id_of;
};

struct Batch {
  Tensor tokens, targets, lengths;
};

/// The windows ids[starts[b], starts[b] + lengths[b]), right-padded with
/// token 0 to `seq`; targets are the next characters, -100 where there is
/// none. Without `padding` `lengths` is undefined (attention then computes
/// every position, as a model without valid_seq_len does).
Batch make_batch(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts,
                 const std::vector<int64_t>& lengths, int64_t seq, bool padding) {
  const int64_t batch = int64_t(starts.size());
  std::vector<int64_t> tokens(batch * seq, 0), targets(batch * seq, -100);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths[b], start = starts[b];
    for (int64_t t = 0; t < len; ++t) {
      tokens[b * seq + t] = ids[start + t];
      targets[b * seq + t] = ids[start + t + 1];
    }
  }
  return {from_vector(tokens, {batch, seq}), from_vector(targets, {batch, seq}),
          padding ? from_vector(lengths, {batch}) : Tensor()};
}

/// `batch` windows of random length in [seq/2, seq] (seq without
/// `padding`) at random starts.
Batch sample_batch(const std::vector<int64_t>& ids, int64_t batch, int64_t seq, bool padding,
                   std::mt19937_64& rng) {
  std::vector<int64_t> starts(batch), lengths(batch);
  std::uniform_int_distribution<int64_t> len_dist(padding ? seq / 2 : seq, seq);
  for (int64_t b = 0; b < batch; ++b) {
    lengths[b] = len_dist(rng);
    std::uniform_int_distribution<int64_t> start_dist(0, int64_t(ids.size()) - lengths[b] - 1);
    starts[b] = start_dist(rng);
  }
  return make_batch(ids, starts, lengths, seq, padding);
}

/// --ddp: this rank's windows come from a DistributedSampler over every
/// start position (the ranks' shares of an epoch do not overlap); the
/// lengths are drawn for all ranks from one seed, the same on every rank,
/// so each knows the global token count.
struct ShardedWindows {
  ShardedWindows(const std::vector<int64_t>& ids, int64_t seq, uint64_t seed)
      : sampler(int64_t(ids.size()) - seq - 1, {.seed = seed}), length_rng(seed + 1) {}
  /// This rank's batch; `global_tokens` gets every rank's token count.
  Batch next(const std::vector<int64_t>& ids, int64_t batch, int64_t seq, bool padding,
             int64_t& global_tokens) {
    const int64_t world = distributed::world_size(), rank = distributed::rank();
    std::uniform_int_distribution<int64_t> len_dist(padding ? seq / 2 : seq, seq);
    std::vector<int64_t> starts, lengths;
    global_tokens = 0;
    for (int64_t i = 0; i < world * batch; ++i) {
      const int64_t len = len_dist(length_rng);
      global_tokens += len;
      if (i / batch == rank) lengths.push_back(len);
    }
    for (int64_t b = 0; b < batch; ++b) {
      if (next_index == int64_t(order.size())) {  // a new epoch
        sampler.set_epoch(epoch++);
        order = sampler.indices();
        next_index = 0;
      }
      starts.push_back(order[next_index++]);
    }
    return make_batch(ids, starts, lengths, seq, padding);
  }
  distributed::DistributedSampler sampler;
  std::mt19937_64 length_rng;
  std::vector<int64_t> order;
  int64_t next_index = 0, epoch = 0;
};

/// Continues `prompt` by `count` characters, sampling with temperature
/// 0.8. Every call runs the same [1, seq] graph (the valid length is data,
/// not a constant), so generation compiles once.
std::string sample_text(examples::GptMini& model, const CharCodec& codec, const std::string& prompt,
                        int count, std::mt19937_64& rng) {
  // The model's vocabulary may be padded past the text's (--vocab): sample
  // only the text's characters.
  const int64_t seq = model.config().max_seq, vocab = codec.vocab(), stride = model.config().vocab;
  NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> context;
  for (unsigned char c : prompt) context.push_back(std::max<int64_t>(codec.id_of[c], 0));
  std::string out = prompt;
  for (int i = 0; i < count; ++i) {
    const int64_t len = std::min<int64_t>(int64_t(context.size()), seq);
    std::vector<int64_t> window(seq, 0);
    std::copy(context.end() - len, context.end(), window.begin());
    std::vector<float> logits =
        model.forward(from_vector(window, {1, seq}), from_vector(std::vector<int64_t>{len}, {1}))
            .to_vector<float>();
    std::vector<double> weights(vocab);
    const float* row = logits.data() + (len - 1) * stride;
    const float top = *std::max_element(row, row + vocab);
    for (int64_t v = 0; v < vocab; ++v) weights[v] = std::exp((row[v] - top) / 0.8);
    int64_t next = std::discrete_distribution<int64_t>(weights.begin(), weights.end())(rng);
    context.push_back(next);
    out += codec.chars[next];
  }
  model.train();
  return out;
}

void print_indented(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) std::printf("    | %s\n", line.c_str());
}

}  // namespace

int train(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  std::ifstream file(args.text, std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "gpt_train: cannot read %s\n", args.text.c_str());
    return 2;
  }
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const CharCodec codec(text);
  std::vector<int64_t> ids;
  for (unsigned char c : text) ids.push_back(codec.id_of[c]);

  if (args.ddp) {
    distributed::init();
    // Rank 0 speaks for the job; the others print errors only.
    if (distributed::rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 2;
  }
  set_default_device(*examples::parse_device(args.device));
  manual_seed(args.seed);
  std::mt19937_64 rng(args.seed);
  examples::GptMini model({.vocab = std::max(codec.vocab(), args.vocab), .dim = args.dim, .heads = args.heads,
                           .layers = args.layers, .max_seq = args.seq, .dropout = args.dropout,
                           .explicit_attention = args.explicit_attention});
  // --ddp: rank 0's initial weights on every rank; gradients averaged.
  std::optional<nn::DistributedDataParallel> ddp;
  if (args.ddp) ddp.emplace(model, nn::DistributedDataParallelOptions{
                                  .bucket_cap_mb = args.bucket_mb,
                                  .first_bucket_cap_mb = args.first_bucket_mb});
  optim::AdamW opt(model.parameters(), {.lr = args.lr, .weight_decay = 0.1});
  optim::WarmupCosineLR schedule(opt, /*warmup_steps=*/std::max<int64_t>(1, args.steps / 10),
                                 std::max<int64_t>(2, args.steps),
                                 /*eta_min=*/args.lr / 10);
  int64_t n_params = 0;
  for (const Tensor& p : model.parameters()) n_params += p.numel();
  char clip_text[32] = "off";
  if (args.clip > 0) std::snprintf(clip_text, sizeof clip_text, "%g", args.clip);
  std::printf("gpt_train: %zu chars of %s, vocab %lld; GPT %lld layers, dim %lld, %lld heads, "
              "%lld parameters; batch %lld x seq %lld (%s), AdamW + warmup/cosine, "
              "clip %s, %s mode on the %s backend\n",
              text.size(), args.text.c_str(), (long long)codec.vocab(), (long long)args.layers,
              (long long)args.dim, (long long)args.heads, (long long)n_params,
              (long long)args.batch, (long long)args.seq,
              args.padding ? "right-padded" : "full length",
              clip_text, args.mode.c_str(), args.device.c_str());

  if (args.ddp)
    std::printf("data parallel: %d ranks x batch %lld, %zu gradient bucket(s) of <= %g MiB, "
                "%d cpu thread(s) per rank\n",
                distributed::world_size(), (long long)args.batch, ddp->bucket_indices().size(),
                args.bucket_mb, cpu_thread_count());
  const bool samples = args.samples && distributed::rank() == 0;  // no collectives in sampling
  const std::string prompt = "Shall I ";
  std::mt19937_64 sample_rng(args.seed + 1);
  if (samples) {
    std::printf("\nsample before training:\n");
    print_indented(sample_text(model, codec, prompt, 120, sample_rng));
    std::printf("\n");
  }

  reset_metrics();
  model.train();
  // One training step on `b`: forward, loss, backward, clip, AdamW, one
  // mark_step(). `forward` is the model itself or its graphed form.
  auto forward = [&](const Tensor& tokens, const Tensor& lengths) {
    // Under --autocast bf16 (or f16) the matmuls and attention run in
    // bf16 (f16); the backward follows the forward's dtypes.
    std::optional<AutocastScope> scope;
    if (args.autocast) scope.emplace(*args.autocast);
    return model.forward(tokens, lengths);
  };
  std::optional<GraphedCallable> graphed;
  std::optional<ModuleCacher> cacher;
  auto train_step = [&](const Batch& b) {
    opt.zero_grad();
    Tensor logits = graphed   ? (*graphed)({b.tokens, b.lengths})[0]
                    : cacher ? (*cacher)({b.tokens, b.lengths})[0]
                             : forward(b.tokens, b.lengths);
    Tensor loss = cross_entropy(logits.reshape({-1, model.config().vocab}), b.targets.reshape({-1}));
    loss.backward();
    if (args.clip > 0) optim::clip_grad_norm_(model.parameters(), args.clip);
    opt.step();
    // --ddp: the global loss, the mean of the ranks' (in the same graph).
    if (args.ddp) loss = distributed::all_reduce(loss.detach(), distributed::ReduceOp::mean);
    mark_step();  // forward + backward + clip + AdamW: one graph
    return loss;
  };
  Graph step_graph;  // --mode replay
  Batch static_batch;
  Tensor static_loss;

  double first_loss = 0, last_loss = 0, window_loss = 0, engine_seconds = 0;
  int64_t tokens_seen = 0;
  const auto t0 = std::chrono::steady_clock::now();
  // Steady-state figures start after the warmup/capture steps.
  constexpr int64_t kSettleSteps = 2;
  double settled_engine_seconds = 0;
  Metrics settled;
  std::chrono::steady_clock::time_point settled_at;
  std::optional<ShardedWindows> sharded;
  if (args.ddp) sharded.emplace(ids, args.seq, args.seed);
  for (int64_t step = 0; step < args.steps; ++step) {
    if (step == kSettleSteps) {
      settled_engine_seconds = engine_seconds;
      settled = metrics();
      settled_at = std::chrono::steady_clock::now();
    }
    int64_t step_tokens = 0;  // every rank's, under --ddp
    Batch batch = sharded ? sharded->next(ids, args.batch, args.seq, args.padding, step_tokens)
                          : sample_batch(ids, args.batch, args.seq, args.padding, rng);
    const auto s0 = std::chrono::steady_clock::now();
    Tensor loss;
    if (args.mode == "replay" && step >= 1) {
      if (!step_graph.captured()) {  // capture once, after one lazy warmup step
        static_batch = batch;
        {
          CaptureGuard capture(step_graph);
          static_loss = train_step(static_batch);
        }
        if (!args.save.empty()) {
          std::map<std::string, Tensor> names{{"tokens", static_batch.tokens},
                                              {"targets", static_batch.targets},
                                              {"loss", static_loss}};
          if (args.padding) names.emplace("lengths", static_batch.lengths);
          for (auto& [name, p] : model.named_parameters()) names.emplace(name, p);
          step_graph.save(args.save, names);
          std::printf("saved the captured step to %s (replay it with mstep-run)\n",
                      args.save.c_str());
        }
      } else {
        static_batch.tokens.copy_(batch.tokens);  // materialized: shares the buffer
        static_batch.targets.copy_(batch.targets);
        if (args.padding) static_batch.lengths.copy_(batch.lengths);
        step_graph.replay();
      }
      loss = static_loss;
    } else {
      if (step == 0 && args.mode == "graphed") {
        graphed = make_graphed_callable(
            [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{forward(in[0], in[1])}; },
            {batch.tokens, batch.lengths}, model.parameters());
      }
      if (step == 0 && args.mode == "cacher")
        cacher.emplace([&](const std::vector<Tensor>& in, const CallArgs&) {
          return std::vector<Tensor>{forward(in[0], in[1])};
        }, model.parameters());
      loss = train_step(batch);
    }
    engine_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    if (step == 0) {
      // Start-up: from exec to the first step ready to run (its kernels
      // excluded). With a populated MSTEP_CACHE this is the warm start.
      const Metrics m0 = metrics();
      std::printf("first_step_ready_ms %.1f  (compiles %lld, disk hits %lld)\n",
                  1e3 * (seconds_since_process_start() - m0.execute_seconds),
                  (long long)m0.compiles, (long long)m0.disk_hits);
    }
    schedule.step();  // fills the lr device scalar: outside any graph

    const double value = loss.item();
    if (step == 0) first_loss = value;
    last_loss = value;
    if (step >= args.steps - 10) window_loss += value / std::min<int64_t>(10, args.steps);
    if (args.ddp)
      tokens_seen += step_tokens;
    else if (args.padding)
      for (int64_t len : batch.lengths.to_vector<int64_t>()) tokens_seen += len;
    else
      tokens_seen += args.batch * args.seq;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const Metrics m = metrics();
    std::printf("step %4lld  loss %.4f  lr %.2e  %.2f steps/s  %.0f tokens/s  compiles %lld  "
                "cache hits %lld  replays %lld\n",
                (long long)step + 1, value, schedule.get_last_lr(), (step + 1) / secs,
                tokens_seen / secs, (long long)m.cache_misses, (long long)m.cache_hits,
                (long long)m.replays);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Metrics m = metrics();

  if (samples) {
    std::printf("\nsample after %lld steps:\n", (long long)args.steps);
    print_indented(sample_text(model, codec, prompt, 240, sample_rng));
  }
  std::printf("\nloss %.4f -> %.4f (mean of the last 10 steps %.4f); uniform guess would be %.4f\n",
              first_loss, last_loss, window_loss, std::log(double(codec.vocab())));
  std::printf("%lld steps in %.2f s: %.2f steps/s, %.0f tokens/s; training graphs compiled %lld, "
              "cache hits %lld, replays %lld, compile time %.2f s\n",
              (long long)args.steps, secs, args.steps / secs, tokens_seen / secs,
              (long long)m.cache_misses, (long long)m.cache_hits, (long long)m.replays,
              m.compile_seconds);
  // Host time per step: the engine's share of each steady-state step (after
  // the warmup and capture steps) without the time inside executables.
  if (args.steps > kSettleSteps) {
    const int64_t n = args.steps - kSettleSteps;
    const double wall = engine_seconds - settled_engine_seconds;
    const double kernels = (m.execute_seconds - settled.execute_seconds) +
                           (m.replay_execute_seconds - settled.replay_execute_seconds);
    const double compile = m.compile_seconds - settled.compile_seconds;
    // wall_ms_per_step: the whole loop, the batch and the read of the loss
    // included; on an asynchronous device (cuda) the loss's read waits for
    // the step, so this is the step's time there, while step_ms is the
    // time to enqueue it.
    const double loop = std::chrono::duration<double>(std::chrono::steady_clock::now() - settled_at).count();
    std::printf("mode %s  step_ms %.3f  host_us_per_step %.1f  wall_ms_per_step %.3f  (steps %lld..%lld)\n",
                args.mode.c_str(), 1e3 * wall / n, 1e6 * (wall - kernels - compile) / n,
                1e3 * loop / n, (long long)kSettleSteps + 1, (long long)args.steps);
    examples::print_simulated_step(settled, m, n);
  }
  std::printf("\nmetrics_report():\n%s", metrics_report().c_str());
  if (args.ddp) distributed::finalize();
  return args.steps < 20 || window_loss < first_loss ? 0 : 1;  // short runs (timing) need not learn
}

// An mstep error the program cannot recover from (a graph that does not
// compile, a runtime-only build without the graph in its disk cache):
// said on stderr, exit status 2, not an abort.
int main(int argc, char** argv) {
  try {
    return train(argc, argv);
  } catch (const mstep::Error& e) {
    std::fprintf(stderr, "gpt_train: %s\n", e.what());
    return 2;
  }
}
