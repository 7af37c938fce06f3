/* Hand-written peers of bench/mandelbrot.py: the same float32 arithmetic as the kernel
 * (escape test before the update, z = c + (zr*zr - zi*zi, 2*zr*zi)), int32 counts.
 * Built by bench/cpeers.py with gcc -O3 -march=native -ffp-contract=off, so the
 * non-FMA functions give Numba's bits; the *_fma ones fuse explicitly. */
#include <immintrin.h>
#include <stdint.h>

static int one(float cr, float ci, int max_iter) {
    float zr = cr, zi = ci;
    int i = 0;
    while (i < max_iter) {
        if (zr * zr + zi * zi > 4.0f) break;
        float nr = zr * zr - zi * zi, ni = 2.0f * zr * zi;
        zr = cr + nr;
        zi = ci + ni;
        i++;
    }
    return i;
}

void mandel_scalar(const float *cr, const float *ci, int max_iter, int32_t *out, long n) {
    for (long j = 0; j < n; j++) out[j] = one(cr[j], ci[j], max_iter);
}

#ifdef __AVX2__
/* K independent chains of 8 lanes: K gangs in flight hide the 4-cycle latencies */
#define AVX2_BODY(K, FMA)                                                              \
    long j = 0;                                                                        \
    const __m256 four = _mm256_set1_ps(4.0f), two = _mm256_set1_ps(2.0f);              \
    for (; j + 8 * K <= n; j += 8 * K) {                                               \
        __m256 cr_[K], ci_[K], zr[K], zi[K], act[K];                                   \
        __m256i cnt[K];                                                                \
        for (int k = 0; k < K; k++) {                                                  \
            cr_[k] = zr[k] = _mm256_loadu_ps(cr + j + 8 * k);                          \
            ci_[k] = zi[k] = _mm256_loadu_ps(ci + j + 8 * k);                          \
            act[k] = _mm256_castsi256_ps(_mm256_set1_epi32(-1));                       \
            cnt[k] = _mm256_setzero_si256();                                           \
        }                                                                              \
        for (int it = 0; it < max_iter; it++) {                                        \
            int any = 0;                                                               \
            for (int k = 0; k < K; k++) {                                              \
                __m256 rr = _mm256_mul_ps(zr[k], zr[k]), ii = _mm256_mul_ps(zi[k], zi[k]); \
                __m256 mag = FMA ? _mm256_fmadd_ps(zr[k], zr[k], ii) : _mm256_add_ps(rr, ii); \
                act[k] = _mm256_and_ps(act[k], _mm256_cmp_ps(mag, four, _CMP_NGT_UQ)); \
                any |= _mm256_movemask_ps(act[k]);                                     \
                cnt[k] = _mm256_sub_epi32(cnt[k], _mm256_castps_si256(act[k]));        \
                __m256 nr = FMA ? _mm256_fmsub_ps(zr[k], zr[k], ii) : _mm256_sub_ps(rr, ii); \
                __m256 tzr = _mm256_mul_ps(two, zr[k]);                                \
                __m256 ni = FMA ? _mm256_fmadd_ps(tzr, zi[k], ci_[k]) : _mm256_add_ps(ci_[k], _mm256_mul_ps(tzr, zi[k])); \
                zr[k] = _mm256_add_ps(cr_[k], nr);                                     \
                zi[k] = ni;                                                              \
            }                                                                          \
            if (!any) break;                                                           \
        }                                                                              \
        for (int k = 0; k < K; k++) _mm256_storeu_si256((__m256i *)(out + j + 8 * k), cnt[k]); \
    }                                                                                  \
    for (; j < n; j++) out[j] = one(cr[j], ci[j], max_iter);

void mandel_avx2_2(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX2_BODY(2, 0) }
void mandel_avx2_3(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX2_BODY(3, 0) }
#ifdef __FMA__
void mandel_avx2_2_fma(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX2_BODY(2, 1) }
void mandel_avx2_3_fma(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX2_BODY(3, 1) }
#endif
#endif

#ifdef __AVX512F__
#define AVX512_BODY(K, FMA)                                                            \
    long j = 0;                                                                        \
    const __m512 four = _mm512_set1_ps(4.0f), two = _mm512_set1_ps(2.0f);              \
    const __m512i one_ = _mm512_set1_epi32(1);                                         \
    for (; j + 16 * K <= n; j += 16 * K) {                                             \
        __m512 cr_[K], ci_[K], zr[K], zi[K];                                           \
        __m512i cnt[K];                                                                \
        __mmask16 act[K];                                                              \
        for (int k = 0; k < K; k++) {                                                  \
            cr_[k] = zr[k] = _mm512_loadu_ps(cr + j + 16 * k);                         \
            ci_[k] = zi[k] = _mm512_loadu_ps(ci + j + 16 * k);                         \
            act[k] = 0xFFFF;                                                           \
            cnt[k] = _mm512_setzero_si512();                                           \
        }                                                                              \
        for (int it = 0; it < max_iter; it++) {                                        \
            unsigned any = 0;                                                          \
            for (int k = 0; k < K; k++) {                                              \
                __m512 rr = _mm512_mul_ps(zr[k], zr[k]), ii = _mm512_mul_ps(zi[k], zi[k]); \
                __m512 mag = FMA ? _mm512_fmadd_ps(zr[k], zr[k], ii) : _mm512_add_ps(rr, ii); \
                act[k] = _mm512_mask_cmp_ps_mask(act[k], mag, four, _CMP_NGT_UQ);      \
                any |= act[k];                                                         \
                cnt[k] = _mm512_mask_add_epi32(cnt[k], act[k], cnt[k], one_);          \
                __m512 nr = FMA ? _mm512_fmsub_ps(zr[k], zr[k], ii) : _mm512_sub_ps(rr, ii); \
                __m512 tzr = _mm512_mul_ps(two, zr[k]);                                \
                zi[k] = FMA ? _mm512_fmadd_ps(tzr, zi[k], ci_[k]) : _mm512_add_ps(ci_[k], _mm512_mul_ps(tzr, zi[k])); \
                zr[k] = _mm512_add_ps(cr_[k], nr);                                     \
            }                                                                          \
            if (!any) break;                                                           \
        }                                                                              \
        for (int k = 0; k < K; k++) _mm512_storeu_si512(out + j + 16 * k, cnt[k]);     \
    }                                                                                  \
    for (; j < n; j++) out[j] = one(cr[j], ci[j], max_iter);

void mandel_avx512_2(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX512_BODY(2, 0) }
void mandel_avx512_3(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX512_BODY(3, 0) }
void mandel_avx512_2_fma(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX512_BODY(2, 1) }
void mandel_avx512_3_fma(const float *cr, const float *ci, int max_iter, int32_t *out, long n) { AVX512_BODY(3, 1) }
#endif
