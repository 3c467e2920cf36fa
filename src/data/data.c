/* Dataset selection, synthetic data, partitions and the minibatch iterator. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "../util/par.h"

#include "../util/sim.h"

#define DEBIAN_DATASETS "/usr/share/datasets"

void dataset_free(dataset_t *d)
{
    if (!d->shared) {
        free(d->px);
        free(d->xf);
        free(d->y);
    }
    memset(d, 0, sizeof *d);
}

void dataset_truncate(dataset_t *d, long n)
{
    if (n > 0 && n < d->n) d->n = n;
}

/* Bytes to floats, each loader's way (data.h); one pass that vectorizes,
 * built for x86-64-v3 and the baseline: IEEE division and multiplication
 * give the same bits at every vector width. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define PX_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define PX_CLONES
#endif
PX_CLONES static void px_multiply(float *out, const uint8_t *p, size_t n)
{
    for (size_t j = 0; j < n; j++) out[j] = (float)p[j] * (1.0f / 255.0f);
}
PX_CLONES static void px_divide(float *out, const uint8_t *p, size_t n)
{
    for (size_t j = 0; j < n; j++) out[j] = (float)p[j] / 255.0f;
}

float dataset_px_value(const dataset_t *d, uint8_t v)
{
    float x;
    if (d->px_div) px_divide(&x, &v, 1);
    else px_multiply(&x, &v, 1);
    return x;
}

void dataset_rows(const dataset_t *d, long first, long count, float *out)
{
    const size_t len = (size_t)count * (size_t)dataset_dim(d);
    if (!d->px) {
        memcpy(out, d->xf + (size_t)first * (size_t)dataset_dim(d), sizeof(float) * len);
        return;
    }
    const uint8_t *p = d->px + (size_t)first * (size_t)dataset_dim(d);
    if (d->px_div) px_divide(out, p, len);
    else px_multiply(out, p, len);
}

void dataset_row(const dataset_t *d, long s, float *out)
{
    dataset_rows(d, s, 1, out);
}

/* Path of NAME or NAME.gz inside dir, whichever exists. */
static int find_idx(const char *dir, const char *name, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", dir, name);
    if (file_exists(out)) return 0;
    snprintf(out, outlen, "%s/%s.gz", dir, name);
    return file_exists(out) ? 0 : -1;
}

static const char *const IDX_NAMES[4] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };

static int load_idx_dir(const char *dir, dataset_t *train, dataset_t *test, char *err, size_t errlen)
{
    char p[4][4096];
    for (int i = 0; i < 4; i++)
        if (find_idx(dir, IDX_NAMES[i], p[i], sizeof p[i]) != 0) {
            snprintf(err, errlen, "data directory '%s' has no %s[.gz]; it needs the four MNIST-format IDX files", dir, IDX_NAMES[i]);
            return -1;
        }
    if (idx_load_pair(p[0], p[1], train, err, errlen) != 0) return -1;
    if (idx_load_pair(p[2], p[3], test, err, errlen) != 0) { dataset_free(train); return -1; }
    if (train->h != test->h || train->w != test->w) {
        snprintf(err, errlen, "training images are %dx%d but test images are %dx%d in '%s'",
                 train->h, train->w, test->h, test->w, dir);
        dataset_free(train); dataset_free(test);
        return -1;
    }
    int k = train->classes > test->classes ? train->classes : test->classes;
    if (k < 2) {
        snprintf(err, errlen, "labels in '%s' name fewer than 2 classes", dir);
        dataset_free(train); dataset_free(test);
        return -1;
    }
    train->classes = test->classes = k;
    return 0;
}

/* CIFAR-10's binary version: five training batches and a test batch. */
enum { CIFAR_TRAIN_BATCHES = 5 };

/* "data_batch_I.bin" for each I in have[] equal to want, as "a, b and c". */
static void cifar_list(const int *have, int want, char *out, size_t len)
{
    int total = 0, done = 0;
    for (int i = 0; i < CIFAR_TRAIN_BATCHES; i++) total += have[i] == want;
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < CIFAR_TRAIN_BATCHES && at < len; i++) {
        if (have[i] != want) continue;
        done++;
        at += (size_t)snprintf(out + at, len - at, "%sdata_batch_%d.bin", done == 1 ? "" : done == total ? " and " : ", ", i + 1);
    }
}

static int load_cifar_dir(const char *dir, int flags, dataset_t *train, dataset_t *test, char *err, size_t errlen)
{
    char buf[CIFAR_TRAIN_BATCHES + 1][4096];
    const char *paths[CIFAR_TRAIN_BATCHES];
    int have[CIFAR_TRAIN_BATCHES], n = 0;
    for (int i = 0; i < CIFAR_TRAIN_BATCHES; i++) {
        snprintf(buf[n], sizeof buf[n], "%s/data_batch_%d.bin", dir, i + 1);
        have[i] = file_exists(buf[n]);
        if (have[i]) { paths[n] = buf[n]; n++; }
    }
    char found[128], missing[128];
    cifar_list(have, 1, found, sizeof found);
    cifar_list(have, 0, missing, sizeof missing);
    snprintf(buf[CIFAR_TRAIN_BATCHES], sizeof buf[CIFAR_TRAIN_BATCHES], "%s/test_batch.bin", dir);
    if (!file_exists(buf[CIFAR_TRAIN_BATCHES])) {
        snprintf(err, errlen, "CIFAR-10 directory '%s' has %s but no test_batch.bin; add it (CIFAR-10's binary version: "
                 "data_batch_1.bin ... data_batch_5.bin and test_batch.bin)", dir, n ? found : "no data_batch_N.bin");
        return -1;
    }
    if (n == 0) {
        snprintf(err, errlen, "CIFAR-10 directory '%s' has test_batch.bin but none of data_batch_1.bin ... data_batch_5.bin "
                 "to train on; add them", dir);
        return -1;
    }
    if (n < CIFAR_TRAIN_BATCHES && !(flags & DATA_PARTIAL)) {
        snprintf(err, errlen, "CIFAR-10 directory '%s' has %s and test_batch.bin but not %s (%d of the %d training batches); "
                 "add the missing files, or pass --data-partial to train on what is there",
                 dir, found, missing, n, CIFAR_TRAIN_BATCHES);
        return -1;
    }
    if (cifar_load_files(paths, n, train, err, errlen) != 0) return -1;
    const char *tp[1] = { buf[CIFAR_TRAIN_BATCHES] };
    if (cifar_load_files(tp, 1, test, err, errlen) != 0) { dataset_free(train); return -1; }
    if (n < CIFAR_TRAIN_BATCHES)
        snprintf(train->note, sizeof train->note, "a partial CIFAR-10 set (--data-partial): %s of the %d training batches, without %s",
                 found, CIFAR_TRAIN_BATCHES, missing);
    return 0;
}

/* Which format a data directory holds, from the names of its files. */
static int has_cifar(const char *dir)
{
    char p[4200];
    for (int i = 0; i <= CIFAR_TRAIN_BATCHES; i++) {
        if (i < CIFAR_TRAIN_BATCHES) snprintf(p, sizeof p, "%s/data_batch_%d.bin", dir, i + 1);
        else snprintf(p, sizeof p, "%s/test_batch.bin", dir);
        if (file_exists(p)) return 1;
    }
    return 0;
}

static int has_idx(const char *dir)
{
    char p[4200];
    for (int i = 0; i < 4; i++)
        if (find_idx(dir, IDX_NAMES[i], p, sizeof p) == 0) return 1;
    return 0;
}

void dataset_synthetic(dataset_t *train, dataset_t *test, long n, int c, int h, int w, uint64_t seed)
{
    enum { K = 4 };
    const long D = (long)c * h * w;
    rng_t r;
    rng_seed(&r, seed, 0x5e7);
    float *proto = xalloc_floats((size_t)(K * D));   /* (K, D) */
    for (long j = 0; j < K * D; j++) proto[j] = (float)rng_uniform(&r);
    dataset_t *sets[2] = { train, test };
    long sizes[2] = { n, n / 4 > 64 ? n / 4 : 64 };
    for (int s = 0; s < 2; s++) {
        dataset_t *d = sets[s];
        d->n = sizes[s]; d->c = c; d->h = h; d->w = w; d->classes = K;
        d->xf = xalloc_floats((size_t)(d->n * D));
        d->y = xmalloc((size_t)d->n);
        for (long i = 0; i < d->n; i++) {
            int k = (int)rng_below(&r, K);
            d->y[i] = (uint8_t)k;
            for (long j = 0; j < D; j++) {
                float v = proto[k * D + j] + 0.35f * rng_normal(&r);
                d->xf[i * D + j] = v < 0 ? 0 : v > 1 ? 1 : v;
            }
        }
    }
    free(proto);
}

/* "synthetic", "synthetic:N" or "synthetic:N,CxHxW"; -1 with err set. */
static int synthetic_parse(const char *spec, long *n, int *c, int *h, int *w, char *err, size_t errlen)
{
    static const char WANT[] = "want synthetic[:N[,CxHxW]] with 16 <= N <= 10000000 and each of C, H, W in [1, 4096], e.g. synthetic:1024,3x64x64";
    *n = 4096; *c = 1; *h = 8; *w = 8;
    if (spec[9] == 0) return 0;
    char buf[64];
    if (strlen(spec + 10) >= sizeof buf) { snprintf(err, errlen, "--data %s: too long; %s", spec, WANT); return -1; }
    strcpy(buf, spec + 10);
    char *shape = strchr(buf, ',');
    if (shape) *shape++ = 0;
    if (parse_long(buf, n) != 0 || *n < 16 || *n > 10000000) {
        snprintf(err, errlen, "bad synthetic size in '%s' (%s)", spec, WANT);
        return -1;
    }
    if (!shape) return 0;
    long dims[3];
    int nd = 0;
    for (char *q = shape, *tok; (tok = strsep(&q, "x")) != NULL;) {
        if (nd == 3 || parse_long(tok, &dims[nd]) != 0 || dims[nd] < 1 || dims[nd] > 4096) nd = 4;
        if (nd == 4) break;
        nd++;
    }
    if (nd != 3) { snprintf(err, errlen, "bad synthetic image shape in '%s' (%s)", spec, WANT); return -1; }
    /* the train set and a quarter of it for the test set, as floats */
    if ((double)(*n + *n / 4 + 64) * (double)(dims[0] * dims[1] * dims[2]) > 2e9) {
        snprintf(err, errlen, "--data %s: %.3g floats of images are too many (at most 2e9, 8 GB); use fewer or smaller images",
                 spec, (double)(*n + *n / 4 + 64) * (double)(dims[0] * dims[1] * dims[2]));
        return -1;
    }
    *c = (int)dims[0]; *h = (int)dims[1]; *w = (int)dims[2];
    return 0;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int dataset_load_own(const char *spec, int flags, dataset_t *train, dataset_t *test, char *err, size_t errlen)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!strncmp(spec, "synthetic", 9) && (spec[9] == 0 || spec[9] == ':')) {
        long n;
        int c, h, w;
        if (synthetic_parse(spec, &n, &c, &h, &w, err, errlen) != 0) return -1;
        dataset_synthetic(train, test, n, c, h, w, 0xda7a);
        return 0;
    }
    char dir[4096];
    if (!strcmp(spec, "fashion-mnist") || !strcmp(spec, "mnist")) {
        snprintf(dir, sizeof dir, "%s/%s", DEBIAN_DATASETS, spec);
        if (!is_dir(dir) && !strcmp(spec, "mnist")) {
            /* Debian packages Fashion-MNIST but not MNIST */
            snprintf(err, errlen, "dataset 'mnist' not found in %s (no Debian package has it); put MNIST's four IDX files "
                     "(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
                     "t10k-labels-idx1-ubyte.gz) in a directory and pass --data DIR", dir);
            return -1;
        }
        if (!is_dir(dir)) {
            snprintf(err, errlen, "dataset '%s' not found in %s; install it (apt-get install dataset-%s) or pass --data DIR",
                     spec, dir, spec);
            return -1;
        }
    } else {
        snprintf(dir, sizeof dir, "%s", spec);
        if (!is_dir(dir)) {
            snprintf(err, errlen, "data directory '%s' does not exist; pass --data fashion-mnist, synthetic, or a directory of IDX or CIFAR-10 binary files", spec);
            return -1;
        }
    }
    if (has_cifar(dir)) return load_cifar_dir(dir, flags, train, test, err, errlen);
    if (has_idx(dir)) return load_idx_dir(dir, train, test, err, errlen);
    snprintf(err, errlen, "data directory '%s' holds no data set dsgd reads; put in it MNIST-format IDX files "
             "(train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each raw or .gz) "
             "or CIFAR-10's binary batches (data_batch_1.bin ... data_batch_5.bin, test_batch.bin), or pass --data fashion-mnist "
             "or synthetic", dir);
    return -1;
}

/* One load per spec and flags for the whole simulation: sim_shared_call
 * runs it for the first rank that asks and hands the same result to every
 * other rank (simulated ranks are threads of one process). Ranks only read
 * it. */
typedef struct shared_load {
    int rc;
    const char *spec;
    int flags;
    dataset_t train, test;
    char err[1024];
} shared_load_t;

static void *dataset_load_once(void *arg)
{
    const shared_load_t *in = arg;
    shared_load_t *s = xcalloc(1, sizeof *s);
    s->rc = dataset_load_own(in->spec, in->flags, &s->train, &s->test, s->err, sizeof s->err);
    s->train.shared = s->test.shared = 1;
    return s;
}

int dataset_load(const char *spec, int flags, dataset_t *train, dataset_t *test, char *err, size_t errlen)
{
    if (!sim_build()) return dataset_load_own(spec, flags, train, test, err, errlen);
    char key[4200];
    snprintf(key, sizeof key, "%d:%s", flags, spec);
    shared_load_t in = { .spec = spec, .flags = flags };
    const shared_load_t *s = sim_shared_call("dataset_load_once", key, dataset_load_once, &in);
    if (s->rc != 0) {
        memset(train, 0, sizeof *train);
        memset(test, 0, sizeof *test);
        snprintf(err, errlen, "%s", s->err);
        return -1;
    }
    *train = s->train;
    *test = s->test;
    return 0;
}

/* ---- partitions ---- */

int part_kind_parse(const char *s, part_kind_t *out)
{
    if (!strcmp(s, "iid") || !strcmp(s, "shard")) *out = PART_IID;
    else if (!strcmp(s, "full") || !strcmp(s, "selsync")) *out = PART_FULL;
    else if (!strcmp(s, "label-skew") || !strcmp(s, "noniid")) *out = PART_LABEL_SKEW;
    else return -1;
    return 0;
}

const char *part_kind_name(part_kind_t k)
{
    return k == PART_FULL ? "full" : k == PART_LABEL_SKEW ? "label-skew" : "iid";
}

int32_t *partition_indices(const dataset_t *d, part_kind_t kind, int rank, int size,
                           uint64_t seed, long *count)
{
    long n = d->n;
    int32_t *all = xmalloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    for (long i = 0; i < n; i++) all[i] = (int32_t)i;
    if (kind == PART_FULL) { *count = n; return all; }
    if (kind == PART_IID) {
        rng_t r;
        rng_seed(&r, seed, 0x9a47);  /* the same permutation on every rank */
        rng_shuffle(&r, all, (size_t)n);
    } else {
        /* counting sort by label: stable, so each rank gets whole classes where possible */
        long cnt[257] = { 0 };
        for (long i = 0; i < n; i++) cnt[d->y[i] + 1]++;
        for (int k = 0; k < 256; k++) cnt[k + 1] += cnt[k];
        int32_t *sorted = xmalloc(sizeof(int32_t) * (size_t)(n ? n : 1));
        for (long i = 0; i < n; i++) sorted[cnt[d->y[i]]++] = (int32_t)i;
        free(all);
        all = sorted;
    }
    long lo = n * rank / size, hi = n * (rank + 1) / size;
    int32_t *mine = xmalloc(sizeof(int32_t) * (size_t)(hi > lo ? hi - lo : 1));
    memcpy(mine, all + lo, sizeof(int32_t) * (size_t)(hi - lo));
    free(all);
    *count = hi - lo;
    return mine;
}

/* ---- iterator ---- */

batch_iter_t *batch_iter_create(const dataset_t *d, const int32_t *idx, long n, int B,
                                uint64_t seed, uint64_t stream)
{
    if (n < 1) die("a rank's data partition is empty; use fewer ranks or more data");
    batch_iter_t *it = xcalloc(1, sizeof *it);
    it->d = d; it->idx = idx; it->n = n; it->B = B; it->nb = B;
    it->seed = seed; it->stream = stream;
    it->order = xmalloc(sizeof(int32_t) * (size_t)n);
    it->x = xalloc_floats((size_t)B * (size_t)dataset_dim(d));
    it->y = xmalloc(sizeof(int32_t) * (size_t)B);
    it->pick = xmalloc(sizeof(int32_t) * (size_t)B);
    batch_iter_seek(it, 0);
    return it;
}

void batch_iter_free(batch_iter_t *it)
{
    if (!it) return;
    for (int c = 0; c < it->inj_nclass; c++) free(it->inj_pool[c]);
    free(it->inj_pool); free(it->inj_pool_n); free(it->inj_class);
    free(it->order); free(it->x); free(it->y); free(it->pick);
    free(it);
}

void batch_iter_inject(batch_iter_t *it, int k, int m)
{
    const dataset_t *d = it->d;
    int owned[256] = { 0 };
    for (long i = 0; i < it->n; i++) owned[d->y[it->idx[i]]] = 1;
    long count[256] = { 0 };
    for (long i = 0; i < d->n; i++) count[d->y[i]]++;
    it->inj_class = xcalloc(256, sizeof(int32_t));
    it->inj_pool = xcalloc(256, sizeof(int32_t *));
    it->inj_pool_n = xcalloc(256, sizeof(long));
    for (int c = 0; c < 256; c++) {
        if (owned[c] || !count[c]) continue;
        int j = it->inj_nclass++;
        it->inj_class[j] = c;
        it->inj_pool[j] = xmalloc(sizeof(int32_t) * (size_t)count[c]);
        for (long i = 0; i < d->n; i++) if (d->y[i] == c) it->inj_pool[j][it->inj_pool_n[j]++] = (int32_t)i;
    }
    it->inj_k = k < it->inj_nclass ? k : it->inj_nclass;
    it->inj_m = m;
    it->nb = it->B + it->inj_k * it->inj_m;
    free(it->x);
    free(it->y);
    it->x = xalloc_floats((size_t)it->nb * (size_t)dataset_dim(d));
    it->y = xmalloc(sizeof(int32_t) * (size_t)it->nb);
}

static void iter_shuffle_pass(batch_iter_t *it)
{
    rng_t r;
    rng_seed(&r, it->seed ^ (0x5bd1e995ULL * (uint64_t)(it->pass + 1)), 0xba7c0000ULL + it->stream);
    memcpy(it->order, it->idx, sizeof(int32_t) * (size_t)it->n);
    rng_shuffle(&r, it->order, (size_t)it->n);
}

void batch_iter_seek(batch_iter_t *it, long k)
{
    long at = k * it->B;
    it->pass = at / it->n;
    it->pos = at % it->n;
    iter_shuffle_pass(it);
}

enum { PICK_AHEAD = 4 };

/* ask for sample s's pixel row, a cache line at a time */
static void prefetch_row(const uint8_t *px, int32_t s, long dim)
{
    for (long o = 0; o < dim; o += 64) __builtin_prefetch(px + (size_t)s * (size_t)dim + (size_t)o);
}

void batch_iter_next(batch_iter_t *it)
{
    const long dim = dataset_dim(it->d);
    /* which samples, in order */
    for (int b = 0; b < it->B; b++) {
        if (it->pos == it->n) {
            it->pass++;
            it->pos = 0;
            iter_shuffle_pass(it);
        }
        it->pick[b] = it->order[it->pos++];
    }
    /* Their rows: each converted alone, the same bits on any thread. The
     * next batch's rows are scattered over the data set: each sample's
     * iteration also asks for the row the next batch has in its place (from
     * the same pass only), so they arrive while this batch is computed.
     * Asked for here, on the threads, not after the loop on this one: there
     * the mlp's 3 300 requests (batch 256) took 27 us, long enough for the
     * other threads to fall asleep before the next kernel (0.4 us now). */
    const uint8_t *px = it->d->px;
    const long next = it->pos;
    PAR_FOR_IF((long)it->B * dim >= PAR_MIN_FLOATS)
    for (int b = 0; b < it->B; b++) {
        const int32_t s = it->pick[b];
        if (px && b + PICK_AHEAD < it->B) prefetch_row(px, it->pick[b + PICK_AHEAD], dim);   /* several at once */
        dataset_row(it->d, s, it->x + (long)b * dim);
        it->y[b] = it->d->y[s];
        if (px && next + b < it->n) prefetch_row(px, it->order[next + b], dim);
    }
    if (!it->inj_k) return;
    /* the injected part depends only on (seed, stream, batch number) */
    long batch = (it->pass * it->n + it->pos) / it->B;
    rng_t r;
    rng_seed(&r, it->seed ^ 0x1a7ec7ULL, ((uint64_t)it->stream << 32) ^ (uint64_t)batch);
    int at = it->B, slot[256];
    for (int j = 0; j < it->inj_nclass; j++) slot[j] = j;
    for (int j = 0; j < it->inj_k; j++) {
        /* k distinct foreign classes: a partial Fisher-Yates over the slots */
        int pick = j + (int)rng_below(&r, (uint32_t)(it->inj_nclass - j));
        int c = slot[pick];
        slot[pick] = slot[j];
        slot[j] = c;
        for (int q = 0; q < it->inj_m; q++, at++) {
            int32_t s = it->inj_pool[c][rng_below(&r, (uint32_t)it->inj_pool_n[c])];
            dataset_row(it->d, s, it->x + (long)at * dim);
            it->y[at] = it->d->y[s];
        }
    }
}
