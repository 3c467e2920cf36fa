/* IDX (MNIST/Fashion-MNIST) and CIFAR-10 binary loaders, raw or gzip via zlib.
 * Every header field and the exact file length are checked; a .gz file must
 * end with its trailer (CRC-32 and length), with nothing after it. Input
 * files must be regular files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define MAX_SAMPLES 100000000L

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uInt chunk_of(size_t n) { return n > (1u << 30) ? (1u << 30) : (uInt)n; }

/* Inflate a whole gzip file (one member or several, concatenated) into
 * out[0..cap). peek: stop once out is full. Otherwise every member must end
 * with its trailer, whose CRC-32 and length zlib checks, and nothing but
 * another member may follow one. *got: bytes produced (cap when the stream
 * holds more than cap). Returns 0, or -1 with *why set. */
static int gz_inflate(const unsigned char *in, size_t inlen, unsigned char *out, size_t cap, int peek,
                      size_t *got, const char **why)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) { *why = "zlib could not start"; return -1; }
    size_t ipos = 0, opos = 0;
    int rc = 0;
    for (;;) {
        z.next_in = (Bytef *)(in + ipos);
        z.avail_in = chunk_of(inlen - ipos);
        z.next_out = out + opos;
        z.avail_out = chunk_of(cap - opos);
        uInt ain = z.avail_in, aout = z.avail_out;
        int zr = inflate(&z, Z_NO_FLUSH);
        ipos += ain - z.avail_in;
        opos += aout - z.avail_out;
        if (zr == Z_STREAM_END) {
            if (ipos == inlen) break;
            if (inlen - ipos >= 2 && in[ipos] == 0x1f && in[ipos + 1] == 0x8b) { inflateReset(&z); continue; }
            *why = "bytes follow the end of the gzip stream";
            rc = -1;
            break;
        }
        if (opos == cap) {
            if (!peek) *why = "it holds more data than its header promises";
            rc = peek ? 0 : -1;
            break;
        }
        if (zr == Z_OK && (ain != z.avail_in || aout != z.avail_out)) continue;
        if (zr == Z_OK || zr == Z_BUF_ERROR) *why = "the gzip stream ends before its trailer (truncated)";
        else *why = z.msg ? z.msg : "corrupt gzip data";
        rc = -1;
        break;
    }
    inflateEnd(&z);
    *got = opos;
    return rc;
}

/* The body of an IDX file (raw or gzip): header checked against magic and
 * ndims, the body exactly as long as the header promises, gzip trailers
 * verified. Returns 0 with *body (malloc'ed, len = product of dims) or -1. */
int idx_parse(const unsigned char *file, size_t len, const char *path, uint32_t magic, int ndims,
              uint32_t *dims, unsigned char **body, char *err, size_t errlen)
{
    const int gz = len >= 2 && file[0] == 0x1f && file[1] == 0x8b;
    const size_t hlen = 4 + 4 * (size_t)ndims;
    unsigned char hdr[4 + 4 * 3];
    size_t got = 0;
    const char *why = "file too short";
    if (gz) {
        if (gz_inflate(file, len, hdr, hlen, 1, &got, &why) != 0) got = 0;
    } else {
        got = len < hlen ? len : hlen;
        memcpy(hdr, file, got);
    }
    if (got != hlen) {
        snprintf(err, errlen, "'%s' is truncated or corrupt (header: %s); re-download or reinstall the dataset", path, why);
        return -1;
    }
    uint32_t m = be32(hdr);
    if (m != magic) {
        snprintf(err, errlen, "'%s' is not an IDX %s file (magic 0x%08x, expected 0x%08x)",
                 path, magic == IDX_IMAGES_MAGIC ? "image" : "label", m, magic);
        return -1;
    }
    size_t n = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        if (dims[i] == 0 || dims[i] > (i == 0 ? (uint32_t)MAX_SAMPLES : 4096u)) {
            snprintf(err, errlen, "'%s' has an invalid dimension %u in its header", path, dims[i]);
            return -1;
        }
        n *= dims[i];
    }
    /* before allocating what the header promises: a raw file holds exactly
     * that, and deflate expands at most 1032:1 */
    if (gz && n / 1032 > len) {
        snprintf(err, errlen, "'%s' is corrupt or truncated: its header promises %zu data bytes, more than %zu compressed bytes can hold",
                 path, n, len);
        return -1;
    }
    if (!gz && len != hlen + n) {
        snprintf(err, errlen, len < hlen + n ? "'%s' is truncated: header promises %zu data bytes, file ends after %zu; re-download or reinstall the dataset"
                                             : "'%s' is longer than its header says (%zu data bytes, file has %zu); the file is corrupt",
                 path, n, len - hlen);
        return -1;
    }
    unsigned char *b = xmalloc_huge(hlen + n + 1);   /* samples are read at random */
    if (gz) {
        if (gz_inflate(file, len, b, hlen + n + 1, 0, &got, &why) != 0 || got != hlen + n) {
            if (got < hlen + n && !strcmp(why, "file too short")) why = "the stream ends";
            snprintf(err, errlen, "'%s' is corrupt or truncated: header promises %zu data bytes; %s; re-download or reinstall the dataset",
                     path, n, why);
            free(b);
            return -1;
        }
    } else {
        memcpy(b, file, len);
    }
    memmove(b, b + hlen, n);
    *body = b;
    return 0;
}

/* Read path (a regular file) and parse it as above. */
static int idx_read(const char *path, uint32_t magic, int ndims, uint32_t *dims, unsigned char **body,
                    char *err, size_t errlen)
{
    unsigned char *file;
    size_t len;
    if (read_regular_file(path, &file, &len, err, errlen) != 0) return -1;
    int rc = idx_parse(file, len, path, magic, ndims, dims, body, err, errlen);
    free(file);
    return rc;
}

int idx_load_pair(const char *images, const char *labels, dataset_t *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    uint32_t idim[3], ldim[1];
    unsigned char *raw, *lab;
    if (idx_read(images, IDX_IMAGES_MAGIC, 3, idim, &raw, err, errlen) != 0) return -1;
    if (idx_read(labels, IDX_LABELS_MAGIC, 1, ldim, &lab, err, errlen) != 0) { free(raw); return -1; }
    if (idim[0] != ldim[0]) {
        snprintf(err, errlen, "'%s' holds %u images but '%s' holds %u labels; the files do not belong together",
                 images, idim[0], labels, ldim[0]);
        free(raw); free(lab);
        return -1;
    }
    long n = idim[0];
    d->y = lab;
    d->n = n; d->c = 1; d->h = (int)idim[1]; d->w = (int)idim[2];
    d->px = raw;
    d->px_div = 0;   /* IDX pixels have always been x * (1/255) */
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
        if (file_regular_size(paths[i], &sizes[i], err, errlen) != 0) return -1;
        if (sizes[i] <= 0 || sizes[i] % REC != 0) {
            snprintf(err, errlen, "'%s' is not a CIFAR-10 binary batch (%ld bytes, not a multiple of %d)",
                     paths[i], sizes[i], REC);
            return -1;
        }
        total += sizes[i] / REC;
    }
    d->n = total; d->c = 3; d->h = 32; d->w = 32; d->classes = 10;
    d->px = xmalloc_huge((size_t)(total * (REC - 1)));
    d->px_div = 1;   /* CIFAR pixels have always been x / 255 */
    d->y = xmalloc((size_t)total);
    unsigned char *rec = xmalloc(REC);
    long k = 0;
    for (int i = 0; i < npaths; i++) {
        FILE *f = fopen(paths[i], "rb");
        for (long r = 0; f && r < sizes[i] / REC; r++, k++) {
            if (fread(rec, 1, REC, f) != REC || rec[0] > 9) {
                snprintf(err, errlen, "'%s' record %ld is unreadable or has label %d > 9", paths[i], r, rec[0]);
                fclose(f); free(rec); free(d->px); free(d->y);   /* what this function allocated */
                memset(d, 0, sizeof *d);
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
