#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../util/util.h"

#define MAX_HEADER (64u << 20)

/* zlib's CRC-32 of a buffer of any size (crc32 takes a uInt length). */
static uLong crc_of(const unsigned char *p, size_t len)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < len; off += 1u << 30) {
        size_t chunk = len - off < (1u << 30) ? len - off : (1u << 30);
        crc = crc32(crc, p + off, (uInt)chunk);
    }
    return crc;
}

static void tensor_name(char *out, size_t len, const model_t *m, int i, const char *what)
{
    snprintf(out, len, "layer%d.%s.%s", i, layer_kind_name(m->layers[i].kind), what);
}

static cJSON *tensor_entry(const int *shape, int nd, size_t begin, size_t end)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "dtype", "F32");
    cJSON_AddItemToObject(t, "shape", cJSON_CreateIntArray(shape, nd));
    cJSON *off = cJSON_CreateArray();
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)begin));
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)end));
    cJSON_AddItemToObject(t, "data_offsets", off);
    return t;
}

/* Shape of layer i's weight as PyTorch lays it out. */
static int weight_shape(const layer_t *l, int *shape)
{
    if (l->kind == LAYER_CONV) {
        shape[0] = l->out_c; shape[1] = l->in_c; shape[2] = l->k; shape[3] = l->k;
        return 4;
    }
    shape[0] = l->out_c;
    shape[1] = l->in_c * l->in_h * l->in_w;
    return 2;
}

static void add_str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v); }
static void add_long(cJSON *o, const char *k, long v)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    cJSON_AddStringToObject(o, k, b);
}

int ckpt_save(const char *path, const model_t *m, const optim_t *o, const ckpt_meta_t *meta,
              char *err, size_t errlen)
{
    const size_t np = m->nparams;
    const float *state[2] = { o ? o->velocity : NULL, o ? o->accum : NULL };
    const char *state_name[2] = { "optim.velocity", "optim.accum" };
    size_t nfloats = np;
    for (int s = 0; s < 2; s++) if (state[s]) nfloats += np;
    const size_t data_len = nfloats * sizeof(float);

    cJSON *root = cJSON_CreateObject(), *md = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "__metadata__", md);
    /* tensors: the flat vector in layer order, then optimizer state */
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (!l->w_len) continue;
        char name[96];
        int shape[4], nd = weight_shape(l, shape);
        tensor_name(name, sizeof name, m, i, "weight");
        cJSON_AddItemToObject(root, name, tensor_entry(shape, nd, l->w_off * 4, (l->w_off + l->w_len) * 4));
        int bs = (int)l->b_len;
        tensor_name(name, sizeof name, m, i, "bias");
        cJSON_AddItemToObject(root, name, tensor_entry(&bs, 1, l->b_off * 4, (l->b_off + l->b_len) * 4));
    }
    size_t at = np * 4;
    int flat = (int)np;
    for (int s = 0; s < 2; s++)
        if (state[s]) {
            cJSON_AddItemToObject(root, state_name[s], tensor_entry(&flat, 1, at, at + np * 4));
            at += np * 4;
        }

    unsigned char *data = xmalloc(data_len);
    memcpy(data, m->params, np * 4);
    at = np * 4;
    for (int s = 0; s < 2; s++)
        if (state[s]) { memcpy(data + at, state[s], np * 4); at += np * 4; }
    uLong crc = crc_of(data, data_len);
    char crcs[16], shape[64];
    snprintf(crcs, sizeof crcs, "%08lx", (unsigned long)crc);
    snprintf(shape, sizeof shape, "%d,%d,%d", meta->c, meta->h, meta->w);
    add_str(md, "format", "dsgd");
    add_long(md, "version", CKPT_VERSION);
    add_str(md, "model", meta->model);
    add_str(md, "input", shape);
    add_long(md, "classes", meta->classes);
    add_long(md, "step", meta->step);
    add_str(md, "sync", meta->sync);
    add_str(md, "optimizer", meta->optimizer);
    add_long(md, "seed", meta->seed);
    add_long(md, "nparams", (long)np);
    add_str(md, "crc32", crcs);
    add_str(md, "pixels", "x/255");

    char *hdr = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t hlen = strlen(hdr), padded = (hlen + 7) / 8 * 8;
    size_t total = 8 + padded + data_len;
    unsigned char *file = xmalloc(total);
    uint64_t n = padded;
    for (int i = 0; i < 8; i++) file[i] = (unsigned char)(n >> (8 * i));
    memcpy(file + 8, hdr, hlen);
    memset(file + 8 + hlen, ' ', padded - hlen);
    memcpy(file + 8 + padded, data, data_len);
    free(hdr);
    free(data);
    int rc = write_file_atomic(path, file, total);
    free(file);
    if (rc != 0) {
        snprintf(err, errlen, "cannot write checkpoint '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static const char *meta_str(const cJSON *md, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(md, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Bounds of a float32 tensor entry; -1 if malformed. */
static int tensor_bounds(const cJSON *t, size_t data_len, long *count, size_t *begin)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    if (!cJSON_IsString(dt) || strcmp(dt->valuestring, "F32") || !cJSON_IsArray(sh) ||
        !cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2)
        return -1;
    long n = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, sh) {
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e10) return -1;
        n *= (long)d->valuedouble;
    }
    double b = cJSON_GetArrayItem(of, 0)->valuedouble, e = cJSON_GetArrayItem(of, 1)->valuedouble;
    if (b < 0 || e < b || e > (double)data_len || (e - b) != 4.0 * (double)n) return -1;
    *count = n;
    *begin = (size_t)b;
    return 0;
}

int ckpt_load(const char *path, ckpt_t *ck, char *err, size_t errlen)
{
    memset(ck, 0, sizeof *ck);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno)); return -1; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < 8) {
        fclose(f);
        snprintf(err, errlen, "checkpoint '%s' is truncated (%ld bytes); it is not usable", path, size);
        return -1;
    }
    ck->buf = xmalloc((size_t)size + 1);
    ck->size = (size_t)size;
    size_t got = fread(ck->buf, 1, (size_t)size, f);
    fclose(f);
#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); ckpt_free(ck); return -1; } while (0)
    if (got != (size_t)size) FAIL("cannot read checkpoint '%s'", path);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)ck->buf[i] << (8 * i);
    if (hlen > MAX_HEADER || hlen > (uint64_t)size - 8)
        FAIL("checkpoint '%s' is truncated or not a safetensors file (header length %llu, file %ld bytes)",
             path, (unsigned long long)hlen, size);
    ck->data_off = 8 + (size_t)hlen;
    cJSON *root = cJSON_ParseWithLength((const char *)ck->buf + 8, (size_t)hlen);
    ck->hdr = root;
    if (!root || !cJSON_IsObject(root)) FAIL("checkpoint '%s' has a corrupt header (not JSON)", path);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    const char *fmt = md ? meta_str(md, "format") : NULL;
    if (!fmt || strcmp(fmt, "dsgd")) FAIL("'%s' is a safetensors file but not a dsgd checkpoint (no dsgd metadata)", path);
    const char *ver = meta_str(md, "version"), *model = meta_str(md, "model"), *input = meta_str(md, "input");
    const char *classes = meta_str(md, "classes"), *step = meta_str(md, "step"), *crcs = meta_str(md, "crc32");
    long v = 0;
    if (!ver || parse_long(ver, &v) || v != CKPT_VERSION)
        FAIL("checkpoint '%s' has format version %s; this dsgd reads version %d", path, ver ? ver : "?", CKPT_VERSION);
    ckpt_meta_t *m = &ck->meta;
    long k = 0;
    if (!model || !input || !classes || !step || !crcs ||
        sscanf(input, "%d,%d,%d", &m->c, &m->h, &m->w) != 3 || parse_long(classes, &k) || parse_long(step, &m->step))
        FAIL("checkpoint '%s' has incomplete metadata", path);
    m->classes = (int)k;
    snprintf(m->model, sizeof m->model, "%s", model);
    snprintf(m->sync, sizeof m->sync, "%s", meta_str(md, "sync") ? meta_str(md, "sync") : "");
    snprintf(m->optimizer, sizeof m->optimizer, "%s", meta_str(md, "optimizer") ? meta_str(md, "optimizer") : "");
    if (meta_str(md, "seed")) parse_long(meta_str(md, "seed"), &m->seed);
    size_t data_len = ck->size - ck->data_off;
    uLong crc = crc_of(ck->buf + ck->data_off, data_len);
    char want[16];
    snprintf(want, sizeof want, "%08lx", (unsigned long)crc);
    if (strcmp(want, crcs)) FAIL("checkpoint '%s' is corrupt: CRC32 of its data is %s, header says %s", path, want, crcs);
    const cJSON *t;
    cJSON_ArrayForEach(t, root) {
        if (!strcmp(t->string, "__metadata__")) continue;
        long n;
        size_t b;
        if (tensor_bounds(t, data_len, &n, &b) != 0) FAIL("checkpoint '%s': tensor '%s' is malformed", path, t->string);
    }
    return 0;
#undef FAIL
}

/* Copy tensor `name` (expected count floats) into dst; -1 if absent/mismatched. */
static int copy_tensor(const ckpt_t *ck, const char *name, float *dst, size_t count)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive((cJSON *)ck->hdr, name);
    long n;
    size_t b;
    if (!t || tensor_bounds(t, ck->size - ck->data_off, &n, &b) != 0 || (size_t)n != count) return -1;
    memcpy(dst, ck->buf + ck->data_off + b, count * sizeof(float));
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
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (!l->w_len) continue;
        char wn[96], bn[96];
        tensor_name(wn, sizeof wn, m, i, "weight");
        tensor_name(bn, sizeof bn, m, i, "bias");
        if (copy_tensor(ck, wn, m->params + l->w_off, l->w_len) != 0 ||
            copy_tensor(ck, bn, m->params + l->b_off, l->b_len) != 0) {
            snprintf(err, errlen, "checkpoint holds model '%s', which does not match model '%s' (layer %d differs); pass --model %s",
                     md->model, m->spec, i, md->model);
            return -1;
        }
    }
    long total = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, (cJSON *)ck->hdr) if (strncmp(t->string, "layer", 5) == 0) {
        long n; size_t b;
        tensor_bounds(t, ck->size - ck->data_off, &n, &b);
        total += n;
    }
    if ((size_t)total != m->nparams) {
        snprintf(err, errlen, "checkpoint holds model '%s' with %ld parameters, not model '%s' (%zu); pass --model %s",
                 md->model, total, m->spec, m->nparams, md->model);
        return -1;
    }
    if (!o) return 0;
    if (strcmp(md->optimizer, optim_kind_name(o->cfg.kind))) {
        snprintf(err, errlen, "checkpoint was trained with optimizer '%s', not '%s'; pass --optimizer %s",
                 md->optimizer, optim_kind_name(o->cfg.kind), md->optimizer);
        return -1;
    }
    if ((o->velocity && copy_tensor(ck, "optim.velocity", o->velocity, o->n) != 0) ||
        (o->accum && copy_tensor(ck, "optim.accum", o->accum, o->n) != 0)) {
        snprintf(err, errlen, "checkpoint has no matching optimizer state for --optimizer %s --momentum %g; resume with the run's own settings",
                 optim_kind_name(o->cfg.kind), o->cfg.momentum);
        return -1;
    }
    return 0;
}

void ckpt_free(ckpt_t *ck)
{
    cJSON_Delete(ck->hdr);
    free(ck->buf);
    memset(ck, 0, sizeof *ck);
}
