/* nn/conv_kernels.h — the vector loops of conv.c, written once and included
 * there once per instruction set (no include guard), with
 *   KVB        bytes per vector: 64, 32 or 16
 *   KFN(name)  this set's name for a function or type
 *   KATTR      function attributes: the target, or nothing
 *   KNT        column tiles per direct-path block: 2 where the registers
 *              allow and the FMA latency needs more independent sums
 * Vectors are the target's own width: GCC keeps wider generic vectors on
 * the stack, which costs more than the arithmetic. A TW-column tile is NV
 * vectors of VL lanes. Vectors go by pointer, never by value (their ABI
 * differs between the sets).
 */

#define VL (KVB / (int)sizeof(float))   /* lanes per vector */
#define NV (TW / VL)                    /* vectors per tile */
#define VF KFN(vf)
#define VI KFN(vi)
#define VFU KFN(vfu)
typedef float VF __attribute__((vector_size(KVB)));
typedef int32_t VI __attribute__((vector_size(KVB)));
typedef float VFU __attribute__((vector_size(KVB), aligned(4), may_alias)); /* unaligned */

/* lane[u] = u·VL + 0 .. VL−1 */
static inline __attribute__((always_inline)) void KFN(lanes)(VI lane[NV])
{
    int32_t n[TW];
    for (int j = 0; j < TW; j++) n[j] = j;
    for (int u = 0; u < NV; u++) memcpy(&lane[u], n + u * VL, sizeof(VI));
}

/* all ones in the lanes where 0 <= x < n: shifts rather than compares, which
 * GCC 12 does one lane at a time for some vector widths */
static inline __attribute__((always_inline)) void KFN(in_range)(VI *m, const VI *x, int n)
{
    *m = ~((*x | (n - 1 - *x)) >> 31);
}

/* *v = p[0], p[s], p[2s], ...; s is a constant after inlining in the common
 * stride-1 case */
static inline __attribute__((always_inline)) void KFN(load_s)(VF *v, const float *p, int s)
{
    if (s == 1) { *v = *(const VFU *)p; return; }
    float t[VL];
    for (int j = 0; j < VL; j++) t[j] = p[(long)j * s];
    *v = *(const VFU *)t;
}

/* col_b[(c,ki,kj)][(oh,ow)] = Pb[c][oh·s+ki][ow·s+kj] for one sample. With
 * stride 1 each row is copied in whole vectors: the last one runs past the
 * row into the next, which the next row's copy overwrites (the buffer has
 * slack at its end), and reads stay inside P and its slack. */
KATTR static void KFN(im2col_sample)(float *col, const float *Pb, const conv_geom_t *gp,
                                     const conv_layout_t *Lp)
{
    /* by value: vector stores may alias anything, and would otherwise make
     * the geometry be reloaded after each of them */
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
                        for (int ow = 0; ow < OW; ow += VL) *(VFU *)(d + ow) = *(const VFU *)(r + ow);
                    else
                        for (int ow = 0; ow < OW; ow++) d[ow] = r[(long)ow * s];
                }
            }
}

/* Adjoint of im2col for one sample: dinp_b(C, H, W) = Σ over taps of col_b
 * put back. With stride 1 each vector of a dinp row gathers all its taps
 * in a register, masked where a tap falls outside the output, and is stored
 * once (a scatter-add of shifted rows would store to overlapping addresses
 * back to back and stall on store forwarding). A store may run past the row
 * into the next, which is written after it; end bounds the last one. */
KATTR static void KFN(col2im_sample)(float *dinp, const float *end, const float *col,
                                     const conv_geom_t *gp)
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
    VI lane[NV];
    KFN(lanes)(lane);
    for (int c = 0; c < g.C; c++)
        for (int ih = 0; ih < H; ih++) {
            float *drow = dinp + ((long)c * H + ih) * W;
            for (int x = 0; x < W; x += VL) {
                VF acc = { 0 };
                for (int ki = 0; ki < g.KH; ki++) {
                    const int oh = ih + p - ki;
                    if (oh < 0 || oh >= OH) continue;
                    const float *sr = col + ((long)(c * g.KH + ki) * g.KW) * OHW + (long)oh * OW;
                    for (int kj = 0; kj < g.KW; kj++, sr += OHW) {
                        /* lane j takes col_b[(c,ki,kj)][oh][ow = x + j + p − kj] */
                        const int ow0 = x + p - kj;
                        const VI ow = lane[0] + ow0;
                        VI keep;
                        KFN(in_range)(&keep, &ow, OW);
                        const VF v = *(const VFU *)(sr + ow0);
                        acc += (VF)((VI)v & keep);
                    }
                }
                if (x + VL <= W || drow + x + VL <= end) *(VFU *)(drow + x) = acc;
                else for (int j = 0; j < W - x; j++) drow[x + j] = acc[j];
            }
        }
}

/* ---- direct path, one input channel ----
 * A block is RB output rows × nt tiles of TW columns (nt = 1 or 2, a
 * constant after inlining). */

static inline __attribute__((always_inline)) int KFN(vec_cols)(int OW, int col)
{
    const int n = OW - col;
    return n < 0 ? 0 : n > VL ? VL : n;
}

/* acc[r][t][u] += Σ_ki,kj wk[ki][kj] · src[(r·s+ki)·WP + kj + (t·TW + u·VL + 0..VL−1)·s] */
static inline __attribute__((always_inline)) void
KFN(direct_block)(VF acc[RB][NT_MAX][NV], const float *src, const float *wk, long WP, int KH,
                  int KW, int s, int nt)
{
    for (int ki = 0; ki < KH; ki++)
        for (int kj = 0; kj < KW; kj++) {
            const float wv = wk[ki * KW + kj];
            for (int r = 0; r < RB; r++)
                for (int t = 0; t < nt; t++)
                    for (int u = 0; u < NV; u++) {
                        VF x;
                        KFN(load_s)(&x, src + ((long)r * s + ki) * WP + kj + (long)(t * TW + u * VL) * s, s);
                        acc[r][t][u] += wv * x;
                    }
        }
}

static inline __attribute__((always_inline)) void
KFN(direct_forward_blocks)(float *out, const float *P, const float *w, const float *b,
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
                    VF acc[RB][NT_MAX][NV];
                    for (int r = 0; r < RB; r++)
                        for (int t = 0; t < nt; t++)
                            for (int u = 0; u < NV; u++) acc[r][t][u] = (VF){ 0 } + b[oc];
                    const float *src = Pb + (long)oh * s * L.WP + (long)ow * s;
                    if (s == 1) KFN(direct_block)(acc, src, wk, L.WP, g.KH, g.KW, 1, nt);
                    else KFN(direct_block)(acc, src, wk, L.WP, g.KH, g.KW, s, nt);
                    /* A whole-vector store past a row's end writes into the
                     * next row. That row is stored later if it is in this
                     * block and this block spans the whole row, or if it is
                     * in a later block, channel or sample; not past out. */
                    const int nr = OH - oh < RB ? OH - oh : RB;
                    for (int r = 0; r < nr; r++)
                        for (int t = 0; t < nt; t++)
                            for (int u = 0; u < NV; u++) {
                                const int col = ow + t * TW + u * VL, nc = KFN(vec_cols)(OW, col);
                                float *d = o + (long)(oh + r) * OW + col;
                                const int overrun_ok = (OW <= nt * TW || r == nr - 1) && d + VL <= out_end;
                                if (nc == VL || (nc > 0 && overrun_ok)) *(VFU *)d = acc[r][t][u];
                                else for (int j = 0; j < nc; j++) d[j] = acc[r][t][u][j];
                            }
                }
        }
    }
}

KATTR static void KFN(direct_forward)(float *out, const float *P, const float *w, const float *b,
                                      const conv_geom_t *gp, const conv_layout_t *Lp, int nt)
{
    const conv_geom_t g = *gp;   /* by value, as in im2col_sample */
    const conv_layout_t L = *Lp;
    if (nt == 2) KFN(direct_forward_blocks)(out, P, w, b, g, L, 2);
    else KFN(direct_forward_blocks)(out, P, w, b, g, L, 1);
}

/* a[(ki,kj)][u] += Σ_r,t dt[r][t][u] · src[(r·s+ki)·WP + kj + (t·TW + u·VL + 0..VL−1)·s]:
 * a whole block per update of each tap's lanes */
static inline __attribute__((always_inline)) void
KFN(direct_dw_block)(VF *a, VF dt[RB][NT_MAX][NV], const float *src, long WP, int KH, int KW,
                     int s, int nt)
{
    for (int ki = 0; ki < KH; ki++)
        for (int kj = 0; kj < KW; kj++, a += NV)
            for (int u = 0; u < NV; u++) {
                /* two partial sums: one chain of RB·nt dependent
                 * multiply-adds per tap would be latency-bound */
                VF part[2] = { a[u], { 0 } };
                for (int r = 0; r < RB; r++)
                    for (int t = 0; t < nt; t++) {
                        VF x;
                        KFN(load_s)(&x, src + ((long)r * s + ki) * WP + kj + (long)(t * TW + u * VL) * s, s);
                        part[(r * nt + t) & 1] += dt[r][t][u] * x;
                    }
                a[u] = part[0] + part[1];
            }
}

static inline __attribute__((always_inline)) void
KFN(direct_backward_blocks)(VF *acc, const float *P, const float *dout,
                            const conv_geom_t g, const conv_layout_t L, int nt, int oc0, int oc1)
{
    const int OH = g.OH, OW = g.OW, s = g.stride, KK = g.KH * g.KW;
    const long per_oc = (long)(KK + 1) * NV;   /* taps, then the bias */
    const float *dout_end = dout + (long)g.B * g.OC * OH * OW;
    VI lane[NV];
    KFN(lanes)(lane);
    for (int bb = 0; bb < g.B; bb++) {
        const float *Pb = P + (long)bb * L.HP * L.WP;
        for (int oc = oc0; oc < oc1; oc++) {
            VF *a = acc + oc * per_oc, *abias = a + (long)KK * NV;
            const float *d = dout + ((long)bb * g.OC + oc) * OH * OW;
            for (int oh = 0; oh < OH; oh += RB)
                for (int ow = 0; ow < OW; ow += nt * TW) {
                    /* this block of dout, zero past its edges (the padded
                     * input has rows and columns for the whole block) */
                    VF dt[RB][NT_MAX][NV];
                    const int nr = OH - oh < RB ? OH - oh : RB;
                    for (int r = 0; r < RB; r++)
                        for (int t = 0; t < nt; t++)
                            for (int u = 0; u < NV; u++) {
                                const int col = ow + t * TW + u * VL;
                                const int nc = r < nr ? KFN(vec_cols)(OW, col) : 0;
                                const float *dr = d + (long)(oh + r) * OW + col;
                                if (nc == VL) dt[r][t][u] = *(const VFU *)dr;
                                else if (nc > 0 && dr + VL <= dout_end) {
                                    /* a whole vector, lanes past the row cleared */
                                    const VF v = *(const VFU *)dr;
                                    VI keep;
                                    KFN(in_range)(&keep, &lane[0], nc);
                                    dt[r][t][u] = (VF)((VI)v & keep);
                                } else {
                                    float tmp[VL] = { 0 };
                                    for (int j = 0; j < nc; j++) tmp[j] = dr[j];
                                    dt[r][t][u] = *(const VFU *)tmp;
                                }
                                abias[u] += dt[r][t][u];
                            }
                    const float *src = Pb + (long)oh * s * L.WP + (long)ow * s;
                    if (s == 1) KFN(direct_dw_block)(a, dt, src, L.WP, g.KH, g.KW, 1, nt);
                    else KFN(direct_dw_block)(a, dt, src, L.WP, g.KH, g.KW, s, nt);
                }
        }
    }
}

/* acc(OC, KH·KW + 1, TW) = lanes of Σ_b,oh,ow dout[b][oc][oh][ow] · P[b][oh·s+ki][ow·s+kj],
 * the last tap Σ dout, for output channels [oc0, oc1) (each channel's
 * sums alone); acc is aligned to 64 bytes */
KATTR static void KFN(direct_backward)(float *acc, const float *P, const float *dout,
                                       const conv_geom_t *gp, const conv_layout_t *Lp, int nt, int oc0, int oc1)
{
    const conv_geom_t g = *gp;
    const conv_layout_t L = *Lp;
    VF *va = (VF *)(void *)acc;
    const long per_oc = (long)(g.KH * g.KW + 1) * NV;
    for (long i = oc0 * per_oc; i < oc1 * per_oc; i++) va[i] = (VF){ 0 };
    if (nt == 2) KFN(direct_backward_blocks)(va, P, dout, g, L, 2, oc0, oc1);
    else KFN(direct_backward_blocks)(va, P, dout, g, L, 1, oc0, oc1);
}

/* ---- flat path: stride 1, "same" padding, several input channels ----
 * An output position q = oh·WP + ow of a plane laid out WP wide (the padded
 * input's width; the columns ow >= OW are computed and dropped) reads tap
 * (ki, kj) at x[q + ki·WP + kj]: one contiguous vector load per tap for
 * FNV·VL positions at once, shared by FOC output channels, each weight
 * broadcast once per tap. No im2col, no packing: the input planes of a
 * sample stay in cache while every block of output channels passes them. */

#define FNV (KVB == 64 ? 4 : 2)   /* vectors of positions per tile */
#define FOC (KVB == 64 ? 6 : 4)   /* output channels per tile, at most */

static inline __attribute__((always_inline)) void
KFN(flat_tile)(float *y, long ys, const float *x, long xplane, const float *w, int Cin, int KH, int KW,
               long WP, int ocb, int nu)
{
    const int KK = KH * KW;
    VF acc[FOC][FNV];
    for (int o = 0; o < ocb; o++)
        for (int u = 0; u < nu; u++) acc[o][u] = (VF){ 0 };
    for (int c = 0; c < Cin; c++) {
        const float *xc = x + (long)c * xplane, *wc = w + (long)c * KK;
        for (int ki = 0; ki < KH; ki++)
            for (int kj = 0; kj < KW; kj++) {
                const float *xs = xc + ki * WP + kj;
                VF xv[FNV];
                for (int u = 0; u < nu; u++) xv[u] = *(const VFU *)(xs + u * VL);
                for (int o = 0; o < ocb; o++) {
                    const float wv = wc[(long)o * Cin * KK + ki * KW + kj];
                    for (int u = 0; u < nu; u++) acc[o][u] += wv * xv[u];
                }
            }
    }
    for (int o = 0; o < ocb; o++)
        for (int u = 0; u < nu; u++) *(VFU *)(y + o * ys + u * VL) = acc[o][u];
}

/* one tile of ocb channels × nu vectors, both made constants so that the
 * tile's loops unroll */
static inline __attribute__((always_inline)) void
KFN(flat_ocb)(float *y, long ys, const float *x, long xplane, const float *w, int Cin, int KH, int KW, long WP,
              int ocb, int nu)
{
#define FLAT_TILE(o, u) KFN(flat_tile)(y, ys, x, xplane, w, Cin, KH, KW, WP, o, u)
#define FLAT_NU(o)                                   \
    do {                                             \
        if (nu == FNV) FLAT_TILE(o, FNV);            \
        else if (nu == 2) FLAT_TILE(o, 2);           \
        else FLAT_TILE(o, 1);                        \
    } while (0)
    switch (ocb) {
    case FOC: FLAT_NU(FOC); break;
#if FOC > 4
    case 4: FLAT_NU(4); break;
#endif
    case 3: FLAT_NU(3); break;
    case 2: FLAT_NU(2); break;
    default: FLAT_NU(1); break;
    }
#undef FLAT_NU
#undef FLAT_TILE
}

static inline __attribute__((always_inline)) void
KFN(flat_blocks)(float *y, long ys, const float *x, long xplane, const float *w, int Cin, int Cout,
                 int KH, int KW, long WP, long nq)
{
    const long wo = (long)Cin * KH * KW;
    for (int oc = 0, ocb; oc < Cout; oc += ocb) {
        ocb = Cout - oc >= FOC ? FOC : Cout - oc >= 4 ? 4 : Cout - oc;
        const float *wq = w + oc * wo;
        long q = 0;
        for (; q + FNV * VL <= nq; q += FNV * VL)
            KFN(flat_ocb)(y + oc * ys + q, ys, x + q, xplane, wq, Cin, KH, KW, WP, ocb, FNV);
        /* the plane's last vectors: a tile of 2, then of 1 */
        for (; q + 2 * VL <= nq; q += 2 * VL)
            KFN(flat_ocb)(y + oc * ys + q, ys, x + q, xplane, wq, Cin, KH, KW, WP, ocb, 2);
        for (; q < nq; q += VL)
            KFN(flat_ocb)(y + oc * ys + q, ys, x + q, xplane, wq, Cin, KH, KW, WP, ocb, 1);
    }
}

/* y(Cout, ys)[0..nq) = Σ_c Σ_ki,kj w[oc][c][ki][kj] · x[c][q + ki·WP + kj]; nq a
 * multiple of FLAT_VEC; x readable FLAT_BLOCK + KW floats past its last plane */
KATTR static void KFN(flat_conv)(float *y, long ys, const float *x, long xplane, const float *w, int Cin,
                                 int Cout, int KH, int KW, long WP, long nq)
{
    if (KH == 3 && KW == 3) KFN(flat_blocks)(y, ys, x, xplane, w, Cin, Cout, 3, 3, WP, nq);
    else KFN(flat_blocks)(y, ys, x, xplane, w, Cin, Cout, KH, KW, WP, nq);
}

/* ---- flat path, weight gradient ----
 * dw[oc][c][ki][kj] = Σ_b Σ_q d[b][oc][q] · x[b][c][q + ki·WP + kj] over the
 * flat positions q < nvalid, where d is the output gradient laid out WP
 * wide with zeros in the dropped columns. A tile keeps DOC output channels
 * × up to DKK taps of one input channel in registers, as lanes, over a
 * chunk of samples: one load of d per channel and one of x per tap feed
 * DOC FMAs each; the lanes are summed once per chunk. */

#define DOC (KVB == 64 ? 3 : 1)
#ifndef KEEP_IN_REGISTER
#if defined(__x86_64__) && defined(__GNUC__)
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define KEEP_IN_REGISTER(v) ((void)0)
#endif
#endif   /* output channels per tile */
#define DKK 9

static inline __attribute__((always_inline)) void
KFN(dw_tile)(float *dw, long dws, const float *d, long dbs, long dplane, const float *x, long xbs, int nb,
             int t0, int nt, int KW, long WP, long nv, const VF *mask, int docb)
{
    VF acc[DOC][DKK];
    long off[DKK];
    for (int t = 0; t < nt; t++) off[t] = (long)((t0 + t) / KW) * WP + (t0 + t) % KW;
    for (int o = 0; o < docb; o++)
        for (int t = 0; t < nt; t++) acc[o][t] = (VF){ 0 };
    /* mask NULL: d is zero past nvalid up to the last vector's end */
    const long nfull = mask ? nv - 1 : nv;
    for (int b = 0; b < nb; b++) {
        const float *db = d + b * dbs, *xb = x + b * xbs;
        for (long v = 0; v < nfull; v++) {
            const long q = v * VL;
            VF dv[DOC];
            for (int o = 0; o < docb; o++) dv[o] = *(const VFU *)(db + o * dplane + q);
            for (int t = 0; t < nt; t++) {
                VF xv = *(const VFU *)(xb + q + off[t]);
                KEEP_IN_REGISTER(xv);   /* one load for DOC FMAs, not one load folded into each */
                for (int o = 0; o < docb; o++) acc[o][t] += dv[o] * xv;
            }
        }
        if (mask) {   /* the last vector: its lanes past nvalid count nothing */
            const long q = nfull * VL;
            for (int o = 0; o < docb; o++) {
                const VF dv = *(const VFU *)(db + o * dplane + q) * *mask;
                for (int t = 0; t < nt; t++) acc[o][t] += dv * *(const VFU *)(xb + q + off[t]);
            }
        }
    }
    for (int o = 0; o < docb; o++)
        for (int t = 0; t < nt; t++) {
            float s = 0.0f;
            for (int j = 0; j < VL; j++) s += acc[o][t][j];
            dw[o * dws + t0 + t] += s;
        }
}

/* dw_tile for 3x3 taps, all 9 and DOC output channels: the input's three
 * rows through pointers that advance with q, each tap a constant
 * displacement from one of them, so that the loop keeps its 27 sums and
 * its pointers in registers (general offsets per tap spill both) */
static inline __attribute__((always_inline)) void
KFN(dw_tile3)(float *dw, long dws, const float *d, long dbs, long dplane, const float *x, long xbs, int nb,
              long WP, long nv, const VF *mask)
{
    VF acc[DOC][9];
    for (int o = 0; o < DOC; o++)
        for (int t = 0; t < 9; t++) acc[o][t] = (VF){ 0 };
    const long nfull = mask ? nv - 1 : nv;
    for (int b = 0; b < nb; b++) {
        const float *dp = d + b * dbs, *r0 = x + b * xbs, *r1 = r0 + WP, *r2 = r1 + WP;
        for (long v = 0; v < nfull; v++, dp += VL, r0 += VL, r1 += VL, r2 += VL) {
            VF dv[DOC];
            for (int o = 0; o < DOC; o++) dv[o] = *(const VFU *)(dp + o * dplane);
            const float *rows[3] = { r0, r1, r2 };
            for (int ki = 0; ki < 3; ki++)
                for (int kj = 0; kj < 3; kj++) {
                    VF xv = *(const VFU *)(rows[ki] + kj);
                    KEEP_IN_REGISTER(xv);
                    for (int o = 0; o < DOC; o++) acc[o][ki * 3 + kj] += dv[o] * xv;
                }
        }
        if (mask) {
            const float *rows[3] = { r0, r1, r2 };
            for (int o = 0; o < DOC; o++) {
                const VF dv = *(const VFU *)(dp + o * dplane) * *mask;
                for (int t = 0; t < 9; t++) acc[o][t] += dv * *(const VFU *)(rows[t / 3] + t % 3);
            }
        }
    }
    for (int o = 0; o < DOC; o++)
        for (int t = 0; t < 9; t++) {
            float s = 0.0f;
            for (int j = 0; j < VL; j++) s += acc[o][t][j];
            dw[o * dws + t] += s;
        }
}

static inline __attribute__((always_inline)) void
KFN(dw_blocks)(float *dw, const float *d, long dbs, long dplane, const float *x, long xbs, long xplane, int B,
               int Cin, int Cout, int KH, int KW, long WP, long nvalid, long zeros)
{
    const int KK = KH * KW;
    const long nv = (nvalid + VL - 1) / VL, rem = nvalid - (nv - 1) * VL;
    VF mask;
    for (int j = 0; j < VL; j++) mask[j] = j < rem ? 1.0f : 0.0f;
    const VF *mk = nv * VL - nvalid <= zeros ? NULL : &mask;
    /* a chunk of samples whose planes stay in cache while every tile passes */
    const long per = dbs + xbs;
    const long fit = (192L * 1024) / (per > 0 ? per : 1);
    const int chunk = fit < 1 ? 1 : fit > B ? B : (int)fit;
    memset(dw, 0, sizeof(float) * (size_t)Cout * Cin * KK);
    for (int b0 = 0; b0 < B; b0 += chunk) {
        const int nb = B - b0 < chunk ? B - b0 : chunk;
        for (int oc = 0, docb; oc < Cout; oc += docb) {
            docb = Cout - oc >= DOC ? DOC : Cout - oc;
            for (int c = 0; c < Cin; c++)
                for (int t0 = 0; t0 < KK; t0 += DKK) {
                    const int nt = KK - t0 < DKK ? KK - t0 : DKK;
                    float *dwq = dw + ((long)oc * Cin + c) * KK;
                    const float *dq = d + b0 * dbs + oc * dplane, *xq = x + b0 * xbs + c * xplane;
                    const long dws = (long)Cin * KK;
                    if (KH == 3 && KW == 3 && docb == DOC)
                        KFN(dw_tile3)(dwq, dws, dq, dbs, dplane, xq, xbs, nb, WP, nv, mk);
                    else if (nt == DKK && docb == DOC)   /* constants, so that the tile's loops unroll */
                        {
                        if (mk) KFN(dw_tile)(dwq, dws, dq, dbs, dplane, xq, xbs, nb, t0, DKK, KW, WP, nv, mk, DOC);
                        else KFN(dw_tile)(dwq, dws, dq, dbs, dplane, xq, xbs, nb, t0, DKK, KW, WP, nv, NULL, DOC);
                    } else
                        for (int o = 0; o < docb; o++)
                            KFN(dw_tile)(dwq + o * dws, dws, dq + o * dplane, dbs, dplane, xq, xbs, nb, t0, nt, KW, WP,
                                         nv, mk, 1);
                }
        }
    }
}

/* dw(Cout, Cin, KH, KW) = Σ_b Σ_q<nvalid d[b·dbs + oc·dplane + q] ·
 * x[b·xbs + c·xplane + q + ki·WP + kj]; d zero in the dropped columns and
 * in the `zeros` floats after each plane's last position; both readable a
 * vector past the last position read */
KATTR static void KFN(flat_dw)(float *dw, const float *d, long dbs, long dplane, const float *x, long xbs,
                               long xplane, int B, int Cin, int Cout, int KH, int KW, long WP, long nvalid,
                               long zeros)
{
    if (KH == 3 && KW == 3) KFN(dw_blocks)(dw, d, dbs, dplane, x, xbs, xplane, B, Cin, Cout, 3, 3, WP, nvalid, zeros);
    else KFN(dw_blocks)(dw, d, dbs, dplane, x, xbs, xplane, B, Cin, Cout, KH, KW, WP, nvalid, zeros);
}

/* ---- flat path, 3x3 weight gradient with output channels in the lanes ----
 * dwt[(c·9 + t)·OCp + oc] += Σ_b Σ_q<nvalid dT[b][q][oc] · x[b][c][q + off_t],
 * off_t = (t/3)·WP + t%3, where dT (nb, nvalid, OCp) is the output gradient
 * transposed, zero in the dropped columns and in the lanes past OC. Each
 * position broadcasts 9 input values per input channel against one or two
 * vectors of output channels: no horizontal sums, and broadcast loads never
 * split a cache line. A tile is 2 vectors × 1 input channel × 9 taps, or
 * 1 vector × 2 channels × 9 taps: 18 sums in registers. (Its 4-position
 * loop and its 1-position tail stay apart: the tail written as the loop's
 * body at one position ran the 2-vector tiles 15-20% slower.) */
static inline __attribute__((always_inline)) void
KFN(dwt_tile)(float *dwt, int OCp, const float *dT, long nvalid, const float *x, long xplane, long xbs, int nb,
              long WP, int V, int CB, int P)
{
    VF acc[2][9][2];
    for (int cb = 0; cb < CB; cb++)
        for (int t = 0; t < 9; t++)
            for (int v = 0; v < V; v++) acc[cb][t][v] = *(const VFU *)(dwt + ((long)cb * 9 + t) * OCp + v * VL);
    for (int b = 0; b < nb; b++) {
        const float *db = dT + (long)b * nvalid * OCp, *xb = x + (long)b * xbs;
        long q = 0;
        /* P positions at once: a row's P + 2 input values serve its 3 taps
         * at each position, so each broadcast feeds up to 3 FMAs */
        for (; P > 1 && q + P <= nvalid; q += P) {
            VF dv[4][2];
            for (int j = 0; j < P; j++)
                for (int v = 0; v < V; v++) dv[j][v] = *(const VFU *)(db + (q + j) * OCp + v * VL);
            for (int cb = 0; cb < CB; cb++)
                for (int ki = 0; ki < 3; ki++) {
                    const float *p = xb + cb * xplane + ki * WP + q;
                    float xs[6];
                    for (int j = 0; j < P + 2; j++) xs[j] = p[j];
                    for (int j = 0; j < P; j++)
                        for (int kj = 0; kj < 3; kj++)
                            for (int v = 0; v < V; v++) acc[cb][ki * 3 + kj][v] += dv[j][v] * xs[j + kj];
                }
        }
        for (; q < nvalid; q++) {
            VF dv[2];
            for (int v = 0; v < V; v++) dv[v] = *(const VFU *)(db + q * OCp + v * VL);
            for (int cb = 0; cb < CB; cb++) {
                const float *p = xb + cb * xplane + q;
                for (int ki = 0; ki < 3; ki++)
                    for (int kj = 0; kj < 3; kj++) {
                        const float xv = p[ki * WP + kj];
                        for (int v = 0; v < V; v++) acc[cb][ki * 3 + kj][v] += dv[v] * xv;
                    }
            }
        }
    }
    for (int cb = 0; cb < CB; cb++)
        for (int t = 0; t < 9; t++)
            for (int v = 0; v < V; v++) *(VFU *)(dwt + ((long)cb * 9 + t) * OCp + v * VL) = acc[cb][t][v];
}

/* dwt(C, 9, OCp) += the chunk's sums (see dwt_tile); x is the chunk's first
 * sample's first channel of the padded input, xplane floats a channel and
 * xbs a sample apart */
KATTR static void KFN(flat_dwt)(float *dwt, const float *dT, long nvalid, int OCp, const float *x, long xplane,
                                long xbs, int nb, int C, long WP)
{
    const int nvo = OCp / VL;
    for (int ov = 0; ov < nvo;) {
        float *dw0 = dwt + ov * VL;
        const float *d0 = dT + ov * VL;
        if (nvo - ov >= 2) {
            for (int c = 0; c < C; c++)
                KFN(dwt_tile)(dw0 + (long)c * 9 * OCp, OCp, d0, nvalid, x + c * xplane, xplane, xbs, nb, WP, 2, 1, 1);
            ov += 2;
        } else {
            int c = 0;
            for (; c + 2 <= C; c += 2)
                KFN(dwt_tile)(dw0 + (long)c * 9 * OCp, OCp, d0, nvalid, x + c * xplane, xplane, xbs, nb, WP, 1, 2, 4);
            for (; c < C; c++)
                KFN(dwt_tile)(dw0 + (long)c * 9 * OCp, OCp, d0, nvalid, x + c * xplane, xplane, xbs, nb, WP, 1, 1, 4);
            ov += 1;
        }
    }
}

#undef DKK
#undef FNV
#undef FOC
/* DOC is undefined after the table, which gives it to conv.c */

static const conv_kernels_t KFN(kernels) = {
    KFN(im2col_sample), KFN(col2im_sample), KFN(direct_forward), KFN(direct_backward), KFN(flat_conv), KFN(flat_dw),
    KFN(flat_dwt), KNT, VL, KVB == 64 ? 2 : 0, DOC,
};

#undef DOC
#undef VL
#undef NV
#undef VF
#undef VI
#undef VFU
