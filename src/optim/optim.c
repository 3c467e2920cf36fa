#include "optim.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../util/par.h"
#include "../util/sim.h"
#include "../util/util.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

int optim_kind_parse(const char *s, opt_kind_t *out)
{
    if (!strcmp(s, "sgd")) *out = OPT_SGD;
    else if (!strcmp(s, "nesterov")) *out = OPT_NESTEROV;
    else if (!strcmp(s, "adagrad")) *out = OPT_ADAGRAD;
    else return -1;
    return 0;
}

const char *optim_kind_name(opt_kind_t k)
{
    return k == OPT_NESTEROV ? "nesterov" : k == OPT_ADAGRAD ? "adagrad" : "sgd";
}

optim_t *optim_create(const optim_cfg_t *cfg, size_t n)
{
    optim_t *o = xcalloc(1, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    if (cfg->kind == OPT_ADAGRAD) o->accum = xalloc_floats(n);
    else if (cfg->momentum != 0.0f || cfg->kind == OPT_NESTEROV) o->velocity = xalloc_floats(n);
    return o;
}

void optim_free(optim_t *o)
{
    if (!o) return;
    free(o->velocity);
    free(o->accum);
    free(o);
}

void optim_reset(optim_t *o)
{
    if (o->velocity) memset(o->velocity, 0, sizeof(float) * o->n);
    if (o->accum) memset(o->accum, 0, sizeof(float) * o->n);
}

void optim_step(optim_t *o, float *w, const float *g, size_t off, size_t count, float lr)
{
    optim_step_scaled(o, w, g, 1.0f, off, count, lr);
}

/* The update of one span, written to dst (== w: in place). Inlined into
 * both callers, so the in-place one is compiled knowing dst is w (no alias
 * checks in its vector loops); the arithmetic, and so the bits, are the
 * same either way. */
static inline __attribute__((always_inline)) void step_span(optim_t *o, float *dst, const float *w, const float *g,
                                                             float gscale, size_t off, size_t count, float lr, float wd)
{
    const float mu = o->cfg.momentum;
    switch (o->cfg.kind) {
    case OPT_ADAGRAD: {
        float *G = o->accum + off;
        const float eps = o->cfg.eps;
        for (size_t i = 0; i < count; i++) {
            float gi = gscale * g[i] + wd * w[i];
            G[i] += gi * gi;
            dst[i] = w[i] - lr * gi / (sqrtf(G[i]) + eps);
        }
        break;
    }
    case OPT_NESTEROV: {
        float *v = o->velocity + off;
        for (size_t i = 0; i < count; i++) {
            float gi = gscale * g[i] + wd * w[i];
            v[i] = mu * v[i] + gi;
            dst[i] = w[i] - lr * (gi + mu * v[i]);
        }
        break;
    }
    case OPT_SGD:
        if (o->velocity) {
            float *v = o->velocity + off;
            for (size_t i = 0; i < count; i++) {
                float gi = gscale * g[i] + wd * w[i];
                v[i] = mu * v[i] + gi;
                dst[i] = w[i] - lr * v[i];
            }
        } else {
            for (size_t i = 0; i < count; i++) dst[i] = w[i] - lr * (gscale * g[i] + wd * w[i]);
        }
        break;
    }
}

/* The update is one pass over three or four vectors of the model's size
 * every step: with AVX2 (x86-64-v3) it runs about twice as fast as with the
 * baseline's SSE2, so both are built and the CPU picks at load time. No FMA
 * contraction (ISO C's default): every clone gives the same bits. */
/* (not under ThreadSanitizer, whose instrumented ifunc resolvers run
 * before it is initialized) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define STEP_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define STEP_CLONES
#endif

/* The next piece of [off, end) with one weight decay: up to the next
 * boundary of a nodecay span (in the optimizer's own coordinates). */
static size_t next_piece(const optim_t *o, size_t off, size_t end, float *wd)
{
    *wd = o->cfg.weight_decay;
    if (*wd == 0.0f || !o->cfg.nodecay) return end;
    for (int i = 0; i < o->cfg.nnodecay; i++) {
        size_t lo = o->cfg.nodecay[2 * i], hi = lo + o->cfg.nodecay[2 * i + 1];
        lo = lo > o->base ? lo - o->base : 0;
        hi = hi > o->base ? hi - o->base : 0;
        if (hi <= off) continue;
        if (lo <= off) { *wd = 0.0f; return hi < end ? hi : end; }
        return lo < end ? lo : end;
    }
    return end;
}

STEP_CLONES static void step_scaled(optim_t *o, float *w, const float *g, float gscale, size_t off, size_t count,
                                   float lr)
{
    for (size_t at = off, end = off + count; at < end;) {
        float wd;
        size_t to = next_piece(o, at, end, &wd);
        step_span(o, w + at, w + at, g + at, gscale, at, to - at, lr, wd);
        at = to;
    }
}

STEP_CLONES static void step_into(optim_t *o, float *dst, const float *w, const float *g, float gscale, size_t off,
                                 size_t count, float lr)
{
    for (size_t at = off, end = off + count; at < end;) {
        float wd;
        size_t to = next_piece(o, at, end, &wd);
        step_span(o, dst + at, w + at, g + at, gscale, at, to - at, lr, wd);
        at = to;
    }
}

/* Each chunk is computed into a buffer that stays in L1 and then written
 * out with non-temporal stores, which invalidate other cores' copies of
 * the lines without first reading them in. */
STEP_CLONES static void step_into_stream(optim_t *o, float *dst, const float *w, const float *g, float gscale, size_t off,
                                        size_t count, float lr)
{
#if defined(__SSE__)
    if (sim_build()) {   /* (the simulated build keeps plain stores) */
        step_into(o, dst, w, g, gscale, off, count, lr);
        return;
    }
    enum { CHUNK = 1024 };
    float tmp[CHUNK] __attribute__((aligned(64)));
    for (size_t c0 = off, end = off + count; c0 < end;) {
        const size_t c1 = end - c0 < CHUNK ? end : c0 + CHUNK;
        for (size_t at = c0; at < c1;) {
            float wd;
            size_t to = next_piece(o, at, c1, &wd);
            step_span(o, tmp + (at - c0), w + at, g + at, gscale, at, to - at, lr, wd);
            at = to;
        }
        float *d = dst + c0;
        size_t i = 0, n = c1 - c0;
        if (((uintptr_t)d & 15) == 0) {
            for (; i + 4 <= n; i += 4) _mm_stream_ps(d + i, _mm_load_ps(tmp + i));
        }
        memcpy(d + i, tmp + i, (n - i) * sizeof(float));
        c0 = c1;
    }
    _mm_sfence();
#else
    step_into(o, dst, w, g, gscale, off, count, lr);
#endif
}

/* The owners' spans (optim_cfg_t.owners) apply: they cover this
 * optimizer's whole vector, which is the whole parameter vector. */
static int owned_spans(const optim_t *o)
{
    if (!o->cfg.owners || o->cfg.nowners < 1 || o->base != 0) return 0;
    const size_t *last = o->cfg.owners + 3 * (o->cfg.nowners - 1);
    return o->cfg.owners[0] == 0 && last[0] + last[1] == o->n;
}

/* The update is element-wise: the threads take pieces of the span (at
 * multiples of 1024 floats, the streaming variant's chunks), any cut the
 * same bits (util/par.h); each piece goes through the clone the CPU runs
 * (the parallel loop itself is outside the clones: GCC would not clone
 * the function it outlines for the loop). */
#define OPTIM_PIECES(fn)                                                              \
    do {                                                                              \
        if (owned_spans(o) && par_elems((long)count) > 1) {                           \
            PAR_REGION_IF(1)                                                          \
            {                                                                         \
                const size_t T = (size_t)par_team_size(), t = (size_t)par_team_index(); \
                for (int i = 0; i < o->cfg.nowners; i++) {                            \
                    const size_t *s = o->cfg.owners + 3 * i;                          \
                    const size_t a = s[0] > off ? s[0] : off;                         \
                    const size_t e = s[0] + s[1] < off + count ? s[0] + s[1] : off + count; \
                    if (s[2] % T == t && e > a) fn(o, dst, w, g, gscale, a, e - a, lr); \
                }                                                                     \
            }                                                                         \
            break;                                                                    \
        }                                                                             \
        const int np = par_elems((long)count);                                        \
        PAR_FOR_DYN_IF(np > 1)                                                        \
        for (int p = 0; p < np; p++) {                                                \
            const size_t a = (size_t)par_cut((long)count, np, p, 1024);               \
            const size_t e = (size_t)par_cut((long)count, np, p + 1, 1024);           \
            if (e > a) fn(o, dst, w, g, gscale, off + a, e - a, lr);                  \
        }                                                                             \
    } while (0)

static void step_scaled_into(optim_t *o, float *dst, const float *w, const float *g, float gscale, size_t off,
                             size_t count, float lr)
{
    (void)dst;
    step_scaled(o, (float *)w, g, gscale, off, count, lr);
}

void optim_step_scaled(optim_t *o, float *w, const float *g, float gscale, size_t off, size_t count, float lr)
{
    float *dst = w;
    OPTIM_PIECES(step_scaled_into);
}

void optim_step_into(optim_t *o, float *dst, const float *w, const float *g, float gscale, size_t off, size_t count,
                     float lr)
{
    OPTIM_PIECES(step_into);
}

void optim_step_into_stream(optim_t *o, float *dst, const float *w, const float *g, float gscale, size_t off,
                            size_t count, float lr)
{
    OPTIM_PIECES(step_into_stream);
}

int lr_sched_parse(const char *s, lr_sched_kind_t *out)
{
    if (!strcmp(s, "constant")) *out = LR_CONSTANT;
    else if (!strcmp(s, "step")) *out = LR_STEP;
    else if (!strcmp(s, "cosine")) *out = LR_COSINE;
    else return -1;
    return 0;
}

long lr_sched_length(long epochs, long steps_per_epoch, long run_steps)
{
    long n;
    if (__builtin_mul_overflow(epochs, steps_per_epoch, &n) || n < run_steps) return run_steps;
    return n;
}

float lr_at(const lr_sched_t *s, long step, double t)
{
    float lr = s->base;
    if (s->kind == LR_STEP && s->step_every > 0)
        lr *= powf(s->gamma, (float)(step / s->step_every));
    if (s->kind == LR_COSINE) {
        double arg = -1;   /* π × the progress through the cosine; < 0: none */
        if (s->horizon_s > 0) {   /* over time: the warm-up still counts steps */
            double u = t / s->horizon_s;
            if (u >= 1) return 0.0f;
            arg = M_PI * (u > 0 ? u : 0);
        } else {
            if (step >= s->total) return 0.0f;
            if (s->total > s->warmup) arg = M_PI * (double)(step - s->warmup) / (double)(s->total - s->warmup);
        }
        if (step >= s->warmup && arg >= 0) lr *= (float)(0.5 * (1.0 + cos(arg)));
    }
    if (step < s->warmup)
        lr *= (float)(step + 1) / (float)s->warmup;
    return lr;
}
