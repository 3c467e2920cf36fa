/* Restoring a model and its optimizer from a loaded checkpoint: every
 * tensor checked against the model's shapes, with a one-line error naming
 * the first that does not fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "checkpoint.h"
#include "ckpt_tensors.h"

long ckpt_rows(const ckpt_t *ck, const char *name)
{
    const st_tensor_t *t = st_find(&ck->st, name);
    return t && t->ndim == 2 ? (long)t->shape[0] : 0;
}

/* "[4,4,3,3]" */
static void shape_text(char *out, size_t len, const uint64_t *d, int nd)
{
    size_t at = (size_t)snprintf(out, len, "[");
    for (int i = 0; i < nd && at < len; i++) at += (size_t)snprintf(out + at, len - at, "%s%llu", i ? "," : "", (unsigned long long)d[i]);
    if (at < len) snprintf(out + at, len - at, "]");
}

/* Copy tensor name, which must have exactly the given shape, into dst (it
 * is F32: only sync.* tensors may be F64); -1 with a line naming the
 * tensor, the shape the file holds and the one the model needs. A
 * checkpoint of another spec is named as such, with the --model that fits
 * it. */
static int restore_tensor(const ckpt_t *ck, const model_t *m, const char *name, float *dst, const int *shape, int nd,
                          char *err, size_t errlen)
{
    const st_tensor_t *t = st_find(&ck->st, name);
    uint64_t want[SHAPE_MAX];
    int same = t && t->ndim == nd;
    for (int i = 0; i < nd; i++) {
        want[i] = (uint64_t)shape[i];
        same = same && t->shape[i] == want[i];
    }
    if (same) {
        memcpy(dst, ck->buf + ck->st.data_off + t->begin, t->count * sizeof(float));
        return 0;
    }
    char ws[128], hs[128] = "absent";
    shape_text(ws, sizeof ws, want, nd);
    if (t) shape_text(hs, sizeof hs, t->shape, t->ndim);
    const char *saved = ck->meta.model;
    if (strcmp(saved, m->spec))
        snprintf(err, errlen, "checkpoint holds model '%s', which does not match model '%s' (tensor '%s': %s in the file, %s here); pass --model %s",
                 saved, m->spec, name, hs, ws, saved);
    else
        snprintf(err, errlen, "checkpoint tensor '%s' is %s, but model '%s' on %dx%dx%d inputs needs %s; the file was altered or damaged: use another checkpoint",
                 name, hs, saved, m->in_c, m->in_h, m->in_w, ws);
    return -1;
}

/* 1 if name is one of the model's layer tensors. */
static int model_has_tensor(const model_t *m, const char *name)
{
    static const char *const what[4] = { "weight", "bias", "running_mean", "running_var" };
    char *end;
    long i = strtol(name + 5, &end, 10);   /* after "layer"; clamped, never past nlayers */
    if (end == name + 5 || *end != '.' || i < 0 || i >= m->nlayers) return 0;
    const layer_t *l = &m->layers[i];
    const size_t len[4] = { l->w_len, l->b_len, l->s_len, l->s_len };
    for (int k = 0; k < 4; k++) {
        char want[96];
        ckpt_tensor_name(want, sizeof want, m, (int)i, what[k]);
        if (len[k] && !strcmp(want, name)) return 1;
    }
    return 0;
}

/* The model's weights, biases and running statistics, each of its own
 * shape, and no layer tensor the model does not have. */
static int restore_layers(const ckpt_t *ck, model_t *m, char *err, size_t errlen)
{
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        int shape[SHAPE_MAX], nd, C = l->out_c;
        char name[96];
        if (l->w_len) {
            nd = ckpt_weight_shape(l, shape);
            ckpt_tensor_name(name, sizeof name, m, i, "weight");
            if (restore_tensor(ck, m, name, m->params + l->w_off, shape, nd, err, errlen) != 0) return -1;
        }
        if (l->b_len) {   /* a convolution without bias (resnet) has none */
            nd = ckpt_bias_shape(l, shape);
            ckpt_tensor_name(name, sizeof name, m, i, "bias");
            if (restore_tensor(ck, m, name, m->params + l->b_off, shape, nd, err, errlen) != 0) return -1;
        }
        for (int k = 0; l->s_len && k < 2; k++) {
            ckpt_tensor_name(name, sizeof name, m, i, k ? "running_var" : "running_mean");
            if (restore_tensor(ck, m, name, m->state + l->s_off + (size_t)k * C, &C, 1, err, errlen) != 0) return -1;
        }
    }
    for (int i = 0; i < ck->st.ntensors; i++) {
        const char *name = ck->st.tensors[i].name;
        if (strncmp(name, "layer", 5) || model_has_tensor(m, name)) continue;
        if (strcmp(ck->meta.model, m->spec))
            snprintf(err, errlen, "checkpoint holds model '%s', which does not match model '%s' (it has no tensor '%s'); pass --model %s",
                     ck->meta.model, m->spec, name, ck->meta.model);
        else
            snprintf(err, errlen, "checkpoint holds tensor '%s', which model '%s' does not have; the file was altered or damaged: use another checkpoint",
                     name, m->spec);
        return -1;
    }
    return 0;
}

/* Every worker's running variances (sync.worker_state, [workers, nstate])
 * are not negative, as the model's own are (tensor_values_ok): a worker
 * resumes from its row. A row of another length is the paradigm's to
 * refuse. */
static int worker_state_ok(const ckpt_t *ck, const model_t *m, char *err, size_t errlen)
{
    const st_tensor_t *t = st_find(&ck->st, "sync.worker_state");
    if (!t || t->ndim != 2 || t->shape[1] != m->nstate || strcmp(t->dtype, "F32")) return 0;
    const unsigned char *p = ck->buf + ck->st.data_off + t->begin;
    for (uint64_t row = 0; row < t->shape[0]; row++)
        for (int i = 0; i < m->nlayers; i++) {
            const layer_t *l = &m->layers[i];
            for (int c = 0; l->s_len && c < l->out_c; c++) {
                const size_t at = (size_t)row * m->nstate + l->s_off + (size_t)l->out_c + (size_t)c;
                float v;
                memcpy(&v, p + at * sizeof v, sizeof v);
                if (v >= 0) continue;
                snprintf(err, errlen, "checkpoint holds %g at index %zu of 'sync.worker_state' (worker %llu's running variance of layer %d, channel %d), which cannot be negative; the file was altered or damaged: use another checkpoint",
                         v, at, (unsigned long long)row, i, c);
                return -1;
            }
        }
    return 0;
}

int ckpt_restore(const ckpt_t *ck, model_t *m, optim_t *o, char *err, size_t errlen)
{
    const ckpt_meta_t *md = &ck->meta;
    if (md->c != m->in_c || md->h != m->in_h || md->w != m->in_w || md->classes != m->classes) {
        snprintf(err, errlen, "checkpoint was trained on %dx%dx%d inputs with %d classes, but the data is %dx%dx%d with %d classes",
                 md->c, md->h, md->w, md->classes, m->in_c, m->in_h, m->in_w, m->classes);
        return -1;
    }
    if (restore_layers(ck, m, err, errlen) != 0 || worker_state_ok(ck, m, err, errlen) != 0) return -1;
    if (!o) return 0;
    if (strcmp(md->optimizer, optim_kind_name(o->cfg.kind))) {
        snprintf(err, errlen, "checkpoint was trained with optimizer '%s', not '%s'; pass --optimizer %s",
                 md->optimizer, optim_kind_name(o->cfg.kind), md->optimizer);
        return -1;
    }
    float *const state[2] = { o->velocity, o->accum };
    const char *const names[2] = { "optim.velocity", "optim.accum" };
    const int flat = (int)o->n;
    for (int s = 0; s < 2; s++) {
        if (!state[s]) continue;
        if (!st_find(&ck->st, names[s])) {
            snprintf(err, errlen, "checkpoint has no matching optimizer state for --optimizer %s --momentum %g; resume with the run's own settings",
                     optim_kind_name(o->cfg.kind), o->cfg.momentum);
            return -1;
        }
        if (restore_tensor(ck, m, names[s], state[s], &flat, 1, err, errlen) != 0) return -1;
    }
    return 0;
}
