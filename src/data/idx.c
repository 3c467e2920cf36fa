/* IDX (MNIST/Fashion-MNIST) and CIFAR-10 binary loaders, raw or gzip via zlib.
 * Every header field and the exact file length are checked. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define MAX_SAMPLES 100000000L

/* Read exactly n bytes; returns bytes read, or -1 on a stream error. */
static long gz_read_full(gzFile f, void *buf, long n)
{
    long got = 0;
    while (got < n) {
        unsigned chunk = (unsigned)((n - got) > (1L << 30) ? (1L << 30) : (n - got));
        int r = gzread(f, (char *)buf + got, chunk);
        if (r < 0) return -1;
        if (r == 0) break;
        got += r;
    }
    return got;
}

static const char *gz_why(gzFile f)
{
    int code = 0;
    const char *msg = gzerror(f, &code);
    return (code != Z_OK && msg && *msg) ? msg : "unexpected end of file";
}

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Open, check magic, read dims; returns the gz handle or NULL with err set. */
static gzFile idx_open(const char *path, uint32_t magic, int ndims, uint32_t *dims,
                       char *err, size_t errlen)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, errno ? strerror(errno) : "gzopen failed");
        return NULL;
    }
    unsigned char hdr[4 + 4 * 3];
    long want = 4 + 4L * ndims;
    long got = gz_read_full(f, hdr, want);
    if (got != want) {
        snprintf(err, errlen, "'%s' is truncated or corrupt (header: %s); re-download or reinstall the dataset",
                 path, got < 0 ? gz_why(f) : "file too short");
        gzclose(f);
        return NULL;
    }
    uint32_t m = be32(hdr);
    if (m != magic) {
        snprintf(err, errlen, "'%s' is not an IDX %s file (magic 0x%08x, expected 0x%08x)",
                 path, magic == IDX_IMAGES_MAGIC ? "image" : "label", m, magic);
        gzclose(f);
        return NULL;
    }
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        if (dims[i] == 0 || dims[i] > (i == 0 ? (uint32_t)MAX_SAMPLES : 4096u)) {
            snprintf(err, errlen, "'%s' has an invalid dimension %u in its header", path, dims[i]);
            gzclose(f);
            return NULL;
        }
    }
    return f;
}

/* Read the body (n bytes) and make sure nothing follows it. */
static int idx_body(gzFile f, const char *path, unsigned char *buf, long n, char *err, size_t errlen)
{
    long got = gz_read_full(f, buf, n);
    if (got != n) {
        snprintf(err, errlen, "'%s' is truncated: header promises %ld data bytes, %s after %ld; re-download or reinstall the dataset",
                 path, n, got < 0 ? gz_why(f) : "file ends", got < 0 ? 0L : got);
        return -1;
    }
    unsigned char extra;
    int r = gzread(f, &extra, 1);
    if (r != 0) {
        if (r < 0) snprintf(err, errlen, "'%s' is corrupt: %s", path, gz_why(f));
        else snprintf(err, errlen, "'%s' is longer than its header says (%ld data bytes); the file is corrupt", path, n);
        return -1;
    }
    int code = 0;
    gzerror(f, &code);
    if (code != Z_OK && code != Z_BUF_ERROR) {
        snprintf(err, errlen, "'%s' is corrupt: %s", path, gz_why(f));
        return -1;
    }
    return 0;
}

int idx_load_pair(const char *images, const char *labels, dataset_t *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    uint32_t idim[3], ldim[1];
    gzFile fi = idx_open(images, IDX_IMAGES_MAGIC, 3, idim, err, errlen);
    if (!fi) return -1;
    gzFile fl = idx_open(labels, IDX_LABELS_MAGIC, 1, ldim, err, errlen);
    if (!fl) { gzclose(fi); return -1; }
    if (idim[0] != ldim[0]) {
        snprintf(err, errlen, "'%s' holds %u images but '%s' holds %u labels; the files do not belong together",
                 images, idim[0], labels, ldim[0]);
        gzclose(fi); gzclose(fl);
        return -1;
    }
    long n = idim[0], dim = (long)idim[1] * idim[2];
    unsigned char *raw = xmalloc((size_t)(n * dim));
    d->y = xmalloc((size_t)n);
    if (idx_body(fi, images, raw, n * dim, err, errlen) != 0 ||
        idx_body(fl, labels, d->y, n, err, errlen) != 0) {
        free(raw); free(d->y); d->y = NULL;
        gzclose(fi); gzclose(fl);
        return -1;
    }
    gzclose(fi); gzclose(fl);
    d->n = n; d->c = 1; d->h = (int)idim[1]; d->w = (int)idim[2];
    d->px = raw;
    const float s = 1.0f / 255.0f;
    for (int v = 0; v < 256; v++) d->lut[v] = (unsigned char)v * s;  /* IDX pixels have always been x * (1/255) */
    int maxl = 0;
    for (long i = 0; i < n; i++) if (d->y[i] > maxl) maxl = d->y[i];
    d->classes = maxl + 1;
    return 0;
}

int cifar_load_files(const char *const *paths, int npaths, dataset_t *d, char *err, size_t errlen)
{
    enum { REC = 1 + 3 * 32 * 32 };
    memset(d, 0, sizeof *d);
    long total = 0, sizes[16];
    if (npaths > 16) { snprintf(err, errlen, "too many CIFAR batch files"); return -1; }
    for (int i = 0; i < npaths; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) { snprintf(err, errlen, "cannot open '%s': %s", paths[i], strerror(errno)); return -1; }
        fseek(f, 0, SEEK_END);
        sizes[i] = ftell(f);
        fclose(f);
        if (sizes[i] <= 0 || sizes[i] % REC != 0) {
            snprintf(err, errlen, "'%s' is not a CIFAR-10 binary batch (%ld bytes, not a multiple of %d)",
                     paths[i], sizes[i], REC);
            return -1;
        }
        total += sizes[i] / REC;
    }
    d->n = total; d->c = 3; d->h = 32; d->w = 32; d->classes = 10;
    d->px = xmalloc((size_t)(total * (REC - 1)));
    for (int v = 0; v < 256; v++) d->lut[v] = (unsigned char)v / 255.0f;  /* CIFAR pixels have always been x / 255 */
    d->y = xmalloc((size_t)total);
    unsigned char *rec = xmalloc(REC);
    long k = 0;
    for (int i = 0; i < npaths; i++) {
        FILE *f = fopen(paths[i], "rb");
        for (long r = 0; f && r < sizes[i] / REC; r++, k++) {
            if (fread(rec, 1, REC, f) != REC || rec[0] > 9) {
                snprintf(err, errlen, "'%s' record %ld is unreadable or has label %d > 9", paths[i], r, rec[0]);
                fclose(f); free(rec); dataset_free(d);
                return -1;
            }
            d->y[k] = rec[0];
            memcpy(d->px + k * (REC - 1), rec + 1, REC - 1);
        }
        if (f) fclose(f);
    }
    free(rec);
    return 0;
}
