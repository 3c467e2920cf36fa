/* train/checkpoint — safetensors files with dsgd metadata.
 *
 * Layout (the safetensors rules): 8-byte little-endian header length N, an
 * N-byte JSON header (padded with spaces to a multiple of 8), then raw
 * little-endian float32 data. One tensor per layer weight/bias (named
 * "layerI.KIND.weight" / ".bias", shaped as PyTorch shapes them), then the
 * optimizer state as flat tensors "optim.velocity" / "optim.accum".
 * "__metadata__" holds: format "dsgd", version, model spec, input shape,
 * classes, step, sync, optimizer, seed and the CRC32 of the data section.
 * Files are written to a temporary name, fsynced and renamed.
 */
#ifndef DSGD_CHECKPOINT_H
#define DSGD_CHECKPOINT_H

#include <stddef.h>

#include "../nn/model.h"
#include "../optim/optim.h"

#define CKPT_VERSION 1

typedef struct ckpt_meta {
    char model[128];
    char sync[64];
    char optimizer[32];
    long step;
    long seed;
    int c, h, w, classes;
} ckpt_meta_t;

typedef struct ckpt {
    unsigned char *buf;      /* whole file */
    size_t size;
    size_t data_off;         /* start of the data section in buf */
    void *hdr;               /* parsed header (cJSON) */
    ckpt_meta_t meta;
} ckpt_t;

/* o may be NULL (no optimizer state saved). Returns 0, or -1 with err set;
 * on failure no file (and no temporary) is left behind. */
int ckpt_save(const char *path, const model_t *m, const optim_t *o, const ckpt_meta_t *meta,
              char *err, size_t errlen);
/* Read and verify (header, tensor bounds, CRC32). */
int ckpt_load(const char *path, ckpt_t *ck, char *err, size_t errlen);
/* Copy the weights (and, if o != NULL, the optimizer state) into a model
 * built for the same architecture. */
int ckpt_restore(const ckpt_t *ck, model_t *m, optim_t *o, char *err, size_t errlen);
void ckpt_free(ckpt_t *ck);

#endif
