/* Loaders on crafted good and corrupt files, partitions and the iterator. */
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/augment.h"
#include "data/data.h"
#include "test.h"

static char dir[256];

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

/* Write an IDX file (images if h > 0, else labels) with n items; gz or raw;
 * (gz = 2: uncompressed deflate blocks); extra appends that many stray bytes. Returns the byte count written. */
static long write_idx(const char *name, uint32_t magic, uint32_t n, int h, int w, int gz, int extra)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    long hdr = h > 0 ? 16 : 8, body = h > 0 ? (long)n * h * w : n;
    unsigned char *buf = calloc(1, (size_t)(hdr + body + extra));
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    if (h > 0) { put_be32(buf + 8, (uint32_t)h); put_be32(buf + 12, (uint32_t)w); }
    for (long i = 0; i < body; i++) buf[hdr + i] = h > 0 ? (unsigned char)(i * 7) : (unsigned char)(i % 3);
    long len = hdr + body + extra;
    if (gz) {
        gzFile f = gzopen(path, gz == 2 ? "wb0" : "wb");   /* 2: stored blocks, so a flipped byte still decodes */
        gzwrite(f, buf, (unsigned)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, (size_t)len, f);
        fclose(f);
    }
    free(buf);
    return len;
}

static void clean_dir(void)
{
    static const char *names[] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                   "t10k-labels-idx1-ubyte", "a", "b", "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                   "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin" };
    char p[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]); unlink(p);
        snprintf(p, sizeof p, "%s/%s.gz", dir, names[i]); unlink(p);
    }
}

static int load_ab(dataset_t *d, char *err, size_t len)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    return idx_load_pair(a, b, d, err, len);
}

static void test_idx_good(void)
{
    for (int gz = 0; gz < 2; gz++) {
        clean_dir();
        write_idx("a", 0x803, 10, 8, 8, gz, 0);
        write_idx("b", 0x801, 10, 0, 0, gz, 0);
        dataset_t d;
        char err[512] = "";
        CHECK(load_ab(&d, err, sizeof err) == 0, "load (gz=%d): %s", gz, err);
        if (d.px) {
            float row[64];
            dataset_row(&d, 0, row);
            CHECK(d.n == 10 && d.c == 1 && d.h == 8 && d.w == 8 && d.classes == 3, "shape %ld %dx%dx%d k=%d", d.n, d.c, d.h, d.w, d.classes);
            CHECK_NEAR(row[5], (unsigned char)(5 * 7) / 255.0, 1e-7, "pixel 5 is x/255");
            CHECK(d.y[4] == 1, "label 4");
            dataset_free(&d);
        }
    }
}

/* A data set of 2 MB or more is read at random rows: its pixels sit on
 * 2 MB boundaries (where huge pages can back them), every row intact */
static void test_idx_large(void)
{
    for (int gz = 0; gz < 2; gz++) {
        clean_dir();
        const int n = 3000, h = 28, w = 28;   /* 2.35 MB of pixels */
        write_idx("a", 0x803, n, h, w, gz, 0);
        write_idx("b", 0x801, n, 0, 0, gz, 0);
        dataset_t d;
        char err[512] = "";
        CHECK(load_ab(&d, err, sizeof err) == 0, "load (gz=%d): %s", gz, err);
        if (!d.px) continue;
        CHECK(((uintptr_t)d.px & (((uintptr_t)2 << 20) - 1)) == 0, "pixels at %p, not on a 2 MB boundary", (void *)d.px);
        float row[28 * 28];
        const long last = (long)n - 1, at = last * h * w + 17;
        dataset_row(&d, last, row);
        CHECK_NEAR(row[17], (unsigned char)(at * 7) / 255.0, 1e-7, "the last row's pixel 17");
        CHECK(d.y[last] == last % 3, "the last label");
        dataset_free(&d);
    }
}

static void expect_error(const char *what, const char *needle)
{
    dataset_t d;
    char err[512] = "";
    int rc = load_ab(&d, err, sizeof err);
    CHECK(rc != 0, "%s: loaded a bad file", what);
    CHECK(strstr(err, needle) != NULL, "%s: error '%s' does not mention '%s'", what, err, needle);
    CHECK(strchr(err, '\n') == NULL, "%s: error is not one line", what);
    if (rc == 0) dataset_free(&d);
}

static void test_idx_corrupt(void)
{
    clean_dir();
    write_idx("a", 0x802, 10, 8, 8, 0, 0); write_idx("b", 0x801, 10, 0, 0, 0, 0);
    expect_error("wrong magic", "not an IDX image file");
    clean_dir();
    write_idx("a", 0x803, 10, 8, 8, 0, 0); write_idx("b", 0x801, 9, 0, 0, 0, 0);
    expect_error("count mismatch", "do not belong together");
    clean_dir();
    write_idx("a", 0x803, 10, 8, 8, 0, 5); write_idx("b", 0x801, 10, 0, 0, 0, 0);
    expect_error("extra bytes", "longer than its header");
    clean_dir();
    long len = write_idx("a", 0x803, 10, 8, 8, 0, 0); write_idx("b", 0x801, 10, 0, 0, 0, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/a", dir);
    CHECK(truncate(p, len - 30) == 0, "truncate");
    expect_error("truncated raw", "truncated");
    /* a gzip stream cut in half */
    clean_dir();
    write_idx("a", 0x803, 200, 8, 8, 1, 0); write_idx("b", 0x801, 200, 0, 0, 0, 0);
    FILE *f = fopen(p, "rb"); fseek(f, 0, SEEK_END); long gzlen = ftell(f); fclose(f);
    CHECK(truncate(p, gzlen / 2) == 0, "truncate gz");
    expect_error("truncated gz", "truncated");
    clean_dir();
    snprintf(p, sizeof p, "%s/a", dir);
    f = fopen(p, "wb"); fputs("IDX", f); fclose(f);
    write_idx("b", 0x801, 10, 0, 0, 0, 0);
    expect_error("3-byte file", "truncated");
}

static long file_len(const char *p)
{
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void flip_byte(const char *p, long at)
{
    FILE *f = fopen(p, "r+b");
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x20, f);
    fclose(f);
}

/* Defect 9: a .gz file must end with its trailer, whose CRC-32 and length
 * must match, and nothing but another gzip member may follow. */
static void test_idx_gzip_trailer(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/a", dir);
    for (int cut = 4; cut <= 8; cut += 4) {
        clean_dir();
        write_idx("a", 0x803, 50, 8, 8, 1, 0); write_idx("b", 0x801, 50, 0, 0, 0, 0);
        CHECK(truncate(p, file_len(p) - cut) == 0, "truncate");
        expect_error(cut == 4 ? "gzip without its length" : "gzip without its trailer", "truncated");
    }
    clean_dir();
    write_idx("a", 0x803, 50, 8, 8, 2, 0); write_idx("b", 0x801, 50, 0, 0, 0, 0);
    flip_byte(p, file_len(p) - 200);
    expect_error("flipped byte (trailer present)", "incorrect data check");
    CHECK(truncate(p, file_len(p) - 8) == 0, "truncate");
    expect_error("flipped byte, no trailer", "truncated");
    clean_dir();
    write_idx("a", 0x803, 50, 8, 8, 1, 0); write_idx("b", 0x801, 50, 0, 0, 0, 0);
    FILE *f = fopen(p, "ab"); fputs("garbage", f); fclose(f);
    expect_error("garbage after the stream", "follow the end");
    /* a header promising far more than the compressed bytes can hold is
     * refused before anything that large is allocated */
    clean_dir();
    unsigned char big[16];
    put_be32(big, 0x803); put_be32(big + 4, 100000000); put_be32(big + 8, 4096); put_be32(big + 12, 4096);
    gzFile h = gzopen(p, "wb"); gzwrite(h, big, sizeof big); gzclose(h);
    write_idx("b", 0x801, 50, 0, 0, 0, 0);
    expect_error("a .gz header promising 1.6e15 bytes", "can hold");
    /* two gzip members, as gzip itself concatenates them: one valid file */
    clean_dir();
    write_idx("a", 0x803, 50, 8, 8, 1, 0); write_idx("b", 0x801, 50, 0, 0, 0, 0);
    gzFile g = gzopen(p, "rb");
    unsigned char plain[16 + 50 * 64];
    CHECK(gzread(g, plain, sizeof plain) == (int)sizeof plain, "gzread");
    gzclose(g);
    g = gzopen(p, "wb"); gzwrite(g, plain, 100); gzclose(g);
    g = gzopen(p, "ab"); gzwrite(g, plain + 100, sizeof plain - 100); gzclose(g);
    dataset_t d;
    char err[512] = "";
    CHECK(load_ab(&d, err, sizeof err) == 0, "two gzip members: %s", err);
    if (!err[0]) dataset_free(&d);
}

static void test_dataset_load_dirs(void)
{
    dataset_t tr, te;
    char err[512] = "";
    CHECK(dataset_load("/nonexistent/dsgd-data", 0, &tr, &te, err, sizeof err) != 0 && strstr(err, "does not exist"), "%s", err);
    clean_dir();
    write_idx("train-images-idx3-ubyte.gz", 0x803, 20, 8, 8, 1, 0);
    write_idx("train-labels-idx1-ubyte.gz", 0x801, 20, 0, 0, 1, 0);
    write_idx("t10k-images-idx3-ubyte", 0x803, 6, 8, 8, 0, 0);
    CHECK(dataset_load(dir, 0, &tr, &te, err, sizeof err) != 0 && strstr(err, "t10k-labels-idx1-ubyte"), "missing file: %s", err);
    write_idx("t10k-labels-idx1-ubyte", 0x801, 6, 0, 0, 0, 0);
    int rc = dataset_load(dir, 0, &tr, &te, err, sizeof err);
    CHECK(rc == 0 && tr.n == 20 && te.n == 6 && tr.classes == 3, "mixed raw/gz dir: %s", err);
    if (rc == 0) { dataset_free(&tr); dataset_free(&te); }
    CHECK(dataset_load("synthetic:100", 0, &tr, &te, err, sizeof err) == 0 && tr.n == 100 && tr.h == 8, "synthetic");
    dataset_free(&tr); dataset_free(&te);
    CHECK(dataset_load("synthetic:abc", 0, &tr, &te, err, sizeof err) != 0, "bad synthetic size accepted");
    /* an image shape of one's choosing; the default shape draws the same data as before */
    dataset_t t2, e2;
    CHECK(dataset_load("synthetic:100,1x8x8", 0, &t2, &e2, err, sizeof err) == 0, "synthetic:100,1x8x8: %s", err);
    CHECK(dataset_load("synthetic:100", 0, &tr, &te, err, sizeof err) == 0, "synthetic:100: %s", err);
    CHECK(t2.n == tr.n && memcmp(t2.xf, tr.xf, sizeof(float) * 100 * 64) == 0 && memcmp(t2.y, tr.y, 100) == 0,
          "synthetic:100,1x8x8 differs from synthetic:100");
    dataset_free(&tr); dataset_free(&te); dataset_free(&t2); dataset_free(&e2);
    rc = dataset_load("synthetic:32,3x20x12", 0, &tr, &te, err, sizeof err);
    CHECK(rc == 0 && tr.n == 32 && tr.c == 3 && tr.h == 20 && tr.w == 12 && te.c == 3 && te.h == 20 && te.w == 12 &&
          tr.classes == 4, "synthetic:32,3x20x12: %s", err);
    if (rc == 0) {
        int in01 = 1;
        for (long i = 0; i < 32 * 720; i++) in01 &= tr.xf[i] >= 0 && tr.xf[i] <= 1;
        CHECK(in01, "synthetic pixels outside [0, 1]");
        dataset_free(&tr); dataset_free(&te);
    }
    static const char *bad[] = { "synthetic:100,3x20", "synthetic:100,3x20x0", "synthetic:100,3x20x12x2", "synthetic:100,",
                                 "synthetic:100,axbxc", "synthetic:100,1x5000x8", "synthetic:10000000,3x256x256" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(dataset_load(bad[i], 0, &tr, &te, err, sizeof err) != 0 && strstr(err, "synthetic") && !strchr(err, '\n'),
              "%s accepted or badly refused: %s", bad[i], err);
}

static void test_cifar(void)
{
    clean_dir();
    char p[512];
    unsigned char rec[3073];
    snprintf(p, sizeof p, "%s/data_batch_1.bin", dir);
    FILE *f = fopen(p, "wb");
    for (int r = 0; r < 3; r++) {
        rec[0] = (unsigned char)(r + 7);
        for (int j = 1; j < 3073; j++) rec[j] = (unsigned char)(j + r);
        fwrite(rec, 1, sizeof rec, f);
    }
    fclose(f);
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    f = fopen(p, "wb"); fwrite(rec, 1, sizeof rec, f); fclose(f);
    dataset_t tr, te;
    char err[512] = "";
    /* one training batch of five: refused in one line naming what is there,
     * what is not and the flag (it trained on a fifth of CIFAR-10, silently) */
    CHECK(dataset_load(dir, 0, &tr, &te, err, sizeof err) != 0 && strstr(err, "has data_batch_1.bin and test_batch.bin") &&
          strstr(err, "not data_batch_2.bin, data_batch_3.bin, data_batch_4.bin and data_batch_5.bin") &&
          strstr(err, "--data-partial") && !strchr(err, '\n'), "a partial CIFAR-10 set accepted or badly refused: %s", err);
    int rc = dataset_load(dir, DATA_PARTIAL, &tr, &te, err, sizeof err);
    CHECK(rc == 0, "cifar: %s", err);
    if (rc == 0) {
        CHECK(strstr(tr.note, "data_batch_1.bin of the 5") && strstr(tr.note, "without data_batch_2.bin"),
              "a partial set does not say what it lacks: '%s'", tr.note);
        CHECK(tr.n == 3 && te.n == 1 && tr.c == 3 && tr.h == 32 && tr.y[2] == 9, "cifar shape/labels");
        float row[3072];
        dataset_row(&tr, 1, row);
        CHECK_NEAR(row[0], (unsigned char)(1 + 1) / 255.0, 1e-7, "cifar pixel");
        /* bit for bit what the CIFAR loader produced when it stored floats: x / 255.0f */
        int same = 1;
        for (int j = 0; j < 3072; j++) {
            float want = (unsigned char)(j + 1 + 1) / 255.0f;
            same &= !memcmp(&row[j], &want, sizeof want);
        }
        CHECK(same, "a CIFAR row converted per batch differs from x / 255.0f");
        dataset_free(&tr); dataset_free(&te);
    }
    /* the whole set: no note */
    for (int i = 2; i <= 5; i++) {
        char b[512];
        snprintf(b, sizeof b, "%s/data_batch_%d.bin", dir, i);
        FILE *g = fopen(b, "wb"); fwrite(rec, 1, sizeof rec, g); fclose(g);
    }
    rc = dataset_load(dir, 0, &tr, &te, err, sizeof err);
    CHECK(rc == 0 && tr.n == 7 && !tr.note[0], "five CIFAR-10 batches: %s", rc ? err : tr.note);
    if (rc == 0) { dataset_free(&tr); dataset_free(&te); }
    /* batch 1 missing is a CIFAR-10 set too (it was read as IDX files) */
    snprintf(p, sizeof p, "%s/data_batch_1.bin", dir);
    unlink(p);
    CHECK(dataset_load(dir, 0, &tr, &te, err, sizeof err) != 0 && strstr(err, "not data_batch_1.bin"), "batch 1 missing: %s", err);
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    f = fopen(p, "ab"); fputc(1, f); fclose(f);
    CHECK(dataset_load(dir, DATA_PARTIAL, &tr, &te, err, sizeof err) != 0 && strstr(err, "not a CIFAR-10"), "odd-sized cifar: %s", err);
    unlink(p);
    CHECK(dataset_load(dir, DATA_PARTIAL, &tr, &te, err, sizeof err) != 0 && strstr(err, "no test_batch.bin"), "no test batch: %s", err);
    /* an empty directory: the error names every format, in one line */
    clean_dir();
    CHECK(dataset_load(dir, 0, &tr, &te, err, sizeof err) != 0 && strstr(err, "train-images-idx3-ubyte") && strstr(err, ".gz") &&
          strstr(err, "data_batch_1.bin") && strstr(err, "test_batch.bin") && !strchr(err, '\n'),
          "an empty directory's error does not name every format: %s", err);
}

static void test_partitions(void)
{
    dataset_t tr, te;
    char err[256];
    dataset_load("synthetic:1003", 0, &tr, &te, err, sizeof err);
    int seen[1003] = { 0 };
    long minc = 1 << 30, maxc = 0;
    for (int r = 0; r < 4; r++) {
        long n;
        int32_t *p = partition_indices(&tr, PART_IID, r, 4, 5, &n);
        for (long i = 0; i < n; i++) seen[p[i]]++;
        if (n < minc) minc = n;
        if (n > maxc) maxc = n;
        free(p);
    }
    int ok = 1;
    for (int i = 0; i < 1003; i++) ok &= seen[i] == 1;
    CHECK(ok, "IID shards are not a disjoint cover");
    CHECK(maxc - minc <= 1, "IID shard sizes %ld..%ld", minc, maxc);
    /* label skew: 4 balanced-ish classes over 4 ranks: each rank's labels span a contiguous range */
    for (int r = 0; r < 4; r++) {
        long n;
        int32_t *p = partition_indices(&tr, PART_LABEL_SKEW, r, 4, 5, &n);
        int lo = 255, hi = 0;
        for (long i = 0; i < n; i++) { if (tr.y[p[i]] < lo) lo = tr.y[p[i]]; if (tr.y[p[i]] > hi) hi = tr.y[p[i]]; }
        for (long i = 1; i < n; i++) ok &= tr.y[p[i]] >= tr.y[p[i - 1]];
        CHECK(hi - lo <= 1, "label-skew rank %d holds labels %d..%d", r, lo, hi);
        free(p);
    }
    CHECK(ok, "label-skew partition is not sorted by label");
    long n;
    int32_t *p = partition_indices(&tr, PART_FULL, 2, 4, 5, &n);
    CHECK(n == tr.n, "full partition has %ld of %ld", n, tr.n);
    free(p);
    dataset_free(&tr); dataset_free(&te);
}

static void test_iterator(void)
{
    dataset_t tr, te;
    char err[256];
    dataset_load("synthetic:96", 0, &tr, &te, err, sizeof err);
    int32_t idx[96];
    for (int i = 0; i < 96; i++) idx[i] = i;
    batch_iter_t *a = batch_iter_create(&tr, idx, 96, 8, 3, 0), *b = batch_iter_create(&tr, idx, 96, 8, 3, 0);
    /* one pass (12 batches) visits every sample exactly once */
    int count[96] = { 0 };
    for (int k = 0; k < 12; k++) {
        batch_iter_next(a);
        for (int j = 0; j < 8; j++) {
            for (int i = 0; i < 96; i++)
                if (!memcmp(a->x + j * 64, tr.xf + i * 64, sizeof(float) * 64)) { count[i]++; break; }
        }
    }
    int once = 1;
    for (int i = 0; i < 96; i++) once &= count[i] == 1;
    CHECK(once, "a pass does not visit every sample exactly once");
    /* seek(k) lands where k draws land, across a pass boundary */
    for (int k = 0; k < 5; k++) batch_iter_next(a);   /* 17 drawn */
    batch_iter_seek(b, 16);
    batch_iter_next(b);
    CHECK(!memcmp(a->x, b->x, sizeof(float) * 8 * 64) && !memcmp(a->y, b->y, sizeof(int32_t) * 8), "seek(16)+next != 17 draws");
    batch_iter_t *c = batch_iter_create(&tr, idx, 96, 8, 3, 1);
    batch_iter_seek(b, 0); batch_iter_next(b); batch_iter_next(c);
    CHECK(memcmp(b->y, c->y, sizeof(int32_t) * 8) || memcmp(b->x, c->x, sizeof(float) * 64), "two ranks draw identical batches");
    batch_iter_free(a); batch_iter_free(b); batch_iter_free(c);
    dataset_free(&tr); dataset_free(&te);
}

static void test_injection(void)
{
    dataset_t tr, te;
    char err[256];
    dataset_load("synthetic:400", 0, &tr, &te, err, sizeof err);
    long n;
    int32_t *p = partition_indices(&tr, PART_LABEL_SKEW, 0, 4, 5, &n);  /* rank 0 owns class 0 (and maybe 1) */
    int owned[4] = { 0 };
    for (long i = 0; i < n; i++) owned[tr.y[p[i]]] = 1;
    batch_iter_t *a = batch_iter_create(&tr, p, n, 8, 3, 0), *b = batch_iter_create(&tr, p, n, 8, 3, 0);
    batch_iter_inject(a, 2, 3);
    batch_iter_inject(b, 2, 3);
    CHECK(a->nb == 8 + 2 * 3, "batch of %d, want 14", a->nb);
    int foreign_ok = 1, own_ok = 1;
    for (int k = 0; k < 5; k++) {
        batch_iter_next(a);
        for (int j = 0; j < 8; j++) own_ok &= owned[a->y[j]];
        for (int j = 8; j < 14; j++) foreign_ok &= !owned[a->y[j]];
    }
    CHECK(own_ok, "the regular part of a batch holds a class the rank does not own");
    CHECK(foreign_ok, "an injected sample is of a class the rank owns");
    batch_iter_seek(b, 4);
    batch_iter_next(b);
    CHECK(!memcmp(a->y, b->y, sizeof(int32_t) * 14) && !memcmp(a->x, b->x, sizeof(float) * 14 * 64),
          "injection after seek(4) differs from the 5th batch");
    batch_iter_free(a); batch_iter_free(b);
    free(p);
    dataset_free(&tr); dataset_free(&te);
}

/* Pixels are stored as bytes and converted when a batch is gathered; the
 * floats must be bit for bit those the IDX loader stored before, x * (1/255),
 * or every run's results would shift. Fashion-MNIST-like: 28x28, every byte
 * value present, batches drawn by the iterator and by the evaluator's rows. */
static void test_bytes_convert_exactly(void)
{
    clean_dir();
    enum { N = 40, D = 28 * 28 };
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    unsigned char *img = malloc(16 + (size_t)N * D), lab[8 + N];
    put_be32(img, 0x803); put_be32(img + 4, N); put_be32(img + 8, 28); put_be32(img + 12, 28);
    for (long i = 0; i < (long)N * D; i++) img[16 + i] = (unsigned char)((i * 131 + i / 7) & 255);
    put_be32(lab, 0x801); put_be32(lab + 4, N);
    for (int i = 0; i < N; i++) lab[8 + i] = (unsigned char)(i % 10);
    FILE *f = fopen(a, "wb"); fwrite(img, 1, 16 + (size_t)N * D, f); fclose(f);
    f = fopen(b, "wb"); fwrite(lab, 1, sizeof lab, f); fclose(f);
    dataset_t d;
    char err[512] = "";
    CHECK(idx_load_pair(a, b, &d, err, sizeof err) == 0, "load: %s", err);
    if (!d.px) { free(img); return; }
    const float s = 1.0f / 255.0f;
    float *old = malloc(sizeof(float) * (size_t)N * D);
    for (long i = 0; i < (long)N * D; i++) old[i] = img[16 + i] * s;
    int32_t idx[N];
    for (int i = 0; i < N; i++) idx[i] = i;
    batch_iter_t *it = batch_iter_create(&d, idx, N, 16, 9, 0);
    int same = 1;
    for (int k = 0; k < 5; k++) {
        batch_iter_next(it);
        for (int j = 0; j < 16; j++) {
            int row = -1;
            for (int i = 0; i < N && row < 0; i++) if (it->y[j] == lab[8 + i] && !memcmp(it->x + (long)j * D, old + (long)i * D, sizeof(float) * D)) row = i;
            same &= row >= 0;
        }
    }
    CHECK(same, "a gathered batch row is not bit for bit x * (1/255) of any sample");
    float *all = malloc(sizeof(float) * (size_t)N * D);
    dataset_rows(&d, 0, N, all);
    CHECK(!memcmp(all, old, sizeof(float) * (size_t)N * D), "dataset_rows differs from x * (1/255) bit for bit");
    int covered[256] = { 0 }, n256 = 0;
    for (long i = 0; i < (long)N * D; i++) covered[img[16 + i]] = 1;
    for (int v = 0; v < 256; v++) n256 += covered[v];
    CHECK(n256 == 256, "the test data hold only %d of the 256 byte values", n256);
    batch_iter_free(it);
    free(all); free(old); free(img);
    dataset_free(&d);
}

/* Every byte value, both conversions, at the CPU's vector width and one at
 * a time: the floats each loader always stored. */
static void test_px_values(void)
{
    dataset_t d;
    memset(&d, 0, sizeof d);
    int bad = 0;
    for (int v = 0; v < 256; v++) {
        d.px_div = 0;
        volatile float s = 1.0f / 255.0f;
        bad += dataset_px_value(&d, (uint8_t)v) != (float)v * s;
        d.px_div = 1;
        bad += dataset_px_value(&d, (uint8_t)v) != (float)v / 255.0f;
    }
    CHECK(bad == 0, "%d byte values convert differently from the loaders' own x * (1/255) and x / 255", bad);
    uint8_t row[256];
    float out[256];
    for (int v = 0; v < 256; v++) row[v] = (uint8_t)v;
    for (int div = 0; div < 2; div++) {
        d.n = 1; d.c = 1; d.h = 16; d.w = 16; d.px = row; d.px_div = div;
        dataset_row(&d, 0, out);
        int diff = 0;
        for (int v = 0; v < 256; v++) diff += out[v] != dataset_px_value(&d, (uint8_t)v);
        CHECK(diff == 0, "the vector gather differs from the scalar conversion in %d values (div %d)", diff, div);
    }
}

/* Augmentation: the same (seed, rank, step) draws the same batch; a crop
 * is a shift with black filling (each image's pixel sum can only drop, its
 * nonzero pixels keep their values); a flip alone mirrors rows; bad specs
 * are refused. */
static void test_augment(void)
{
    augment_t a;
    char err[256];
    CHECK(augment_parse("crop,flip", &a, err, sizeof err) == 0 && a.crop && a.flip, "crop,flip");
    CHECK(augment_parse("none", &a, err, sizeof err) == 0 && !augment_on(&a), "none");
    CHECK(augment_parse("crop,crop", &a, err, sizeof err) != 0 && strstr(err, "--augment"), "repeated part: %s", err);
    CHECK(augment_parse("rotate", &a, err, sizeof err) != 0, "unknown part");
    enum { B = 8, H = 28, W = 28, N = B * H * W };
    static float x[N], y[N], z[N];
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 255 + 1) / 255.0f;   /* no zero pixel */
    CHECK(augment_parse("crop", &a, err, sizeof err) == 0, "crop");
    augment_setup(&a, 1, H, W);
    CHECK(a.pad == 2, "28x28 pads by 2 (got %d)", a.pad);
    memcpy(y, x, sizeof y); memcpy(z, x, sizeof z);
    augment_batch(&a, y, B, 5, 1, 42);
    augment_batch(&a, z, B, 5, 1, 42);
    CHECK(!memcmp(y, z, sizeof y), "same seed, rank and step: same batch");
    memcpy(z, x, sizeof z);
    augment_batch(&a, z, B, 5, 1, 43);
    CHECK(memcmp(y, z, sizeof y) != 0, "another step draws other crops");
    int moved = 0;
    for (int b = 0; b < B; b++) {
        double sx = 0, sy = 0;
        for (int i = 0; i < H * W; i++) { sx += x[b * H * W + i]; sy += y[b * H * W + i]; }
        CHECK(sy <= sx + 1e-3, "a crop only adds black: sum %g > %g", sy, sx);
        moved += sy < sx - 1e-3;
    }
    CHECK(moved > 0, "no image was shifted");
    augment_free(&a);
    CHECK(augment_parse("flip", &a, err, sizeof err) == 0, "flip");
    augment_setup(&a, 1, H, W);
    memcpy(y, x, sizeof y);
    augment_batch(&a, y, B, 5, 0, 0);
    int flipped = 0;
    for (int b = 0; b < B; b++) {
        const float *s = x + b * H * W, *d = y + b * H * W;
        int same = !memcmp(s, d, sizeof(float) * H * W), mirror = 1;
        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++) mirror &= d[r * W + c] == s[r * W + W - 1 - c];
        CHECK(same || mirror, "image %d is neither itself nor its mirror", b);
        flipped += mirror;
    }
    CHECK(flipped > 0 && flipped < B, "%d of %d flipped (want some, not all)", flipped, B);
    augment_free(&a);
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    snprintf(dir, sizeof dir, "/tmp/dsgd-test-data-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    RUN(test_idx_good);
    RUN(test_idx_large);
    RUN(test_augment);
    RUN(test_idx_corrupt);
    RUN(test_idx_gzip_trailer);
    RUN(test_dataset_load_dirs);
    RUN(test_cifar);
    RUN(test_partitions);
    RUN(test_iterator);
    RUN(test_injection);
    RUN(test_bytes_convert_exactly);
    RUN(test_px_values);
    clean_dir();
    rmdir(dir);
    return TEST_END("test_data");
}
