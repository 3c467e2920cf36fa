/* nn/graph — the output gradients of models whose layers form a graph
 * (the residual network of plan.c's resnet:D,W), laid out in a few shared
 * buffers. Their passes are every model's (passes.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "layers.h"
#include "plan.h"

/* ---- output gradients: a few shared buffers ----
 * The backward pass visits layers from the top. A layer's dout is needed
 * from the visit of its first reader (which writes it) until its own
 * visit; simulating that order assigns buffers that are free again. An
 * output whose first reader in that order is a residual add gets the add's
 * own dout (the add passes its gradient through unchanged), so neither a
 * buffer nor a copy: an output only the add reads, and a block's input,
 * which the block's first convolution reads too. That convolution's input
 * gradient is then added into the add's buffer (passes.c, grad_done), the
 * sum in the order it had as a copy (the add's gradient + the
 * convolution's); the buffer's other reader (the normalization below the
 * add) has read it by then and never writes it. This saved a copy of the
 * block's output gradient, ~1.5% of a resnet:20,16 step. */
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
            if (l->kind == LAYER_ADD) buf[s] = buf[t];
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
