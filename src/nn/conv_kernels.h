/* nn/conv_kernels — the table of a convolution's vector kernels, one per
 * instruction set (built in conv.c from conv_kernels.inc), and the
 * Winograd form's host side (conv_wino.c) that runs them. Internal to nn. */
#ifndef DSGD_CONV_KERNELS_H
#define DSGD_CONV_KERNELS_H

#include "conv_layout.h"

typedef struct conv_kernels {
    void (*im2col)(float *col, const float *Pb, const conv_geom_t *g, const conv_layout_t *L);
    void (*col2im)(float *dinp, const float *end, const float *col, const conv_geom_t *g);
    void (*pad_planes)(float *P, const float *inp, long n, int H, int W, int p, long HP, long WP);
    void (*flat_unpack)(float *out, const float *y, int n, int OH, int OW, long WP, long FS, const float *b);
    void (*direct_forward)(float *out, const float *P, const float *w, const float *b,
                           const conv_geom_t *g, const conv_layout_t *L, int nt);
    void (*direct_backward)(float *acc, const float *P, const float *dout,
                            const conv_geom_t *g, const conv_layout_t *L, int nt, int oc0, int oc1);
    void (*flat_conv)(float *y, long ys, const float *x, long xplane, const float *w, int Cin, int Cout,
                      int KH, int KW, long WP, long nq);
    void (*flat_dw)(float *dw, long dws, const float *d, long dbs, long dplane, const float *x, long xbs,
                    long xplane, int B, int Cin, int Cout, int KH, int KW, long WP, long nvalid, long zeros);
    void (*flat_dwt)(float *dwt, const float *dT, long nvalid, int OCp, const float *x, long xplane, long xbs,
                     int nb, int C, long WP);
    void (*dt_transpose)(float *T, long OCp, const float *D, long dplane, int OC, long n);
    void (*wino_input)(float *V, long ps, const float *x, long xplane, int Cin, int OH, int OW, long WP, long p0);
    void (*wino_product)(float *Y, const float *V, const float *U, int Cin, int Cout, long ps, long np);
    void (*wino_output)(float *out, const float *Y, long ps, int Cout, int OH, int OW, long p0, const float *b,
                        int add);
    void (*wino_dz)(float *Z, long zs, const float *dT, int OCp, int OH, int OW, long WP, long p0);
    void (*wino_dw_product)(float *dU, const float *V, long ps, const float *Z, long zs, int C, int OCp, long np,
                            int add);
    int nt;   /* direct path: column tiles per block */
    int vl;   /* floats per vector */
    int dwt;  /* flat 3x3 weight gradient with output channels in the lanes from this many vectors of
               * them (0: never) */
    int doc;  /* flat weight gradient: output channels per tile */
    int wro;  /* the Winograd product's output channels per block (U's blocks) */
    int wdw;  /* the weight gradient in the Winograd form (AVX2 and AVX-512) */
} conv_kernels_t;

/* the moments of sample bb's output planes (just written: still in
 * cache), for the normalization that follows (NULL moments: none) */
static inline void conv_out_moments(double *moments, const float *out, const conv_geom_t *g, int bb)
{
    if (!moments) return;
    const int OHW = g->OH * g->OW;
    for (int oc = 0; oc < g->OC; oc++) {
        const long p = (long)bb * g->OC + oc;
        bn_plane_moments(moments + 2 * p, out + p * OHW, OHW);
    }
}

/* U(16, Cin·Cout), the Winograd form's weights of w(Cout, Cin, 3, 3), its
 * output channels by blocks of ro */
enum { WINO_RO_MAX = 8 };   /* the widest set's wro */
void wino_weights(float *U, const float *w, int Cin, int Cout, int ro, int par);
/* out(B, Cout, OH, OW) (+ b; add: added to out) from the padded planes x
 * and U, with the moments of its planes */
void wino_conv(const conv_kernels_t *k, float *out, const float *x, float *work, const float *U, const float *b,
               double *moments, int Cin, int Cout, const conv_geom_t *g, const conv_layout_t *L, int par, int add);
/* dw(OC, C, 3, 3) from the padded output gradient D and input P */
void wino_weight_grad(const conv_kernels_t *k, float *dw, const float *D, const float *P, float *acc, float *work,
                      const conv_geom_t *g, const conv_layout_t *L, int par);

#endif
