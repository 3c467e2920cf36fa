/* nn/bn — batch normalization, global average pooling and the residual add
 * (declared in layers.h), over NCHW activations.
 *
 * Batch normalization follows PyTorch's BatchNorm2d: in training, each
 * channel is normalized with its batch mean and biased variance, and the
 * running statistics move by momentum: rm ← (1−m)·rm + m·mean,
 * rv ← (1−m)·rv + m·var·n/(n−1) (unbiased), n = B·H·W; in evaluation the
 * running statistics normalize. A ReLU that follows is fused: the forward
 * pass clamps as it writes; the backward pass recomputes where it clamped
 * from the input (bit for bit), so it reads neither the output nor a mask.
 *
 * Sums over a channel: each plane (one sample's) gives Σ x and Σ (x − a)²
 * about its own mean a, in float lanes; the planes merge in double (Chan
 * et al.'s rule): with n up to B·H·W ≈ 10⁵ values one float sum would lose
 * the variance's low bits. A convolution can compute its planes' moments
 * as it writes them (conv2d_forward_ws), while they are still in cache;
 * the same function computes them here otherwise, so both give one result.
 */
#include "layers.h"

#include <math.h>
#include <string.h>

#include "../util/par.h"

/* Memory-bound passes: with AVX-512 (x86-64-v4) or AVX2 they run about twice
 * as fast as with the baseline's SSE2, so each is built for those too and
 * the CPU picks at load time. No FMA contraction (ISO C's default) and the
 * same explicit lanes in every clone: every clone gives the same bits. */
/* (not under ThreadSanitizer, whose instrumented ifunc resolvers run
 * before it is initialized) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define BN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BN_CLONES
#endif

/* Σ x and Σ (x − μ)² over one row of a channel: 16 float lanes (a row is
 * at most a few thousand values), summed in double by the caller. */
static inline __attribute__((always_inline)) double row_sum(const float *x, int n)
{
    float a[16] = { 0 };
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) a[j] += x[i + j];
    double t = 0;
    for (; i < n; i++) t += x[i];
    for (int j = 0; j < 16; j++) t += a[j];
    return t;
}

static inline __attribute__((always_inline)) double row_centred_squares(const float *x, int n, float mu)
{
    float a[16] = { 0 };
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) { float d = x[i + j] - mu; a[j] += d * d; }
    double t = 0;
    for (; i < n; i++) { double d = x[i] - mu; t += d * d; }
    for (int j = 0; j < 16; j++) t += a[j];
    return t;
}

enum { BN_ROWS_BLOCK = 1024 };   /* floats: a padded plane's rows computed at once */
enum { BN_PAD_BLOCK = 16 };      /* floats: copied into a padded row at once */
enum { BN_FUSED_BYTES = 512 * 1024 };   /* bn_backward: a piece's planes, both arrays */

/* one plane of y = x·k + sh (then ReLU) */
static inline __attribute__((always_inline)) void affine_plane(float *y, const float *x, float k, float sh, int HW,
                                                                int relu)
{
    if (relu)
        for (int i = 0; i < HW; i++) { float v = x[i] * k + sh; y[i] = v > 0.0f ? v : 0.0f; }
    else
        for (int i = 0; i < HW; i++) y[i] = x[i] * k + sh;
}

/* Channel c's affine map y = x·k + sh, k = γ/σ, sh = β − μ·k. The forward
 * pass and both backward passes take k and sh from here: the backward passes
 * recompute the ReLU's mask from x, which gives the forward pass's bits only
 * if the float operations are the same. */
static inline __attribute__((always_inline)) void affine_coef(float *k, float *sh, const float *mean,
                                                               const float *invstd, const float *gamma,
                                                               const float *beta, int c)
{
    *k = gamma[c] * invstd[c];
    *sh = beta[c] - mean[c] * *k;
}

/* one plane of y = (x·k + sh) + a (then ReLU): the residual add's
 * operations on the normalization's output, so its bits */
static inline __attribute__((always_inline)) void affine_add_plane(float *y, const float *x, const float *a, float k,
                                                                    float sh, int HW, int relu)
{
    if (relu)
        for (int i = 0; i < HW; i++) { float v = (x[i] * k + sh) + a[i]; y[i] = v > 0.0f ? v : 0.0f; }
    else
        for (int i = 0; i < HW; i++) y[i] = (x[i] * k + sh) + a[i];
}

/* A plane already computed, t[0 .. H·W), into the padded plane pl. In the
 * flat layout (pad 1, a row is its zero and its W values, the zero also
 * the right neighbour of the row above) a row is copied as whole blocks of
 * BN_PAD_BLOCK from its zero on, running into the next row, which is
 * written after it, its zero written last (ResNet's rows, 7 to 28 values,
 * are too short for a vector loop of their own): every row but the last
 * where t has room around it (slack: a buffer of the plane's own, t[-1]
 * and a block past each row readable), else only the rows whose blocks
 * stay within t; the other rows value by value, so nothing is written
 * past the plane or read past t. */
static inline __attribute__((always_inline)) void padded_store(float *pl, const float *t, const plane_pad_t *pp,
                                                                int slack)
{
    const int W = pp->W, H = pp->H, pad = pp->pad;
    const long WP = pp->WP, right = WP - pad - W, HW = (long)H * W;
    const int flat = pad == 1 && right == 0, nb = (W + 1 + BN_PAD_BLOCK - 1) / BN_PAD_BLOCK;
    memset(pl, 0, sizeof(float) * (size_t)(pad * WP));
    for (int r = 0; r < H; r++) {
        float *row = pl + (r + pad) * WP;
        const float *src = t + (long)r * W - 1;   /* src[0]: the zero's place */
        if (flat && r < H - 1 && (slack || (r > 0 && (long)r * W - 1 + (long)nb * BN_PAD_BLOCK <= HW))) {
            for (int b = 0; b < nb; b++)
                for (int j = 0; j < BN_PAD_BLOCK; j++) row[b * BN_PAD_BLOCK + j] = src[b * BN_PAD_BLOCK + j];
            row[0] = 0.0f;
            continue;
        }
        for (int j = 0; j < pad; j++) row[j] = 0.0f;
        for (int j = 0; j < W; j++) row[pad + j] = t[(long)r * W + j];
        for (long j = 0; j < right; j++) row[pad + W + j] = 0.0f;
    }
    memset(pl + (pad + H) * WP, 0, sizeof(float) * (size_t)((pp->HP - pad - H) * WP));
}

/* plane p of (B, C) of y = x·k + sh (then ReLU): at out + p·HW; with
 * o->add, plus the residual add's other operand before the ReLU, and with
 * o->also a copy in the padded layout o->also_pad gives (the convolution
 * that reads the add's output besides the next add); with o->pad, in the
 * padded layout it gives (a convolution's input: zeros above, below and
 * around each row), the same values, the plane computed whole into a
 * buffer first where it fits (the loop as long as the plane). */
static inline __attribute__((always_inline)) void affine_plane_at(float *out, const float *inp, long p, float k,
                                                                   float sh, int HW, int relu, const bn_out_t *o)
{
    const int fits = HW + 2 * BN_PAD_BLOCK <= BN_ROWS_BLOCK;
    float tmp[BN_ROWS_BLOCK];
    if (o && o->add) {
        affine_add_plane(out + p * HW, inp + p * HW, o->add + p * HW, k, sh, HW, relu);
        if (o->also)   /* copied from the output plane just written */
            padded_store(o->also + p * o->also_pad->HP * o->also_pad->WP, out + p * HW, o->also_pad, 0);
        return;
    }
    if (!o || !o->pad) {
        affine_plane(out + p * HW, inp + p * HW, k, sh, HW, relu);
        return;
    }
    const plane_pad_t *opad = o->pad;
    float *pl = out + p * opad->HP * opad->WP;
    if (fits) {
        affine_plane(tmp + 1, inp + p * HW, k, sh, HW, relu);
        padded_store(pl, tmp + 1, opad, 1);
        return;
    }
    const int W = opad->W, H = opad->H, pad = opad->pad;
    const long WP = opad->WP, right = WP - pad - W;
    const float *x = inp + p * HW;
    memset(pl, 0, sizeof(float) * (size_t)(pad * WP));
    for (int r = 0; r < H; r++) {
        float *row = pl + (r + pad) * WP;
        for (int j = 0; j < pad; j++) row[j] = 0.0f;
        affine_plane(row + pad, x + (long)r * W, k, sh, W, relu);
        for (long j = 0; j < right; j++) row[pad + W + j] = 0.0f;
    }
    memset(pl + (pad + H) * WP, 0, sizeof(float) * (size_t)((opad->HP - pad - H) * WP));
}

/* y = x·k + (β − μ·k), k = γ/σ, over planes [p0, p1) of (B, C) in memory
 * order (the prefetcher follows one stream, not B short ones per channel) */
BN_CLONES static void normalize_planes(float *out, const float *inp, const float *mean, const float *invstd,
                                       const float *gamma, const float *beta, long p0, long p1, int C, int HW,
                                       int relu, const bn_out_t *o)
{
    for (long p = p0; p < p1; p++) {
        const int c = (int)(p % C);
        float k, sh;
        affine_coef(&k, &sh, mean, invstd, gamma, beta, c);
        affine_plane_at(out, inp, p, k, sh, HW, relu, o);
    }
}

/* The threads' pieces of the (B, C) planes: whole planes, each computed
 * alone, so any cut gives the same bits (util/par.h). The parallel loops
 * call the clones (BN_CLONES) and are not in them: GCC does not clone the
 * function it outlines for a loop. */
#define PLANE_PIECES(B, C, HW, call)                                                 \
    do {                                                                             \
        const long np_all_ = (long)(B) * (C);                                        \
        const int npc_ = par_elems(np_all_ * (HW));                                  \
        PAR_FOR_DYN_IF(npc_ > 1)                                                         \
        for (int q_ = 0; q_ < npc_; q_++) {                                          \
            const long p0 = par_cut(np_all_, npc_, q_, 1), p1 = par_cut(np_all_, npc_, q_ + 1, 1); \
            if (p1 > p0) call;                                                       \
        }                                                                            \
    } while (0)

static void normalize(float *out, const float *inp, const float *mean, const float *invstd, const float *gamma,
                      const float *beta, int B, int C, int HW, int relu, const bn_out_t *o)
{
    PLANE_PIECES(B, C, HW, normalize_planes(out, inp, mean, invstd, gamma, beta, p0, p1, C, HW, relu, o));
}

BN_CLONES void bn_plane_moments(double *m, const float *x, int n)
{
    /* centred about the float mean a: Σ(x − μ)² = Σ(x − a)² − n(μ − a)² */
    const double s = row_sum(x, n), mu = s / n;
    const float a = (float)mu;
    const double d = mu - (double)a;
    m[0] = s;
    m[1] = row_centred_squares(x, n, a) - n * d * d;
}

/* Channel c's Σ x and Σ (x − μ)² over the batch, merged from its planes'
 * moments (Chan et al.: M2 = Σ M2_p + n_p (μ_p − μ)²), mom (B, C, 2) */
static void channel_sums(double *s1, double *m2, const double *mom, int B, int C, int HW, int c)
{
    double t = 0;
    for (int b = 0; b < B; b++) t += mom[2 * ((long)b * C + c)];
    const double mu = t / ((double)B * HW);
    double q = 0;
    for (int b = 0; b < B; b++) {
        const double *mp = mom + 2 * ((long)b * C + c), d = mp[0] / HW - mu;
        q += mp[1] + HW * d * d;
    }
    *s1 = t;
    *m2 = q;
}

/* Channel c with mean mu and centred sum of squares m2 over n values:
 * keeps mean and 1/σ, moves the running statistics. */
static inline __attribute__((always_inline)) void channel_stats(float *mean, float *invstd, float *run_mean,
                                                                 float *run_var, int c, float momentum, float eps,
                                                                 double mu, double m2, double n)
{
    const double var = m2 / n;
    const float is = (float)(1.0 / sqrt(var + eps));
    mean[c] = (float)mu;
    invstd[c] = is;
    run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * (float)mu;
    run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (float)(n > 1 ? m2 / (n - 1) : var);
}

/* Gathers every replica's (2·C + 1) doubles into s->all and sums the first
 * `upto` of them over the replicas, in replica order (so that every replica
 * computes the same bits), into mine; returns the number of replicas. */
static int gather_sum(const bn_sync_t *s, double *mine, int C, int upto)
{
    const int w = 2 * C + 1;
    const int R = s->gather(s->ctx, mine, s->all, w);
    for (int i = 0; i < upto; i++) {
        double t = 0;
        for (int r = 0; r < R; r++) t += s->all[r * w + i];
        mine[i] = t;
    }
    return R;
}

/* Every replica's (n, Σx per channel, Σ(x − μ_r)² per channel) merged in
 * replica order (Chan et al.'s pairwise rule: M2 = Σ M2_r + n_r (μ_r − μ)²).
 * On return mine holds (N, μ per channel, M2 per channel) of the union. */
static void merge_moments(const bn_sync_t *s, double *mine, int C)
{
    const int w = 2 * C + 1;
    const int R = gather_sum(s, mine, C, 1 + C);   /* N, Σx per channel */
    const double *a = s->all;
    const double N = mine[0];
    for (int c = 0; c < C; c++) {
        const double mu = mine[1 + c] / N;
        double m2 = 0;
        for (int r = 0; r < R; r++) {
            const double nr = a[r * w], d = a[r * w + 1 + c] / nr - mu;
            m2 += a[r * w + 1 + C + c] + nr * d * d;
        }
        mine[1 + c] = mu;
        mine[1 + C + c] = m2;
    }
}

void bn_forward_train(float *out, float *mean, float *invstd, float *run_mean, float *run_var,
                                const float *inp, const float *gamma, const float *beta, const double *moments,
                                double *scratch, int B, int C, int HW, int relu, float momentum, float eps,
                                const bn_sync_t *sync, const bn_out_t *o)
{
    const double n = (double)B * HW;
    if (!moments) {   /* the planes' moments, unless the layer before computed them as it wrote */
        PAR_FOR_IF((long)B * C * HW >= PAR_MIN_FLOATS)   /* each plane's alone */
        for (long p = 0; p < (long)B * C; p++) bn_plane_moments(scratch + 2 * p, inp + p * HW, HW);
        moments = scratch;
    }
    if (sync) {
        /* the replicas' batches together: each replica's sums first, then
         * one gather, then the union's statistics normalize every batch */
        double *mine = sync->mine;
        mine[0] = n;
        for (int c = 0; c < C; c++) channel_sums(&mine[1 + c], &mine[1 + C + c], moments, B, C, HW, c);
        merge_moments(sync, mine, C);
        for (int c = 0; c < C; c++)
            channel_stats(mean, invstd, run_mean, run_var, c, momentum, eps, mine[1 + c], mine[1 + C + c], mine[0]);
    } else {
        for (int c = 0; c < C; c++) {
            /* centred sums of squares throughout: the one-pass E[x²] − E[x]²
             * cancels badly when |mean| ≫ std */
            double s1, m2;
            channel_sums(&s1, &m2, moments, B, C, HW, c);
            channel_stats(mean, invstd, run_mean, run_var, c, momentum, eps, s1 / n, m2, n);
        }
    }
    normalize(out, inp, mean, invstd, gamma, beta, B, C, HW, relu, o);
}

BN_CLONES static void eval_planes(float *out, const float *run_mean, const float *run_var, const float *inp,
                                  const float *gamma, const float *beta, long p0, long p1, int C, int HW, int relu,
                                  float eps, const bn_out_t *o)
{
    for (long p = p0; p < p1; p++) {
        const int c = (int)(p % C);
        const float k = gamma[c] / sqrtf(run_var[c] + eps), sh = beta[c] - run_mean[c] * k;
        affine_plane_at(out, inp, p, k, sh, HW, relu, o);
    }
}

void bn_forward_eval(float *out, const float *run_mean, const float *run_var, const float *inp,
                     const float *gamma, const float *beta, int B, int C, int HW, int relu, float eps,
                     const bn_out_t *o)
{
    PLANE_PIECES(B, C, HW, eval_planes(out, run_mean, run_var, inp, gamma, beta, p0, p1, C, HW, relu, eps, o));
}

/* With g = dout (masked where the fused ReLU clamped), x̂ = (x − μ)/σ:
 *   dβ = Σ g,  dγ = Σ g·x̂,  dx = γ/σ · (g − dβ/n − x̂·dγ/n).
 * The ReLU's mask is recomputed from the input: the forward pass wrote
 * y = max(x·k + sh, 0) with k = γ/σ and sh = β − μ·k, and the same float
 * operations give the same bits here, so the output need not be read. */
static inline __attribute__((always_inline)) float masked(float g, float x, float k, float sh, int relu)
{
    return relu && !(x * k + sh > 0.0f) ? 0.0f : g;
}

/* Each channel's Σ g and Σ g·(x − μ), g masked, for channels [c0, c1):
 * sg and sgx (C doubles each) take each plane's lanes in sample order. The
 * planes are read in memory order, sample by sample, a block of channels
 * at a time: one stream for the prefetcher (a channel at a time over the
 * batch was B short streams; resnet:20,16's normalizations took 13.3 ms of
 * a one-thread step's backward pass at batch 64 that way, 12.3 this way),
 * and each channel's sums stay in a local array until its last plane:
 * channels next to each other share a cache line, and the threads take
 * neighbouring channels, so writing sg plane by plane (as this once did)
 * had the two threads' cores trade the line B times a channel. */
enum { BN_SUMS_BLOCK = 64 };   /* channels whose sums are kept at once */

BN_CLONES static void grad_sums(double *sg, double *sgx, const float *dout, const float *inp, const float *mean,
                                const float *invstd, const float *gamma, const float *beta, int B, int C, int HW,
                                int relu, int c0, int c1)
{
    for (int cb = c0; cb < c1; cb += BN_SUMS_BLOCK) {
        const int ce = c1 - cb < BN_SUMS_BLOCK ? c1 : cb + BN_SUMS_BLOCK;
        double tg[BN_SUMS_BLOCK] = { 0 }, tgx[BN_SUMS_BLOCK] = { 0 };
        for (int b = 0; b < B; b++)
            for (int c = cb; c < ce; c++) {
                const float mu = mean[c];
                float k, sh;
                affine_coef(&k, &sh, mean, invstd, gamma, beta, c);
                const long o = ((long)b * C + c) * HW;
                const float *g = dout + o, *x = inp + o;
                float a[16] = { 0 }, q[16] = { 0 };
                int i = 0;
                for (; i + 16 <= HW; i += 16)
                    for (int j = 0; j < 16; j++) {
                        const float gv = masked(g[i + j], x[i + j], k, sh, relu);
                        a[j] += gv;
                        q[j] += gv * (x[i + j] - mu);
                    }
                for (; i < HW; i++) {
                    const float gv = masked(g[i], x[i], k, sh, relu);
                    a[0] += gv;
                    q[0] += gv * (x[i] - mu);
                }
                double ta = tg[c - cb], tq = tgx[c - cb];
                for (int j = 0; j < 16; j++) { ta += a[j]; tq += q[j]; }
                tg[c - cb] = ta;
                tgx[c - cb] = tq;
            }
        for (int c = cb; c < ce; c++) {
            sg[c] = tg[c - cb];
            sgx[c] = tgx[c - cb];
        }
    }
}


/* dx = k·g − k·dβ/n − k·dγ/n · x̂ = k·g + (c0 + c1·x), from each channel's
 * sums sg, sgx (Σ g, Σ g·(x − μ)) over the n values normalized together;
 * planes [p0, p1) of (B, C) in memory order */
BN_CLONES static void input_grad(float *dinp, const float *dout, const float *inp, const float *mean,
                                 const float *invstd, const float *gamma, const float *beta, const double *sg,
                                 const double *sgx, double n, long p0, long p1, int C, int HW, int relu,
                                 const plane_pad_t *dpad)
{
    for (long pl_ = p0; pl_ < p1; pl_++) {
        const int b = (int)(pl_ / C), c = (int)(pl_ % C);
        {
            const long o = ((long)b * C + c) * HW;
            const float *g = dout + o, *x = inp + o, mu = mean[c], is = invstd[c];
            float k, sh;
            affine_coef(&k, &sh, mean, invstd, gamma, beta, c);
            const float db = (float)sg[c], dg = (float)(sgx[c] * is);
            const float c1 = -k * dg * is / (float)n, c0 = -k * db / (float)n - c1 * mu;
            if (!dpad) {
                float *dx = dinp + o;
                for (int i = 0; i < HW; i++) dx[i] = k * masked(g[i], x[i], k, sh, relu) + c0 + c1 * x[i];
                continue;
            }
            /* the same values, each row at its place in the padded plane:
             * computed a block of rows at a time into tmp, where the loop
             * is as long as the block (ResNet's rows, 7 to 32 values, are
             * too short for the vector loop), then copied in while tmp is
             * in L1; rows longer than tmp, each straight in */
            float tmp[BN_ROWS_BLOCK];
            const int W = dpad->W, p = dpad->pad, H = dpad->H;
            const long WP = dpad->WP, right = WP - p - W;
            const int rb = W > BN_ROWS_BLOCK ? 1 : BN_ROWS_BLOCK / W;
            float *pl = dinp + ((long)b * C + c) * dpad->HP * WP;
            memset(pl, 0, sizeof(float) * (size_t)(p * WP));
            for (int r0 = 0; r0 < H; r0 += rb) {
                const int nr = H - r0 < rb ? H - r0 : rb;
                const float *gr = g + (long)r0 * W, *xr = x + (long)r0 * W;
                float *t = W > BN_ROWS_BLOCK ? pl + (r0 + p) * WP + p : tmp;
                for (long i = 0; i < (long)nr * W; i++) t[i] = k * masked(gr[i], xr[i], k, sh, relu) + c0 + c1 * xr[i];
                for (int r = 0; r < nr; r++) {
                    float *row = pl + (r0 + r + p) * WP;
                    for (int j = 0; j < p; j++) row[j] = 0.0f;
                    if (t == tmp)
                        for (int j = 0; j < W; j++) row[p + j] = tmp[r * W + j];
                    for (long j = 0; j < right; j++) row[p + W + j] = 0.0f;
                }
            }
            memset(pl + (p + H) * WP, 0, sizeof(float) * (size_t)((dpad->HP - p - H) * WP));
        }
    }
}

void bn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                 const float *mean, const float *invstd, const float *gamma, const float *beta,
                 double *scratch, int B, int C, int HW, int relu, const bn_sync_t *sync,
                 const plane_pad_t *dpad)
{
    double n = (double)B * HW;
    const double *sg = scratch, *sgx = scratch + C;
    if (dinp && !sync) {
        /* A few channels at a time, their sums and then their input
         * gradient, while their planes (at most BN_FUSED_BYTES of output
         * gradient and input) are still in the cache: the second pass
         * reads from L2, not memory (resnet:20,16's first stage: 400 kB a
         * channel, 3.2 MB a layer). The threads take whole pieces, at
         * least PAR_GRAIN of them each where there are channels enough
         * (20 channels a piece at 7x7 left 2 threads 40 and 24). Each
         * channel's sums are added in the same order as in two passes,
         * and the input gradient is element-wise: the same bits. */
        const long per = BN_FUSED_BYTES / ((long)B * HW * 2 * (long)sizeof(float));
        const int most = (C + par_pieces(C) - 1) / par_pieces(C);   /* enough pieces for the threads */
        const int cw = per < 1 ? 1 : per > most ? most : (int)per, nq = (C + cw - 1) / cw;
        PAR_FOR_DYN_IF(nq > 1 && (long)B * C * HW >= PAR_MIN_FLOATS)
        for (int q = 0; q < nq; q++) {
            const int c0 = q * cw, c1 = C - c0 < cw ? C : c0 + cw;
            grad_sums(scratch, scratch + C, dout, inp, mean, invstd, gamma, beta, B, C, HW, relu, c0, c1);
            for (int b = 0; b < B; b++)
                input_grad(dinp, dout, inp, mean, invstd, gamma, beta, sg, sgx, n, (long)b * C + c0, (long)b * C + c1,
                           C, HW, relu, dpad);
        }
        for (int c = 0; c < C; c++) {
            dbeta[c] = (float)sg[c];
            dgamma[c] = (float)(sgx[c] * invstd[c]);
        }
        return;
    }
    {   /* the threads take channels, each summing its own over the batch in
         * sample order: the bits of a one-thread pass */
        const int np = (long)B * C * HW < PAR_MIN_FLOATS ? 1 : par_pieces(C);
        PAR_FOR_DYN_IF(np > 1)
        for (int q = 0; q < np; q++)
            grad_sums(scratch, scratch + C, dout, inp, mean, invstd, gamma, beta, B, C, HW, relu, (int)par_cut(C, np, q, 1),
                      (int)par_cut(C, np, q + 1, 1));
    }
    for (int c = 0; c < C; c++) {
        dbeta[c] = (float)sg[c];
        dgamma[c] = (float)(sgx[c] * invstd[c]);
    }
    if (!dinp) return;
    if (sync) {
        /* dγ and dβ stay this replica's (the paradigm averages them like
         * every gradient); the input gradient subtracts the union's means:
         * N, Σg and Σg·(x − μ) per channel summed over the replicas */
        double *mine = sync->mine;
        mine[0] = n;
        for (int c = 0; c < C; c++) { mine[1 + c] = sg[c]; mine[1 + C + c] = sgx[c]; }
        gather_sum(sync, mine, C, 2 * C + 1);
        sg = mine + 1;
        sgx = mine + 1 + C;
        n = mine[0];
    }
    PLANE_PIECES(B, C, HW, input_grad(dinp, dout, inp, mean, invstd, gamma, beta, sg, sgx, n, p0, p1, C, HW, relu, dpad));
}

void gap_forward(float *out, const float *inp, int B, int C, int HW)
{
    const float inv = 1.0f / (float)HW;
    PAR_FOR_IF((long)B * C * HW >= PAR_MIN_FLOATS)   /* planes apart */
    for (long bc = 0; bc < (long)B * C; bc++) {
        const float *x = inp + bc * HW;
        float s = 0.0f;
        for (int i = 0; i < HW; i++) s += x[i];
        out[bc] = s * inv;
    }
}

void gap_backward(float *dinp, const float *dout, int B, int C, int HW)
{
    const float inv = 1.0f / (float)HW;
    PAR_FOR_IF((long)B * C * HW >= PAR_MIN_FLOATS)   /* planes apart */
    for (long bc = 0; bc < (long)B * C; bc++) {
        const float d = dout[bc] * inv;
        float *dx = dinp + bc * HW;
        for (int i = 0; i < HW; i++) dx[i] = d;
    }
}

BN_CLONES static void add_range(float *out, const float *a, const float *b, long i0, long n, int relu)
{
    if (relu)
        for (long i = i0; i < n; i++) { float v = a[i] + b[i]; out[i] = v > 0.0f ? v : 0.0f; }
    else
        for (long i = i0; i < n; i++) out[i] = a[i] + b[i];
}

BN_CLONES static void add_backward_range(float *dsum, const float *dout, const float *out, long i0, long n, int relu)
{
    if (relu && dsum == dout)   /* in place */
        for (long i = i0; i < n; i++) dsum[i] = out[i] > 0.0f ? dsum[i] : 0.0f;
    else if (relu)
        for (long i = i0; i < n; i++) dsum[i] = out[i] > 0.0f ? dout[i] : 0.0f;
    else if (dsum != dout)
        memcpy(dsum + i0, dout + i0, sizeof(float) * (size_t)(n - i0));
}

/* element-wise: pieces of [0, n), any cut the same bits */
#define RANGE_PIECES(n, call)                                                        \
    do {                                                                             \
        const int npc_ = par_elems(n);                                               \
        PAR_FOR_DYN_IF(npc_ > 1)                                                         \
        for (int q_ = 0; q_ < npc_; q_++) {                                          \
            const long i0 = par_cut((n), npc_, q_, 16), i1 = par_cut((n), npc_, q_ + 1, 16); \
            if (i1 > i0) call;                                                       \
        }                                                                            \
    } while (0)

void add_forward(float *out, const float *a, const float *b, long n, int relu)
{
    RANGE_PIECES(n, add_range(out, a, b, i0, i1, relu));
}

void add_backward(float *dsum, const float *dout, const float *out, long n, int relu)
{
    if (!relu && dsum == dout) return;
    RANGE_PIECES(n, add_backward_range(dsum, dout, out, i0, i1, relu));
}
