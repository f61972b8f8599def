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
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "examples/models/GptMini.h"
#include "mstep/mstep.h"

using namespace mstep;

namespace {

struct Args {
  int64_t steps = 300, batch = 16, seq = 64, dim = 64, layers = 2, heads = 4;
  double lr = 6e-3;
  uint64_t seed = 0;
  double dropout = 0.0;
  bool explicit_attention = false;
  std::string text = MSTEP_EXAMPLES_DATA_DIR "/sonnets.txt";
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
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
    else if (flag == "--lr") a.lr = std::atof(v);
    else if (flag == "--seed") a.seed = std::strtoull(v, nullptr, 10);
    else if (flag == "--text") a.text = v;
    else if (flag == "--dropout") a.dropout = std::atof(v);
    else if (flag == "--explicit-attention") a.explicit_attention = std::atoi(v) != 0;
    else {
      std::fprintf(stderr, "gpt_train: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
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

/// `batch` windows of random length in [seq/2, seq], right-padded with
/// token 0; targets are the next characters, -100 where there is none.
Batch sample_batch(const std::vector<int64_t>& ids, int64_t batch, int64_t seq,
                   std::mt19937_64& rng) {
  std::vector<int64_t> tokens(batch * seq, 0), targets(batch * seq, -100), lengths(batch);
  std::uniform_int_distribution<int64_t> len_dist(seq / 2, seq);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = len_dist(rng);
    std::uniform_int_distribution<int64_t> start_dist(0, int64_t(ids.size()) - len - 1);
    int64_t start = start_dist(rng);
    lengths[b] = len;
    for (int64_t t = 0; t < len; ++t) {
      tokens[b * seq + t] = ids[start + t];
      targets[b * seq + t] = ids[start + t + 1];
    }
  }
  return {from_vector(tokens, {batch, seq}), from_vector(targets, {batch, seq}),
          from_vector(lengths, {batch})};
}

/// Continues `prompt` by `count` characters, sampling with temperature
/// 0.8. Every call runs the same [1, seq] graph (the valid length is data,
/// not a constant), so generation compiles once.
std::string sample_text(examples::GptMini& model, const CharCodec& codec, const std::string& prompt,
                        int count, std::mt19937_64& rng) {
  const int64_t seq = model.config().max_seq, vocab = codec.vocab();
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
    const float* row = logits.data() + (len - 1) * vocab;
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

int main(int argc, char** argv) {
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

  manual_seed(args.seed);
  std::mt19937_64 rng(args.seed);
  examples::GptMini model({.vocab = codec.vocab(), .dim = args.dim, .heads = args.heads,
                           .layers = args.layers, .max_seq = args.seq, .dropout = args.dropout,
                           .explicit_attention = args.explicit_attention});
  optim::AdamW opt(model.parameters(), {.lr = args.lr, .weight_decay = 0.1});
  optim::WarmupCosineLR schedule(opt, /*warmup_steps=*/std::max<int64_t>(1, args.steps / 10),
                                 std::max<int64_t>(2, args.steps),
                                 /*eta_min=*/args.lr / 10);
  int64_t n_params = 0;
  for (const Tensor& p : model.parameters()) n_params += p.numel();
  std::printf("gpt_train: %zu chars of %s, vocab %lld; GPT %lld layers, dim %lld, %lld heads, "
              "%lld parameters; batch %lld x seq %lld (right-padded), AdamW + warmup/cosine, "
              "clip 1.0, lazy mode on the ref backend\n",
              text.size(), args.text.c_str(), (long long)codec.vocab(), (long long)args.layers,
              (long long)args.dim, (long long)args.heads, (long long)n_params,
              (long long)args.batch, (long long)args.seq);

  const std::string prompt = "Shall I ";
  std::mt19937_64 sample_rng(args.seed + 1);
  std::printf("\nsample before training:\n");
  print_indented(sample_text(model, codec, prompt, 120, sample_rng));
  std::printf("\n");

  reset_metrics();
  model.train();
  double first_loss = 0, last_loss = 0, window_loss = 0;
  int64_t tokens_seen = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < args.steps; ++step) {
    Batch batch = sample_batch(ids, args.batch, args.seq, rng);
    opt.zero_grad();
    Tensor logits = model.forward(batch.tokens, batch.lengths);
    Tensor loss = cross_entropy(logits.reshape({-1, codec.vocab()}), batch.targets.reshape({-1}));
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    schedule.step();
    mark_step();  // forward + backward + clip + AdamW: one graph

    const double value = loss.item();
    if (step == 0) first_loss = value;
    last_loss = value;
    if (step >= args.steps - 10) window_loss += value / std::min<int64_t>(10, args.steps);
    for (int64_t len : batch.lengths.to_vector<int64_t>()) tokens_seen += len;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const Metrics m = metrics();
    std::printf("step %4lld  loss %.4f  lr %.2e  %.2f steps/s  %.0f tokens/s  compiles %lld  "
                "cache hits %lld\n",
                (long long)step + 1, value, schedule.get_last_lr(), (step + 1) / secs,
                tokens_seen / secs, (long long)m.cache_misses, (long long)m.cache_hits);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Metrics m = metrics();

  std::printf("\nsample after %lld steps:\n", (long long)args.steps);
  print_indented(sample_text(model, codec, prompt, 240, sample_rng));
  std::printf("\nloss %.4f -> %.4f (mean of the last 10 steps %.4f); uniform guess would be %.4f\n",
              first_loss, last_loss, window_loss, std::log(double(codec.vocab())));
  std::printf("%lld steps in %.2f s: %.2f steps/s, %.0f tokens/s; training graphs compiled %lld, "
              "cache hits %lld, compile time %.2f s\n",
              (long long)args.steps, secs, args.steps / secs, tokens_seen / secs,
              (long long)m.cache_misses, (long long)m.cache_hits, m.compile_seconds);
  return window_loss < first_loss ? 0 : 1;
}
