#include "layers.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "../util/par.h"

/* Element-wise passes: any cut gives the same bits (util/par.h). */
#define ELEMENTWISE(n, body)                                                   \
    do {                                                                       \
        const int np_ = par_elems(n);                                          \
        PAR_FOR_DYN_IF(np_ > 1)                                                    \
        for (int p_ = 0; p_ < np_; p_++) {                                     \
            const long e_ = par_cut((n), np_, p_ + 1, 16);                     \
            for (long i = par_cut((n), np_, p_, 16); i < e_; i++) body;        \
        }                                                                      \
    } while (0)

/* ---------------- pooling ---------------- */

static int pool_is_2x2(const conv_geom_t *g) { return g->KH == 2 && g->KW == 2 && g->stride == 2 && g->pad == 0; }

/* The common 2x2, stride 2, no padding case: no bounds checks, and selects
 * instead of branches (the winner is data-dependent, so branches mispredict
 * about half the time); the same first-wins tie-breaking as the general loop. */
static void maxpool2x2_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g)
{
    const int HW = g->H * g->W, OH = g->OH, OW = g->OW, W = g->W;
    PAR_FOR_IF((long)g->B * g->C * g->H * g->W >= PAR_MIN_FLOATS)   /* planes apart */
    for (long bc = 0; bc < (long)g->B * g->C; bc++) {
        const float *s = inp + bc * HW;
        float *o = out + bc * OH * OW;
        int32_t *a = argmax + bc * OH * OW;
        const int32_t base = (int32_t)(bc * HW);
        for (int oh = 0; oh < OH; oh++) {
            const float *r0 = s + 2 * oh * W, *r1 = r0 + W;
            const int32_t i0 = base + 2 * oh * W;
            float *orow = o + oh * OW;
            int32_t *arow = a + oh * OW;
            for (int ow = 0; ow < OW; ow++) {
                const float v0 = r0[2 * ow], v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];
                const int32_t k = i0 + 2 * ow;
                float best = v0;
                int32_t bi = k;
                bi = v1 > best ? k + 1 : bi;
                best = v1 > best ? v1 : best;
                bi = v2 > best ? k + W : bi;
                best = v2 > best ? v2 : best;
                bi = v3 > best ? k + W + 1 : bi;
                best = v3 > best ? v3 : best;
                orow[ow] = best;
                arow[ow] = bi;
            }
        }
    }
}

void maxpool_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g)
{
    if (pool_is_2x2(g)) {
        maxpool2x2_forward(out, argmax, inp, g);
        return;
    }
    const int HW = g->H * g->W, OHW = g->OH * g->OW;
    PAR_FOR_IF((long)g->B * g->C * g->H * g->W >= PAR_MIN_FLOATS)   /* planes apart */
    for (long bc = 0; bc < (long)g->B * g->C; bc++) {
        const float *s = inp + bc * HW;
        float *o = out + bc * OHW;
        int32_t *a = argmax + bc * OHW;
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                float best = -FLT_MAX;
                int32_t bi = -1;
                for (int ki = 0; ki < g->KH; ki++) {
                    int ih = oh * g->stride - g->pad + ki;
                    if (ih < 0 || ih >= g->H) continue;
                    for (int kj = 0; kj < g->KW; kj++) {
                        int iw = ow * g->stride - g->pad + kj;
                        if (iw < 0 || iw >= g->W) continue;
                        float v = s[ih * g->W + iw];
                        if (v > best || bi < 0) { best = v; bi = ih * g->W + iw; }
                    }
                }
                o[oh * g->OW + ow] = best;
                a[oh * g->OW + ow] = (int32_t)(bc * HW + bi);
            }
    }
}

/* v where c holds, +0 elsewhere, by a mask: GCC turns a select of floats
 * into a branch, which mispredicts on data as random as an argmax */
static inline float keep_if(float v, int c)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u &= -(uint32_t)(c != 0);
    memcpy(&v, &u, sizeof v);
    return v;
}

/* The 2x2, stride 2 case: every input element is written once, the winner's
 * gradient or zero (rows and columns outside every window are zeroed), with
 * no scatter and no branch. 0 + d, as the scatter into zeros gives (it
 * turns −0 into +0); out, when given, masks as a ReLU before the pool would. */
static void maxpool2x2_backward(float *dinp, const float *dout, const float *out, const int32_t *argmax,
                                const conv_geom_t *g)
{
    const int H = g->H, W = g->W, HW = H * W, OH = g->OH, OW = g->OW;
    PAR_FOR_IF((long)g->B * g->C * g->H * g->W >= PAR_MIN_FLOATS)   /* planes apart */
    for (long bc = 0; bc < (long)g->B * g->C; bc++) {
        float *s = dinp + bc * HW;
        const float *d = dout + bc * OH * OW, *o = out ? out + bc * OH * OW : NULL;
        const int32_t *a = argmax + bc * OH * OW;
        const int32_t base = (int32_t)(bc * HW);
        for (int oh = 0; oh < OH; oh++) {
            float *r0 = s + 2 * oh * W, *r1 = r0 + W;
            const int32_t i0 = base + 2 * oh * W;
            for (int ow = 0; ow < OW; ow++) {
                const int j = oh * OW + ow;
                float v = 0.0f + d[j];
                if (o) v = keep_if(v, o[j] > 0.0f);
                const int32_t k = a[j] - (i0 + 2 * ow);
                r0[2 * ow] = keep_if(v, k == 0);
                r0[2 * ow + 1] = keep_if(v, k == 1);
                r1[2 * ow] = keep_if(v, k == W);
                r1[2 * ow + 1] = keep_if(v, k == W + 1);
            }
            if (W > 2 * OW) { r0[W - 1] = 0.0f; r1[W - 1] = 0.0f; }
        }
        if (H > 2 * OH) memset(s + (long)(H - 1) * W, 0, sizeof(float) * (size_t)W);
    }
}

void maxpool_backward(float *dinp, const float *dout, const int32_t *argmax, const conv_geom_t *g)
{
    if (pool_is_2x2(g)) {
        maxpool2x2_backward(dinp, dout, NULL, argmax, g);
        return;
    }
    const long nin = (long)g->B * g->C * g->H * g->W;
    const long nout = (long)g->B * g->C * g->OH * g->OW;
    memset(dinp, 0, sizeof(float) * (size_t)nin);
    for (long i = 0; i < nout; i++) dinp[argmax[i]] += dout[i];
}

/* ReLU then max pooling, in one pass over the larger tensor: max(relu(x)) =
 * relu(max(x)), so the pool runs on the raw input and clamps its outputs.
 * Bit-identical to the two layers: where a window's maximum is positive it
 * is the same element (first wins); where it is not, the output is +0 and no
 * gradient flows, whichever element the argmax names. */
void maxpool_relu_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g)
{
    maxpool_forward(out, argmax, inp, g);
    const long n = (long)g->B * g->C * g->OH * g->OW;
    ELEMENTWISE(n, out[i] = out[i] > 0.0f ? out[i] : 0.0f);
}

void maxpool_relu_backward(float *dinp, const float *dout, const float *out, const int32_t *argmax,
                           const conv_geom_t *g)
{
    if (pool_is_2x2(g)) {
        maxpool2x2_backward(dinp, dout, out, argmax, g);
        return;
    }
    const long nin = (long)g->B * g->C * g->H * g->W;
    const long nout = (long)g->B * g->C * g->OH * g->OW;
    memset(dinp, 0, sizeof(float) * (size_t)nin);
    for (long i = 0; i < nout; i++) {
        const float d = dout[i];   /* a select, not a branch: the sign is data */
        dinp[argmax[i]] += out[i] > 0.0f ? d : 0.0f;
    }
}

/* ---------------- activations ---------------- */

void relu_forward(float *out, const float *inp, long n)
{
    ELEMENTWISE(n, out[i] = inp[i] > 0.0f ? inp[i] : 0.0f);
}

void relu_backward(float *dinp, const float *dout, const float *out, long n)
{
    /* load dout unconditionally: a select, not a branch, so it vectorizes */
    ELEMENTWISE(n, { float d = dout[i]; dinp[i] = out[i] > 0.0f ? d : 0.0f; });
}

void tanh_forward(float *out, const float *inp, long n)
{
    ELEMENTWISE(n, out[i] = tanhf(inp[i]));
}

void tanh_backward(float *dinp, const float *dout, const float *out, long n)
{
    ELEMENTWISE(n, dinp[i] = dout[i] * (1.0f - out[i] * out[i]));
}

/* ---------------- loss ---------------- */

/* The loss is summed in double by pieces of XENT_PIECE samples (more
 * where a batch has over XENT_PIECES of them), each in sample order, and
 * the pieces' sums in piece order: the pieces depend on B alone, so the
 * threads may take them (a batch of 256 on one thread spent 15 µs here,
 * which the other thread waited out asleep). */
enum { XENT_PIECE = 64, XENT_PIECES = 256 };

float softmax_xent_forward(float *probs, const float *logits, const int32_t *labels, int B, int K)
{
    const int per = ((B + XENT_PIECE * XENT_PIECES - 1) / (XENT_PIECE * XENT_PIECES)) * XENT_PIECE;
    const int np = (B + per - 1) / per;
    double part[XENT_PIECES];
    PAR_FOR_IF(np > 1)
    for (int q = 0; q < np; q++) {
        double total = 0.0;
        for (int i = q * per; i < B && i < (q + 1) * per; i++) {
            const float *z = logits + (long)i * K;
            float *p = probs + (long)i * K;
            float m = z[0];
            for (int k = 1; k < K; k++) if (z[k] > m) m = z[k];
            double sum = 0.0;
            for (int k = 0; k < K; k++) { p[k] = expf(z[k] - m); sum += p[k]; }
            float inv = (float)(1.0 / sum);
            for (int k = 0; k < K; k++) p[k] *= inv;
            /* −log softmax = log Σ exp(z − m) − (z_y − m), exact even when p_y underflows */
            total += log(sum) - (double)(z[labels[i]] - m);
        }
        part[q] = total;
    }
    double total = 0.0;
    for (int q = 0; q < np; q++) total += part[q];
    return (float)(total / B);
}

void softmax_xent_backward(float *dlogits, const float *probs, const int32_t *labels, int B, int K)
{
    const float inv = 1.0f / (float)B;
    for (int i = 0; i < B; i++) {
        const float *p = probs + (long)i * K;
        float *d = dlogits + (long)i * K;
        for (int k = 0; k < K; k++) d[k] = p[k] * inv;
        d[labels[i]] -= inv;
    }
}
