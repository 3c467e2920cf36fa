/* nn/plan — model specs parsed into layers with shapes (no buffers): the
 * simple stacks here, the residual network in resnet.c. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "../util/util.h"
#include "plan.h"

#define MAX_LAYERS 64   /* hidden layers of an mlp, at most half of these */

/* ---- spec parsing into a plan (layers with shapes, no buffers) ---- */

void plan_from(plan_t *p, int src)
{
    p->next_src = src;
    if (src < 0) { p->c = p->in_c; p->h = p->in_h; p->w = p->in_w; }
    else { p->c = p->l[src].out_c; p->h = p->l[src].out_h; p->w = p->l[src].out_w; }
}

int plan_push(plan_t *p, layer_kind_t kind, int out_c, int k, int stride, int pad,
              char *err, size_t errlen)
{
    if (p->n >= PLAN_MAX) { snprintf(err, errlen, "model has more than %d layers", PLAN_MAX); return -1; }
    layer_t *l = &p->l[p->n];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->src = p->next_src != PLAN_PREV ? p->next_src : p->n - 1;
    l->src2 = -1;
    p->next_src = PLAN_PREV;
    l->in_c = p->c; l->in_h = p->h; l->in_w = p->w;
    l->k = k; l->stride = stride; l->pad = pad;
    switch (kind) {
    case LAYER_DENSE:
        l->out_c = out_c; l->out_h = l->out_w = 1;
        l->w_len = (size_t)out_c * p->c * p->h * p->w;
        l->b_len = (size_t)out_c;
        break;
    case LAYER_CONV:
    case LAYER_MAXPOOL: {
        conv_geom_t g = { .B = 1, .C = p->c, .H = p->h, .W = p->w, .OC = out_c,
                          .KH = k, .KW = k, .stride = stride, .pad = pad };
        if (conv_geom_init(&g) != 0) {
            snprintf(err, errlen, "%s %dx%d at layer %d does not fit its %dx%d input",
                     layer_kind_name(kind), k, k, p->n + 1, p->h, p->w);
            return -1;
        }
        l->out_c = kind == LAYER_CONV ? out_c : p->c;
        l->out_h = g.OH; l->out_w = g.OW;
        if (kind == LAYER_CONV) {
            l->w_len = (size_t)out_c * p->c * k * k;
            l->b_len = (size_t)out_c;
        }
        break;
    }
    case LAYER_FLATTEN:
        l->out_c = p->c * p->h * p->w; l->out_h = l->out_w = 1;
        break;
    case LAYER_BN:
        l->out_c = p->c; l->out_h = p->h; l->out_w = p->w;
        l->w_len = l->b_len = (size_t)p->c;
        l->s_len = 2 * (size_t)p->c;
        break;
    case LAYER_GAP:
        l->out_c = p->c; l->out_h = l->out_w = 1;
        break;
    default:
        l->out_c = p->c; l->out_h = p->h; l->out_w = p->w;
    }
    p->c = l->out_c; p->h = l->out_h; p->w = l->out_w;
    p->n++;
    return 0;
}

int plan_build(plan_t *p, const char *spec, int c, int h, int w, int classes,
                      char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->c = c; p->h = h; p->w = w;
    p->in_c = c; p->in_h = h; p->in_w = w;
    p->next_src = PLAN_PREV;
    if (c < 1 || h < 1 || w < 1 || classes < 2) {
        snprintf(err, errlen, "invalid input shape %dx%dx%d with %d classes", c, h, w, classes);
        return -1;
    }
    char buf[128];
    if (strlen(spec) >= sizeof buf) { snprintf(err, errlen, "model spec '%s' is too long", spec); return -1; }
    strcpy(buf, spec);
    char *fields[8];
    int nf = 0;
    for (char *s = buf, *tok; (tok = strsep(&s, ":")) != NULL;) {
        if (nf == 8) { snprintf(err, errlen, "model spec '%s' has too many ':' fields", spec); return -1; }
        fields[nf++] = tok;
    }
    layer_kind_t act = LAYER_RELU;
    int hidden[MAX_LAYERS], nh = -1;
    for (int i = 1; i < nf; i++) {
        if (!strcmp(fields[i], "tanh")) act = LAYER_TANH;
        else if (!strcmp(fields[i], "relu")) act = LAYER_RELU;
        else if (!strcmp(fields[0], "resnet")) continue;   /* plan_resnet parses its fields */
        else if (!strcmp(fields[0], "mlp") && nh < 0 && isdigit((unsigned char)fields[i][0])) {
            nh = 0;
            for (char *s = fields[i], *tok; (tok = strsep(&s, ",")) != NULL;) {
                long v;
                if (parse_long(tok, &v) != 0 || v < 1 || v > 1 << 20 || nh >= MAX_LAYERS / 2 - 2) {
                    snprintf(err, errlen, "bad hidden size '%s' in model spec '%s' (want e.g. mlp:256,128)", tok, spec);
                    return -1;
                }
                hidden[nh++] = (int)v;
            }
        } else {
            snprintf(err, errlen, "unknown option '%s' in model spec '%s'; models: logreg, mlp[:H1,H2,...][:tanh], lenet[:tanh], resnet[:D,W]", fields[i], spec);
            return -1;
        }
    }
    const char *name = fields[0];
    int rc = 0;
    if (!strcmp(name, "resnet")) return plan_resnet(p, spec, nf > 1 ? fields[1] : NULL, nf, classes, err, errlen);
    if (!strcmp(name, "logreg")) {
        if (nf > 1) { snprintf(err, errlen, "model logreg takes no options (got '%s')", spec); return -1; }
        rc |= plan_push(p, LAYER_FLATTEN, 0, 0, 0, 0, err, errlen);
        rc |= plan_push(p, LAYER_DENSE, classes, 0, 0, 0, err, errlen);
    } else if (!strcmp(name, "mlp")) {
        if (nh < 0) { hidden[0] = 256; hidden[1] = 128; nh = 2; }
        rc |= plan_push(p, LAYER_FLATTEN, 0, 0, 0, 0, err, errlen);
        for (int i = 0; i < nh && !rc; i++) {
            rc |= plan_push(p, LAYER_DENSE, hidden[i], 0, 0, 0, err, errlen);
            rc |= plan_push(p, act, 0, 0, 0, 0, err, errlen);
        }
        if (!rc) rc |= plan_push(p, LAYER_DENSE, classes, 0, 0, 0, err, errlen);
    } else if (!strcmp(name, "lenet")) {
        if (h < 12 || w < 12) {
            snprintf(err, errlen, "model lenet needs inputs of at least 12x12 (data is %dx%d); use mlp or logreg", h, w);
            return -1;
        }
        static const struct { layer_kind_t kind; int out_c, k, stride, pad; } lenet[] = {
            { LAYER_CONV, 6, 5, 1, 2 }, { LAYER_RELU, 0, 0, 0, 0 }, { LAYER_MAXPOOL, 0, 2, 2, 0 },
            { LAYER_CONV, 16, 5, 1, 0 }, { LAYER_RELU, 0, 0, 0, 0 }, { LAYER_MAXPOOL, 0, 2, 2, 0 },
            { LAYER_FLATTEN, 0, 0, 0, 0 }, { LAYER_DENSE, 120, 0, 0, 0 }, { LAYER_RELU, 0, 0, 0, 0 },
            { LAYER_DENSE, 84, 0, 0, 0 }, { LAYER_RELU, 0, 0, 0, 0 }, { LAYER_DENSE, -1, 0, 0, 0 },
        };
        for (size_t i = 0; i < sizeof lenet / sizeof lenet[0] && !rc; i++) {
            layer_kind_t kind = lenet[i].kind == LAYER_RELU ? act : lenet[i].kind;
            int oc = lenet[i].out_c < 0 ? classes : lenet[i].out_c;
            rc = plan_push(p, kind, oc, lenet[i].k, lenet[i].stride, lenet[i].pad, err, errlen);
        }
    } else {
        snprintf(err, errlen, "unknown model '%s'; models: logreg, mlp[:H1,H2,...][:tanh], lenet[:tanh], resnet[:D,W]", name);
        return -1;
    }
    return rc ? -1 : 0;
}

