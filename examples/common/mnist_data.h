/* The MNIST data of the examples, in portable C11 (+ zlib): a seeded PRNG
 * (xoshiro256** seeded by splitmix64), Box-Muller normals, the synthetic
 * data set, IDX file reading (gzipped or not, through zlib), a Fisher-Yates
 * shuffle and batch assembly.
 *
 * The C++ example (examples/mnist_mlp.cpp) and the C host
 * (examples/c_host/mnist_c.c) both link this one object file, so they see
 * bit-identical data for the same seed: std::normal_distribution and
 * std::shuffle are implementation-defined and cannot be reproduced in C.
 *
 * Thread-safety: every function works on the objects it is given only. */
#ifndef MSTEP_EXAMPLES_COMMON_MNIST_DATA_H_
#define MSTEP_EXAMPLES_COMMON_MNIST_DATA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Pixels per image (28 x 28) and classes. */
#define MNIST_PIXELS 784
#define MNIST_CLASSES 10

/** xoshiro256** state. Seed it with mnist_rng_seed before use. */
typedef struct mnist_rng {
  uint64_t s[4];
  /** Box-Muller makes normals in pairs: the second one waits here. */
  double spare_normal;
  int has_spare;
} mnist_rng;

/** Seeds the four state words from `seed` through splitmix64. */
void mnist_rng_seed(mnist_rng* rng, uint64_t seed);
/** The next 64 random bits. */
uint64_t mnist_rng_next(mnist_rng* rng);
/** Uniform in [0, 1) with 53 random bits. */
double mnist_rng_uniform(mnist_rng* rng);
/** Uniform integer in [0, n), unbiased (rejection sampling); n > 0. */
uint64_t mnist_rng_below(mnist_rng* rng, uint64_t n);
/** A standard normal, Box-Muller in double precision. */
double mnist_rng_normal(mnist_rng* rng);

/** Images and labels of one split. Owns its arrays: free with
 *  mnist_dataset_free. */
typedef struct mnist_dataset {
  float* images;   /** [size, MNIST_PIXELS], normalized */
  int64_t* labels; /** [size], in [0, MNIST_CLASSES) */
  int64_t size;
} mnist_dataset;

/** Frees the arrays of `d` and zeroes it. A zeroed data set is a no-op. */
void mnist_dataset_free(mnist_dataset* d);

/** Ten Gaussian clusters in 784 dimensions, one per class: the centres are
 *  0.3 * N(0, 1) from a fixed seed (the same for every split), a sample is
 *  its class centre + N(0, 1), labels are uniform. Learnable, but noisy
 *  enough that the first steps are far from perfect. Returns 0, or -1 (with
 *  a message in `error`) when memory runs out. */
int mnist_synthetic(mnist_dataset* out, int64_t n, uint64_t seed, char* error, size_t error_size);

/** Reads an IDX image file (magic 2051, 28x28 images) and its label file
 *  (magic 2049), gzipped or not, normalized as in the PyTorch MNIST
 *  example: (x / 255 - 0.1307) / 0.3081. Returns 0, or -1 with a message in
 *  `error` naming the file and what is wrong with it (cannot open, wrong
 *  magic number, truncated, corrupt gzip data, a label out of range, ...). */
int mnist_read_idx(const char* images_path, const char* labels_path, mnist_dataset* out,
                   char* error, size_t error_size);

/** Where Debian's dataset-fashion-mnist package puts Fashion-MNIST: the
 *  MNIST format (four gzipped IDX files), clothes instead of digits. */
#define MNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

/** MNIST_DEFAULT_DIR when its four files are there, else NULL. */
const char* mnist_default_dir(void);

/** The examples' data:
 *  - `synthetic` non-zero: the synthetic set, 12000 train samples (seed 1)
 *    and 2000 test samples (seed 2);
 *  - else a non-empty `dir`: the four IDX files in it, each named as in
 *    MNIST (train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *    t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte) or that name + .gz;
 *  - else Fashion-MNIST from MNIST_DEFAULT_DIR when it is installed, and the
 *    synthetic set when it is not.
 *  Writes one line saying which data it read (source, sample counts, and
 *  why when it fell back to the synthetic set) into `what` (may be NULL).
 *  Returns 0, or -1 with a message in `error` (nothing is left allocated). */
int mnist_load(const char* dir, int synthetic, mnist_dataset* train, mnist_dataset* test,
               char* what, size_t what_size, char* error, size_t error_size);

/** order[i] = i for i < n. */
void mnist_identity_order(int64_t* order, int64_t n);
/** Fisher-Yates shuffle of order[0, n) drawing from `rng`. */
void mnist_shuffle(int64_t* order, int64_t n, mnist_rng* rng);

/** Rows order[first, first + rows) of `d` as a batch: images
 *  [rows, MNIST_PIXELS] and labels [rows], into arrays the caller owns. */
void mnist_batch(const mnist_dataset* d, const int64_t* order, int64_t first, int64_t rows,
                 float* images, int64_t* labels);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSTEP_EXAMPLES_COMMON_MNIST_DATA_H_ */
