/* nn/graph — the forward and backward passes of models whose layers form
 * a graph (the residual network of plan.c's resnet:D,W): each layer names
 * the one it reads (src) and a residual add a second one (src2).
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

static const float BN_EPS = 1e-5f;

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
