#include "layers.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

/* ---------------- dense ---------------- */

void dense_forward(float *out, const float *inp, const float *w, const float *b,
                   int B, int IN, int OUT)
{
    for (int i = 0; i < B; i++)
        memcpy(out + (long)i * OUT, b, sizeof(float) * (size_t)OUT);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OUT, IN,
                1.0f, inp, IN, w, IN, 1.0f, out, OUT);
}

void dense_backward(float *dinp, float *dw, float *db, const float *dout,
                    const float *inp, const float *w, int B, int IN, int OUT)
{
    /* dw = doutᵀ · inp */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, IN, B,
                1.0f, dout, OUT, inp, IN, 0.0f, dw, IN);
    memset(db, 0, sizeof(float) * (size_t)OUT);
    for (int i = 0; i < B; i++) {
        const float *r = dout + (long)i * OUT;
        for (int o = 0; o < OUT; o++) db[o] += r[o];
    }
    if (dinp) /* dinp = dout · w */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, IN, OUT,
                    1.0f, dout, OUT, w, IN, 0.0f, dinp, IN);
}

/* ---------------- convolution ---------------- */

int conv_geom_init(conv_geom_t *g)
{
    if (g->stride < 1 || g->KH < 1 || g->KW < 1 || g->pad < 0) return -1;
    int eh = g->H + 2 * g->pad - g->KH, ew = g->W + 2 * g->pad - g->KW;
    if (eh < 0 || ew < 0) return -1;
    g->OH = eh / g->stride + 1;
    g->OW = ew / g->stride + 1;
    return 0;
}

long conv_col_size(const conv_geom_t *g)
{
    return (long)g->C * g->KH * g->KW * g->B * g->OH * g->OW;
}

/* col[(c,ki,kj)][(b,oh,ow)] = padded inp[b][c][oh·s−pad+ki][ow·s−pad+kj] */
static void im2col(float *col, const float *inp, const conv_geom_t *g)
{
    const int OHW = g->OH * g->OW, HW = g->H * g->W;
    const long ncol = (long)g->B * OHW;
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < g->KH; ki++)
            for (int kj = 0; kj < g->KW; kj++) {
                float *row = col + ((long)(c * g->KH + ki) * g->KW + kj) * ncol;
                for (int b = 0; b < g->B; b++) {
                    const float *src = inp + ((long)b * g->C + c) * HW;
                    float *dst = row + (long)b * OHW;
                    for (int oh = 0; oh < g->OH; oh++) {
                        int ih = oh * g->stride - g->pad + ki;
                        float *d = dst + oh * g->OW;
                        if (ih < 0 || ih >= g->H) {
                            memset(d, 0, sizeof(float) * (size_t)g->OW);
                            continue;
                        }
                        const float *s = src + ih * g->W;
                        if (g->stride == 1) {
                            /* valid ow range: 0 <= ow - pad + kj < W */
                            int lo = g->pad - kj, hi = g->W + g->pad - kj;
                            if (lo < 0) lo = 0;
                            if (hi > g->OW) hi = g->OW;
                            if (lo > hi) lo = hi;
                            for (int ow = 0; ow < lo; ow++) d[ow] = 0.0f;
                            if (hi > lo)
                                memcpy(d + lo, s + lo - g->pad + kj, sizeof(float) * (size_t)(hi - lo));
                            for (int ow = hi; ow < g->OW; ow++) d[ow] = 0.0f;
                        } else {
                            for (int ow = 0; ow < g->OW; ow++) {
                                int iw = ow * g->stride - g->pad + kj;
                                d[ow] = (iw >= 0 && iw < g->W) ? s[iw] : 0.0f;
                            }
                        }
                    }
                }
            }
}

/* Adjoint of im2col: dinp += scatter(col). dinp is zeroed first. */
static void col2im(float *dinp, const float *col, const conv_geom_t *g)
{
    const int OHW = g->OH * g->OW, HW = g->H * g->W;
    const long ncol = (long)g->B * OHW;
    memset(dinp, 0, sizeof(float) * (size_t)g->B * g->C * HW);
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < g->KH; ki++)
            for (int kj = 0; kj < g->KW; kj++) {
                const float *row = col + ((long)(c * g->KH + ki) * g->KW + kj) * ncol;
                for (int b = 0; b < g->B; b++) {
                    float *dst = dinp + ((long)b * g->C + c) * HW;
                    const float *src = row + (long)b * OHW;
                    for (int oh = 0; oh < g->OH; oh++) {
                        int ih = oh * g->stride - g->pad + ki;
                        if (ih < 0 || ih >= g->H) continue;
                        float *d = dst + ih * g->W;
                        const float *s = src + oh * g->OW;
                        if (g->stride == 1) {
                            /* valid ow: 0 <= ow - pad + kj < W, as in im2col */
                            int lo = g->pad - kj, hi = g->W + g->pad - kj;
                            if (lo < 0) lo = 0;
                            if (hi > g->OW) hi = g->OW;
                            const int shift = kj - g->pad;
                            for (int ow = lo; ow < hi; ow++) d[ow + shift] += s[ow];
                        } else {
                            for (int ow = 0; ow < g->OW; ow++) {
                                int iw = ow * g->stride - g->pad + kj;
                                if (iw >= 0 && iw < g->W) d[iw] += s[ow];
                            }
                        }
                    }
                }
            }
}

void conv2d_forward(float *out, float *col, float *tmp, const float *inp,
                    const float *w, const float *b, const conv_geom_t *g)
{
    const int OHW = g->OH * g->OW, CKK = g->C * g->KH * g->KW;
    const int N = g->B * OHW;
    im2col(col, inp, g);
    /* tmp(OC, B·OHW) = w · col */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->OC, N, CKK,
                1.0f, w, CKK, col, N, 0.0f, tmp, N);
    /* (OC, B, OHW) -> (B, OC, OHW), adding the bias */
    for (int bb = 0; bb < g->B; bb++)
        for (int oc = 0; oc < g->OC; oc++) {
            const float *s = tmp + (long)oc * N + (long)bb * OHW;
            float *d = out + ((long)bb * g->OC + oc) * OHW;
            const float bias = b[oc];
            for (int p = 0; p < OHW; p++) d[p] = s[p] + bias;
        }
}

void conv2d_backward(float *dinp, float *dw, float *db, float *col, float *tmp,
                     const float *dout, const float *w, const conv_geom_t *g)
{
    const int OHW = g->OH * g->OW, CKK = g->C * g->KH * g->KW;
    const int N = g->B * OHW;
    memset(db, 0, sizeof(float) * (size_t)g->OC);
    for (int bb = 0; bb < g->B; bb++)
        for (int oc = 0; oc < g->OC; oc++) {
            const float *s = dout + ((long)bb * g->OC + oc) * OHW;
            float *d = tmp + (long)oc * N + (long)bb * OHW;
            float acc = 0.0f;
            for (int p = 0; p < OHW; p++) { d[p] = s[p]; acc += s[p]; }
            db[oc] += acc;
        }
    /* dw(OC, CKK) = dtmp · colᵀ */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->OC, CKK, N,
                1.0f, tmp, N, col, N, 0.0f, dw, CKK);
    if (dinp) {
        /* dcol(CKK, N) = wᵀ · dtmp, reusing col */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CKK, N, g->OC,
                    1.0f, w, CKK, tmp, N, 0.0f, col, N);
        col2im(dinp, col, g);
    }
}

/* ---------------- pooling ---------------- */

/* The common 2x2, stride 2, no padding case: no bounds checks; the same
 * first-wins tie-breaking as the general loop. */
static void maxpool2x2_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g)
{
    const int HW = g->H * g->W, OHW = g->OH * g->OW, W = g->W;
    for (long bc = 0; bc < (long)g->B * g->C; bc++) {
        const float *s = inp + bc * HW;
        float *o = out + bc * OHW;
        int32_t *a = argmax + bc * OHW;
        const int32_t base = (int32_t)(bc * HW);
        for (int oh = 0; oh < g->OH; oh++) {
            const float *r0 = s + 2 * oh * W, *r1 = r0 + W;
            for (int ow = 0; ow < g->OW; ow++) {
                int j = 2 * ow;
                float best = r0[j];
                int32_t bi = 2 * oh * W + j;
                if (r0[j + 1] > best) { best = r0[j + 1]; bi = 2 * oh * W + j + 1; }
                if (r1[j] > best) { best = r1[j]; bi = (2 * oh + 1) * W + j; }
                if (r1[j + 1] > best) { best = r1[j + 1]; bi = (2 * oh + 1) * W + j + 1; }
                o[oh * g->OW + ow] = best;
                a[oh * g->OW + ow] = base + bi;
            }
        }
    }
}

void maxpool_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g)
{
    if (g->KH == 2 && g->KW == 2 && g->stride == 2 && g->pad == 0) {
        maxpool2x2_forward(out, argmax, inp, g);
        return;
    }
    const int HW = g->H * g->W, OHW = g->OH * g->OW;
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

void maxpool_backward(float *dinp, const float *dout, const int32_t *argmax, const conv_geom_t *g)
{
    const long nin = (long)g->B * g->C * g->H * g->W;
    const long nout = (long)g->B * g->C * g->OH * g->OW;
    memset(dinp, 0, sizeof(float) * (size_t)nin);
    for (long i = 0; i < nout; i++) dinp[argmax[i]] += dout[i];
}

/* ---------------- activations ---------------- */

void relu_forward(float *out, const float *inp, long n)
{
    for (long i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float *dinp, const float *dout, const float *out, long n)
{
    /* load dout unconditionally: a select, not a branch, so it vectorizes */
    for (long i = 0; i < n; i++) {
        float d = dout[i];
        dinp[i] = out[i] > 0.0f ? d : 0.0f;
    }
}

void tanh_forward(float *out, const float *inp, long n)
{
    for (long i = 0; i < n; i++) out[i] = tanhf(inp[i]);
}

void tanh_backward(float *dinp, const float *dout, const float *out, long n)
{
    for (long i = 0; i < n; i++) dinp[i] = dout[i] * (1.0f - out[i] * out[i]);
}

/* ---------------- loss ---------------- */

float softmax_xent_forward(float *probs, const float *logits, const int32_t *labels, int B, int K)
{
    double total = 0.0;
    for (int i = 0; i < B; i++) {
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
