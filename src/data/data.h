/* data — datasets in memory, loaders, per-rank partitions, minibatch iterator.
 *
 * Every loader turns pixels into floats as x/255 and nothing else (no mean or
 * std normalisation), so a checkpoint's user needs only that one rule. Pixels
 * stay bytes in memory (a quarter of the floats' size) and become floats one
 * batch at a time, through a 256-entry table that holds exactly the float
 * each loader has always produced for each byte value.
 *
 * In the simulated build (util/sim.h) all simulated ranks live in one process: the first
 * rank to load a dataset loads it, the others share that read-only copy.
 *
 * --data accepts:
 *   fashion-mnist   Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)
 *   mnist           /usr/share/datasets/mnist, if present
 *   synthetic[:N[,CxHxW]]
 *                   N (default 4096) images of C×H×W (default 1x8x8) pixels, 4 noisy
 *                   class prototypes, for tests and for models larger than real data allows
 *   DIR             a directory holding MNIST-format IDX files
 *                   (train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *                    t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte; each raw or .gz)
 *                   or CIFAR-10 binary batches (data_batch_1.bin … data_batch_5.bin,
 *                   test_batch.bin); a CIFAR-10 directory missing some of its
 *                   training batches is refused unless DATA_PARTIAL is given
 *                   (--data-partial), and the set then says what it lacks
 */
#ifndef DSGD_DATA_H
#define DSGD_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "../util/util.h"

typedef struct dataset {
    long n;
    int c, h, w;           /* per-sample shape */
    int classes;
    uint8_t *px;           /* (n, c·h·w) pixel bytes; sample value dataset_px_value */
    float *xf;             /* (n, c·h·w) in [0, 1], for data that are not bytes
                              (synthetic); NULL when px is set */
    int px_div;            /* byte → float as the loader always made it: x / 255 (CIFAR, 1)
                              or x · (1/255) (IDX, 0); they differ in 126 of 256 values */
    uint8_t *y;            /* (n) */
    int shared;            /* 1: one copy shared by all simulated ranks; never freed */
    char note[256];        /* what a partial training set lacks, for the start-up print ("" when whole) */
} dataset_t;

static inline long dataset_dim(const dataset_t *d) { return (long)d->c * d->h * d->w; }
/* The float a pixel byte stands for (what the batch gather computes). */
float dataset_px_value(const dataset_t *d, uint8_t v);

/* dataset_load's flags */
enum { DATA_PARTIAL = 1 };   /* accept a CIFAR-10 directory that lacks some of its training batches */

/* Load train and test sets. On failure writes a one-line reason into err and
 * returns -1 (nothing is left allocated). */
int dataset_load(const char *spec, int flags, dataset_t *train, dataset_t *test, char *err, size_t errlen);
/* Loaders, exposed for tests. */
int idx_load_pair(const char *images, const char *labels, dataset_t *d, char *err, size_t errlen);
/* An IDX file held in memory (raw or gzip): the same checks as the loader
 * (for the fuzz harness); *body (malloc'ed) holds the product of dims bytes. */
int idx_parse(const unsigned char *file, size_t len, const char *path, uint32_t magic, int ndims,
              uint32_t *dims, unsigned char **body, char *err, size_t errlen);
int cifar_load_files(const char *const *paths, int npaths, dataset_t *d, char *err, size_t errlen);
void dataset_synthetic(dataset_t *train, dataset_t *test, long n, int c, int h, int w, uint64_t seed);
void dataset_free(dataset_t *d);
/* Keep the first n samples (no-op if n <= 0 or n >= d->n). */
void dataset_truncate(dataset_t *d, long n);
/* Sample s as floats into out (dim). */
void dataset_row(const dataset_t *d, long s, float *out);
/* Samples first .. first+count-1 as floats into out (count, dim). */
void dataset_rows(const dataset_t *d, long first, long count, float *out);

/* ---- per-rank partitions: index lists into a dataset ---- */
typedef enum part_kind {
    PART_IID,        /* seeded shuffle, then a contiguous 1/size shard per rank */
    PART_FULL,       /* every rank sees the whole dataset (SelSync's scheme); the
                        iterator's rank-seeded order makes the ranks differ */
    PART_LABEL_SKEW  /* sorted by label, contiguous 1/size block: each rank owns a
                        block of classes (non-IID) */
} part_kind_t;

int part_kind_parse(const char *s, part_kind_t *out);
const char *part_kind_name(part_kind_t k);
/* Returns a malloc'ed index list; *count receives its length. */
int32_t *partition_indices(const dataset_t *d, part_kind_t kind, int rank, int size,
                           uint64_t seed, long *count);

/* ---- seeded shuffled minibatch iterator ----
 * Walks an index list in passes; each pass is a fresh permutation drawn from
 * (seed, stream, pass) alone, so the position after k batches is a pure
 * function of k: batch_iter_seek restores it exactly (checkpoint resume). */
typedef struct batch_iter {
    const dataset_t *d;
    const int32_t *idx;    /* (n) not owned */
    long n;
    int B;                 /* samples drawn from idx per batch */
    int nb;                /* samples per batch in x/y: B plus injected ones */
    /* SelSync's data injection (non-IID): each batch also carries m samples
     * of each of k classes this rank does not own, drawn fresh per batch. */
    int inj_k, inj_m;
    int inj_nclass;        /* foreign classes available */
    int32_t *inj_class;    /* (inj_nclass) their labels */
    int32_t **inj_pool;    /* (inj_nclass) → sample indices of that class */
    long *inj_pool_n;      /* (inj_nclass) */
    uint64_t seed, stream;
    long pass, pos;
    int32_t *order;        /* (n) current pass permutation */
    float *x;              /* (B, dim) current batch */
    int32_t *y;            /* (B) */
    int32_t *pick;         /* (B) the batch's sample indices, in order */
} batch_iter_t;

batch_iter_t *batch_iter_create(const dataset_t *d, const int32_t *idx, long n, int B,
                                uint64_t seed, uint64_t stream);
/* Add SelSync's data injection: each batch gets m samples of each of
 * min(k, foreign) classes absent from idx, drawn from the whole dataset by a
 * generator seeded from (seed, stream, batch number). Grows nb. */
void batch_iter_inject(batch_iter_t *it, int k, int m);
void batch_iter_free(batch_iter_t *it);
/* Position the iterator as if k batches had been drawn. */
void batch_iter_seek(batch_iter_t *it, long k);
/* Fill it->x / it->y with the next batch (never allocates). */
void batch_iter_next(batch_iter_t *it);

#endif
