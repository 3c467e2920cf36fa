#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../util/util.h"
#include "ckpt_tensors.h"

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

static void add_str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v); }
static void add_long(cJSON *o, const char *k, long v)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    cJSON_AddStringToObject(o, k, b);
}

static const char CRC_FIELD[] = "\"crc32\":\"";

/* zlib's CRC-32, continued over a buffer of any size (crc32 takes a uInt length). */
static uLong crc_more(uLong crc, const unsigned char *p, size_t len)
{
    for (size_t off = 0; off < len; off += 1u << 30) {
        size_t chunk = len - off < (1u << 30) ? len - off : (1u << 30);
        crc = crc32(crc, p + off, (uInt)chunk);
    }
    return crc;
}

/* The CRC-32 of version 2: the whole file, with the eight hex digits of
 * the crc32 value (at hex) read as "00000000". */
static uLong file_crc(const unsigned char *buf, size_t size, size_t hex)
{
    uLong crc = crc_more(crc32(0L, Z_NULL, 0), buf, hex);
    crc = crc32(crc, (const unsigned char *)"00000000", 8);
    return crc_more(crc, buf + hex + 8, size - hex - 8);
}

/* Offset of the crc32 value's hex digits in the file: the one place the
 * header holds the key (a key cannot occur inside a string value, whose
 * quotes are escaped); 0 if absent or present more than once. */
static size_t crc_hex_at(const unsigned char *buf, size_t hlen)
{
    const char *h = (const char *)buf + 8, *end = h + hlen, *hit = NULL;
    const size_t k = sizeof CRC_FIELD - 1;
    for (const char *p = h; (p = memmem(p, (size_t)(end - p), CRC_FIELD, k)); p += k) {
        if (hit) return 0;
        hit = p;
    }
    if (!hit || (size_t)(end - hit) < k + 9 || hit[k + 8] != '"') return 0;
    return (size_t)(hit - (const char *)buf) + k;
}

/* 1 if every value of x[0..n) is finite */
static int all_finite(const float *x, size_t n)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= isfinite(x[i]) != 0;
    return ok;
}

static int all_finite64(const double *x, size_t n)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= isfinite(x[i]) != 0;
    return ok;
}

/* The name of the first vector of a checkpoint to be that holds a NaN or an
 * infinity, or NULL. */
static const char *first_nonfinite(const model_t *m, const optim_t *o, const ckpt_meta_t *meta)
{
    if (!all_finite(meta->params ? meta->params : m->params, m->nparams)) return "the parameters";
    if (!all_finite(meta->state ? meta->state : m->state, m->nstate)) return "the batch-normalization statistics";
    if (o && o->velocity && !all_finite(o->velocity, m->nparams)) return "the momentum buffer";
    if (o && o->accum && !all_finite(o->accum, m->nparams)) return "the Adagrad accumulator";
    for (int e = 0; e < meta->nextra; e++) {
        const ckpt_tensor_t *t = &meta->extra[e];
        size_t n = (size_t)(t->rows ? t->rows : 1) * (size_t)t->cols;
        if (t->data64 ? !all_finite64(t->data64, n) : !all_finite(t->data, n)) return t->name;
    }
    return NULL;
}

int ckpt_save(const char *path, const model_t *m, const optim_t *o, const ckpt_meta_t *meta,
              char *err, size_t errlen)
{
    /* a diverged model never replaces a checkpoint: the previous file stays */
    const char *bad = first_nonfinite(m, o, meta);
    if (bad) {
        snprintf(err, errlen, "not writing checkpoint '%s' at step %ld: NaN or infinite values in %s (training diverged; lower --lr); the previous checkpoint is kept",
                 path, meta->step, bad);
        return -1;
    }
    const size_t np = m->nparams;
    const float *state[2] = { o ? o->velocity : NULL, o ? o->accum : NULL };
    const char *state_name[2] = { "optim.velocity", "optim.accum" };
    size_t nfloats = np + m->nstate;
    for (int s = 0; s < 2; s++) if (state[s]) nfloats += np;
    size_t data_len = nfloats * sizeof(float);
    for (int e = 0; e < meta->nextra; e++)
        data_len += (size_t)(meta->extra[e].rows ? meta->extra[e].rows : 1) * (size_t)meta->extra[e].cols *
                    (meta->extra[e].data64 ? 8 : 4);

    cJSON *root = cJSON_CreateObject(), *md = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "__metadata__", md);
    /* tensors: the flat vector in layer order, then optimizer state */
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (!l->w_len) continue;
        char name[96];
        int shape[SHAPE_MAX], nd = ckpt_weight_shape(l, shape);
        ckpt_tensor_name(name, sizeof name, m, i, "weight");
        cJSON_AddItemToObject(root, name, tensor_entry(shape, nd, l->w_off * 4, (l->w_off + l->w_len) * 4));
        if (!l->b_len) continue;   /* a convolution without bias (resnet) */
        nd = ckpt_bias_shape(l, shape);
        ckpt_tensor_name(name, sizeof name, m, i, "bias");
        cJSON_AddItemToObject(root, name, tensor_entry(shape, nd, l->b_off * 4, (l->b_off + l->b_len) * 4));
    }
    unsigned char *data = xmalloc(data_len);
    memcpy(data, meta->params ? meta->params : m->params, np * 4);
    size_t at = np * 4;
    /* batch normalization's running statistics, named as PyTorch names them */
    const float *st = meta->state ? meta->state : m->state;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (!l->s_len) continue;
        int C = l->out_c;
        for (int k = 0; k < 2; k++) {
            char name[96];
            ckpt_tensor_name(name, sizeof name, m, i, k ? "running_var" : "running_mean");
            cJSON_AddItemToObject(root, name, tensor_entry(&C, 1, at, at + (size_t)C * 4));
            memcpy(data + at, st + l->s_off + (size_t)k * C, (size_t)C * 4);
            at += (size_t)C * 4;
        }
    }
    int flat = (int)np;
    for (int s = 0; s < 2; s++)
        if (state[s]) {
            cJSON_AddItemToObject(root, state_name[s], tensor_entry(&flat, 1, at, at + np * 4));
            memcpy(data + at, state[s], np * 4);
            at += np * 4;
        }
    for (int e = 0; e < meta->nextra; e++) {
        const ckpt_tensor_t *t = &meta->extra[e];
        int shape[2] = { (int)t->rows, (int)t->cols };
        size_t bytes = (size_t)(t->rows ? t->rows : 1) * (size_t)t->cols * (t->data64 ? 8 : 4);
        cJSON *te = t->rows ? tensor_entry(shape, 2, at, at + bytes) : tensor_entry(shape + 1, 1, at, at + bytes);
        if (t->data64) cJSON_ReplaceItemInObject(te, "dtype", cJSON_CreateString("F64"));
        cJSON_AddItemToObject(root, t->name, te);
        if (t->data64) memcpy(data + at, t->data64, bytes);
        else memcpy(data + at, t->data, bytes);
        at += bytes;
    }
    char shape[64];
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
    if (meta->sync_state[0]) add_str(md, "sync_state", meta->sync_state);
    add_str(md, "crc32", "00000000");   /* filled in below, once the file is laid out */
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
    size_t hex = crc_hex_at(file, padded);
    if (!hex) die("checkpoint header of '%s' lacks a unique crc32 field (a defect)", path);
    char crcs[16];
    snprintf(crcs, sizeof crcs, "%08lx", (unsigned long)file_crc(file, total, hex));
    memcpy(file + hex, crcs, 8);
    int rc = write_file_atomic(path, file, total);
    free(file);
    if (rc != 0) {
        snprintf(err, errlen, "cannot write checkpoint '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A metadata integer in [lo, hi]; -1 if absent, malformed or out of range. */
static int meta_long(const st_file_t *st, const char *key, long lo, long hi, long *out)
{
    const char *v = st_meta(st, key);
    long x;
    if (!v || parse_long(v, &x) != 0 || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* A metadata string that fits in len bytes (with its NUL). */
static int meta_copy(const st_file_t *st, const char *key, char *out, size_t len, int required)
{
    const char *v = st_meta(st, key);
    if (!v) { out[0] = 0; return required ? -1 : 0; }
    if (strlen(v) >= len || (required && !*v)) return -1;
    memcpy(out, v, strlen(v) + 1);
    return 0;
}

/* "C,H,W", each 1..4096. */
static int parse_input(const char *s, ckpt_meta_t *m)
{
    char buf[64];
    long v[3];
    if (!s || strlen(s) >= sizeof buf) return -1;
    memcpy(buf, s, strlen(s) + 1);
    char *p = buf;
    for (int i = 0; i < 3; i++) {
        char *comma = strchr(p, ',');
        if ((i < 2) != (comma != NULL)) return -1;
        if (comma) *comma = 0;
        if (parse_long(p, &v[i]) != 0 || v[i] < 1 || v[i] > 4096) return -1;
        if (comma) p = comma + 1;
    }
    m->c = (int)v[0]; m->h = (int)v[1]; m->w = (int)v[2];
    return 0;
}

static int is_crc_text(const char *s)
{
    if (!s || strlen(s) != 8) return 0;
    for (; *s; s++) if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

/* What every value of tensor name is if it cannot be negative (a variance,
 * a sum of squares), or NULL. A negative one is no state a run reaches, and
 * its square root is a NaN that a ReLU downstream hides (the accuracy looks
 * ordinary). */
static const char *nonneg_tensor(const char *name)
{
    static const char VAR[] = ".running_var";
    size_t len = strlen(name), k = sizeof VAR - 1;
    if (len > k && !strcmp(name + len - k, VAR)) return "a running variance";
    if (!strcmp(name, "optim.accum") || !strcmp(name, "sync.worker_accum")) return "a sum of squared gradients";
    return NULL;
}

/* 1 if no value of x[0..n) is negative (a NaN is not) */
static int all_nonneg(const float *x, size_t n)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= !(x[i] < 0);
    return ok;
}

/* Every value of t finite (and not negative where nonneg_tensor names it);
 * -1 with a line naming the tensor, the index and the value. The values
 * are copied out in blocks (tensors need not be aligned), each checked
 * whole; only a block that fails is searched for the index. */
static int tensor_values_ok(const ckpt_t *ck, const st_tensor_t *t, const char *path, char *err, size_t errlen)
{
    const unsigned char *p = ck->buf + ck->st.data_off + t->begin;
    const size_t w = strcmp(t->dtype, "F64") ? 4 : 8;
    const char *nonneg = w == 4 ? nonneg_tensor(t->name) : NULL;
    for (uint64_t at = 0; at < t->count; at += 512) {
        float fb[512];
        double db[512];
        size_t k = t->count - at < 512 ? (size_t)(t->count - at) : 512;
        memcpy(w == 4 ? (void *)fb : (void *)db, p + at * w, k * w);
        if (w == 4 ? all_finite(fb, k) && (!nonneg || all_nonneg(fb, k)) : all_finite64(db, k)) continue;
        for (size_t j = 0; j < k; j++) {
            double v = w == 4 ? fb[j] : db[j];
            if (!isfinite(v)) {
                snprintf(err, errlen, "checkpoint '%s' holds NaN or infinite values in '%s' (index %llu is %g; written by a run that diverged); use an earlier checkpoint",
                         path, t->name, (unsigned long long)(at + j), v);
                return -1;
            }
            if (nonneg && v < 0) {
                snprintf(err, errlen, "checkpoint '%s' holds %g at index %llu of '%s', %s, which cannot be negative; the file was altered or damaged: use another checkpoint",
                         path, v, (unsigned long long)(at + j), t->name, nonneg);
                return -1;
            }
        }
    }
    return 0;
}

int ckpt_parse(ckpt_t *ck, unsigned char *buf, size_t size, const char *path, char *err, size_t errlen)
{
    memset(ck, 0, sizeof *ck);
    ck->buf = buf;
    ck->size = size;
#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); ckpt_free(ck); return -1; } while (0)
    char why[300];
    if (size < 8) FAIL("checkpoint '%s' is truncated (%zu bytes); it is not usable", path, size);
    if (st_parse(buf, size, &ck->st, why, sizeof why) != 0) FAIL("checkpoint '%s' is corrupt: %s", path, why);
    const st_file_t *st = &ck->st;
    const char *fmt = st_meta(st, "format");
    if (!fmt || strcmp(fmt, "dsgd")) FAIL("'%s' is a safetensors file but not a dsgd checkpoint (no dsgd metadata)", path);
    const char *ver = st_meta(st, "version");
    if (!ver || (strcmp(ver, "1") && strcmp(ver, "2")))
        FAIL("checkpoint '%s' has format version %.20s; this dsgd reads versions 1 and %d", path, ver ? ver : "?", CKPT_VERSION);
    /* the CRC before the values: a damaged file is named as such */
    const char *crcs = st_meta(st, "crc32");
    if (!is_crc_text(crcs)) FAIL("checkpoint '%s' has no valid crc32 in its metadata", path);
    uLong crc;
    if (!strcmp(ver, "1")) {   /* version 1: the data section only */
        crc = crc_more(crc32(0L, Z_NULL, 0), buf + ck->st.data_off, ck->st.data_len);
    } else {
        size_t hex = crc_hex_at(buf, ck->st.header_len);
        if (!hex) FAIL("checkpoint '%s' is corrupt: its header does not hold the crc32 field once", path);
        crc = file_crc(buf, size, hex);
    }
    char want[16];
    snprintf(want, sizeof want, "%08lx", (unsigned long)crc);
    if (strcmp(want, crcs)) FAIL("checkpoint '%s' is corrupt: CRC32 of the file is %s, header says %s", path, want, crcs);
    ckpt_meta_t *m = &ck->meta;
    long classes, nparams;
    if (meta_copy(st, "model", m->model, sizeof m->model, 1) != 0) FAIL("checkpoint '%s': metadata 'model' is missing or too long", path);
    if (parse_input(st_meta(st, "input"), m) != 0) FAIL("checkpoint '%s': metadata 'input' is not C,H,W with each in 1..4096", path);
    if (meta_long(st, "classes", 2, 1000000, &classes) != 0) FAIL("checkpoint '%s': metadata 'classes' is not in 2..1000000", path);
    if (meta_long(st, "step", 0, 1000000000000L, &m->step) != 0) FAIL("checkpoint '%s': metadata 'step' is not in 0..1e12", path);
    if (meta_long(st, "nparams", 1, 1L << 40, &nparams) != 0) FAIL("checkpoint '%s': metadata 'nparams' is not a positive count", path);
    if (meta_copy(st, "sync", m->sync, sizeof m->sync, 0) != 0 || meta_copy(st, "optimizer", m->optimizer, sizeof m->optimizer, 0) != 0 ||
        meta_copy(st, "sync_state", m->sync_state, sizeof m->sync_state, 0) != 0)
        FAIL("checkpoint '%s': metadata 'sync', 'optimizer' or 'sync_state' is too long", path);
    if (st_meta(st, "seed") && meta_long(st, "seed", LONG_MIN, LONG_MAX, &m->seed) != 0)
        FAIL("checkpoint '%s': metadata 'seed' is not an integer", path);
    m->classes = (int)classes;
    uint64_t layer_floats = 0;
    for (int i = 0; i < st->ntensors; i++) {
        const st_tensor_t *t = &st->tensors[i];
        if (strcmp(t->dtype, "F32") && (strcmp(t->dtype, "F64") || strncmp(t->name, "sync.", 5)))
            FAIL("checkpoint '%s': tensor '%s' is %s; dsgd checkpoints hold F32 (and F64 only in sync.* tensors)", path, t->name, t->dtype);
        if (ckpt_is_param(t->name)) layer_floats += t->count;
    }
    if (layer_floats != (uint64_t)nparams)
        FAIL("checkpoint '%s': metadata 'nparams' says %ld but its layer tensors hold %llu parameters", path,
             nparams, (unsigned long long)layer_floats);
    for (int i = 0; i < st->ntensors; i++)
        if (tensor_values_ok(ck, &st->tensors[i], path, err, errlen) != 0) { ckpt_free(ck); return -1; }
    return 0;
#undef FAIL
}

int ckpt_load(const char *path, ckpt_t *ck, char *err, size_t errlen)
{
    memset(ck, 0, sizeof *ck);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno)); return -1; }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        snprintf(err, errlen, "checkpoint '%s' is not a regular file", path);
        return -1;
    }
    size_t size = (size_t)sb.st_size, got = 0;
    unsigned char *buf = xmalloc(size + 1);
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    int e = errno;
    close(fd);
    if (got != size) {
        free(buf);
        snprintf(err, errlen, "cannot read checkpoint '%s': %s", path, got < size ? "file shrank while being read" : strerror(e));
        return -1;
    }
    return ckpt_parse(ck, buf, size, path, err, errlen);
}

int ckpt_read_tensor(const ckpt_t *ck, const char *name, float *dst, size_t count)
{
    const st_tensor_t *t = st_find(&ck->st, name);
    if (!t || t->count != count || strcmp(t->dtype, "F32")) return -1;
    memcpy(dst, ck->buf + ck->st.data_off + t->begin, count * sizeof(float));
    return 0;
}

int ckpt_read_row(const ckpt_t *ck, const char *name, long row, float *dst, size_t cols)
{
    const st_tensor_t *t = st_find(&ck->st, name);
    if (!t || t->ndim != 2 || strcmp(t->dtype, "F32") || t->shape[1] != cols || row < 0 || (uint64_t)row >= t->shape[0]) return -1;
    memcpy(dst, ck->buf + ck->st.data_off + t->begin + (size_t)row * cols * sizeof(float), cols * sizeof(float));
    return 0;
}

int ckpt_read_row64(const ckpt_t *ck, const char *name, long row, double *dst, size_t cols)
{
    const st_tensor_t *t = st_find(&ck->st, name);
    if (!t || t->ndim != 2 || strcmp(t->dtype, "F64") || t->shape[1] != cols || row < 0 || (uint64_t)row >= t->shape[0]) return -1;
    memcpy(dst, ck->buf + ck->st.data_off + t->begin + (size_t)row * cols * sizeof(double), cols * sizeof(double));
    for (size_t i = 0; i < cols; i++) if (!isfinite(dst[i])) return -1;
    return 0;
}

int ckpt_state_write(char *out, size_t len, int n, const ckpt_key_t keys[], const long vals[])
{
    size_t at = 0;
    if (len) out[0] = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(out + at, len - at, "%s%s=%ld", i ? "," : "", keys[i].name, vals[i]);
        if (w < 0 || (size_t)w >= len - at) return -1;
        at += (size_t)w;
    }
    return 0;
}

int ckpt_state_read(const char *text, int n, const ckpt_key_t keys[], long vals[])
{
    char seen[64] = { 0 }, buf[256];
    if (n < 1 || n > 64 || strlen(text) >= sizeof buf) return -1;
    memcpy(buf, text, strlen(text) + 1);
    int got = 0;
    for (char *save = NULL, *pair = strtok_r(buf, ",", &save); pair; pair = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(pair, '=');
        if (!eq) return -1;
        *eq = 0;
        int k = 0;
        while (k < n && strcmp(pair, keys[k].name)) k++;
        if (k == n || seen[k] || parse_long(eq + 1, &vals[k]) != 0 || vals[k] < keys[k].min || vals[k] > keys[k].max) return -1;
        seen[k] = 1;
        got++;
    }
    /* strtok_r skips empty fields: ",," or a trailing comma must not pass */
    size_t L = strlen(text);
    if (L == 0 || text[0] == ',' || text[L - 1] == ',' || strstr(text, ",,")) return -1;
    return got == n ? 0 : -1;
}

void ckpt_free(ckpt_t *ck)
{
    st_free(&ck->st);
    free(ck->buf);
    memset(ck, 0, sizeof *ck);
}
