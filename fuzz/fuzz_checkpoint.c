/* libFuzzer harness: the checkpoint reader on arbitrary bytes (ckpt_parse,
 * what ckpt_load runs on a file's contents), then, for a checkpoint it
 * accepts with a small model, the restore into that model. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "run/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size + 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    ckpt_t ck;
    char err[512];
    if (ckpt_parse(&ck, buf, size, "fuzz", err, sizeof err) != 0) return 0;   /* buf freed by ckpt_parse */
    const ckpt_meta_t *m = &ck.meta;
    if ((long)m->c * m->h * m->w <= 4096 && m->classes <= 64 &&
        model_spec_check(m->model, m->c, m->h, m->w, m->classes, err, sizeof err) == 0) {
        model_t *model = model_create(m->model, m->c, m->h, m->w, m->classes, 1);
        if (model->nparams <= 1000000) ckpt_restore(&ck, model, NULL, err, sizeof err);
        model_free(model);
    }
    ckpt_free(&ck);
    return 0;
}
