/* run/safetensors — the safetensors container's validity rules, on a
 * memory buffer (so the checkpoint reader and its fuzz harness run the same
 * code).
 *
 * A buffer is accepted only if: it holds an 8-byte little-endian header
 * length N with 8 + N <= size; the N header bytes are valid UTF-8 without
 * NUL, begin with '{', are one JSON object followed by nothing but spaces
 * (0x20); every number in the header is an integer literal; top-level keys
 * are unique; "__metadata__", if present, maps unique keys to strings; every
 * other entry has exactly the keys "dtype", "shape" and "data_offsets", a
 * known dtype, non-negative integer dimensions whose product (times the dtype
 * size) fits in 64 bits and equals end - begin of its two integer offsets;
 * and the tensors' byte spans, sorted, tile the data section exactly: the
 * first begins at 0, each begins where the previous ends, the last ends at
 * the end of the buffer (no holes, no overlaps, no trailing bytes). */
#ifndef DSGD_SAFETENSORS_H
#define DSGD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_HEADER (64u << 20)
#define ST_MAX_DIMS 8

typedef struct st_tensor {
    const char *name;        /* points into the parsed header */
    const char *dtype;
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t count;          /* product of the shape */
    uint64_t begin, end;     /* byte offsets into the data section */
} st_tensor_t;

typedef struct st_file {
    void *root;              /* parsed header (cJSON), owned */
    const void *metadata;    /* the "__metadata__" object (cJSON) or NULL */
    st_tensor_t *tensors;    /* (ntensors), in header order, owned */
    int ntensors;
    size_t header_len;       /* N */
    size_t data_off;         /* 8 + N */
    size_t data_len;
} st_file_t;

/* Validate buf[0..size) by the rules above. Returns 0, or -1 with a
 * one-line reason in err (without the file name). */
int st_parse(const unsigned char *buf, size_t size, st_file_t *st, char *err, size_t errlen);
/* The tensor called name, or NULL. */
const st_tensor_t *st_find(const st_file_t *st, const char *name);
/* A metadata string, or NULL. */
const char *st_meta(const st_file_t *st, const char *key);
void st_free(st_file_t *st);

#endif
