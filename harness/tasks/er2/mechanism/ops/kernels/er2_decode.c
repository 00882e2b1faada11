/* One ER2 decode token in one call: the fused CPU form of ER2Decoder's eager step.
 *
 * Decode moves a few kilobytes of state per token, so the eager step (about 85 tensor ops) is
 * bound by per-op dispatch, not arithmetic. This kernel does the same arithmetic in plain loops,
 * in the eager step's order of operations, over float32 with the state read from and written to
 * its storage dtype (fp16 or fp32). harness/tasks/er2/mechanism/ops/fused_decode.py builds it with the
 * system C compiler and checks nothing else: the tests hold it to the eager step.
 *
 * Shapes (all contiguous): q [B,Hq,D]; k, v [B,Hkv,D]; per core c memory [B,Hkv,F_c,D] and
 * curvature [B,Hkv,F_c]; tail [B,Hkv,K-1,D]. Cores lie side by side in the feature axis of the
 * stacked weights (Ft = sum F_c). C is the number of cores (1: base only, 2: base + residual).
 * Outputs never alias inputs: a caller may keep the state it passed in and decode from it again.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

#define MAX_CORES 2
#define MAX_DIM 256
#define MAX_FEATURES 1024
#define NORMALIZE_EPS 1e-12f
#define CURVATURE_FLOOR 1e-4f
#define DENOMINATOR_FLOOR 1e-4f

typedef _Float16 half;

static inline float load(const void *base, int64_t i, int is_half) {
    return is_half ? (float)((const half *)base)[i] : ((const float *)base)[i];
}

static inline void store(void *base, int64_t i, float x, int is_half) {
    if (is_half) ((half *)base)[i] = (half)x;
    else ((float *)base)[i] = x;
}

/* Whole blocks convert 8 values per instruction with F16C where the CPU has it (GCC 12 turns
 * _Float16 conversions into library calls); rounding is to nearest even, as torch's. */
static void read_block(const void *base, int64_t first, int64_t count, float *out, int is_half) {
    if (!is_half) {
        memcpy(out, (const float *)base + first, sizeof(float) * count);
        return;
    }
    const half *in = (const half *)base + first;
    int64_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
#endif
    for (; i < count; i++) out[i] = (float)in[i];
}

static void write_block(void *base, int64_t first, int64_t count, const float *in, int is_half) {
    if (!is_half) {
        memcpy((float *)base + first, in, sizeof(float) * count);
        return;
    }
    half *out = (half *)base + first;
    int64_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < count; i++) out[i] = (half)in[i];
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* x / max(||x||, eps), as F.normalize */
static void normalize(const float *x, float *out, int n) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float norm = sqrtf(ss);
    if (norm < NORMALIZE_EPS) norm = NORMALIZE_EPS;
    for (int i = 0; i < n; i++) out[i] = x[i] / norm;
}

struct weights {
    const float *taps;         /* [Hkv, K, C, D] */
    const float *key_maps;     /* [Hkv, D, 3 Ft]: key, forget, erase-gate projections */
    const float *key_bias;     /* [Hkv, 3 Ft] */
    const float *write_maps;   /* [Hkv * C, D, D] (input, output) */
    const float *write_bias;   /* [Hkv * C, D] */
    const float *alpha, *beta, *log_x, *center; /* [Hkv, Ft] each */
    const float *query_maps;   /* [Hq, D, Ft] */
    const float *core_gain;    /* [Hq, C] */
    const float *residual_gain;/* [Hq] (raw mode) */
    const float *projector;    /* [Hq, D, D]: gain B^T B (compressed mode) */
    const float *gate_weight;  /* [Hq, D] (compressed mode) */
    const float *gate_bias;    /* [Hq] (compressed mode) */
};

struct config {
    int batch, heads, kv_heads, dim, kernel, cores, sizes[MAX_CORES];
    int mode;       /* 0 base only, 1 raw residual, 2 compressed residual */
    int state_half; /* memories and tail stored as fp16 (else fp32); curvature is always fp32 */
};

/* The tensors of one call, in this order (one table, so a call from Python passes two pointers). */
struct io {
    const float *q, *k, *v;
    const void *memory_in[MAX_CORES];
    const float *curvature_in[MAX_CORES];
    const void *tail_in;
    float *out;
    void *memory_out[MAX_CORES];
    float *curvature_out[MAX_CORES];
    void *tail_out;
    float *memory; /* scratch [Ft, D]: one KV head's rows at float32 */
};

static int decode(int batch, int heads, int kv_heads, int dim, int kernel, int cores, const int *sizes,
                  int mode, int state_half, const struct weights *w,
                  const float *q, const float *k, const float *v,
                  const void *const *memory_in, const float *const *curvature_in, const void *tail_in,
                  float *out, void *const *memory_out, float *const *curvature_out, void *tail_out,
                  float *memory) {
    int features = 0, offset[MAX_CORES + 1];
    if (cores < 1 || cores > MAX_CORES || dim > MAX_DIM || kernel < 1) return 1;
    for (int c = 0; c < cores; c++) { offset[c] = features; features += sizes[c]; }
    offset[cores] = features;
    if (features > MAX_FEATURES) return 1;
    const int groups = heads / kv_heads, history = kernel - 1, projected = 3 * features;

    float values[MAX_CORES][MAX_DIM], vn[MAX_CORES][MAX_DIM], kn[MAX_DIM], qn[MAX_DIM];
    float projections[3 * MAX_FEATURES], key[MAX_FEATURES], pre[MAX_FEATURES], erase[MAX_FEATURES];
    float query[MAX_FEATURES], z[MAX_DIM], difference[MAX_DIM], reads[MAX_CORES][MAX_DIM];

    for (int b = 0; b < batch; b++) {
        for (int h = 0; h < kv_heads; h++) {
            const int64_t bh = (int64_t)b * kv_heads + h;
            const float *v_t = v + bh * dim;
            /* value convolution over [tail, v]; output c is core c's value */
            for (int c = 0; c < cores; c++)
                for (int d = 0; d < dim; d++) {
                    float acc = 0.0f;
                    for (int j = 0; j < kernel; j++) {
                        float x = j < history ? load(tail_in, (bh * history + j) * dim + d, state_half) : v_t[d];
                        acc += x * w->taps[(((int64_t)h * kernel + j) * cores + c) * dim + d];
                    }
                    values[c][d] = acc;
                }
            for (int j = 0; j < history; j++)
                for (int d = 0; d < dim; d++) {
                    float x = j + 1 < history ? load(tail_in, (bh * history + j + 1) * dim + d, state_half) : v_t[d];
                    store(tail_out, (bh * history + j) * dim + d, x, state_half);
                }
            normalize(k + bh * dim, kn, dim);
            for (int c = 0; c < cores; c++) normalize(values[c], vn[c], dim);

            /* key, forget and erase-gate pre-activations */
            const float *maps = w->key_maps + (int64_t)h * dim * projected;
            for (int j = 0; j < projected; j++) projections[j] = w->key_bias[(int64_t)h * projected + j];
            for (int d = 0; d < dim; d++) {
                const float x = kn[d], *row = maps + (int64_t)d * projected;
                for (int j = 0; j < projected; j++) projections[j] += x * row[j];
            }
            const float *forget = projections + features, *erase_gate = projections + 2 * features;
            const float *alpha = w->alpha + (int64_t)h * features, *beta = w->beta + (int64_t)h * features;
            const float *log_x = w->log_x + (int64_t)h * features, *center = w->center + (int64_t)h * features;

            for (int c = 0; c < cores; c++) {
                const int lo = offset[c], hi = offset[c + 1], rows = hi - lo;
                const float *curvature = curvature_in[c] + bh * rows;
                float ss = 0.0f;
                for (int f = lo; f < hi; f++) ss += projections[f] * projections[f];
                float norm = sqrtf(ss > NORMALIZE_EPS * NORMALIZE_EPS ? ss : NORMALIZE_EPS * NORMALIZE_EPS);
                float dot = 0.0f;
                for (int f = lo; f < hi; f++) {
                    key[f] = projections[f] / norm;
                    float relative = logf(curvature[f - lo] + CURVATURE_FLOOR) - center[f];
                    pre[f] = expf(log_x[f] * (relative / (-1.0f - fabsf(relative)))) * key[f];
                    dot += key[f] * pre[f];
                    curvature_out[c][bh * rows + (f - lo)] = alpha[f] * curvature[f - lo] + beta[f] * key[f] * key[f];
                    erase[f] = key[f] * sigmoidf(erase_gate[f]);
                }
                float denominator = 1.0f + dot;
                if (denominator < DENOMINATOR_FLOOR) denominator = DENOMINATOR_FLOOR;
                for (int f = lo; f < hi; f++) pre[f] /= denominator;

                /* gated write value */
                const float *write = w->write_maps + ((int64_t)h * cores + c) * dim * dim;
                const float *write_bias = w->write_bias + ((int64_t)h * cores + c) * dim;
                for (int d = 0; d < dim; d++) z[d] = write_bias[d];
                for (int e = 0; e < dim; e++) {
                    const float x = vn[c][e], *row = write + (int64_t)e * dim;
                    for (int d = 0; d < dim; d++) z[d] += x * row[d];
                }
                for (int d = 0; d < dim; d++) { z[d] = values[c][d] * sigmoidf(z[d]); difference[d] = z[d]; }

                /* decay, erase read, delta write, on a float32 copy of the core's rows */
                float *block = memory + (int64_t)lo * dim;
                const int64_t first = bh * rows * dim, count = (int64_t)rows * dim;
                read_block(memory_in[c], first, count, block, state_half);
                for (int f = lo; f < hi; f++) {
                    const float decay = expf(-0.25f * sigmoidf(forget[f]));
                    float *m = memory + (int64_t)f * dim;
                    for (int d = 0; d < dim; d++) {
                        m[d] *= decay;
                        difference[d] -= erase[f] * m[d];
                    }
                }
                for (int f = lo; f < hi; f++) {
                    float *m = memory + (int64_t)f * dim;
                    for (int d = 0; d < dim; d++) m[d] += pre[f] * difference[d];
                }
                write_block(memory_out[c], first, count, block, state_half);
            }

            /* each query head of this KV head reads every core */
            for (int g = 0; g < groups; g++) {
                const int hq = h * groups + g;
                normalize(q + ((int64_t)b * heads + hq) * dim, qn, dim);
                const float *qmap = w->query_maps + (int64_t)hq * dim * features;
                for (int f = 0; f < features; f++) query[f] = 0.0f;
                for (int d = 0; d < dim; d++) {
                    const float x = qn[d], *row = qmap + (int64_t)d * features;
                    for (int f = 0; f < features; f++) query[f] += x * row[f];
                }
                for (int c = 0; c < cores; c++) {
                    float ss = 0.0f;
                    for (int f = offset[c]; f < offset[c + 1]; f++) ss += query[f] * query[f];
                    const float scale = w->core_gain[hq * cores + c] /
                                        sqrtf(ss > NORMALIZE_EPS * NORMALIZE_EPS ? ss : NORMALIZE_EPS * NORMALIZE_EPS);
                    for (int d = 0; d < dim; d++) reads[c][d] = 0.0f;
                    for (int f = offset[c]; f < offset[c + 1]; f++) {
                        const float x = scale * query[f], *m = memory + (int64_t)f * dim;
                        for (int d = 0; d < dim; d++) reads[c][d] += x * m[d];
                    }
                }
                float *o = out + ((int64_t)b * heads + hq) * dim;
                memcpy(o, reads[0], sizeof(float) * dim);
                if (mode == 1) {
                    for (int d = 0; d < dim; d++) o[d] += w->residual_gain[hq] * reads[1][d];
                } else if (mode == 2) {
                    float logit = w->gate_bias[hq];
                    for (int d = 0; d < dim; d++) logit += qn[d] * w->gate_weight[(int64_t)hq * dim + d];
                    const float gate = sigmoidf(logit), *projector = w->projector + (int64_t)hq * dim * dim;
                    for (int e = 0; e < dim; e++) {
                        const float x = gate * reads[1][e], *row = projector + (int64_t)e * dim;
                        for (int d = 0; d < dim; d++) o[d] += x * row[d];
                    }
                }
            }
        }
    }
    return 0;
}

/* Returns 0, or 1 on sizes the buffers above cannot hold. */
int er2_decode_step(const struct config *c, const struct weights *w, const struct io *t) {
    return decode(c->batch, c->heads, c->kv_heads, c->dim, c->kernel, c->cores, c->sizes, c->mode, c->state_half, w,
                  t->q, t->k, t->v, t->memory_in, t->curvature_in, t->tail_in, t->out, t->memory_out,
                  t->curvature_out, t->tail_out, t->memory);
}
