// brrr C++ prelude: scalar helpers shared by every generated translation unit.
// No system headers beyond <stdint.h>: <cmath> alone costs ~100 ms of compile time.
#include <stdint.h>
#include <string.h>

// Transcendental functions from libm, called as brrr_libm_<name>[f] (scalar_ops.py).
// With glibc's libmvec (BRRR_LIBMVEC), every element goes through ONE vector kernel,
// libmvec's widest for the target (_ZGVeN16v_sinf on AVX-512): libmvec's vector widths
// and scalar libm round differently (up to an ulp, on 5-40% of inputs), and gcc's
// vectorized loops call the widest variant in the body, a narrower one in the epilogue
// and scalar libm for the last elements, so a value would depend on its position in the
// loop (a row of equal inputs came out not constant). brrr_libm_sinf is declared
// `declare simd` for every width up to the widest; each width's clone, defined here,
// widens its argument and calls the kernel, and the scalar function (defined under the
// declared name by an asm label, so gcc makes no clones of it) evaluates lane 0 of the
// kernel. Hidden: each kernel library binds its own. A unit defines the wrappers its
// kernels call only (scalar_ops.libm_declarations): each costs ~10 ms of compile CPU.
#define BRRR_CAT_(a, b, c, d) a##b##c##d
#define BRRR_CAT(a, b, c, d) BRRR_CAT_(a, b, c, d)
#define BRRR_VEC(n, t) BRRR_CAT(brrr_v, n, t, )
#define BRRR_HIDDEN extern "C" __attribute__((visibility("hidden")))
// const: no side effects (no errno: -fno-math-errno), so gcc may if-convert around the
// call; without it a bfloat16 or float16 loop (whose rounding has a NaN select) stayed
// scalar, calling the 16-lane kernel once per element (bfloat16 sin 3.5x slower).
#define BRRR_PURE __attribute__((const))
// A kernel of transcendental functions runs its loops at 512-bit width where the target
// has AVX-512 (codegen/cpp.py, wide_vectors): gcc's tuning for Intel server cores prefers
// 256-bit vectors, but each libm call runs libmvec's 16-lane kernel anyway (the clones
// below widen a narrower vector to it), so a 256-bit loop paid for 16 lanes and used 8
// (sin 2.3x, tanh 2.6x slower than at 512), and the inline exp and erf are compute-bound
// (exp, sigmoid and softmax 1.4-1.5x faster at 512). So does a kernel that converts
// float16/bfloat16 values (integer code, compute-bound too). Others keep gcc's choice.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define BRRR_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define BRRR_WIDE
#endif
typedef float brrr_v4f __attribute__((vector_size(16)));
typedef float brrr_v8f __attribute__((vector_size(32)));
typedef float brrr_v16f __attribute__((vector_size(64)));
typedef double brrr_v2d __attribute__((vector_size(16)));
typedef double brrr_v4d __attribute__((vector_size(32)));
typedef double brrr_v8d __attribute__((vector_size(64)));

// A narrow vector into the low lanes of a wide one (zeros above) and back, for the
// libmvec clones below. In registers: through memory, the wide load of a narrow store
// misses store forwarding, which cost a short row (8 floats) as much as its math.
#if defined(__clang__) || __GNUC__ >= 12
template <typename V> static inline V brrr_widen(V x, V) { return x; }
template <typename V> static inline V brrr_narrow(V w, V) { return w; }
#define BRRR_I2 0, 1
#define BRRR_I4 BRRR_I2, 2, 3
#define BRRR_I8 BRRR_I4, 4, 5, 6, 7
#define BRRR_I16 BRRR_I8, 8, 9, 10, 11, 12, 13, 14, 15
#define BRRR_WIDEN(N, W, t, IW, IN)                                               \
  static inline BRRR_VEC(W, t) brrr_widen(BRRR_VEC(N, t) x, BRRR_VEC(W, t)) {     \
    const BRRR_VEC(N, t) z = {};                                                  \
    return __builtin_shufflevector(x, z, IW);                                     \
  }                                                                               \
  static inline BRRR_VEC(N, t) brrr_narrow(BRRR_VEC(W, t) w, BRRR_VEC(N, t)) {    \
    return __builtin_shufflevector(w, w, IN);                                     \
  }
BRRR_WIDEN(4, 8, f, BRRR_I8, BRRR_I4)
BRRR_WIDEN(8, 16, f, BRRR_I16, BRRR_I8)
BRRR_WIDEN(2, 4, d, BRRR_I4, BRRR_I2)
BRRR_WIDEN(4, 8, d, BRRR_I8, BRRR_I4)
// two steps where the widest vector is four times the narrow one
static inline brrr_v16f brrr_widen(brrr_v4f x, brrr_v16f w) {
  return brrr_widen(brrr_widen(x, brrr_v8f{}), w);
}
static inline brrr_v4f brrr_narrow(brrr_v16f w, brrr_v4f x) {
  return brrr_narrow(brrr_narrow(w, brrr_v8f{}), x);
}
static inline brrr_v8d brrr_widen(brrr_v2d x, brrr_v8d w) {
  return brrr_widen(brrr_widen(x, brrr_v4d{}), w);
}
static inline brrr_v2d brrr_narrow(brrr_v8d w, brrr_v2d x) {
  return brrr_narrow(brrr_narrow(w, brrr_v4d{}), x);
}
#else
template <typename V, typename X> static inline V brrr_widen(X x, V w) {
  memcpy(&w, &x, sizeof x);
  return w;
}
template <typename X, typename V> static inline X brrr_narrow(V w, X x) {
  memcpy(&x, &w, sizeof x);
  return x;
}
#endif

#ifdef BRRR_LIBMVEC
#define BRRR_SIMD_LEN(n) _Pragma(BRRR_SIMD_STR(omp declare simd notinbranch simdlen(n)))
#define BRRR_SIMD_STR(x) #x
// ISA letter of the x86 vector ABI gcc picks, widest float/double lanes, each width
#if defined(__AVX512F__)
#define BRRR_ISA e
#define BRRR_FLANES 16
#define BRRR_DLANES 8
#define BRRR_WIDTHS_F(M, ...) M(4, f, __VA_ARGS__) M(8, f, __VA_ARGS__) M(16, f, __VA_ARGS__)
#define BRRR_WIDTHS_D(M, ...) M(2, d, __VA_ARGS__) M(4, d, __VA_ARGS__) M(8, d, __VA_ARGS__)
#elif defined(__AVX__)
#if defined(__AVX2__)
#define BRRR_ISA d
#else
#define BRRR_ISA c
#endif
#define BRRR_FLANES 8
#define BRRR_DLANES 4
#define BRRR_WIDTHS_F(M, ...) M(4, f, __VA_ARGS__) M(8, f, __VA_ARGS__)
#define BRRR_WIDTHS_D(M, ...) M(2, d, __VA_ARGS__) M(4, d, __VA_ARGS__)
#else
#define BRRR_ISA b
#define BRRR_FLANES 4
#define BRRR_DLANES 2
#define BRRR_WIDTHS_F(M, ...) M(4, f, __VA_ARGS__)
#define BRRR_WIDTHS_D(M, ...) M(2, d, __VA_ARGS__)
#endif
#define BRRR_ZGV(n, args, fn) BRRR_CAT(_ZGV, BRRR_ISA, N, BRRR_CAT(n, args, _, fn))
#define BRRR_DECLARE_LEN(n, t, ...) BRRR_SIMD_LEN(n)
// Domains. libmvec hands each lane whose argument lies outside the function's domain (the
// log of a negative, the asin of 2: NaN results) to the scalar function, one lane at a
// time: a float log1p over normal samples, 16% of them below -1, ran 8x slower than over
// the same count inside the domain (10-25x for log, asin, acos, atanh). A function whose
// row gives a domain (scalar_ops.py: D is ", lo, hi, inside, below, above") calls the
// kernel on lanes inside [lo, hi] only, the others set to `inside`, and gives the others
// the function's limits itself: `below` under lo, `above` over hi (0 and inf for exp),
// where those are NaN the default NaN (as libm's invalid operation), and a NaN argument
// as it is. A vector whose lanes are all inside goes straight to the kernel: the blends
// around the call (which spill the argument and the mask) cost clean double exp 1.4x.
// Lanes from N up are a narrow clone's padding (zeros, and log's zero costs the detour
// too): they count as outside. benchmarks/results/notes.md has the measurements.
#define BRRR_UNPAREN(...) __VA_ARGS__
// Whether every lane of `ok` (lanes from N up false) is set. With AVX-512 the compares go
// to mask registers and are tested there (the same predicates as `ok`'s, so gcc computes
// them once): read out of a vector register and ANDed word by word (the generic form),
// the test cost float32 log 1.25x the kernel's time without it, in mask registers 1.07x.
template <int N, typename V, typename T, typename M>
static inline bool brrr_all_inside(V, T, T, M ok) {
  uint64_t words[sizeof(V) / 8], all = ~(uint64_t)0;
  memcpy(words, &ok, sizeof words);
  for (uint64_t w : words) all &= w;
  return all == ~(uint64_t)0;
}
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
// predicates 13 and 2: _CMP_GE_OS and _CMP_LE_OS, what >= and <= compile to; 4: the
// current rounding (no suppress-all-exceptions)
template <int N, typename M>
static inline bool brrr_all_inside(brrr_v16f x, float lo, float hi, M) {
  const unsigned short lanes = (unsigned short)((1u << N) - 1);
  const unsigned short ge = __builtin_ia32_cmpps512_mask(x, brrr_v16f{} + lo, 13, lanes, 4);
  return __builtin_ia32_cmpps512_mask(x, brrr_v16f{} + hi, 2, ge, 4) == 0xffff;
}
template <int N, typename M>
static inline bool brrr_all_inside(brrr_v8d x, double lo, double hi, M) {
  const unsigned char lanes = (unsigned char)((1u << N) - 1);
  const unsigned char ge = __builtin_ia32_cmppd512_mask(x, brrr_v8d{} + lo, 13, lanes, 4);
  return __builtin_ia32_cmppd512_mask(x, brrr_v8d{} + hi, 2, ge, 4) == 0xff;
}
#elif defined(__AVX__) && defined(__GNUC__) && !defined(__clang__)
// AVX's widest vectors: the lanes' sign bits in one movmsk (the log kernel over 2M floats
// compiled for AVX2 alone, on the AVX-512 VM: 515-548 -> 484-531 us)
template <int N, typename M> static inline bool brrr_all_inside(brrr_v8f, float, float, M ok) {
  return __builtin_ia32_movmskps256((brrr_v8f)ok) == 0xff;
}
template <int N, typename M> static inline bool brrr_all_inside(brrr_v4d, double, double, M ok) {
  return __builtin_ia32_movmskpd256((brrr_v4d)ok) == 0xf;
}
#endif
template <int N, typename F, typename V> static inline V brrr_call_in(F f, V x) {
  return f(x);
}
template <int N, typename F, typename V>
static inline V brrr_call_in(F f, V x, double lo, double hi, double inside,
                             double below, double above) {
  typedef __typeof__(x[0] + 0) T;
  V lane = {};
  for (int i = 0; i < (int)(sizeof(V) / sizeof(T)); ++i) lane[i] = (T)i;   // folded by gcc
  const auto ok = (x >= (T)lo) & (x <= (T)hi) & (lane < (T)N);   // false for NaN
  if (__builtin_expect(brrr_all_inside<N>(x, (T)lo, (T)hi, ok), 1)) return f(x);
  const V r = f(ok ? x : V{} + (T)inside);
  const T fault = -__builtin_nan("");     // the default NaN an invalid operation gives
  const V low = V{} + (below == below ? (T)below : fault);
  const V high = V{} + (above == above ? (T)above : fault);
  return ok ? r : x < (T)lo ? low : x > (T)hi ? high : x + x;   // x + x: a NaN x as is
}
// one function (fn: sinf, sin) in one type: the kernel, the declaration, the clones
#define BRRR_LIBM_1(T, fn, W, V, WIDTHS, D)                                       \
  extern "C" V BRRR_ZGV(W, v, fn)(V);                                             \
  WIDTHS(BRRR_DECLARE_LEN, ) BRRR_HIDDEN BRRR_PURE T brrr_libm_##fn(T);           \
  BRRR_HIDDEN T brrr_lane_##fn(T) __asm__("brrr_libm_" #fn);                      \
  T brrr_lane_##fn(T x) { /* x - 0 broadcasts x, -0.0 too (0 + x made it +0.0) */ \
    return brrr_call_in<W>(BRRR_ZGV(W, v, fn), x - V{} BRRR_UNPAREN D)[0];        \
  }                                                                               \
  WIDTHS(BRRR_CLONE_1, fn, W, V, D)
#define BRRR_CLONE_1(n, t, fn, W, V, D)                                           \
  BRRR_HIDDEN BRRR_VEC(n, t) BRRR_ZGV(n, v, brrr_libm_##fn)(BRRR_VEC(n, t) x) {   \
    const V w = brrr_widen(x, V{});                                               \
    return brrr_narrow(brrr_call_in<n>(BRRR_ZGV(W, v, fn), w BRRR_UNPAREN D), x); \
  }
#define BRRR_LIBM_2(T, fn, W, V, WIDTHS, D)                                       \
  extern "C" V BRRR_ZGV(W, vv, fn)(V, V);                                         \
  WIDTHS(BRRR_DECLARE_LEN, ) BRRR_HIDDEN BRRR_PURE T brrr_libm_##fn(T, T);        \
  BRRR_HIDDEN T brrr_lane_##fn(T, T) __asm__("brrr_libm_" #fn);                   \
  T brrr_lane_##fn(T x, T y) {                                                    \
    V a = {x}, b = {y};                                                           \
    return BRRR_ZGV(W, vv, fn)(a, b)[0];                                          \
  }                                                                               \
  WIDTHS(BRRR_CLONE_2, fn, W, V)
#define BRRR_CLONE_2(n, t, fn, W, V)                                              \
  BRRR_HIDDEN BRRR_VEC(n, t) BRRR_ZGV(n, vv, brrr_libm_##fn)(BRRR_VEC(n, t) x,    \
                                                            BRRR_VEC(n, t) y) {   \
    const V a = brrr_widen(x, V{}), b = brrr_widen(y, V{});                       \
    return brrr_narrow(BRRR_ZGV(W, vv, fn)(a, b), x);                             \
  }
#define BRRR_LIBM_FLOAT(arity, name, D)                                           \
  BRRR_CAT(BRRR_LIBM_, arity, , )(float, name##f, BRRR_FLANES,                    \
                                  BRRR_VEC(BRRR_FLANES, f), BRRR_WIDTHS_F, D)
#define BRRR_LIBM_DOUBLE(arity, name, D)                                          \
  BRRR_CAT(BRRR_LIBM_, arity, , )(double, name, BRRR_DLANES,                      \
                                  BRRR_VEC(BRRR_DLANES, d), BRRR_WIDTHS_D, D)
#else
// without libmvec every call is scalar libm's: one implementation already (and no
// lane-by-lane detour outside a domain)
#define BRRR_LIBM_FLOAT(arity, name, D)                                           \
  extern "C" float name##f(BRRR_CAT(BRRR_ARGS_, arity, , )(float));               \
  BRRR_CAT(BRRR_WRAP_, arity, , )(float, name##f)
#define BRRR_LIBM_DOUBLE(arity, name, D)                                          \
  extern "C" double name(BRRR_CAT(BRRR_ARGS_, arity, , )(double));                \
  BRRR_CAT(BRRR_WRAP_, arity, , )(double, name)
#define BRRR_ARGS_1(T) T
#define BRRR_ARGS_2(T) T, T
#define BRRR_WRAP_1(T, fn) static inline T brrr_libm_##fn(T x) { return fn(x); }
#define BRRR_WRAP_2(T, fn) static inline T brrr_libm_##fn(T x, T y) { return fn(x, y); }
#endif

BRRR_LIBM_DECLARATIONS
extern "C" {
float fmodf(float, float);
double fmod(double, double);
int omp_get_thread_num(void);
int omp_get_num_threads(void);
void* malloc(size_t);
void* calloc(size_t, size_t);
void free(void*);
}

// erf for float: x * P(x^2) / Q(x^2) on |x| < 3.9; beyond, erf rounds to +-1 in float.
// Coefficients fitted for this project (rational least-squares with Lawson reweighting on
// |x| <= 3.92, relative error 1.9e-9 in exact arithmetic; <= 6 ulp vs torch.erf when
// evaluated in float). Branch-free, so loops calling it vectorize. The final select alone
// handles large |x| (where x*x overflows and r is garbage) and NaN (fails the compare, and
// r is NaN): no clamp in front, whose NaN-preserving compares cost a third of the loop.
static inline float brrr_erff(float x) {
  const float t = x * x;
  float p = -1.2795730114170455e-08f;
  p = __builtin_fmaf(p, t, 4.6084439738605227e-06f);
  p = __builtin_fmaf(p, t, 3.7672907887127086e-04f);
  p = __builtin_fmaf(p, t, 3.8385271994807288e-03f);
  p = __builtin_fmaf(p, t, 5.4243277475603070e-02f);
  p = __builtin_fmaf(p, t, 1.8513514293339395e-01f);
  p = __builtin_fmaf(p, t, 1.1283791691200538e+00f);
  float q = 6.2391664778190876e-05f;
  q = __builtin_fmaf(q, t, 1.3014652651780084e-03f);
  q = __builtin_fmaf(q, t, 1.5429751753829470e-02f);
  q = __builtin_fmaf(q, t, 1.1387309252734912e-01f);
  q = __builtin_fmaf(q, t, 4.9740515439054289e-01f);
  q = __builtin_fmaf(q, t, 1.0f);
  const float r = x * p / q;
  // past |x| = 3.9, erf(x) rounds to +-1 in float: return it exactly (gelu(-1e30) = -0)
  return __builtin_fabsf(x) >= 3.9f ? __builtin_copysignf(1.0f, x) : r;
}

static inline float brrr_exp_poly(float x, float t, float shifter) {
  // e^r for r = x - n ln2, n = t - shifter (ln2 in two parts, Cody-Waite)
  const float n = t - shifter;
  float r = __builtin_fmaf(n, -0.693359375f, x);
  r = __builtin_fmaf(n, 2.12194440e-4f, r);
  float p = 1.3814598385e-03f;
  p = __builtin_fmaf(p, r, 8.3687169226e-03f);
  p = __builtin_fmaf(p, r, 4.1668388053e-02f);
  p = __builtin_fmaf(p, r, 1.6666520631e-01f);
  p = __builtin_fmaf(p, r, 4.9999993448e-01f);
  p = __builtin_fmaf(p, r, 1.0f);
  return __builtin_fmaf(p, r, 1.0f);
}

// exp for float: e^x = 2^n * e^r with n = round(x / ln2) and |r| <= ln2 / 2 (Cody-Waite
// reduction, ln2 in two parts), e^r by a degree-6 polynomial fitted for this project
// (relative error 3.1e-9 in exact arithmetic; <= 0.87 ulp vs the exact value when
// evaluated in float, over every 37th float32). 2^n is applied as two normal powers of two,
// so results that underflow to subnormals round correctly. Inline and branch-free: gcc
// vectorizes it without a call, 13% faster than libmvec's expf on AVX-512. NaN flows
// through r; the final select handles overflow (+inf), underflow (0) and +-inf inputs.
static inline float brrr_expf(float x) {
  const float shifter = 12582912.0f;   // 1.5 * 2^23: adding it rounds to an integer
  const float t = __builtin_fmaf(x, 1.44269504088896341f, shifter);
  const float p = brrr_exp_poly(x, t, shifter);
  int32_t tb;
  memcpy(&tb, &t, 4);
  const int32_t ni = tb - 0x4B400000, n1 = ni >> 1;   // n as an integer, |n| <= 150 here
  const int32_t b1 = (n1 + 127) << 23, b2 = (ni - n1 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, 4);
  memcpy(&s2, &b2, 4);
  const float res = p * s1 * s2;
  return x > 88.8f ? __builtin_inff() : (x < -104.0f ? 0.0f : res);
}

// exp of an argument known to be <= 0 (x - max over a row: lower/signs.py). It cannot
// overflow, so 2^n is one power of two built by a shift: with 127 added to the shifter,
// the low bits of t hold n + 127, and shifted left by 23 they are 2^n's exponent field.
// Arguments below -88 are clamped there (the compare keeps NaN); from x < -87.68 on,
// n = -127 gives an exponent field of 0 and the result +0: eager's too for x <= -103.97,
// and under 1e-38 in between (a subnormal). Otherwise as accurate as
// brrr_expf; 25% fewer vector ops in a sum of exps (measured: 0.206 vs 0.276 ns/element).
static inline float brrr_expf_nonpos(float x) {
  const float xc = x < -88.0f ? -88.0f : x;
  const float shifter = 12583039.0f;   // 1.5 * 2^23 + 127
  const float t = __builtin_fmaf(xc, 1.44269504088896341f, shifter);
  const float p = brrr_exp_poly(xc, t, shifter);
  int32_t tb;
  memcpy(&tb, &t, 4);
  const int32_t b = tb << 23;
  float s;
  memcpy(&s, &b, 4);
  return p * s;
}

// 16x16 float transpose through gcc's generic vectors (no intrinsics header): four
// stages each swap the off-diagonal halves of 2h x 2h blocks (h = 8, 4, 2, 1) with
// two-source shuffles (one vpermt2ps each on AVX-512). dst[c * ds + r] = src[r * ss + c].
// The tiled schedule stages transposed operands with it; scalar copies cost ~2 ops per
// element there. Pure data movement: every bit pattern (NaN payloads, -0.0) is kept.
//
// Without AVX-512, gcc lowers those 16-lane two-source shuffles to one scalar move per
// element (678 vmovss in the 9-tap weight copy on an AVX2 EPYC; the copy ran 1.8x eager's
// time). There each 16x16 block is four 8x8 transposes of 8-lane rows, whose stages gcc
// maps to vperm2f128, vshufps, vpermilps and vblendps on AVX2's 256-bit registers; the
// two off-diagonal 8x8 blocks trade places by where they are stored.

// one stage over the n rows of r (vectors of type V, index vectors of type VI)
#define BRRR_T_STAGE_OF(V, VI, n, h, LO, HI)                              \
  for (int i = 0; i < n; ++i) {                                          \
    if (i & h) continue;                                                 \
    const V a = r[i], b = r[i + h];                                      \
    r[i] = __builtin_shuffle(a, b, (VI)LO);                              \
    r[i + h] = __builtin_shuffle(a, b, (VI)HI);                          \
  }
#if defined(__AVX512F__)
typedef int32_t brrr_v16i __attribute__((vector_size(64)));
#define BRRR_T_STAGE(h, LO, HI) BRRR_T_STAGE_OF(brrr_v16f, brrr_v16i, 16, h, LO, HI)
static inline void brrr_t16_stages(brrr_v16f r[16]) {
  BRRR_T_STAGE(8, ((brrr_v16i){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}),
                  ((brrr_v16i){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}))
  BRRR_T_STAGE(4, ((brrr_v16i){0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}),
                  ((brrr_v16i){4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}))
  BRRR_T_STAGE(2, ((brrr_v16i){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}),
                  ((brrr_v16i){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}))
  BRRR_T_STAGE(1, ((brrr_v16i){0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}),
                  ((brrr_v16i){1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}))
}
// brrr_transpose16k: the first k (<= 16) columns of 16 rows in, k rows of 16 out: a conv
// weight's 9 taps (a short transposed dim). Rows whose 16-float load stays inside the
// block (the last row ends at 15 * ss + k) load whole, their lanes past k going to rows
// not stored; the others copy k floats (a partial copy into a vector is a store-forward
// stall: with every row copied so, the 9-tap weight copy was slower than a gather).
static inline void brrr_transpose16k(const float* src, int64_t ss, float* dst, int64_t ds, int k) {
  brrr_v16f r[16];
  for (int i = 0; i < 16; ++i) {
    if (i * ss + 16 <= 15 * ss + k) {
      memcpy(&r[i], src + i * ss, 64);
    } else {
      r[i] = (brrr_v16f){};
      memcpy(&r[i], src + i * ss, 4 * k);
    }
  }
  brrr_t16_stages(r);
  for (int i = 0; i < k; ++i) memcpy(dst + i * ds, &r[i], 64);
}
// brrr_transpose16h: the same for 16-bit elements (float16 and bfloat16 bits): each row
// widened to 32-bit lanes, the float stages, each row narrowed back (vpmovzxwd and vpmovdw
// on AVX-512). Copying a 16-bit tile element by element cost ~2 cycles an element: a
// float16 NCHW -> NHWC copy of 67 MB moved 7.4 GB/s where float32's moved 23.
typedef uint16_t brrr_v16u16 __attribute__((vector_size(32)));
static inline void brrr_transpose16h(const uint16_t* src, int64_t ss, uint16_t* dst,
                                     int64_t ds) {
  brrr_v16f r[16];
  for (int i = 0; i < 16; ++i) {
    brrr_v16u16 h;
    memcpy(&h, src + i * ss, 32);
    r[i] = (brrr_v16f)__builtin_convertvector(h, brrr_v16i);
  }
  brrr_t16_stages(r);
  for (int i = 0; i < 16; ++i) {
    const brrr_v16u16 h = __builtin_convertvector((brrr_v16i)r[i], brrr_v16u16);
    memcpy(dst + i * ds, &h, 32);
  }
}
#else
typedef int32_t brrr_v8i __attribute__((vector_size(32)));
#define BRRR_T_STAGE(h, LO, HI) BRRR_T_STAGE_OF(brrr_v8f, brrr_v8i, 8, h, LO, HI)
static inline void brrr_t8_stages(brrr_v8f r[8]) {
  BRRR_T_STAGE(4, ((brrr_v8i){0, 1, 2, 3, 8, 9, 10, 11}), ((brrr_v8i){4, 5, 6, 7, 12, 13, 14, 15}))
  BRRR_T_STAGE(2, ((brrr_v8i){0, 1, 8, 9, 4, 5, 12, 13}), ((brrr_v8i){2, 3, 10, 11, 6, 7, 14, 15}))
  BRRR_T_STAGE(1, ((brrr_v8i){0, 8, 2, 10, 4, 12, 6, 14}), ((brrr_v8i){1, 9, 3, 11, 5, 13, 7, 15}))
}
// brrr_transpose16k as above, 8x8 at a time: rows whose 8-float load ends inside the
// block (15 * ss + k) load whole, the others copy their columns below k. One or two
// columns past the last 8 (a 3x3 weight's ninth tap) are gathered a column at a time:
// an 8x8 transpose for them cost as much as for eight, and its last row's partial copy
// stalled store forwarding (that weight copy 1.6x faster so, in C alone).
static inline void brrr_transpose16k(const float* src, int64_t ss, float* dst, int64_t ds, int k) {
  const int64_t end = 15 * ss + k;
  for (int rb = 0; rb < 16; rb += 8) {
    for (int cb = 0; cb < k; cb += 8) {
      const int kc = k - cb < 8 ? k - cb : 8;
      if (kc <= 2) {
        for (int c = cb; c < k; ++c) {
          float col[8];
          for (int i = 0; i < 8; ++i) col[i] = src[(rb + i) * ss + c];
          memcpy(dst + c * ds + rb, col, 32);
        }
        continue;
      }
      brrr_v8f r[8];
      for (int i = 0; i < 8; ++i) {
        const int64_t at = (rb + i) * ss + cb;
        if (at + 8 <= end) {
          memcpy(&r[i], src + at, 32);
        } else {
          r[i] = (brrr_v8f){};
          memcpy(&r[i], src + at, 4 * kc);
        }
      }
      brrr_t8_stages(r);
      for (int i = 0; i < kc; ++i) memcpy(dst + (cb + i) * ds + rb, &r[i], 32);
    }
  }
}
typedef uint16_t brrr_v8u16 __attribute__((vector_size(16)));
static inline void brrr_transpose16h(const uint16_t* src, int64_t ss, uint16_t* dst,
                                     int64_t ds) {
  for (int rb = 0; rb < 16; rb += 8) {
    for (int cb = 0; cb < 16; cb += 8) {
      brrr_v8f r[8];
      for (int i = 0; i < 8; ++i) {
        brrr_v8u16 h;
        memcpy(&h, src + (rb + i) * ss + cb, 16);
        r[i] = (brrr_v8f)__builtin_convertvector(h, brrr_v8i);
      }
      brrr_t8_stages(r);
      for (int i = 0; i < 8; ++i) {
        const brrr_v8u16 h = __builtin_convertvector((brrr_v8i)r[i], brrr_v8u16);
        memcpy(dst + (cb + i) * ds + rb, &h, 16);
      }
    }
  }
}
#endif
static inline void brrr_transpose16(const float* src, int64_t ss, float* dst, int64_t ds) {
  brrr_transpose16k(src, ss, dst, ds, 16);
}
#undef BRRR_T_STAGE
#undef BRRR_T_STAGE_OF

BRRR_LOW_PRECISION

// Streaming stores (codegen/cpp_stream.py): n values (float, double, bfloat16 or float16 bits)
// from a small local array to dst, non-temporal (whole lines, no read of the old line)
// where dst is 64- (or 32-) byte aligned, ordinary stores at the head and tail. The fence
// orders them before whatever the thread does next (another thread reading the output
// after the parallel region).
#if defined(__AVX512F__)
#define BRRR_NT_LANES 16
#define BRRR_NT_STORE __builtin_ia32_movntps512
#elif defined(__AVX__)
#define BRRR_NT_LANES 8
#define BRRR_NT_STORE __builtin_ia32_movntps256
#endif
template <typename T>
static inline void brrr_stream(T* __restrict dst, const T* __restrict src, int64_t n) {
  int64_t i = 0;
#ifdef BRRR_NT_LANES
  typedef float brrr_vnt __attribute__((vector_size(4 * BRRR_NT_LANES)));
  const int64_t per = sizeof(brrr_vnt) / sizeof(T);
  for (; i < n && ((uintptr_t)(dst + i) & (sizeof(brrr_vnt) - 1)); ++i) dst[i] = src[i];
  for (; i + per <= n; i += per) {
    brrr_vnt x;
    memcpy(&x, src + i, sizeof x);
    BRRR_NT_STORE((float*)(dst + i), x);
  }
#endif
  for (; i < n; ++i) dst[i] = src[i];
}
static inline void brrr_stream_fence(void) {
#if defined(__SSE__)
  __builtin_ia32_sfence();
#endif
}

// maximum/minimum propagate NaN from either side, like torch.maximum/minimum. Flat
// selects, not nested: gcc 12 if-converts a loop with several nested ones next to other
// selects (a max-pool window over a relu) into branches, unvectorized. One unordered test
// of both operands, not a NaN test of each: gcc unswitches a loop on a test of a
// loop-invariant operand, and one copy stayed scalar, so a float sum over a chunk ran
// sequentially and lost precision (benchmarks/results/notes.md, "Nested selects").
template <typename T> static inline T brrr_maximum(T a, T b) { return a < b ? b : a; }
template <typename T> static inline T brrr_minimum(T a, T b) { return b < a ? b : a; }
// Against a constant that is not NaN (a clamp's bound, relu's 0) one compare and one
// select carry NaN through from the other side (the compare is false for it) and keep
// the first operand on a tie: the unordered test and its blend cost relu6 and
// hardsigmoid over bfloat16 a third of their loop, which ran 1.3-1.8x eager's time.
// __builtin_constant_p is decided after inlining (gcc); elsewhere the general form runs.
#define BRRR_FLOAT_MINMAX(T)                                                      \
  static inline T brrr_maximum(T a, T b) {                                        \
    if (__builtin_constant_p(b) && b == b) return a < b ? b : a;                  \
    if (__builtin_constant_p(a) && a == a) return b <= a ? a : b;                 \
    const T m = a < b ? b : a;                                                    \
    return __builtin_isunordered(a, b) ? a + b : m;                               \
  }                                                                               \
  static inline T brrr_minimum(T a, T b) {                                        \
    if (__builtin_constant_p(b) && b == b) return b < a ? b : a;                  \
    if (__builtin_constant_p(a) && a == a) return b >= a ? a : b;                 \
    const T m = b < a ? b : a;                                                    \
    return __builtin_isunordered(a, b) ? a + b : m;                               \
  }
BRRR_FLOAT_MINMAX(float)
BRRR_FLOAT_MINMAX(double)
// The total of a block of L partials (codegen/cpp_sum_lanes.py), folded as a tree: each
// level adds the upper half onto the lower in vector lanes; in order, one lane at a time,
// the fold of 64 float partials was a chain of 64 dependent adds.
template <int L, typename T> static inline T brrr_fold_lanes(T* c) {
#pragma GCC unroll 8
  for (int h = L / 2; h > 0; h /= 2) {
    for (int i = 0; i < h; ++i) c[i] += c[i + h];
  }
  return c[0];
}
// The same trees for maxes and mins (their NaN flags fold apart, as ints: or)
template <int L, typename T> static inline T brrr_fold_max_lanes(T* c) {
#pragma GCC unroll 8
  for (int h = L / 2; h > 0; h /= 2) {
    for (int i = 0; i < h; ++i) c[i] = c[i + h] > c[i] ? c[i + h] : c[i];
  }
  return c[0];
}
template <int L, typename T> static inline T brrr_fold_min_lanes(T* c) {
#pragma GCC unroll 8
  for (int h = L / 2; h > 0; h /= 2) {
    for (int i = 0; i < h; ++i) c[i] = c[i + h] < c[i] ? c[i + h] : c[i];
  }
  return c[0];
}
template <int L, typename T> static inline T brrr_fold_prod_lanes(T* c) {
#pragma GCC unroll 8
  for (int h = L / 2; h > 0; h /= 2) {
    for (int i = 0; i < h; ++i) c[i] *= c[i + h];
  }
  return c[0];
}
template <int L> static inline int brrr_fold_or_lanes(int* c) {
#pragma GCC unroll 8
  for (int h = L / 2; h > 0; h /= 2) {
    for (int i = 0; i < h; ++i) c[i] |= c[i + h];
  }
  return c[0];
}
// fmax/fmin: the other side of a NaN (NaN only where both are), flat selects as above
// prims.fma: one rounding (vfmadd where the target has FMA, libm's fma otherwise)
static inline float brrr_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double brrr_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
template <typename T> static inline T brrr_fmax(T a, T b) {
  const T m = a < b ? b : a;
  const T r = a != a ? b : m;
  return b != b ? a : r;
}
template <typename T> static inline T brrr_fmin(T a, T b) {
  const T m = b < a ? b : a;
  const T r = a != a ? b : m;
  return b != b ? a : r;
}
template <typename T> static inline T brrr_sign(T x) { return (T)((T(0) < x) - (x < T(0))); }
template <typename T> static inline T brrr_abs(T x) { return x < T(0) ? -x : x; }
static inline float brrr_abs(float x) { return __builtin_fabsf(x); }
static inline double brrr_abs(double x) { return __builtin_fabs(x); }
template <typename T> static inline bool brrr_isinf(T x) { return false; }
static inline bool brrr_isinf(float x) { return __builtin_fabsf(x) == __builtin_inff(); }
static inline bool brrr_isinf(double x) { return __builtin_fabs(x) == __builtin_inf(); }
template <typename T> static inline bool brrr_signbit(T x) { return x < T(0); }
// sign bit through the bits (gcc 12 ICEs vectorizing __builtin_signbit after bf16 loads)
static inline bool brrr_signbit(float x) { int32_t b; memcpy(&b, &x, 4); return b < 0; }
static inline bool brrr_signbit(double x) { int64_t b; memcpy(&b, &x, 8); return b < 0; }

// fmod for float, exact as C's (the sign of a, zeros too), in vector lanes. libm's fmodf
// is a call per element that gcc cannot vectorize (fmod, remainder and floor division
// over 1M floats ran 3.7x eager's time, which vectorizes with Sleef). A lane with
// |a| < 2^29 |b| computes in double: q = trunc(a / b) is the true quotient or, where
// a / b lies just below an integer and rounds up to it, one too large in magnitude;
// q * b is exact (29 + 24 bits), so is a - q * b (the result is a multiple of the
// smaller operand's ulp, under 2^53 of them), and a result of the wrong sign gets |b|
// back. Other lanes (huge quotients, b = 0 or inf, NaN, inf a) call fmodf: both paths
// are exact, so a value does not depend on its lane. The clones are defined only in
// units whose kernels call fmod (codegen/cpp.py, prelude).
#if defined(BRRR_LIBMVEC) && defined(BRRR_FMOD_CLONES)
static inline bool brrr_fmodf_near(float a, float b) {     // false for NaN
  return __builtin_fabsf(a) < __builtin_fabsf(b) * 536870912.0f &&
         __builtin_fabsf(b) != __builtin_inff();
}
static inline float brrr_fmodf_fast(float a, float b) {
  const double ad = a, bd = b;
  const double q = brrr_fmodf_near(a, b) ? ad / bd : 0.0;
  const double t = (double)(int32_t)q;                        // trunc
  double r = ad - t * bd;
  const double babs = __builtin_fabs(bd);
  r = (r != 0 && (r < 0) != (ad < 0)) ? r + (ad < 0 ? -babs : babs) : r;
  return __builtin_copysignf((float)r, a);
}
// one clone's lanes as a short loop gcc vectorizes at the target's widths (generic
// vectors of 16 doubles are wider than any register: gcc split their selects lane by lane)
template <int N, typename V> static inline V brrr_fmodf_lanes(V a, V b) {
  float av[N], bv[N], out[N];
  int32_t near[N], all = -1;
  memcpy(av, &a, sizeof av);
  memcpy(bv, &b, sizeof bv);
  // no pragma: gcc vectorizes this fixed count at -O3, and a unit's omp loops stay the
  // kernels' own (benchmarks/vector_audit.py and tests count them)
  for (int i = 0; i < N; ++i) {
    out[i] = brrr_fmodf_fast(av[i], bv[i]);
    near[i] = brrr_fmodf_near(av[i], bv[i]) ? -1 : 0;
    all &= near[i];
  }
  if (__builtin_expect(!all, 0))
    for (int i = 0; i < N; ++i)
      if (!near[i]) out[i] = fmodf(av[i], bv[i]);
  V r;
  memcpy(&r, out, sizeof r);
  return r;
}
BRRR_WIDTHS_F(BRRR_DECLARE_LEN, ) BRRR_HIDDEN BRRR_PURE float brrr_fmodf_v(float, float);
BRRR_HIDDEN float brrr_fmodf_lane(float, float) __asm__("brrr_fmodf_v");
float brrr_fmodf_lane(float a, float b) { return fmodf(a, b); }
#define BRRR_FMOD_CLONE(n, t, ...)                                                \
  BRRR_HIDDEN BRRR_VEC(n, t) BRRR_ZGV(n, vv, brrr_fmodf_v)(BRRR_VEC(n, t) a,      \
                                                           BRRR_VEC(n, t) b) {    \
    return brrr_fmodf_lanes<n>(a, b);                                             \
  }
BRRR_WIDTHS_F(BRRR_FMOD_CLONE, )
static inline float brrr_fmod(float a, float b) { return brrr_fmodf_v(a, b); }
#else
static inline float brrr_fmod(float a, float b) { return fmodf(a, b); }
#endif
static inline double brrr_fmod(double a, double b) { return fmod(a, b); }

// Python-style floor division and remainder on floats, with ATen's rounding fix-ups
// (div_floor_floating), as selects: branches kept gcc from vectorizing the loop
template <typename T> static inline T brrr_floordiv(T a, T b) {
  const T mod = brrr_fmod(a, b);
  T div = (a - mod) / b;
  div = (mod != 0 && (b < 0) != (mod < 0)) ? div - T(1) : div;
  const T fl = __builtin_floor(div);
  const T rounded = div - fl > T(0.5) ? fl + T(1) : fl;
  const T res = div == 0 ? __builtin_copysign(T(0), a / b) : rounded;
  return b == 0 ? a / b : res;
}
template <typename T> static inline T brrr_remainder(T a, T b) {
  T mod = brrr_fmod(a, b);
  return (mod != 0 && (b < 0) != (mod < 0)) ? mod + b : mod;
}

static inline int64_t brrr_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t brrr_max_i64(int64_t a, int64_t b) { return a < b ? b : a; }
