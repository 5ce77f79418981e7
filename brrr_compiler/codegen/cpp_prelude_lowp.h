// bfloat16 and float16 in brrr's C++ kernels (part of the prelude: cpp.py inlines this
// file in place of cpp_prelude.h's BRRR_LOW_PRECISION line).
//
// Values live in registers as float; storage is uint16_t holding the format's bits, and
// every conversion is integer and float arithmetic with selects, no branch and no call,
// so gcc vectorizes the loops around it. gcc 12 vectorizes no conversion between
// _Float16 and float ("unsupported data-type"): with _Float16 storage every float16
// kernel ran scalar. Rounding is to nearest even, as eager's; a NaN stays a NaN with its
// sign (its payload, which eager's vector and scalar loops treat differently, may differ).

static inline uint32_t brrr_f32_as_u32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float brrr_u32_as_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float brrr_bf16_to_f32(uint16_t b) { return brrr_u32_as_f32((uint32_t)b << 16); }

static inline uint16_t brrr_f32_to_bf16(float f) {
  // round to nearest even; NaN stays a quiet NaN
  uint32_t u = brrr_f32_as_u32(f);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return f != f ? (uint16_t)0x7FC0 : (uint16_t)rounded;
}

static inline float brrr_round_bf16(float f) { return brrr_bf16_to_f32(brrr_f32_to_bf16(f)); }
// A bfloat16-typed value always holds a float that bfloat16 represents exactly (a load, a
// rounding cast, a rounded literal, a select of those), so storing it keeps the high half:
// rounding it again costs 7 vector ops per 16 elements and changes nothing.
static inline uint16_t brrr_bf16_bits(float f) { return (uint16_t)(brrr_f32_as_u32(f) >> 16); }

// float16 bits (1 sign, 5 exponent bits biased by 15, 10 mantissa bits) -> float, exact.
// Exponent and mantissa shifted into float's place and rebiased (15 -> 127) give every
// normal half; exponent 31 (inf, NaN) becomes 255, the mantissa (NaN payload) kept; a
// subnormal half m * 2^-24 is (1 + m/1024) * 2^-14 - 2^-14, both normal floats, so the
// flush-to-zero and denormals-are-zero modes change nothing.
static inline float brrr_f16_to_f32(uint16_t h) {
  const uint32_t m = (uint32_t)(h & 0x7FFFu) << 13;
  const uint32_t normal = m + 0x38000000u;
  const uint32_t sub = brrr_f32_as_u32(brrr_u32_as_f32(normal + 0x00800000u) - 0x1p-14f);
  uint32_t r = m >= 0x0F800000u ? normal + 0x38000000u : normal;
  r = m < 0x00800000u ? sub : r;
  return brrr_u32_as_f32(r | (uint32_t)(h & 0x8000u) << 16);
}

// float -> the nearest float16 (ties to even, as eager's), kept as float. The FPU rounds:
// |f| + c, with c = 2^(e + 13) for |f|'s exponent e, keeps exactly float16's 11
// significant bits (c's ulp is float16's ulp at e); below 2^-14 (float16 subnormals) c is
// 0.5, whose ulp 2^-24 is the subnormals' spacing; taking c back off is exact. From 65520
// (the tie above 65504) inf; NaN stays NaN (quiet, sign kept: the float sum).
static inline float brrr_round_f16(float f) {
  const float a = __builtin_fabsf(f);
  const uint32_t e = brrr_f32_as_u32(a) & 0x7F800000u;
  const float c = brrr_u32_as_f32((e > 0x38800000u ? e : 0x38800000u) + 0x06800000u);
  float r = (a + c) - c;
  r = a >= 65520.0f ? __builtin_inff() : r;
  return brrr_u32_as_f32(brrr_f32_as_u32(r) | (brrr_f32_as_u32(f) & 0x80000000u));
}

// As for bfloat16, a float16-typed value always holds a float that float16 represents
// exactly (a NaN among them has a nonzero payload in its top 10 mantissa bits: a load
// keeps the half's, rounding sets the quiet bit), so a store only moves bits into place:
// below 2^-14 the subnormal's mantissa is what |f| + 0.5f holds above 0.5f's bits; from
// 2^-14 exponent and mantissa shift into place, rebiased (127 -> 15), and inf or NaN
// (exponent 255 -> 31) keep the top 10 mantissa bits.
static inline uint16_t brrr_f16_bits(float f) {
  const uint32_t u = brrr_f32_as_u32(f) & 0x7FFFFFFFu;
  const uint32_t t = u >> 13;
  const uint32_t sub = brrr_f32_as_u32(__builtin_fabsf(f) + 0.5f) - 0x3F000000u;
  uint32_t o = u < 0x38800000u ? sub : t - 0x1C000u;
  o = u >= 0x47800000u ? t - 0x38000u : o;
  return (uint16_t)(o | ((brrr_f32_as_u32(f) >> 16) & 0x8000u));
}

// float16 loads and stores of pointwise loops, a chunk at a time (codegen/cpp_half.py has
// the note): n values converted between float16 bits and a local float array by the
// target's conversion instructions (AVX-512, F16C; vcvtps2ph rounds to nearest even), the
// integer conversions above for what is left.
typedef short brrr_v16h __attribute__((vector_size(32)));
typedef short brrr_v8h __attribute__((vector_size(16)));
static inline void brrr_f16_load(float* __restrict dst, const uint16_t* __restrict src,
                                 int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    brrr_v16h h;
    memcpy(&h, src + i, sizeof h);
    const brrr_v16f f = __builtin_ia32_vcvtph2ps512_mask(h, brrr_v16f{}, (unsigned short)0xFFFF, 4);
    memcpy(dst + i, &f, sizeof f);
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    brrr_v8h h;
    memcpy(&h, src + i, sizeof h);
    const brrr_v8f f = __builtin_ia32_vcvtph2ps256(h);
    memcpy(dst + i, &f, sizeof f);
  }
#endif
  for (; i < n; ++i) dst[i] = brrr_f16_to_f32(src[i]);
}
static inline void brrr_f16_store(uint16_t* __restrict dst, const float* __restrict src,
                                  int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    brrr_v16f f;
    memcpy(&f, src + i, sizeof f);
    const brrr_v16h h = __builtin_ia32_vcvtps2ph512_mask(f, 0, brrr_v16h{}, (unsigned short)0xFFFF);
    memcpy(dst + i, &h, sizeof h);
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    brrr_v8f f;
    memcpy(&f, src + i, sizeof f);
    const brrr_v8h h = __builtin_ia32_vcvtps2ph256(f, 0);
    memcpy(dst + i, &h, sizeof h);
  }
#endif
  for (; i < n; ++i) dst[i] = brrr_f16_bits(brrr_round_f16(src[i]));
}

// bfloat16 stores of a staged chunk (codegen/cpp_half.py), printed only where the CPU has
// AVX512-BF16 (machine.rounds_bfloat16): vcvtneps2bf16 rounds 16 floats to nearest even in
// one instruction where the integer rounding takes 7 vector ops, which in a loop bound by
// its vector ALUs (silu, gelu, hardswish over bfloat16) cost a sixth of its time. The
// instruction flushes float32 subnormals to zero where eager keeps bfloat16's subnormals:
// a 16-value group holding one (vfpclassps, class 0x20) takes the integer rounding, as
// does the tail. A NaN keeps its sign and top payload bits, quieted (the integer code
// writes 0x7FC0): NaN either way.
static inline void brrr_bf16_store(uint16_t* __restrict dst, const float* __restrict src,
                                   int64_t n) {
  int64_t i = 0;
#if defined(__AVX512BF16__) && defined(__AVX512DQ__) && defined(__GNUC__) && !defined(__clang__)
  for (; i + 16 <= n; i += 16) {
    brrr_v16f f;
    memcpy(&f, src + i, sizeof f);
    if (__builtin_expect(__builtin_ia32_fpclassps512_mask(f, 0x20, (unsigned short)0xFFFF) != 0, 0)) {
      for (int64_t j = i; j < i + 16; ++j) dst[j] = brrr_f32_to_bf16(src[j]);
      continue;
    }
    const brrr_v16h h = (brrr_v16h)__builtin_ia32_cvtneps2bf16_v16sf(f);
    memcpy(dst + i, &h, sizeof h);
  }
#endif
  for (; i < n; ++i) dst[i] = brrr_f32_to_bf16(src[i]);
}

// bfloat16 loads of a staged chunk (codegen/cpp_staging.py): the same shift as
// brrr_bf16_to_f32, 16 then 8 values at a time in explicit vectors. gcc sizes a plain
// loop over 16-bit loads at 32 lanes, so a chunk shorter than that (a row of 24) ran
// scalar: `x.sum(-1)` over rows of 24 bfloat16 took 2.3x eager's time.
typedef unsigned short brrr_v16u16 __attribute__((vector_size(32)));
typedef unsigned short brrr_v8u16 __attribute__((vector_size(16)));
typedef unsigned int brrr_v16u32 __attribute__((vector_size(64)));
typedef unsigned int brrr_v8u32 __attribute__((vector_size(32)));
static inline void brrr_bf16_load(float* __restrict dst, const uint16_t* __restrict src,
                                  int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    brrr_v16u16 h;
    memcpy(&h, src + i, sizeof h);
    const brrr_v16u32 w = __builtin_convertvector(h, brrr_v16u32) << 16;
    memcpy(dst + i, &w, sizeof w);
  }
  for (; i + 8 <= n; i += 8) {
    brrr_v8u16 h;
    memcpy(&h, src + i, sizeof h);
    const brrr_v8u32 w = __builtin_convertvector(h, brrr_v8u32) << 16;
    memcpy(dst + i, &w, sizeof w);
  }
  for (; i < n; ++i) dst[i] = brrr_bf16_to_f32(src[i]);
}
