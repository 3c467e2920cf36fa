#include "augment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

int augment_parse(const char *spec, augment_t *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (!*spec || !strcmp(spec, "none")) return 0;
    char buf[64];
    if (strlen(spec) >= sizeof buf) { snprintf(err, errlen, "--augment '%s' is too long; use crop, flip or crop,flip", spec); return -1; }
    strcpy(buf, spec);
    for (char *s = buf, *tok; (tok = strsep(&s, ",")) != NULL;) {
        if (!strcmp(tok, "crop") && !a->crop) a->crop = 1;
        else if (!strcmp(tok, "flip") && !a->flip) a->flip = 1;
        else {
            snprintf(err, errlen, "unknown or repeated --augment part '%s' in '%s'; use crop, flip or crop,flip (or none)", tok, spec);
            return -1;
        }
    }
    return 0;
}

void augment_setup(augment_t *a, int c, int h, int w)
{
    const int side = h < w ? h : w;
    a->c = c; a->h = h; a->w = w;
    a->pad = side >= 32 ? 4 : side >= 16 ? 2 : 1;
    a->tmp = augment_on(a) ? xalloc_floats((size_t)c * h * w) : NULL;
}

void augment_free(augment_t *a)
{
    free(a->tmp);
    a->tmp = NULL;
}

/* out = in shifted by (dy, dx): out[y][x] = in[y + dy][x + dx], 0 outside;
 * mirrored first if flip. */
static void shift_plane(float *out, const float *in, int h, int w, int dy, int dx, int flip)
{
    for (int y = 0; y < h; y++) {
        float *o = out + (long)y * w;
        const int sy = y + dy;
        if (sy < 0 || sy >= h) { memset(o, 0, sizeof(float) * (size_t)w); continue; }
        const float *r = in + (long)sy * w;
        for (int x = 0; x < w; x++) {
            const int sx = x + dx;
            o[x] = sx < 0 || sx >= w ? 0.0f : r[flip ? w - 1 - sx : sx];
        }
    }
}

void augment_batch(const augment_t *a, float *x, int B, uint64_t seed, uint64_t rank, long step)
{
    if (!augment_on(a)) return;
    rng_t r;
    /* one stream per (rank, step): resume needs no generator state */
    rng_seed(&r, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(step + 1)), 0xa0a0 + rank);
    const long plane = (long)a->h * a->w, img = plane * a->c;
    const int P = a->pad, span = 2 * P + 1;
    for (int b = 0; b < B; b++) {
        int dy = 0, dx = 0, flip = 0;
        if (a->crop) {
            dy = (int)(rng_uniform(&r) * span) - P;
            dx = (int)(rng_uniform(&r) * span) - P;
        }
        if (a->flip) flip = rng_uniform(&r) < 0.5;
        if (!dy && !dx && !flip) continue;
        float *s = x + b * img;
        memcpy(a->tmp, s, sizeof(float) * (size_t)img);
        for (int c = 0; c < a->c; c++) shift_plane(s + c * plane, a->tmp + c * plane, a->h, a->w, dy, dx, flip);
    }
}
