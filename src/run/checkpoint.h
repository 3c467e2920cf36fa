/* run/checkpoint — safetensors files with dsgd metadata.
 *
 * Layout (the safetensors rules): 8-byte little-endian header length N, an
 * N-byte JSON header (padded with spaces to a multiple of 8), then raw
 * little-endian float32 data. One tensor per layer weight/bias (named
 * "layerI.KIND.weight" / ".bias", shaped as PyTorch shapes them; no bias
 * tensor for a convolution without one), batch normalization's running
 * statistics ("layerI.bn.running_mean" / ".running_var"), then the
 * optimizer state as flat tensors "optim.velocity" / "optim.accum".
 * A paradigm may add tensors "sync.*" and a "sync_state" string.
 * "__metadata__" holds: format "dsgd", version, model spec, input shape,
 * classes, step, sync, optimizer, seed, nparams and the CRC-32 of the file
 * (docs/checkpoints.md).
 * Files are written to a temporary name, fsynced and renamed.
 */
#ifndef DSGD_CHECKPOINT_H
#define DSGD_CHECKPOINT_H

#include <stddef.h>

#include "../nn/model.h"
#include "../optim/optim.h"
#include "safetensors.h"

/* Version 2: the CRC-32 covers the whole file (header included); version 1
 * files (CRC of the data only) are still read. */
#define CKPT_VERSION 2

/* A tensor a paradigm saves beside the model: shape [rows, cols], or [cols]
 * when rows == 0. F32 from data, or F64 from data64 when that is set (state
 * that must come back bit for bit in double precision: EWMAs, L-BFGS's ρ,
 * clocks). Only "sync.*" tensors may be F64. */
typedef struct ckpt_tensor {
    const char *name;        /* "sync.…" */
    const float *data;
    long rows, cols;
    const double *data64;
} ckpt_tensor_t;

typedef struct ckpt_meta {
    char model[128];
    char sync[64];
    char optimizer[32];
    long step;
    long seed;
    int c, h, w, classes;
    char sync_state[256];    /* the paradigm's own state as text it parses itself ("" if none) */
    const ckpt_tensor_t *extra;   /* save only: the paradigm's tensors (nextra of them) */
    int nextra;
    const float *state;      /* save only: if set, the batch-norm statistics instead of the model's state */
    const float *params;     /* save only: if set, the layer tensors' values instead of the model's
                                (e.g. EASGD's center, the average of gossip replicas) */
} ckpt_meta_t;

typedef struct ckpt {
    unsigned char *buf;      /* whole file */
    size_t size;
    st_file_t st;            /* the validated safetensors layout */
    ckpt_meta_t meta;
} ckpt_t;

/* o may be NULL (no optimizer state saved). Returns 0, or -1 with err set;
 * on failure no file (and no temporary) is left behind. */
int ckpt_save(const char *path, const model_t *m, const optim_t *o, const ckpt_meta_t *meta,
              char *err, size_t errlen);
/* Read a regular file and verify it (ckpt_parse). */
int ckpt_load(const char *path, ckpt_t *ck, char *err, size_t errlen);
/* Verify a checkpoint held in memory: the safetensors rules (safetensors.h),
 * dsgd's metadata with every value range-checked, F32 tensors, the CRC-32,
 * every value finite and none negative in a running variance or an Adagrad
 * sum of squares.
 * Takes ownership of buf (malloc'ed, size bytes). name is used in messages. */
int ckpt_parse(ckpt_t *ck, unsigned char *buf, size_t size, const char *name, char *err, size_t errlen);
/* Copy the weights and running statistics (and, if o != NULL, the
 * optimizer state) into a model built for the same architecture: each
 * tensor of exactly the shape the model needs, no layer tensor the model
 * lacks, and no negative variance in any worker's statistics; -1 with a
 * line naming the tensor otherwise. */
int ckpt_restore(const ckpt_t *ck, model_t *m, optim_t *o, char *err, size_t errlen);
/* Copy tensor name (exactly count floats) into dst; -1 if absent or of
 * another size. */
int ckpt_read_tensor(const ckpt_t *ck, const char *name, float *dst, size_t count);
/* Copy row `row` of a [rows, cols] tensor into dst; -1 if absent or of
 * another shape. */
int ckpt_read_row(const ckpt_t *ck, const char *name, long row, float *dst, size_t cols);
/* The same for F64 tensors (shape [rows, cols]); -1 if absent, not F64, of
 * another shape, or holding a value that is not finite. */
int ckpt_read_row64(const ckpt_t *ck, const char *name, long row, double *dst, size_t cols);
/* Rows of a 2-D tensor (0 if absent or not 2-D). */
long ckpt_rows(const ckpt_t *ck, const char *name);

/* A paradigm's sync_state is "key=value,key=value,..." with integer values:
 * its schema, declared once in the paradigm's file, names each key with the
 * range a resume accepts (one array for writing and reading).
 * ckpt_state_write writes the n pairs in that order (-1 if they do not fit);
 * ckpt_state_read takes exactly those keys, in any order, each once, no
 * other key, each value a plain decimal integer within its key's range (-1
 * otherwise). What ties two keys together the paradigm checks itself. */
typedef struct ckpt_key {
    const char *name;
    long min, max;
} ckpt_key_t;
int ckpt_state_write(char *out, size_t len, int n, const ckpt_key_t keys[], const long vals[]);
int ckpt_state_read(const char *text, int n, const ckpt_key_t keys[], long vals[]);
void ckpt_free(ckpt_t *ck);

#endif
