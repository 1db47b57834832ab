// Vector helpers shared by the kernels (``paged_attention.cpp``, ``layer_ops.cpp``): 16 floats at a time in GCC
// vector extensions (lowered to AVX-512 or narrower), fp32 or bf16 storage (bf16 as its 16 raw bits), e^x.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace kvviz {

typedef float v16 __attribute__((vector_size(64)));
typedef int i16v __attribute__((vector_size(64)));

// Below these sizes a kernel runs on the calling thread: starting an OpenMP team (waking its threads) costs
// 5-40 us, more than two threads save on a few rows; torch's own element-wise ops use a grain of 32,768.
constexpr int64_t kParallelMacs = int64_t(1) << 21;
constexpr int64_t kParallelElements = 32768;

inline v16 load(const float* p) { v16 r; std::memcpy(&r, p, sizeof r); return r; }
inline void store(float* p, v16 x) { std::memcpy(p, &x, sizeof x); }
typedef unsigned short u16x16 __attribute__((vector_size(32)));
typedef unsigned u32v __attribute__((vector_size(64)));

// K, V, Q and the output are fp32 (float) or bf16 (its 16 raw bits, uint16_t); arithmetic is fp32 throughout.
inline float to_f32(float x) { return x; }
inline float to_f32(uint16_t b) { const uint32_t u = static_cast<uint32_t>(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
inline v16 load_row(const float* p) { return load(p); }
inline v16 load_row(const uint16_t* p) {  // 16 bf16 -> 16 floats: each one's bits in the high half
  u16x16 h;
  std::memcpy(&h, p, sizeof h);
  i16v w = __builtin_convertvector(h, i16v) << 16;
  return reinterpret_cast<v16&>(w);
}
inline void put(float* p, float x) { *p = x; }
inline void put(uint16_t* p, float x) {  // round to nearest even, as torch's float -> bfloat16 (NaN stays NaN)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  *p = (x != x) ? static_cast<uint16_t>((u >> 16) | 0x40) : static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
// 16 floats at once, rounded as ``put`` rounds each: the bits of the bf16 values (in the high halves)
inline u32v bf16_bits(v16 x) {
  const u32v u = reinterpret_cast<u32v&>(x);
  const u32v nan = (u >> 16) | 0x40;
  const u32v even = (u + 0x7FFF + ((u >> 16) & 1)) >> 16;
  return x != x ? nan : even;
}
inline v16 round_bf16_v(v16 x) {  // x as bf16 would hold it, as a float
  const u32v w = bf16_bits(x) << 16;
  return reinterpret_cast<const v16&>(w);
}
inline void store_row(float* p, v16 x) { store(p, x); }
inline void store_row(uint16_t* p, v16 x) {
  const u16x16 h = __builtin_convertvector(bf16_bits(x), u16x16);
  std::memcpy(p, &h, sizeof h);
}
inline v16 stored_v(v16 x, const float*) { return x; }  // a product as the tensor's dtype holds it
inline v16 stored_v(v16 x, const uint16_t*) { return round_bf16_v(x); }

#ifdef __AVX512F__
inline v16 splat(float x) { return reinterpret_cast<v16>(_mm512_set1_ps(x)); }
#else
inline v16 splat(float x) { return v16{} + x; }
#endif

#ifdef __AVX512F__
inline float lane_max(v16 x) { return _mm512_reduce_max_ps(reinterpret_cast<__m512&>(x)); }
inline float lane_sum(v16 x) { return _mm512_reduce_add_ps(reinterpret_cast<__m512&>(x)); }
#else
inline float lane_max(v16 x) { float m = x[0]; for (int i = 1; i < 16; ++i) m = std::max(m, x[i]); return m; }
inline float lane_sum(v16 x) { float s = 0.f; for (int i = 0; i < 16; ++i) s += x[i]; return s; }
#endif

// e^x: 2^n * e^r with n = round(x / ln 2), |r| <= ln2 / 2, e^r by its Taylor series to r^7 (relative error
// below 1e-8); arguments under -87 give exactly 0 (a masked score), over 88 are taken as 88 (e^88 ~ 1.7e38).
inline v16 vexp(v16 x) {
  const v16 floor_arg = splat(-87.f), ceil_arg = splat(88.f);
  v16 xc = x < floor_arg ? floor_arg : x;
  xc = xc > ceil_arg ? ceil_arg : xc;
#ifdef __AVX512F__  // n and 2^n * p in one instruction each
  const __m512 t = _mm512_mul_ps(reinterpret_cast<const __m512&>(xc), _mm512_set1_ps(1.4426950408889634f));
  const __m512 nn = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const v16 n = reinterpret_cast<const v16&>(nn);
#else
  v16 t = xc * 1.4426950408889634f + 0.5f;
  i16v ti = __builtin_convertvector(t, i16v);        // toward zero
  v16 n = __builtin_convertvector(ti, v16);
  n = n > t ? n - 1.f : n;                            // floor(t) = the nearest n
#endif
  v16 r = xc - n * 0.693359375f + n * 2.12194440e-4f;  // ln 2 in two parts, so r keeps its low bits
  v16 p = splat(1.f / 5040.f);
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
#ifdef __AVX512F__
  const __m512 e512 = _mm512_scalef_ps(reinterpret_cast<const __m512&>(p), nn);
  const v16 e = reinterpret_cast<const v16&>(e512);
#else
  i16v bits = (__builtin_convertvector(n, i16v) + 127) << 23;
  v16 scale = reinterpret_cast<v16&>(bits);
  v16 e = p * scale;
#endif
  return x < floor_arg ? splat(0.f) : e;
}

}  // namespace kvviz
