/* nn/conv — 2-D convolution (declared in layers.h).
 *
 * Forward first writes a zero-padded copy of the input into the col
 * workspace; backward works from that copy, so it needs neither the input
 * pointer nor bounds checks. Two paths:
 *
 *  - One input channel (LeNet's first layer): direct convolution. An im2col
 *    would blow the input up KH·KW times to feed a GEMM with only OC rows,
 *    which OpenBLAS packs at the cost of the arithmetic. Here each output tile
 *    of RB rows × TW columns is accumulated in registers over the KH·KW taps,
 *    and the weight gradient is accumulated per tap in TW lanes. Tiles past
 *    the output's edge are computed on the padding and not stored.
 *  - Otherwise, per sample: im2col of one sample (small enough to stay in
 *    cache), then out_b(OC, OH·OW) = w · col_b, which is already the NCHW
 *    layout, so no transpose and no batch-sized col.
 *
 * The direct loops are compiled for AVX-512 and AVX2 as well as the baseline
 * and picked at run time where the compiler supports it (target_clones), so
 * the binary still runs on any x86-64.
 *
 * col workspace, conv_col_size(g) floats:
 *   [ padded input (B, C, HP, WP) | col_b (C·KH·KW, OH·OW) | acc ]
 * acc is the weight-gradient accumulator: (OC, KH·KW + 1, TW) lanes on the
 * direct path (the extra tap is the bias), (C·KH·KW, OC) otherwise.
 */
#include "layers.h"

#include <cblas.h>
#include <stdint.h>
#include <string.h>

enum { TW = 16, RB = 4, NT_MAX = 2 };   /* direct path: tile columns, block rows, tiles per block */

/* The vector loops are written with explicit vectors (below); the loop
 * vectorizer would only try to widen them again across taps, into gathers. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CONV_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), \
                                   optimize("fp-contract=fast", "no-tree-loop-vectorize")))
#define CONV_HAVE_CLONES 1
#endif
#endif
#ifndef CONV_CLONES
#define CONV_CLONES
#endif

/* One TW-wide row segment as a GCC/Clang vector; the compiler splits it
 * into whatever registers the target has (1 zmm, 2 ymm, 4 xmm). */
typedef float vtw_t __attribute__((vector_size(TW * sizeof(float))));
typedef int32_t vti_t __attribute__((vector_size(TW * sizeof(int32_t))));
#define LANES { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 }
_Static_assert(TW == 16, "LANES lists TW lane numbers");

/* Loads and stores through memcpy: unaligned, and no vector passed by value
 * (whose ABI would differ between the clones). */
#define VLOAD(v, p) memcpy(&(v), (p), sizeof(vtw_t))
#define VSTORE(p, v) memcpy((p), &(v), sizeof(vtw_t))

/* v = p[0], p[s], p[2s], ...; s is a constant after inlining in the common
 * stride-1 case */
static inline __attribute__((always_inline)) void vload_s(vtw_t *v, const float *p, int s)
{
    if (s == 1) { VLOAD(*v, p); return; }
    for (int j = 0; j < TW; j++) (*v)[j] = p[(long)j * s];
}

int conv_geom_init(conv_geom_t *g)
{
    if (g->stride < 1 || g->KH < 1 || g->KW < 1 || g->pad < 0) return -1;
    int eh = g->H + 2 * g->pad - g->KH, ew = g->W + 2 * g->pad - g->KW;
    if (eh < 0 || ew < 0) return -1;
    g->OH = eh / g->stride + 1;
    g->OW = ew / g->stride + 1;
    return 0;
}

typedef struct conv_layout {
    long HP, WP;          /* padded input plane */
    long n_pad, n_col, n_acc;
    int direct;
} conv_layout_t;

static long round_up(long x, long m) { return (x + m - 1) / m * m; }
static long max_l(long a, long b) { return a > b ? a : b; }

static conv_layout_t conv_layout(const conv_geom_t *g)
{
    conv_layout_t L;
    const long s = g->stride, KK = (long)g->KH * g->KW;
    L.direct = g->C == 1;
    L.WP = g->W + 2L * g->pad;
    L.HP = g->H + 2L * g->pad;
    if (L.direct) {
        /* wide and tall enough for the last tile's reads */
        L.WP = max_l(L.WP, (round_up(g->OW, NT_MAX * TW) - 1) * s + g->KW);
        L.HP = max_l(L.HP, (round_up(g->OH, RB) - 1) * s + g->KH);
    }
    /* the slack after each buffer takes the vector loops' overrun: reads
     * past a row's end, and stores that the next row overwrites */
    const long slack = TW + g->KW + g->pad;
    L.n_pad = (long)g->B * g->C * L.HP * L.WP + slack;
    L.n_col = (long)g->C * KK * g->OH * g->OW + slack;
    /* + TW: room to align the direct path's vectors */
    L.n_acc = L.direct ? (long)g->OC * (KK + 1) * TW + TW : (long)g->C * KK * g->OC;
    return L;
}

long conv_col_size(const conv_geom_t *g)
{
    conv_layout_t L = conv_layout(g);
    return L.n_pad + L.n_col + L.n_acc;
}

/* P(B, C, HP, WP) = inp with pad zeros above and left, zeros to fill below and right */
static void pad_input(float *P, const float *inp, const conv_geom_t *g, const conv_layout_t *L)
{
    const long HW = (long)g->H * g->W, plane = L->HP * L->WP;
    const int p = g->pad, W = g->W;
    if (plane == HW) {   /* nothing to pad */
        memcpy(P, inp, sizeof(float) * (size_t)(g->B * g->C * HW));
        return;
    }
    memset(P, 0, sizeof(float) * (size_t)(g->B * g->C * plane));
    for (long bc = 0; bc < (long)g->B * g->C; bc++)
        for (int ih = 0; ih < g->H; ih++)
            memcpy(P + bc * plane + (ih + p) * L->WP + p, inp + bc * HW + (long)ih * W,
                   sizeof(float) * (size_t)W);
}

/* col_b[(c,ki,kj)][(oh,ow)] = Pb[c][oh·s+ki][ow·s+kj] for one sample. With
 * stride 1 each row is copied in whole vectors: the last one runs past the
 * row into the next, which the next row's copy overwrites (the buffer has TW
 * floats of slack at its end), and reads stay inside the padded row. */
CONV_CLONES
static void im2col_sample(float *col, const float *Pb, const conv_geom_t *gp, const conv_layout_t *Lp)
{
    /* by value: the vector stores go through memcpy and could otherwise
     * alias the geometry, which would be reloaded after every store */
    const conv_geom_t g = *gp;
    const conv_layout_t L = *Lp;
    const int OHW = g.OH * g.OW, OW = g.OW, s = g.stride;
    for (int c = 0; c < g.C; c++)
        for (int ki = 0; ki < g.KH; ki++)
            for (int kj = 0; kj < g.KW; kj++) {
                float *d = col + ((long)(c * g.KH + ki) * g.KW + kj) * OHW;
                for (int oh = 0; oh < g.OH; oh++, d += OW) {
                    const float *r = Pb + (c * L.HP + (long)oh * s + ki) * L.WP + kj;
                    if (s == 1)
                        for (int ow = 0; ow < OW; ow += TW) {
                            vtw_t v;
                            VLOAD(v, r + ow);
                            VSTORE(d + ow, v);
                        }
                    else
                        for (int ow = 0; ow < OW; ow++) d[ow] = r[(long)ow * s];
                }
            }
}

/* Adjoint of im2col for one sample: dinp_b(C, H, W) = Σ over taps of col_b
 * scattered back. With stride 1 each TW-wide segment of a dinp row gathers
 * all its taps in a register, masked where a tap falls outside the output,
 * and is stored once (a scatter-add of shifted rows would store to
 * overlapping addresses back to back and stall on store forwarding). A
 * store may run past the row into the next, which is written after it; end
 * bounds the last one. */
CONV_CLONES
static void col2im_sample(float *dinp, const float *end, const float *col, const conv_geom_t *gp)
{
    const conv_geom_t g = *gp;
    const int OHW = g.OH * g.OW, OH = g.OH, OW = g.OW, H = g.H, W = g.W, p = g.pad;
    if (g.stride != 1) {
        const int s = g.stride;
        memset(dinp, 0, sizeof(float) * (size_t)g.C * H * W);
        for (int c = 0; c < g.C; c++)
            for (int ki = 0; ki < g.KH; ki++)
                for (int kj = 0; kj < g.KW; kj++) {
                    const float *sr = col + ((long)(c * g.KH + ki) * g.KW + kj) * OHW;
                    for (int oh = 0; oh < OH; oh++, sr += OW) {
                        const int ih = oh * s - p + ki;
                        if (ih < 0 || ih >= H) continue;
                        for (int ow = 0; ow < OW; ow++) {
                            const int iw = ow * s - p + kj;
                            if (iw >= 0 && iw < W) dinp[((long)c * H + ih) * W + iw] += sr[ow];
                        }
                    }
                }
        return;
    }
    const vti_t lane = LANES;
    for (int c = 0; c < g.C; c++)
        for (int ih = 0; ih < H; ih++) {
            float *drow = dinp + ((long)c * H + ih) * W;
            for (int x = 0; x < W; x += TW) {
                vtw_t acc = { 0 };
                for (int ki = 0; ki < g.KH; ki++) {
                    const int oh = ih + p - ki;
                    if (oh < 0 || oh >= OH) continue;
                    for (int kj = 0; kj < g.KW; kj++) {
                        /* lane j takes col_b[(c,ki,kj)][oh][ow = x + j + p − kj] */
                        const int ow0 = x + p - kj;
                        /* all ones where 0 <= ow < OW: shifts, not compares,
                         * which GCC 12 scalarizes for 64-byte vectors */
                        const vti_t ow = lane + ow0, keep = ~((ow | (OW - 1 - ow)) >> 31);
                        vtw_t v;
                        VLOAD(v, col + ((long)(c * g.KH + ki) * g.KW + kj) * OHW + (long)oh * OW + ow0);
                        acc += (vtw_t)((vti_t)v & keep);
                    }
                }
                if (x + TW <= W || drow + x + TW <= end) VSTORE(drow + x, acc);
                else for (int j = 0; j < W - x; j++) drow[x + j] = acc[j];
            }
        }
}

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

/* ---------------- direct path, one input channel ---------------- */

/* A block is RB output rows × nt tiles of TW columns; nt is 1 or 2 and a
 * constant after inlining. Two tiles give the independent accumulator
 * chains an AVX-512 core needs (RB·2 registers); with narrower vectors one
 * tile already takes RB·2 or RB·4 registers. */
static int direct_col_tiles(void)
{
#ifdef CONV_HAVE_CLONES
    return __builtin_cpu_supports("avx512f") ? 2 : 1;
#else
    return 1;
#endif
}

/* acc[r][t] += Σ_ki,kj wk[ki][kj] · src[(r·s+ki)·WP + kj + (t·TW + 0..TW−1)·s];
 * s is a constant after inlining in the common stride-1 case. */
static inline __attribute__((always_inline)) void
direct_tile(vtw_t acc[RB][NT_MAX], const float *src, const float *wk, long WP, int KH, int KW,
            int s, int nt)
{
    for (int ki = 0; ki < KH; ki++)
        for (int kj = 0; kj < KW; kj++) {
            const float wv = wk[ki * KW + kj];
            for (int r = 0; r < RB; r++)
                for (int t = 0; t < nt; t++) {
                    vtw_t x;
                    vload_s(&x, src + ((long)r * s + ki) * WP + kj + (long)t * TW * s, s);
                    acc[r][t] += wv * x;
                }
        }
}

static inline __attribute__((always_inline)) int tile_cols(int OW, int ow, int t)
{
    const int n = OW - ow - t * TW;
    return n < 0 ? 0 : n > TW ? TW : n;
}

static inline __attribute__((always_inline)) void
direct_forward_blocks(float *out, const float *P, const float *w, const float *b,
                      const conv_geom_t g, const conv_layout_t L, int nt)
{
    const int OH = g.OH, OW = g.OW, s = g.stride, KK = g.KH * g.KW;
    const float *out_end = out + (long)g.B * g.OC * OH * OW;
    for (int bb = 0; bb < g.B; bb++) {
        const float *Pb = P + (long)bb * L.HP * L.WP;
        for (int oc = 0; oc < g.OC; oc++) {
            float *o = out + ((long)bb * g.OC + oc) * OH * OW;
            const float *wk = w + (long)oc * KK;
            for (int oh = 0; oh < OH; oh += RB)
                for (int ow = 0; ow < OW; ow += nt * TW) {
                    vtw_t acc[RB][NT_MAX];
                    for (int r = 0; r < RB; r++)
                        for (int t = 0; t < nt; t++) acc[r][t] = (vtw_t){ 0 } + b[oc];
                    const float *src = Pb + (long)oh * s * L.WP + (long)ow * s;
                    if (s == 1) direct_tile(acc, src, wk, L.WP, g.KH, g.KW, 1, nt);
                    else direct_tile(acc, src, wk, L.WP, g.KH, g.KW, s, nt);
                    /* A whole-vector store past a row's end writes into the
                     * next row. That row is stored later if it is in this
                     * block and this block spans the whole row, or if it is
                     * in a later block, channel or sample; not past out. */
                    const int nr = OH - oh < RB ? OH - oh : RB;
                    for (int r = 0; r < nr; r++)
                        for (int t = 0; t < nt; t++) {
                            float *d = o + (long)(oh + r) * OW + ow + t * TW;
                            const int nc = tile_cols(OW, ow, t);
                            const int overrun_ok = (OW <= nt * TW || r == nr - 1) && d + TW <= out_end;
                            if (nc == TW || (nc > 0 && overrun_ok)) VSTORE(d, acc[r][t]);
                            else for (int j = 0; j < nc; j++) d[j] = acc[r][t][j];
                        }
                }
        }
    }
}

CONV_CLONES
static void direct_forward(float *out, const float *P, const float *w, const float *b,
                           const conv_geom_t *gp, const conv_layout_t *Lp, int nt)
{
    /* by value: the vector stores go through memcpy and could otherwise
     * alias the geometry, which would be reloaded after every store */
    const conv_geom_t g = *gp;
    const conv_layout_t L = *Lp;
    if (nt == 2) direct_forward_blocks(out, P, w, b, g, L, 2);
    else direct_forward_blocks(out, P, w, b, g, L, 1);
}

/* a[(ki,kj)] += Σ_r,t dt[r][t] · src[(r·s+ki)·WP + kj + (t·TW + 0..TW−1)·s]:
 * a whole block per update of each tap's lanes */
static inline __attribute__((always_inline)) void
direct_dw_block(vtw_t *a, vtw_t dt[RB][NT_MAX], const float *src, long WP, int KH, int KW,
                int s, int nt)
{
    for (int ki = 0; ki < KH; ki++)
        for (int kj = 0; kj < KW; kj++, a++) {
            /* two partial sums: one chain of RB·nt dependent multiply-adds
             * per tap would be latency-bound */
            vtw_t u[2] = { *a, { 0 } };
            for (int r = 0; r < RB; r++)
                for (int t = 0; t < nt; t++) {
                    vtw_t x;
                    vload_s(&x, src + ((long)r * s + ki) * WP + kj + (long)t * TW * s, s);
                    u[(r * nt + t) & 1] += dt[r][t] * x;
                }
            *a = u[0] + u[1];
        }
}

static inline __attribute__((always_inline)) void
direct_backward_blocks(vtw_t *acc, const float *P, const float *dout,
                       const conv_geom_t g, const conv_layout_t L, int nt)
{
    const int OH = g.OH, OW = g.OW, s = g.stride, KK = g.KH * g.KW;
    const long per_oc = KK + 1;   /* taps, then the bias */
    const float *dout_end = dout + (long)g.B * g.OC * OH * OW;
    const vti_t lane = LANES;
    for (int bb = 0; bb < g.B; bb++) {
        const float *Pb = P + (long)bb * L.HP * L.WP;
        for (int oc = 0; oc < g.OC; oc++) {
            vtw_t *a = acc + oc * per_oc;
            const float *d = dout + ((long)bb * g.OC + oc) * OH * OW;
            for (int oh = 0; oh < OH; oh += RB)
                for (int ow = 0; ow < OW; ow += nt * TW) {
                    /* this block of dout, zero past its edges (the padded
                     * input has rows and columns for the whole block) */
                    vtw_t dt[RB][NT_MAX];
                    const int nr = OH - oh < RB ? OH - oh : RB;
                    for (int r = 0; r < RB; r++)
                        for (int t = 0; t < nt; t++) {
                            const float *dr = d + (long)(oh + r) * OW + ow + t * TW;
                            const int nc = r < nr ? tile_cols(OW, ow, t) : 0;
                            if (nc == TW) VLOAD(dt[r][t], dr);
                            else if (nc > 0 && dr + TW <= dout_end) {
                                /* a whole vector, lanes past the row cleared */
                                const vti_t keep = ~((nc - 1 - lane) >> 31);
                                vtw_t v;
                                VLOAD(v, dr);
                                dt[r][t] = (vtw_t)((vti_t)v & keep);
                            } else {
                                float tmp[TW] = { 0 };
                                for (int j = 0; j < nc; j++) tmp[j] = dr[j];
                                VLOAD(dt[r][t], tmp);
                            }
                            a[KK] += dt[r][t];
                        }
                    const float *src = Pb + (long)oh * s * L.WP + (long)ow * s;
                    if (s == 1) direct_dw_block(a, dt, src, L.WP, g.KH, g.KW, 1, nt);
                    else direct_dw_block(a, dt, src, L.WP, g.KH, g.KW, s, nt);
                }
        }
    }
}

/* dw[oc][ki][kj] = Σ_b,oh,ow dout[b][oc][oh][ow] · P[b][oh·s+ki][ow·s+kj], db[oc] = Σ dout */
CONV_CLONES
static void direct_backward(float *dw, float *db, vtw_t *acc, const float *P, const float *dout,
                            const conv_geom_t *gp, const conv_layout_t *Lp, int nt)
{
    const conv_geom_t g = *gp;   /* by value, as in direct_forward */
    const conv_layout_t L = *Lp;
    const int KK = g.KH * g.KW;
    const long per_oc = KK + 1;
    for (long i = 0; i < g.OC * per_oc; i++) acc[i] = (vtw_t){ 0 };
    if (nt == 2) direct_backward_blocks(acc, P, dout, g, L, 2);
    else direct_backward_blocks(acc, P, dout, g, L, 1);
    for (int oc = 0; oc < g.OC; oc++)
        for (int k = 0; k <= KK; k++) {
            const vtw_t v = acc[oc * per_oc + k];
            float t = 0.0f;
            for (int j = 0; j < TW; j++) t += v[j];
            if (k < KK) dw[(long)oc * KK + k] = t;
            else db[oc] = t;
        }
}

/* ---------------- entry points ---------------- */

void conv2d_forward(float *out, float *col, float *tmp, const float *inp,
                    const float *w, const float *b, const conv_geom_t *g)
{
    (void)tmp;
    const conv_layout_t L = conv_layout(g);
    float *P = col, *cb = col + L.n_pad;
    pad_input(P, inp, g, &L);
    if (L.direct) {
        direct_forward(out, P, w, b, g, &L, direct_col_tiles());
        return;
    }
    const int OHW = g->OH * g->OW, CKK = g->C * g->KH * g->KW;
    for (int bb = 0; bb < g->B; bb++) {
        im2col_sample(cb, P + (long)bb * g->C * L.HP * L.WP, g, &L);
        float *o = out + (long)bb * g->OC * OHW;
        for (int oc = 0; oc < g->OC; oc++)
            for (int p = 0; p < OHW; p++) o[(long)oc * OHW + p] = b[oc];
        /* out_b(OC, OHW) += w · col_b */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->OC, OHW, CKK,
                    1.0f, w, CKK, cb, OHW, 1.0f, o, OHW);
    }
}

void conv2d_backward(float *dinp, float *dw, float *db, float *col, float *tmp,
                     const float *dout, const float *w, const conv_geom_t *g)
{
    (void)tmp;
    const conv_layout_t L = conv_layout(g);
    const int OHW = g->OH * g->OW, CKK = g->C * g->KH * g->KW;
    const long plane = (long)g->C * L.HP * L.WP;
    float *P = col, *cb = col + L.n_pad, *acc = cb + L.n_col;
    const float *dinp_end = dinp ? dinp + (long)g->B * g->C * g->H * g->W : NULL;
    if (L.direct) {
        vtw_t *va = (vtw_t *)(((uintptr_t)acc + sizeof(vtw_t) - 1) & ~(uintptr_t)(sizeof(vtw_t) - 1));
        direct_backward(dw, db, va, P, dout, g, &L, direct_col_tiles());
    }
    else memset(db, 0, sizeof(float) * (size_t)g->OC);
    for (int bb = 0; bb < g->B; bb++) {
        const float *d = dout + (long)bb * g->OC * OHW;   /* (OC, OHW) */
        if (!L.direct) {
            for (int oc = 0; oc < g->OC; oc++) db[oc] += sum_floats(d + (long)oc * OHW, OHW);
            /* accᵀ(CKK, OC) += col_b · d_bᵀ: this orientation packs faster
             * than dw(OC, CKK) += d_b · col_bᵀ for few output channels */
            im2col_sample(cb, P + bb * plane, g, &L);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, CKK, g->OC, OHW,
                        1.0f, cb, OHW, d, OHW, bb ? 1.0f : 0.0f, acc, g->OC);
        }
        if (dinp) {
            /* dcol_b(CKK, OHW) = wᵀ · d_b, into the col_b buffer */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CKK, OHW, g->OC,
                        1.0f, w, CKK, d, OHW, 0.0f, cb, OHW);
            col2im_sample(dinp + (long)bb * g->C * g->H * g->W, dinp_end, cb, g);
        }
    }
    if (!L.direct)
        for (int oc = 0; oc < g->OC; oc++)
            for (int k = 0; k < CKK; k++) dw[(long)oc * CKK + k] = acc[(long)k * g->OC + oc];
}
