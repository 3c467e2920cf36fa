/* nn/conv — 2-D convolution (declared in layers.h).
 *
 * Forward first writes a zero-padded copy of the input into the col
 * workspace; backward works from that copy, so it needs neither the input
 * pointer nor bounds checks. Two paths:
 *
 *  - One input channel (LeNet's first layer): direct convolution. An im2col
 *    would blow the input up KH·KW times to feed a GEMM with only OC rows,
 *    which OpenBLAS packs at the cost of the arithmetic. Here each block of
 *    RB output rows × one or two tiles of TW columns is accumulated in
 *    registers over the KH·KW taps, and the weight gradient per tap in TW
 *    lanes. Blocks past the output's edge are computed on the padding and
 *    not stored.
 *  - Stride 1 with "same" padding (3x3 with pad 1, ResNet's convolutions):
 *    the flat path (conv_kernels.inc). Each output plane is computed WP wide
 *    (the padded input's width, W + pad: one dropped column per row for
 *    3x3), so
 *    every tap is one contiguous vector load at a fixed offset, shared by
 *    a block of output channels: no im2col and no GEMM packing, which cost
 *    as much as the arithmetic at ResNet's 16 to 64 channels. The input
 *    gradient is the same convolution of the padded output gradient with
 *    the weights flipped and transposed. With 3x3 taps both are computed
 *    in the Winograd F(2x2, 3x3) form instead (conv_wino.inc, its host side
 *    conv_wino.c): 2.25 times
 *    fewer multiplications, each 2x2 tile of outputs from its own 4x4 of
 *    input, so a sample's outputs do not depend on the thread or the set
 *    (beyond FMA contraction) but differ from the direct sums by a few ulp
 *    of their terms. With AVX-512 the weight gradient of a 3x3 layer is in
 *    the same form too (conv_wino.c: output channels in the lanes,
 *    sums per fixed piece of the batch). Elsewhere the weight gradient sums, for each
 *    tap, the padded output gradient against the input at that tap's
 *    offset, over the batch: a tile of 3 output channels × 9 taps stays in
 *    registers as lanes of positions (2.3-3.5x faster than an im2col GEMM
 *    per sample, whose 16 to 64 columns OpenBLAS packs at the cost of the
 *    arithmetic). With AVX-512 and 32 output channels or more, the output
 *    gradient of a chunk of samples is transposed first, so that the lanes
 *    hold output channels: each input value is broadcast against them, and
 *    no lanes need summing (about 1.5x faster again).
 *  - Otherwise, per sample: im2col of one sample (small enough to stay in
 *    cache), then out_b(OC, OH·OW) = w · col_b, which is already the NCHW
 *    layout, so no transpose and no batch-sized col. At stride 2 (ResNet's
 *    downsampling 3x3s) the im2col and its adjoint go by whole vectors, the
 *    even lanes picked or spread by permutes: one value at a time, they
 *    took longer than the layer's GEMMs.
 *
 * The vector loops (conv_kernels.inc) are compiled three times on x86-64 with
 * GCC: for x86-64-v4 (AVX-512), -v3 (AVX2, FMA) and the baseline, each with
 * vectors of its own width, and the widest the CPU runs is picked at run
 * time, so the default build still runs on any x86-64. Elsewhere only the
 * baseline copy (16-byte vectors) is built.
 *
 * The workspace's layout: conv_layout.c.
 */
#include "layers.h"

#include <cblas.h>
#include <stdint.h>
#include <string.h>

#include "../util/par.h"
#include "conv_kernels.h"
#include "conv_layout.h"

/* Σ x[0..n), in 8 lanes so that it vectorizes */
static float sum_floats(const float *x, long n)
{
    float a[8] = { 0 };
    long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) a[j] += x[i + j];
    float t = 0.0f;
    for (; i < n; i++) t += x[i];
    for (int j = 0; j < 8; j++) t += a[j];
    return t;
}

/* ---------------- vector kernels, one copy per instruction set ---------------- */

/* GCC's shuffle of generic vectors by a vector of indices, which the
 * stride-2 im2col and col2im use; other compilers (clang, which builds the
 * fuzzing harnesses) take their scalar loops */
#if defined(__GNUC__) && !defined(__clang__)
#define CONV_VSHUFFLE 1
#else
#define CONV_VSHUFFLE 0
#endif


#define KCAT2(a, b) a##_##b
#define KCAT(a, b) KCAT2(a, b)

#define KVB 16
#define KFN(name) KCAT(name, base)
#define KATTR
#define KNT 1
#include "conv_kernels.inc"
#undef KVB
#undef KFN
#undef KATTR
#undef KNT

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONV_X86_SETS 1
/* AVX2 + FMA, and AVX-512 (where two column tiles give the 8 independent
 * accumulators its FMA latency needs); fp-contract lets a·b + c be one FMA */
#define KVB 32
#define KFN(name) KCAT(name, v3)
#define KATTR __attribute__((target("arch=x86-64-v3"), optimize("fp-contract=fast")))
#define KNT 1
#include "conv_kernels.inc"
#undef KVB
#undef KFN
#undef KATTR
#undef KNT
#define KVB 64
#define KFN(name) KCAT(name, v4)
#define KATTR __attribute__((target("arch=x86-64-v4"), optimize("fp-contract=fast")))
#define KNT 2
#include "conv_kernels.inc"
#undef KVB
#undef KFN
#undef KATTR
#undef KNT
#endif

/* The widest set this CPU runs. */
static const conv_kernels_t *conv_kernels(void)
{
#ifdef CONV_X86_SETS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return &kernels_v4;
    if (__builtin_cpu_supports("x86-64-v3")) return &kernels_v3;
#endif
    return &kernels_base;
}

/* ---------------- entry points ---------------- */

/* P's planes [c0, c1) of (B, C) from the input's: padded, or subsampled
 * (the sub path) */
static void input_planes(const conv_kernels_t *k, float *P, const float *inp, long c0, long c1, const conv_geom_t *g,
                         const conv_layout_t *L)
{
    const long plane = L->HP * L->WP, HW = (long)g->H * g->W;
    if (!L->sub) {
        k->pad_planes(P + c0 * plane, inp + c0 * HW, c1 - c0, g->H, g->W, g->pad, L->HP, L->WP);
        return;
    }
    const long s = g->stride;
    for (long bc = c0; bc < c1; bc++)
        for (long oh = 0; oh < L->HP; oh++) {
            float *r = P + bc * plane + oh * L->WP;
            const float *x = inp + bc * HW + oh * s * g->W;
            for (long ow = 0; ow < L->WP; ow++) r[ow] = x[ow * s];
        }
}

/* The entry points with a given kernel set (tests run every set the CPU has). */

/* The im2col path's batch pieces (util/par.h), piece i of L.np holding
 * samples [piece_lo(B, np, i), piece_lo(B, np, i + 1)): its weight
 * gradient sums each piece's samples, so the same pieces whatever
 * --threads (conv_layout.c). Elsewhere a sample is a piece. Either runs on
 * the workspace slot of the thread that computes it. */
static int piece_lo(int B, int np, int i) { return (int)par_cut(B, np, i, 1); }



/* Forward: every sample is computed alone (the same bits on any thread). */
static void conv2d_forward_with(const conv_kernels_t *k, float *out, float *P, float *cb, const float *inp,
                                const float *w, const float *b, double *moments, const conv_geom_t *g)
{
    const conv_layout_t L = conv_layout(g);
    const int OHW = g->OH * g->OW, CKK = g->C * g->KH * g->KW;
    const long plane = L.HP * L.WP, work = (long)g->B * g->OC * OHW * CKK;
    const int par = work >= 64L * PAR_MIN_FLOATS;
    /* P(B, C, HP, WP): the padded input, its planes apart (none if its
     * producer wrote it there: conv2d_in_padded); the flat path reads past
     * the last plane (for positions it drops): zeros there */
    const long n = (long)g->B * g->C;
    if (L.flat) memset(P + n * plane, 0, sizeof(float) * (size_t)(L.n_pad - n * plane));
    if (inp) {
        const int np = par ? par_elems(n * plane) : 1;
        PAR_FOR_DYN_IF(np > 1)
        for (int i = 0; i < np; i++) input_planes(k, P, inp, par_cut(n, np, i, 1), par_cut(n, np, i + 1, 1), g, &L);
    }
    if (L.direct && !b) {   /* no bias: zeros from the (forward-unused) accumulator space */
        float *z = cb + L.n_col;
        memset(z, 0, sizeof(float) * (size_t)g->OC);
        b = z;
    }
    if (L.wino) {
        float *U = cb + L.n_col + L.n_acc + (long)g->C * 9 * g->OC;
        wino_weights(U, w, g->C, g->OC, k->wro, par);
        wino_conv(k, out, P, cb, U, b, moments, g->C, g->OC, g, &L, par, 0);
        return;
    }
    /* one sample at a time to whichever thread is free, each thread with
     * its workspace slot */
    PAR_FOR_SLOTS_IF(par && g->B > 1)
    for (int bb = 0; bb < g->B; bb++) {
        const int slot = par_slot();
        if (L.direct) {
            /* the sample as a batch of its own: its last store stops at its end */
            conv_geom_t gi = *g;
            gi.B = 1;
            k->direct_forward(out + (long)bb * g->OC * OHW, P + (long)bb * plane, w, b, &gi, &L, k->nt);
        } else if (L.flat) {
            float *y = cb + (long)slot * g->OC * L.FS;
            k->flat_conv(y, L.FS, P + (long)bb * g->C * plane, plane, w, g->C, g->OC, g->KH, g->KW, L.WP, L.FS);
            k->flat_unpack(out + (long)bb * g->OC * OHW, y, g->OC, g->OH, g->OW, L.WP, L.FS, b);
        } else {
            const float *col = P + (long)bb * g->C * plane;
            if (!L.sub) {
                float *c = cb + (long)slot * (L.n_col / PAR_SLOTS);
                k->im2col(c, col, g, &L);
                col = c;
            }
            float *o = out + (long)bb * g->OC * OHW;
            if (b)
                for (int oc = 0; oc < g->OC; oc++)
                    for (int p = 0; p < OHW; p++) o[(long)oc * OHW + p] = b[oc];
            /* out_b(OC, OHW) (+)= w · col_b */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->OC, OHW, CKK,
                        1.0f, w, CKK, col, OHW, b ? 1.0f : 0.0f, o, OHW);
        }
        conv_out_moments(moments, out, g, bb);
    }
}

/* The direct path's weight and bias gradients: acc(OC, KK + 1, TW) holds
 * per-tap lanes, the bias last; the threads take output channels. */
static void backward_direct_dw(const conv_kernels_t *k, float *dw, float *db, const float *P, float *acc,
                               const float *dout, const conv_geom_t *g, const conv_layout_t *Lp, int par)
{
    const conv_layout_t L = *Lp;
    const int KK = g->KH * g->KW;
    float *a = (float *)(((uintptr_t)acc + 63) & ~(uintptr_t)63);
    const int nq = par_pieces(g->OC);
    PAR_FOR_DYN_IF(par && nq > 1)
    for (int q = 0; q < nq; q++)
        k->direct_backward(a, P, dout, g, &L, k->nt, (int)par_cut(g->OC, nq, q, 1), (int)par_cut(g->OC, nq, q + 1, 1));
    for (int oc = 0; oc < g->OC; oc++) {
        for (int t = 0; t < KK; t++) dw[(long)oc * KK + t] = sum_floats(a + ((long)oc * (KK + 1) + t) * TW, TW);
        if (db) db[oc] = sum_floats(a + ((long)oc * (KK + 1) + KK) * TW, TW);
    }
}


/* The flat 3x3 path's weight gradient from the padded output gradient D. */
static void flat_weight_grad(const conv_kernels_t *k, float *dw, const float *D, const float *P, float *acc,
                             const conv_geom_t *g, const conv_layout_t *Lp, int par)
{
    const conv_layout_t L = *Lp;
    const int KK = g->KH * g->KW;
    const long plane = (long)g->C * L.HP * L.WP, dplane = L.HP * L.WP;
    if (L.dchunk && k->dwt && k->dwt * k->vl <= g->OC) {
        /* 3x3 with output channels in the lanes, over chunks of samples
         * whose output gradient is transposed to dT (q, OCp) first:
         * with AVX-512 and 32 or 64 channels (ResNet's stages 2 and 3),
         * 1.6-1.8 ms against 2.4-2.9 for the lane-sum tiles below, at
         * batch 64. Not with fewer channels, where each broadcast feeds
         * too few FMAs, nor with 16 vector registers (AVX2, SSE2), which
         * the tile's 18 sums would spill. The threads transpose a
         * chunk's samples, then take its input channels, cut in pairs (the
         * tiles' own pairs, so the same tiles as on one thread). */
        const long nvalid = (long)g->OH * L.WP, OCp = L.OCp;
        float *dwt = acc, *dT = acc + (long)g->C * 9 * OCp;
        /* one region: each thread keeps the same input channels (so their
         * sums stay in its cache) and the same share of each chunk's
         * samples to transpose; a barrier after the transposes, and one
         * before the next chunk's overwrite dT. (Two regions a chunk,
         * each handing out pieces: 64 channels 1.79x one thread's rate.) */
        PAR_REGION_IF(par)
        {
            const int T = par_team_size(), me = par_team_index();
            const int c0 = (int)par_cut(g->C, T, me, 2), c1 = (int)par_cut(g->C, T, me + 1, 2);
            memset(dwt + (long)c0 * 9 * OCp, 0, sizeof(float) * (size_t)((c1 - c0) * 9 * OCp));
            for (int b0 = 0; b0 < g->B; b0 += L.dchunk) {
                const int nb = g->B - b0 < L.dchunk ? g->B - b0 : L.dchunk;
                const int bb1 = (int)par_cut(nb, T, me + 1, 1);
                for (int bb = (int)par_cut(nb, T, me, 1); bb < bb1; bb++) {
                    const float *Db = D + (long)(b0 + bb) * g->OC * dplane + g->pad * L.WP + g->pad;
                    k->dt_transpose(dT + (long)bb * nvalid * OCp, OCp, Db, dplane, g->OC, nvalid);
                }
                PAR_BARRIER
                if (c1 > c0)
                    k->flat_dwt(dwt + (long)c0 * 9 * OCp, dT, nvalid, (int)OCp, P + b0 * plane + (long)c0 * L.HP * L.WP,
                                L.HP * L.WP, plane, nb, c1 - c0, L.WP);
                PAR_BARRIER
            }
            PAR_FOR_STATIC
            for (int oc = 0; oc < g->OC; oc++)
                for (int c = 0; c < g->C; c++)
                    for (int t = 0; t < 9; t++) dw[((long)oc * g->C + c) * 9 + t] = dwt[((long)c * 9 + t) * OCp + oc];
        }
    } else {
        /* the threads take shares of the (tile of output channels, input
         * channel) pairs in that order, each pair a tile's sums alone (the
         * same tiles as on one thread), a share's whole tiles in one call.
         * By tiles alone, 16 channels were 6 tiles: 9 of the channels on
         * one thread, 7 on the other (cut by pairs: 1.47 ms against 1.56 at
         * batch 64, 2 threads) */
        const int nt = (g->OC + k->doc - 1) / k->doc;
        const long pairs = (long)nt * g->C;
        /* The batch by chunks whose planes stay in cache (768 kB) while
         * every tile passes over them, each tile adding a chunk's sums to
         * the last chunk's. On the threads, each takes the same share of
         * the (tile, channel) pairs in every chunk, so the chunks need no
         * barrier between them. (Pieces over the whole batch, each streaming
         * its own chunks: at 16 channels, 1.62 ms a layer on two threads
         * against 2.6 on one; pieces of each chunk handed out one at a time,
         * a barrier after each chunk: 1.50.) */
        const long dbs = (long)g->OC * dplane, fit = (192L * 1024) / (dbs + plane);
        const int chunk = fit < 1 ? 1 : fit > g->B ? g->B : (int)fit;
        memset(dw, 0, sizeof(float) * (size_t)((long)g->OC * g->C * KK));
        PAR_REGION_IF(par && pairs > 1)
        {
            const int T = par_team_size(), me = par_team_index();
            const long p0 = par_cut(pairs, T, me, 1), p1 = par_cut(pairs, T, me + 1, 1);
            for (int b0 = 0; b0 < g->B; b0 += chunk) {
                const int nb = g->B - b0 < chunk ? g->B - b0 : chunk;
                const float *Dc = D + b0 * dbs + g->pad * L.WP + g->pad, *Pc = P + b0 * plane;
                for (long i = p0; i < p1;) {
                    const int t = (int)(i / g->C), c0 = (int)(i % g->C);
                    const long whole = c0 ? 0 : (p1 - i) / g->C;   /* tiles with every input channel */
                    const int c1 = whole ? g->C : p1 - (long)t * g->C < g->C ? (int)(p1 - (long)t * g->C) : g->C;
                    const int o0 = t * k->doc, ot = o0 + (whole ? (int)whole : 1) * k->doc, o1 = ot < g->OC ? ot : g->OC;
                    k->flat_dw(dw + ((long)o0 * g->C + c0) * KK, (long)g->C * KK, Dc + (long)o0 * dplane, dbs, dplane,
                               Pc + (long)c0 * L.HP * L.WP, plane, L.HP * L.WP, nb, c1 - c0, o1 - o0, g->KH, g->KW, L.WP,
                               (long)g->OH * L.WP, 2L * g->pad * L.WP);
                    i += whole ? whole * g->C : c1 - c0;
                }
            }
        }
    }
}

/* The flat path's three gradients. */
static void backward_flat(const conv_kernels_t *k, float *dinp, float *dw, float *db, const float *P, float *cb,
                          const float *dout, const float *w, const conv_geom_t *g, const conv_layout_t *Lp, int par,
                          int add)
{
    const conv_layout_t L = *Lp;
    const int OHW = g->OH * g->OW, KK = g->KH * g->KW;
    float *acc = cb + L.n_col;
    /* D(B, OC, HP, WP): the output gradient padded as the input was. Its
     * planes from offset pad·WP + pad are the flat layout, zeros in the
     * dropped columns: the weight gradient sums them against the input's
     * taps; the input gradient is their convolution with the weights
     * flipped in both taps and transposed, wt[c][oc][KK−1−t] = w[oc][c][t] */
    const long dplane = L.HP * L.WP;
    float *D = cb, *yd0 = cb + (long)g->B * g->OC * dplane + L.slack, *wt = acc + L.n_acc;
    if (dout) {   /* else: its producer wrote it there (conv2d_dout_padded) */
        const long n = (long)g->B * g->OC;
        const int npd = par ? par_elems(n * dplane) : 1;
        PAR_FOR_DYN_IF(npd > 1)
        for (int i = 0; i < npd; i++) {
            const long c0 = par_cut(n, npd, i, 1), c1 = par_cut(n, npd, i + 1, 1);
            k->pad_planes(D + c0 * dplane, dout + c0 * OHW, c1 - c0, g->OH, g->OW, g->pad, L.HP, L.WP);
        }
    }
    memset(D + (long)g->B * g->OC * dplane, 0, sizeof(float) * (size_t)L.slack);
    if (db) {   /* the padded planes' zeros add nothing; each channel over the batch in order */
        PAR_FOR_IF(par)
        for (int oc = 0; oc < g->OC; oc++) {
            float s = 0.0f;
            for (int bb = 0; bb < g->B; bb++) {
                const long p = (long)bb * g->OC + oc;
                s += dout ? sum_floats(dout + p * OHW, OHW) : sum_floats(D + p * dplane, dplane);
            }
            db[oc] = s;
        }
    }
    if (L.wino && k->wdw) wino_weight_grad(k, dw, D, P, acc, yd0, g, &L, par);
    else flat_weight_grad(k, dw, D, P, acc, g, &L, par);
    if (!dinp) return;
    PAR_FOR_IF(par && (long)g->OC * g->C * KK >= PAR_MIN_FLOATS)
    for (int oc = 0; oc < g->OC; oc++)
        for (int c = 0; c < g->C; c++)
            for (int t = 0; t < KK; t++) wt[((long)c * g->OC + oc) * KK + KK - 1 - t] = w[((long)oc * g->C + c) * KK + t];
    if (L.wino) {   /* wt is the weights of a convolution from OC channels to C */
        float *U = wt + (long)g->C * KK * g->OC;
        wino_weights(U, wt, g->OC, g->C, k->wro, par);
        wino_conv(k, dinp, D, yd0, U, NULL, NULL, g->OC, g->C, g, &L, par, add);
        return;
    }
    PAR_FOR_SLOTS_IF(par && g->B > 1)
    for (int bb = 0; bb < g->B; bb++) {
        float *yd = yd0 + (long)par_slot() * g->C * L.FS;
        k->flat_conv(yd, L.FS, D + (long)bb * g->OC * dplane, dplane, wt, g->OC, g->C, g->KH, g->KW, L.WP, L.FS);
        k->flat_unpack(dinp + (long)bb * g->C * g->H * g->W, yd, g->C, g->H, g->W, L.WP, L.FS, NULL);
    }
}

/* The im2col path, and the direct path's input gradient: the im2col path's
 * weight gradient sums fixed pieces of the batch; the direct path's input
 * gradient takes the same pieces. */
static void backward_im2col(const conv_kernels_t *k, float *dinp, float *dw, float *db, const float *P, float *cb,
                            const float *dout, const float *w, const conv_geom_t *g, const conv_layout_t *Lp, int par)
{
    const conv_layout_t L = *Lp;
    const int OHW = g->OH * g->OW, CKK = g->C * g->KH * g->KW;
    const long plane = (long)g->C * L.HP * L.WP;
    const int np = L.np;
    float *acc = cb + L.n_col;
    if (!L.direct && db) {   /* each channel over the batch in order */
        PAR_FOR_IF(par)
        for (int oc = 0; oc < g->OC; oc++) {
            float s = 0.0f;
            for (int bb = 0; bb < g->B; bb++) s += sum_floats(dout + ((long)bb * g->OC + oc) * OHW, OHW);
            db[oc] = s;
        }
    }
    if (L.direct && !dinp) return;
    const long sampl = (long)g->C * g->H * g->W, accn = (long)CKK * g->OC;
    PAR_FOR_SLOTS_IF(par && np > 1)
    for (int i = 0; i < np; i++) {
        float *col = cb + (long)par_slot() * (L.n_col / PAR_SLOTS), *acci = acc + i * accn;
        const int b0 = piece_lo(g->B, np, i);
        for (int bb = b0; bb < piece_lo(g->B, np, i + 1); bb++) {
            const float *d = dout + (long)bb * g->OC * OHW;   /* (OC, OHW) */
            if (!L.direct) {
                /* acciᵀ(CKK, OC) += col_b · d_bᵀ: this orientation packs
                 * faster than dw(OC, CKK) += d_b · col_bᵀ for few output
                 * channels */
                const float *xc = P + bb * plane;   /* the sub path's is its im2col */
                if (!L.sub) {
                    k->im2col(col, xc, g, &L);
                    xc = col;
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, CKK, g->OC, OHW,
                            1.0f, xc, OHW, d, OHW, bb > b0 ? 1.0f : 0.0f, acci, g->OC);
            }
            if (dinp) {
                /* dcol_b(CKK, OHW) = wᵀ · d_b, into the col_b buffer; its
                 * last store stops at the sample's end (the next sample may
                 * be another thread's) */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CKK, OHW, g->OC,
                            1.0f, w, CKK, d, OHW, 0.0f, col, OHW);
                k->col2im(dinp + bb * sampl, dinp + (bb + 1) * sampl, col, g);
            }
        }
    }
    if (!L.direct) {   /* the pieces' sums, in piece order */
        PAR_FOR_IF(par)
        for (int oc = 0; oc < g->OC; oc++)
            for (int t = 0; t < CKK; t++) {
                float s = acc[(long)t * g->OC + oc];
                for (int i = 1; i < np; i++) s += acc[i * accn + (long)t * g->OC + oc];
                dw[(long)oc * CKK + t] = s;
            }
    }
}

/* Backward. What sums over the batch is cut by output channel (the bias
 * and weight gradients of the direct and flat paths) or input channel
 * (the flat 3x3 path's transposed sums), each channel's sum taken over the
 * samples in order, as on one thread; the input gradient is per sample.
 * The im2col path's weight gradient is the exception: it is the sum of
 * the batch's pieces' sums (one GEMM chain per piece, added in piece
 * order), the same pieces whatever --threads, so its bits do not depend
 * on T either; they differ from one chain over the whole batch by the
 * reassociation of that sum (a few ulp). */
static void conv2d_backward_with(const conv_kernels_t *k, float *dinp, float *dw, float *db,
                                 const float *P, float *cb, const float *dout, const float *w, const conv_geom_t *g,
                                 int add)
{
    const conv_layout_t L = conv_layout(g);
    const int OHW = g->OH * g->OW, CKK = g->C * g->KH * g->KW;
    const int par = (long)g->B * g->OC * OHW * CKK >= 64L * PAR_MIN_FLOATS;
    if (L.direct) backward_direct_dw(k, dw, db, P, cb + L.n_col, dout, g, &L, par);
    if (L.flat) backward_flat(k, dinp, dw, db, P, cb, dout, w, g, &L, par, add && L.wino);
    else backward_im2col(k, dinp, dw, db, P, cb, dout, w, g, &L, par);
}

void conv2d_forward(float *out, float *col, const float *inp,
                    const float *w, const float *b, const conv_geom_t *g)
{
    conv2d_forward_with(conv_kernels(), out, col, col + conv_pad_size(g), inp, w, b, NULL, g);
}

void conv2d_backward(float *dinp, float *dw, float *db, float *col,
                     const float *dout, const float *w, const conv_geom_t *g)
{
    conv2d_backward_with(conv_kernels(), dinp, dw, db, col, col + conv_pad_size(g), dout, w, g, 0);
}

void conv2d_forward_ws(float *out, float *pad, float *work, const float *inp,
                       const float *w, const float *b, double *moments, const conv_geom_t *g)
{
    conv2d_forward_with(conv_kernels(), out, pad, work, inp, w, b, moments, g);
}

void conv2d_backward_ws(float *dinp, float *dw, float *db, const float *pad, float *work,
                        const float *dout, const float *w, const conv_geom_t *g)
{
    conv2d_backward_with(conv_kernels(), dinp, dw, db, pad, work, dout, w, g, 0);
}

int conv2d_dinp_adds(const conv_geom_t *g) { return conv_layout(g).wino; }

void conv2d_backward_ws_add(float *dinp, float *dw, float *db, const float *pad, float *work,
                            const float *dout, const float *w, const conv_geom_t *g)
{
    conv2d_backward_with(conv_kernels(), dinp, dw, db, pad, work, dout, w, g, 1);
}
