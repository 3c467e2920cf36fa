#include "safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

#define MAX_EXACT 9007199254740992.0   /* 2^53: larger JSON integers lose digits in a double */

static const struct { const char *name; int size; } dtypes[] = {
    { "BOOL", 1 }, { "U8", 1 }, { "I8", 1 }, { "F8_E5M2", 1 }, { "F8_E4M3", 1 },
    { "I16", 2 }, { "U16", 2 }, { "F16", 2 }, { "BF16", 2 },
    { "I32", 4 }, { "U32", 4 }, { "F32", 4 }, { "I64", 8 }, { "U64", 8 }, { "F64", 8 },
};

static int dtype_size(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtypes[i].name, name)) return dtypes[i].size;
    return 0;
}

/* Well-formed UTF-8 (no overlong forms, no surrogates, <= U+10FFFF), no NUL. */
static int utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c == 0) return 0;
        if (c < 0x80) { i++; continue; }
        int len;
        unsigned min, cp;
        if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i < (size_t)len) return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += (size_t)len;
    }
    return 1;
}

/* Every number outside strings is an integer literal: shapes and offsets
 * are the header's only numbers, and they are unsigned integers. */
static int numbers_are_integers(const char *s, size_t n)
{
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if (c == '-' || (c == '0' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')) return 0;
            for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {}
            if (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E')) return 0;
            i--;
        }
    }
    return 1;
}

static int unique_keys(const cJSON *obj)
{
    for (const cJSON *a = obj->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (!strcmp(a->string, b->string)) return 0;
    return 1;
}

static int as_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > MAX_EXACT ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int tensor_entry(const cJSON *e, st_tensor_t *t, char *err, size_t errlen)
{
    const char *n = e->string;
    if (!cJSON_IsObject(e)) BAD("tensor '%s' is not an object", n);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (cJSON_GetArraySize(e) != 3 || !dt || !sh || !of)
        BAD("tensor '%s' must have exactly dtype, shape and data_offsets", n);
    int size = cJSON_IsString(dt) ? dtype_size(dt->valuestring) : 0;
    if (!size) BAD("tensor '%s' has an unknown dtype", n);
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > ST_MAX_DIMS)
        BAD("tensor '%s': shape is not a list of at most %d integers", n, ST_MAX_DIMS);
    t->name = n;
    t->dtype = dt->valuestring;
    t->ndim = 0;
    t->count = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, sh) {
        uint64_t v;
        if (as_u64(d, &v) != 0) BAD("tensor '%s': shape holds a value that is not a non-negative integer", n);
        t->shape[t->ndim++] = v;
        if (__builtin_mul_overflow(t->count, v, &t->count)) BAD("tensor '%s': the shape's element count overflows", n);
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(t->count, (uint64_t)size, &bytes)) BAD("tensor '%s': the shape's byte size overflows", n);
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 ||
        as_u64(cJSON_GetArrayItem(of, 0), &t->begin) != 0 || as_u64(cJSON_GetArrayItem(of, 1), &t->end) != 0)
        BAD("tensor '%s': data_offsets is not two non-negative integers", n);
    if (t->begin > t->end || t->end - t->begin != bytes)
        BAD("tensor '%s': data_offsets [%llu, %llu] do not span its %llu bytes", n, (unsigned long long)t->begin,
            (unsigned long long)t->end, (unsigned long long)bytes);
    return 0;
}

static int by_offsets(const void *a, const void *b)
{
    const st_tensor_t *x = *(st_tensor_t *const *)a, *y = *(st_tensor_t *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The sorted spans tile [0, data_len) exactly. */
static int spans_tile(st_file_t *st, char *err, size_t errlen)
{
    st_tensor_t **order = xmalloc(sizeof *order * (size_t)(st->ntensors ? st->ntensors : 1));
    for (int i = 0; i < st->ntensors; i++) order[i] = &st->tensors[i];
    qsort(order, (size_t)st->ntensors, sizeof *order, by_offsets);
    uint64_t at = 0;
    const char *bad = NULL;
    for (int i = 0; i < st->ntensors && !bad; i++) {
        if (order[i]->begin != at) bad = order[i]->name;
        at = order[i]->end;
    }
    free(order);
    if (bad) BAD("tensor '%s' does not start where the previous tensor ends (overlap or hole in the data)", bad);
    if (at != st->data_len)
        BAD("the tensors cover %llu data bytes but the file holds %zu", (unsigned long long)at, st->data_len);
    return 0;
}

int st_parse(const unsigned char *buf, size_t size, st_file_t *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    if (size < 8) BAD("truncated: %zu bytes, shorter than the 8-byte header length", size);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)buf[i] << (8 * i);
    if (n > ST_MAX_HEADER || n > size - 8)
        BAD("truncated or not a safetensors file (header length %llu, file %zu bytes)", (unsigned long long)n, size);
    const char *h = (const char *)buf + 8;
    if (n < 2 || h[0] != '{') BAD("the header is not a JSON object");
    if (!utf8_valid(buf + 8, (size_t)n)) BAD("the header is not valid UTF-8");
    if (!numbers_are_integers(h, (size_t)n)) BAD("the header holds a number that is not a non-negative integer");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)n, &end, 0);
    st->root = root;
    st->header_len = (size_t)n;
    st->data_off = 8 + (size_t)n;
    st->data_len = size - st->data_off;
#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); st_free(st); return -1; } while (0)
    if (!root || !cJSON_IsObject(root)) FAIL("the header is not a JSON object");
    for (const char *p = end; p < h + n; p++)
        if (*p != ' ') FAIL("the header has bytes after its JSON object other than space padding");
    if (!unique_keys(root)) FAIL("the header names a key twice");
    int count = cJSON_GetArraySize(root);
    st->tensors = xcalloc((size_t)(count ? count : 1), sizeof *st->tensors);
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (!cJSON_IsObject(e) || !unique_keys(e)) FAIL("__metadata__ is not an object with unique keys");
            for (const cJSON *v = e->child; v; v = v->next)
                if (!cJSON_IsString(v)) FAIL("__metadata__ value '%s' is not a string", v->string);
            st->metadata = e;
            continue;
        }
        if (tensor_entry(e, &st->tensors[st->ntensors], err, errlen) != 0) { st_free(st); return -1; }
        st->ntensors++;
    }
    if (spans_tile(st, err, errlen) != 0) { st_free(st); return -1; }
    return 0;
#undef FAIL
}

const st_tensor_t *st_find(const st_file_t *st, const char *name)
{
    for (int i = 0; i < st->ntensors; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

const char *st_meta(const st_file_t *st, const char *key)
{
    const cJSON *v = st->metadata ? cJSON_GetObjectItemCaseSensitive(st->metadata, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

void st_free(st_file_t *st)
{
    cJSON_Delete(st->root);
    free(st->tensors);
    memset(st, 0, sizeof *st);
}
