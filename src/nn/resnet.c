/* nn/resnet — He et al.'s residual network for small images (the CIFAR
 * family of "Deep Residual Learning for Image Recognition", 2016), and the
 * forward and backward passes of models whose layers form a graph.
 *
 * resnet:D,W with D = 6n + 2:
 *   conv3x3(W) → bn → relu
 *   3 stages of n basic blocks, widths W, 2W, 4W; the first block of
 *   stages 2 and 3 has stride 2:
 *       x → conv3x3 → bn → relu → conv3x3 → bn ─┐
 *       x ─────────── (or conv1x1/2 → bn) ──────+→ relu
 *   global average pooling → dense(K)
 * Convolutions have no bias (the batch normalization after each has one).
 * resnet = resnet:20,16 (ResNet-20: 0.27 M parameters on 3×32×32 inputs).
 *
 * The backward pass visits layers from the top; an output that feeds two
 * layers (a block's input: its first convolution and its shortcut) gets
 * the first reader's input gradient written into its dout and the
 * second's added from a scratch buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/par.h"
#include "../util/util.h"
#include "layers.h"
#include "plan.h"

enum { RESNET_DEPTH = 20, RESNET_WIDTH = 16, RESNET_MAX_BLOCKS = 60 };

static const float BN_EPS = 1e-5f;

/* conv without bias, He-normal init (a batch normalization follows) */
static int push_conv(plan_t *p, int oc, int k, int stride, int pad, char *err, size_t errlen)
{
    if (plan_push(p, LAYER_CONV, oc, k, stride, pad, err, errlen) != 0) return -1;
    layer_t *l = &p->l[p->n - 1];
    l->b_len = 0;
    l->he = 1;
    return 0;
}

static int push_bn(plan_t *p, int relu, char *err, size_t errlen)
{
    if (plan_push(p, LAYER_BN, 0, 0, 0, 0, err, errlen) != 0) return -1;
    p->l[p->n - 1].relu = relu;
    return 0;
}

int plan_resnet(plan_t *p, const char *spec, const char *dw, int nf, int classes, char *err, size_t errlen)
{
    long D = RESNET_DEPTH, W = RESNET_WIDTH;
    if (nf > 2) { snprintf(err, errlen, "--model %s: resnet takes one field, resnet:D,W (e.g. resnet:20,16)", spec); return -1; }
    if (dw) {
        char buf[64], *comma;
        snprintf(buf, sizeof buf, "%s", dw);
        comma = strchr(buf, ',');
        if (!comma) { snprintf(err, errlen, "--model %s: want resnet:D,W, depth and base width (e.g. resnet:20,16)", spec); return -1; }
        *comma = 0;
        if (parse_long(buf, &D) != 0 || parse_long(comma + 1, &W) != 0) {
            snprintf(err, errlen, "--model %s: depth and width must be integers (e.g. resnet:20,16)", spec);
            return -1;
        }
    }
    const long nb = (D - 2) / 6;
    if (D < 8 || (D - 2) % 6 != 0 || nb > RESNET_MAX_BLOCKS) {
        snprintf(err, errlen, "--model %s: depth %ld is not 6n+2 with 1 <= n <= %d (8, 14, 20, 32, 44, 56, 110, ...)", spec, D,
                 RESNET_MAX_BLOCKS);
        return -1;
    }
    if (W < 1 || W > 4096) { snprintf(err, errlen, "--model %s: base width %ld must be in [1, 4096]", spec, W); return -1; }
    if (p->in_h < 4 || p->in_w < 4) {
        snprintf(err, errlen, "--model %s: the data's %dx%d images are too small for resnet's two stride-2 stages (at least 4x4)",
                 spec, p->in_h, p->in_w);
        return -1;
    }
    /* parameters ≈ 9·(4W)²·2n + ...; keep every size far inside the int and
     * size_t ranges the kernels use */
    double params = 9.0 * (double)W * W * 2 * nb * (1 + 4 + 16) + 9.0 * W * p->in_c;
    double act = (double)W * p->in_h * p->in_w;
    if (params > 1e9 || act > 1e8 || (double)p->in_c * 9 * 4 * W > 1e8) {
        snprintf(err, errlen, "--model %s: too large for these %dx%dx%d inputs (%.3g parameters, %.3g floats of activation per sample); lower the width or depth",
                 spec, p->in_c, p->in_h, p->in_w, params, act);
        return -1;
    }
    p->graph = 1;
    plan_from(p, -1);
    if (push_conv(p, (int)W, 3, 1, 1, err, errlen) || push_bn(p, 1, err, errlen)) return -1;
    int x = p->n - 1;
    for (int s = 0; s < 3; s++)
        for (int j = 0; j < nb; j++) {
            const int oc = (int)W << s, stride = s > 0 && j == 0 ? 2 : 1, in_c = p->l[x].out_c;
            plan_from(p, x);
            if (push_conv(p, oc, 3, stride, 1, err, errlen) || push_bn(p, 1, err, errlen) ||
                push_conv(p, oc, 3, 1, 1, err, errlen) || push_bn(p, 0, err, errlen))
                return -1;
            const int main_out = p->n - 1;
            int shortcut = x;
            if (stride != 1 || in_c != oc) {   /* projection: conv1x1 with the block's stride */
                plan_from(p, x);
                if (push_conv(p, oc, 1, stride, 0, err, errlen) || push_bn(p, 0, err, errlen)) return -1;
                shortcut = p->n - 1;
            }
            plan_from(p, main_out);
            if (plan_push(p, LAYER_ADD, 0, 0, 0, 0, err, errlen) != 0) return -1;
            layer_t *a = &p->l[p->n - 1];
            a->src2 = shortcut;
            a->relu = 1;
            x = p->n - 1;
        }
    if (plan_push(p, LAYER_GAP, 0, 0, 0, 0, err, errlen) || plan_push(p, LAYER_DENSE, classes, 0, 0, 0, err, errlen)) return -1;
    (void)classes;
    return 0;
}

/* ---- output gradients: a few shared buffers ----
 * The backward pass visits layers from the top. A layer's dout is needed
 * from the visit of its first reader (which writes it) until its own
 * visit; simulating that order assigns buffers that are free again. An
 * output only a residual add reads gets the add's own dout (the add passes
 * its gradient through unchanged), so neither a buffer nor a copy. */
void graph_alloc_douts(model_t *m, size_t size)
{
    const int n = m->nlayers;
    int *buf = xmalloc(sizeof(int) * (size_t)n), *refs = xcalloc((size_t)n + 1, sizeof(int));
    int *freelist = xmalloc(sizeof(int) * ((size_t)n + 1)), nfree = 0, nbuf = 0;
    for (int i = 0; i < n; i++) buf[i] = -1;
    buf[n - 1] = n;            /* the logits' gradient: dlogits, outside the pool */
    refs[n] = 1;
    for (int t = n - 1; t >= 0; t--) {
        const layer_t *l = &m->layers[t];
        const int src[2] = { l->src, l->kind == LAYER_ADD ? l->src2 : -1 };
        for (int k = 0; k < 2; k++) {
            const int s = src[k];
            if (s < 0 || buf[s] >= 0) continue;
            if (l->kind == LAYER_ADD && m->layers[s].nuse == 1) buf[s] = buf[t];
            else buf[s] = nfree ? freelist[--nfree] : nbuf++;
            refs[buf[s]]++;
        }
        if (buf[t] >= 0 && --refs[buf[t]] == 0 && buf[t] != n) freelist[nfree++] = buf[t];
    }
    m->ndpool = nbuf;
    m->dpool = xmalloc(sizeof(float *) * (size_t)(nbuf ? nbuf : 1));
    for (int b = 0; b < nbuf; b++) m->dpool[b] = xalloc_floats(size);
    for (int i = 0; i < n; i++)
        m->layers[i].dout = buf[i] == n ? m->dlogits : buf[i] >= 0 ? m->dpool[buf[i]] : NULL;
    free(buf); free(refs); free(freelist);
}

/* ---- passes ---- */

static long out_size(const layer_t *l) { return (long)l->out_c * l->out_h * l->out_w; }

static conv_geom_t geom(const layer_t *l, int B)
{
    conv_geom_t g = { .B = B, .C = l->in_c, .H = l->in_h, .W = l->in_w, .OC = l->out_c,
                      .KH = l->k, .KW = l->k, .stride = l->stride, .pad = l->pad };
    conv_geom_init(&g);
    return g;
}

static const float *input_of(const model_t *m, int src) { return src < 0 ? m->input : m->layers[src].out; }

const float *graph_forward(model_t *m, const float *x, int B)
{
    m->input = x;
    int moments_of = -1;   /* the layer whose output planes' moments m->bn_moments holds */
    for (int i = 0; i < m->nlayers; i++) {
        layer_t *l = &m->layers[i];
        const float *in = input_of(m, l->src);
        const float *W = m->params + l->w_off, *bias = m->params + l->b_off;
        const int HW = l->out_h * l->out_w;
        const long n = (long)B * out_size(l);
        switch (l->kind) {
        case LAYER_CONV: {
            conv_geom_t g = geom(l, B);
            /* a batch normalization in training reads this output next:
             * its planes' moments, taken while they are in cache */
            const int to_bn = m->training && i + 1 < m->nlayers && m->layers[i + 1].kind == LAYER_BN &&
                              m->layers[i + 1].src == i;
            conv2d_forward_ws(l->out, m->col + m->col_off[i], m->col + m->col_work_off, in, W, l->b_len ? bias : NULL,
                              to_bn ? m->bn_moments : NULL, &g);
            moments_of = to_bn ? i : -1;
            break;
        }
        case LAYER_BN: {
            float *rm = m->state + l->s_off, *rv = rm + l->out_c;
            if (m->training)
                bn_forward_train(l->out, l->aux, l->aux + l->out_c, rm, rv, in, W, bias,
                                 moments_of == l->src ? m->bn_moments : NULL, m->bn_moments, B, l->out_c, HW, l->relu,
                                 m->bn_momentum, BN_EPS, m->bn_sync);
            else
                bn_forward_eval(l->out, rm, rv, in, W, bias, B, l->out_c, HW, l->relu, BN_EPS);
            break;
        }
        case LAYER_ADD: add_forward(l->out, in, m->layers[l->src2].out, n, l->relu); break;
        case LAYER_GAP: gap_forward(l->out, in, B, l->out_c, l->in_h * l->in_w); break;
        case LAYER_DENSE: dense_forward(l->out, in, W, bias, B, l->in_c * l->in_h * l->in_w, l->out_c); break;
        case LAYER_RELU: relu_forward(l->out, in, n); break;
        case LAYER_TANH: tanh_forward(l->out, in, n); break;
        case LAYER_FLATTEN: case LAYER_MAXPOOL: case LAYER_LC:
            die("graph models have no %s layers", layer_kind_name(l->kind));
        }
    }
    return m->layers[m->nlayers - 1].out;
}

/* Where the input gradient for layer src goes: its dout for the first
 * reader to write, the scratch buffer for the second (added by
 * grad_done); NULL for the model input. */
static float *grad_target(model_t *m, int src)
{
    if (src < 0) return NULL;
    layer_t *s = &m->layers[src];
    return s->dwrites++ == 0 ? s->dout : m->dscratch;
}

static void grad_done(model_t *m, int src, const float *d, int B)
{
    if (src < 0 || d != m->dscratch) return;
    layer_t *s = &m->layers[src];
    const long n = (long)B * out_size(s);
    PAR_FOR_IF(n >= PAR_MIN_FLOATS)   /* element-wise */
    for (long i = 0; i < n; i++) s->dout[i] += d[i];
}

void graph_backward(model_t *m, int B)
{
    for (int i = 0; i < m->nlayers; i++) m->layers[i].dwrites = 0;
    int padded = -1;   /* the convolution whose output gradient is in the workspace, padded */
    for (int i = m->nlayers - 1; i >= 0; i--) {
        layer_t *l = &m->layers[i];
        const float *in = input_of(m, l->src), *W = m->params + l->w_off;
        float *dW = m->grads + l->w_off, *db = m->grads + l->b_off;
        const long n = (long)B * out_size(l);
        float *d;
        switch (l->kind) {
        case LAYER_CONV: {
            conv_geom_t g = geom(l, B);
            d = grad_target(m, l->src);
            conv2d_backward_ws(d, dW, l->b_len ? db : NULL, m->col + m->col_off[i], m->col + m->col_work_off,
                               padded == i ? NULL : l->dout, W, &g);
            grad_done(m, l->src, d, B);
            break;
        }
        case LAYER_BN: {
            /* the input gradient of a convolution just below that only this
             * layer reads goes straight into that convolution's padded
             * output gradient, if it pads it */
            plane_pad_t pp;
            float *D = NULL;
            if (l->src == i - 1 && m->layers[l->src].kind == LAYER_CONV && m->layers[l->src].nuse == 1) {
                conv_geom_t g = geom(&m->layers[l->src], B);
                D = conv2d_dout_padded(&pp, m->col + m->col_work_off, &g);
            }
            d = D ? D : grad_target(m, l->src);
            bn_backward(d, dW, db, l->dout, in, l->aux, l->aux + l->out_c, W, m->params + l->b_off, m->bn_moments, B, l->out_c,
                        l->out_h * l->out_w, l->relu, m->bn_sync, D ? &pp : NULL);
            if (D) padded = l->src;
            else grad_done(m, l->src, d, B);
            break;
        }
        case LAYER_ADD: {
            add_backward(l->dout, l->dout, l->out, n, l->relu);   /* in place: the sum's gradient */
            const int srcs[2] = { l->src, l->src2 };
            for (int k = 0; k < 2; k++) {
                d = grad_target(m, srcs[k]);
                if (!d) continue;
                if (d != l->dout) memcpy(d, l->dout, sizeof(float) * (size_t)n);   /* else: the same buffer */
                grad_done(m, srcs[k], d, B);
            }
            break;
        }
        case LAYER_GAP:
            d = grad_target(m, l->src);
            if (d) gap_backward(d, l->dout, B, l->out_c, l->in_h * l->in_w);
            grad_done(m, l->src, d, B);
            break;
        case LAYER_DENSE:
            d = grad_target(m, l->src);
            dense_backward(d, dW, db, l->dout, in, W, B, l->in_c * l->in_h * l->in_w, l->out_c);
            grad_done(m, l->src, d, B);
            break;
        case LAYER_RELU:
        case LAYER_TANH:
            d = grad_target(m, l->src);
            if (d && l->kind == LAYER_RELU) relu_backward(d, l->dout, l->out, n);
            else if (d) tanh_backward(d, l->dout, l->out, n);
            grad_done(m, l->src, d, B);
            break;
        case LAYER_FLATTEN: case LAYER_MAXPOOL: case LAYER_LC: break;
        }
        if (l->w_len && m->grad_ready) m->grad_ready(m->grad_ctx, l->w_off, l->w_len + l->b_len);
    }
}
