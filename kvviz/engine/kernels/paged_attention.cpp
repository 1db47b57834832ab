// Paged attention for the CPU, fp32 or bf16 (computed in fp32): every query row attends to positions 0..its own of its sequence, whose
// K/V are read in place from the engine's blocks through the sequence's block table (no gather, no copy).
// One work item = one query tile of one sequence x one K/V head: its rows (tile positions x the query heads
// of that K/V head) sweep the sequence's key blocks once, with a running (online) softmax per row.
// Vector code is written with GCC vector extensions (16 floats), lowered to AVX-512 or narrower by the compiler.
#include <torch/extension.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

typedef float v16 __attribute__((vector_size(64)));
typedef int i16v __attribute__((vector_size(64)));

constexpr float kMasked = -1e30f;  // a score that must not count (a key after the query's position)
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

struct Item {  // one query tile of one sequence (a row of ``items``)
  int64_t row0, npos, pos0, table0;
};

// ND = head_dim / 16; keys are taken KC at a time (one running-softmax update per chunk), from one or more
// blocks (block_size divides KC); RS query rows compute scores together, RB accumulate P V together (registers).
constexpr int KC = 64, NV = KC / 16, RB = 4, RS = 8;  // RS rows share each K load of the scores

// Scores of R query rows (``qs``, [R][D]) against the chunk's transposed keys (``kt``, [D][KC]) into ``p``
// ([R][KC]), 32 keys at a time: each K vector is loaded once for all R rows.
template <int R, int D>
inline void scores(const float* qs, const float* kt, float (*p)[KC]) {
  for (int half = 0; half < KC / 32; ++half) {
    v16 s[R][2];
    for (int rr = 0; rr < R; ++rr) s[rr][0] = s[rr][1] = splat(0.f);
    for (int d = 0; d < D; ++d) {
      const v16 k0 = load(kt + d * KC + half * 32);
      const v16 k1 = load(kt + d * KC + half * 32 + 16);
      for (int rr = 0; rr < R; ++rr) {
        const v16 b = splat(qs[rr * D + d]);
        s[rr][0] += b * k0;
        s[rr][1] += b * k1;
      }
    }
    for (int rr = 0; rr < R; ++rr) {
      store(&p[rr][half * 32], s[rr][0]);
      store(&p[rr][half * 32 + 16], s[rr][1]);
    }
  }
}

// The same for at most RB rows (a decode token's query heads) straight from the keys' rows, one dot product
// per (row, key): no transposed copy, which would cost more than these few rows' products.
template <typename T, int D>
inline void scores_direct(const float* qs, int n_rows, const T* const* krow, int nk, float (*p)[KC]) {
  constexpr int ND = D / 16;
  for (int j = 0; j < nk; ++j) {
    v16 k[ND];
    for (int c = 0; c < ND; ++c) k[c] = load_row(krow[j] + c * 16);
    for (int rr = 0; rr < n_rows; ++rr) {
      v16 acc = load(qs + rr * D) * k[0];
      for (int c = 1; c < ND; ++c) acc += load(qs + rr * D + c * 16) * k[c];
      p[rr][j] = lane_sum(acc);
    }
  }
  for (int rr = 0; rr < n_rows; ++rr)
    for (int j = nk; j < KC; ++j) p[rr][j] = 0.f;
}

template <typename T, int ND>
void attend_tile(const Item& it, int kvh, const T* q, int64_t q_stride, const T* kc, const T* vc,
                 const int64_t* tables, int bs, int heads, int kv_heads, float scale, T* out) {
  constexpr int D = ND * 16;
  const int group = heads / kv_heads;
  const int rows = static_cast<int>(it.npos) * group;
  const int padded = (rows + RB - 1) / RB * RB;  // whole groups of RB rows (RS at a time while they last)
  std::vector<float> qs(static_cast<size_t>(padded) * D, 0.f), o(static_cast<size_t>(padded) * D, 0.f);
  std::vector<float> m(padded, kMasked), l(padded, 0.f), pos(padded), kt(static_cast<size_t>(D) * KC);
  float p[RS][KC];
  for (int r = 0; r < padded; ++r) {  // row r = tile position r / group, query head kvh * group + r % group
    const int i = std::min(r / group, static_cast<int>(it.npos) - 1);
    pos[r] = static_cast<float>(it.pos0 + i);
    if (r < rows) {
      const T* src = q + (it.row0 + i) * q_stride + (static_cast<int64_t>(kvh) * group + r % group) * D;
      for (int d = 0; d < D; ++d) qs[static_cast<size_t>(r) * D + d] = to_f32(src[d]) * scale;
    }
  }
  const int64_t last = it.pos0 + it.npos - 1;  // the tile's last position: keys 0..last are read
  const int64_t token_stride = static_cast<int64_t>(kv_heads) * D;
  const T* krow[KC];  // where each key of the chunk lives (its block, its slot)
  const T* vrow_at[KC];
  for (int64_t key0 = 0; key0 <= last; key0 += KC) {
    const int nk = static_cast<int>(std::min<int64_t>(KC, last + 1 - key0));
    for (int j = 0; j < nk; ++j) {
      const int64_t key = key0 + j;
      const int64_t slot = tables[it.table0 + key / bs] * bs + key % bs;
      krow[j] = kc + slot * token_stride + static_cast<int64_t>(kvh) * D;
      vrow_at[j] = vc + slot * token_stride + static_cast<int64_t>(kvh) * D;
    }
    const bool few = padded == RB;  // a decode token's rows: scores straight from the key rows
    for (int d = 0; d < D && !few; ++d) {  // K of the chunk transposed: kt[d][j] (zeros past the last key), rows written in order
      float* dst = &kt[static_cast<size_t>(d) * KC];
      for (int j = 0; j < nk; ++j) dst[j] = to_f32(krow[j][d]);
      for (int j = nk; j < KC; ++j) dst[j] = 0.f;
    }
    const bool masks = key0 + KC - 1 > it.pos0;  // a key of this chunk may follow some row's position
    v16 keypos[NV];
    for (int v = 0; v < NV; ++v)
      for (int t = 0; t < 16; ++t) keypos[v][t] = static_cast<float>(key0 + v * 16 + t);
    for (int r0 = 0; r0 < padded; r0 += RS) {
      const int n_rows = std::min(RS, padded - r0);  // RS, or RB for the last rows
      if (few)
        scores_direct<T, D>(&qs[static_cast<size_t>(r0) * D], n_rows, krow, nk, p);
      else if (n_rows == RS)
        scores<RS, D>(&qs[static_cast<size_t>(r0) * D], kt.data(), p);
      else
        scores<RB, D>(&qs[static_cast<size_t>(r0) * D], kt.data(), p);
      float alpha[RS];
      for (int rr = 0; rr < n_rows; ++rr) {
        const int r = r0 + rr;
        v16 sc[NV];
        for (int v = 0; v < NV; ++v) {
          sc[v] = load(&p[rr][v * 16]);
          if (masks) sc[v] = keypos[v] > splat(pos[r]) ? splat(kMasked) : sc[v];
        }
        v16 vmax = sc[0];
        for (int v = 1; v < NV; ++v) vmax = vmax > sc[v] ? vmax : sc[v];
        const float mx = std::max(m[r], lane_max(vmax));
        alpha[rr] = std::exp(m[r] - mx);
        v16 vsum = splat(0.f);
        for (int v = 0; v < NV; ++v) {
          const v16 e = vexp(sc[v] - mx);
          vsum += e;
          store(&p[rr][v * 16], e);
        }
        l[r] = l[r] * alpha[rr] + lane_sum(vsum);
        m[r] = mx;
      }
      for (int g0 = 0; g0 < n_rows; g0 += RB) {
        v16 acc[RB][ND];
        for (int rr = 0; rr < RB; ++rr)
          for (int c = 0; c < ND; ++c) acc[rr][c] = load(&o[static_cast<size_t>(r0 + g0 + rr) * D + c * 16]) * alpha[g0 + rr];
        for (int j = 0; j < nk; ++j) {
          v16 vrow[ND];
          for (int c = 0; c < ND; ++c) vrow[c] = load_row(vrow_at[j] + c * 16);
          for (int rr = 0; rr < RB; ++rr) {
            const v16 b = splat(p[g0 + rr][j]);
            for (int c = 0; c < ND; ++c) acc[rr][c] += b * vrow[c];
          }
        }
        for (int rr = 0; rr < RB; ++rr)
          for (int c = 0; c < ND; ++c) store(&o[static_cast<size_t>(r0 + g0 + rr) * D + c * 16], acc[rr][c]);
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    const int i = r / group;
    T* dst = out + ((it.row0 + i) * heads + static_cast<int64_t>(kvh) * group + r % group) * D;
    const float inv = 1.f / l[r];
    for (int d = 0; d < D; ++d) put(dst + d, o[static_cast<size_t>(r) * D + d] * inv);
  }
}

template <typename T, int ND>
void run_all(const Item* items, int64_t n_items, const T* q, int64_t q_stride, const T* kc, const T* vc,
             const int64_t* tables, int bs, int heads, int kv_heads, float scale, T* out) {
  // Work (tile x K/V head) is handed out one at a time, the last tiles of each sequence first: a tile's cost
  // grows with its position, so equal contiguous shares (at::parallel_for) would leave one thread the heavy end.
  const int64_t n_work = n_items * kv_heads;
  int64_t macs = 0;  // query rows x keys x heads x head_dim of every tile; a small step (a few decode tokens) stays
  for (int64_t i = 0; i < n_items; ++i)  // on the calling thread
    macs += items[i].npos * (items[i].pos0 + items[i].npos) * heads * ND * 16;
#pragma omp parallel for schedule(dynamic, 1) if (macs >= kParallelMacs)
  for (int64_t w = n_work - 1; w >= 0; --w)
    attend_tile<T, ND>(items[w / kv_heads], static_cast<int>(w % kv_heads), q, q_stride, kc, vc, tables, bs, heads,
                    kv_heads, scale, out);
}

}  // namespace

// q [T, heads, d] (rows may be strided), k_cache / v_cache [num_blocks, block_size, kv_heads, d] contiguous,
// tables [*] int64 block ids, items [n, 4] int64 (first row, positions, first position, table offset) -> [T, heads, d]
torch::Tensor paged_attention(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache, torch::Tensor tables,
                              torch::Tensor items, double scale) {
  const bool bf16 = q.dtype() == torch::kBFloat16;
  TORCH_CHECK((q.dtype() == torch::kFloat32 || bf16) && k_cache.dtype() == q.dtype() && v_cache.dtype() == q.dtype(),
              "fp32 or bf16, the same for q, K and V");
  TORCH_CHECK(q.dim() == 3 && q.stride(2) == 1 && q.stride(1) == q.size(2), "q rows of [heads, d]");
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "contiguous K/V blocks");
  TORCH_CHECK(tables.is_contiguous() && items.is_contiguous() && items.size(1) == 4, "tables, items");
  const int heads = static_cast<int>(q.size(1)), d = static_cast<int>(q.size(2));
  const int bs = static_cast<int>(k_cache.size(1)), kv_heads = static_cast<int>(k_cache.size(2));
  auto out = torch::empty({q.size(0), heads, d}, q.options());
  const auto* it = reinterpret_cast<const Item*>(items.data_ptr<int64_t>());
  const int64_t n = items.size(0);
  const float s = static_cast<float>(scale);
  const int64_t* tab = tables.data_ptr<int64_t>();
  TORCH_CHECK(KC % bs == 0, "block size must divide 64");
#define KVVIZ_RUN(T, ND)                                                                                        \
  run_all<T, ND>(it, n, reinterpret_cast<const T*>(q.data_ptr()), q.stride(0),                                   \
                 reinterpret_cast<const T*>(k_cache.data_ptr()), reinterpret_cast<const T*>(v_cache.data_ptr()),  \
                 tab, bs, heads, kv_heads, s, reinterpret_cast<T*>(out.data_ptr()));                              \
  return out;
  if (d == 64 && !bf16) { KVVIZ_RUN(float, 4) }
  if (d == 128 && !bf16) { KVVIZ_RUN(float, 8) }
  if (d == 64 && bf16) { KVVIZ_RUN(uint16_t, 4) }
  if (d == 128 && bf16) { KVVIZ_RUN(uint16_t, 8) }
#undef KVVIZ_RUN
  TORCH_CHECK(false, "head_dim 64 or 128 only");
}

// The SiLU-gated product of the MLP: x [T, 2I] (gate | up, side by side) -> silu(gate) * up [T, I], in fp32
// (bf16 in and out: one rounding at the end), rows split over torch's OpenMP threads.
template <typename T>
void silu_mul_rows(const T* x, T* out, int64_t rows, int64_t inter) {
#pragma omp parallel for schedule(static) if (rows * inter >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T* gate = x + r * 2 * inter;
    const T* up = gate + inter;
    T* dst = out + r * inter;
    int64_t i = 0;
    for (; i + 16 <= inter; i += 16) {
      const v16 g = load_row(gate + i);
      const v16 e = vexp(splat(0.f) - g);  // e^-g
      store_row(dst + i, g / (splat(1.f) + e) * load_row(up + i));
    }
    for (; i < inter; ++i) {
      const float g = to_f32(gate[i]);
      put(dst + i, g / (1.f + std::exp(-g)) * to_f32(up[i]));
    }
  }
}

torch::Tensor silu_and_mul(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.size(1) % 2 == 0, "x [T, 2I] contiguous");
  TORCH_CHECK(x.dtype() == torch::kFloat32 || x.dtype() == torch::kBFloat16, "fp32 or bf16");
  const int64_t rows = x.size(0), inter = x.size(1) / 2;
  auto out = torch::empty({rows, inter}, x.options());
  if (x.dtype() == torch::kFloat32)
    silu_mul_rows(x.data_ptr<float>(), out.data_ptr<float>(), rows, inter);
  else
    silu_mul_rows(reinterpret_cast<const uint16_t*>(x.data_ptr()), reinterpret_cast<uint16_t*>(out.data_ptr()), rows,
                  inter);
  return out;
}

inline float round_bf16(float x) { uint16_t b; put(&b, x); return to_f32(b); }  // x as bf16 would hold it
inline float stored(float x, const float*) { return x; }
inline float stored(float x, const uint16_t*) { return round_bf16(x); }

// RMSNorm of each row of x [T, D]: w * (x / sqrt(mean(x^2) + eps)), in fp32; in bf16 the normed row is rounded
// before the weight multiplies it and again after, as transformers' LlamaRMSNorm does.
template <typename T>
void rms_norm_rows(const T* x, const T* w, T* out, int64_t rows, int64_t dim, float eps) {
#pragma omp parallel for schedule(static) if (rows * dim >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = x + r * dim;
    v16 acc = splat(0.f);
    int64_t i = 0;
    for (; i + 16 <= dim; i += 16) {
      const v16 v = load_row(src + i);
      acc += v * v;
    }
    float ss = lane_sum(acc);
    for (; i < dim; ++i) ss += to_f32(src[i]) * to_f32(src[i]);
    const float inv = 1.f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t j = 0; j < dim; ++j) put(out + r * dim + j, to_f32(w[j]) * stored(to_f32(src[j]) * inv, src));
  }
}

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && w.is_contiguous() && w.numel() == x.size(1), "x [T, D], w [D]");
  TORCH_CHECK(x.dtype() == w.dtype() && (x.dtype() == torch::kFloat32 || x.dtype() == torch::kBFloat16), "fp32 or bf16");
  auto out = torch::empty_like(x);
  if (x.dtype() == torch::kFloat32)
    rms_norm_rows(x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1),
                  static_cast<float>(eps));
  else
    rms_norm_rows(reinterpret_cast<const uint16_t*>(x.data_ptr()), reinterpret_cast<const uint16_t*>(w.data_ptr()),
                  reinterpret_cast<uint16_t*>(out.data_ptr()), x.size(0), x.size(1), static_cast<float>(eps));
  return out;
}

// Rotary positions: out = x * cos + roll(x, d / 2) * sin' per head, x [T, n, d] (rows may be strided), cos and the
// signed sin' [T, 1, d] (sin with its first half negated); each product rounded as torch rounds it (no fused
// multiply-add: the same numbers as the two multiplications and the addition).
template <typename T>
__attribute__((optimize("fp-contract=off"))) void rotary_rows(const T* x, int64_t row_stride, const T* cos, const T* sin,
                                                               T* out, int64_t rows, int64_t heads, int64_t d) {
  const int64_t half = d / 2;
  const bool vec = half % 16 == 0;  // the rolled half starts on a whole vector (head_dim 32, 64, 128...)
#pragma omp parallel for schedule(static) if (rows * heads * d >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      const T* src = x + r * row_stride + h * d;
      T* dst = out + (r * heads + h) * d;
      if (vec) {
        for (int64_t i = 0; i < d; i += 16) {
          const v16 a = stored_v(load_row(src + i) * load_row(cos + r * d + i), src);
          const v16 b = stored_v(load_row(src + (i + half) % d) * load_row(sin + r * d + i), src);
          store_row(dst + i, a + b);
        }
        continue;
      }
      for (int64_t i = 0; i < d; ++i) {
        const float a = stored(to_f32(src[i]) * to_f32(cos[r * d + i]), src);
        const float b = stored(to_f32(src[(i + half) % d]) * to_f32(sin[r * d + i]), src);
        put(dst + i, a + b);
      }
    }
}

torch::Tensor rotary(torch::Tensor x, torch::Tensor cos, torch::Tensor sin) {
  TORCH_CHECK(x.dim() == 3 && x.stride(2) == 1 && x.stride(1) == x.size(2) && x.size(2) % 2 == 0, "x [T, n, d]");
  TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous() && cos.numel() == x.size(0) * x.size(2) &&
              sin.numel() == cos.numel(), "cos, sin [T, 1, d]");
  TORCH_CHECK(x.dtype() == cos.dtype() && x.dtype() == sin.dtype() &&
              (x.dtype() == torch::kFloat32 || x.dtype() == torch::kBFloat16), "fp32 or bf16, all alike");
  auto out = torch::empty({x.size(0), x.size(1), x.size(2)}, x.options());
  if (x.dtype() == torch::kFloat32)
    rotary_rows(x.data_ptr<float>(), x.stride(0), cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<float>(),
                x.size(0), x.size(1), x.size(2));
  else
    rotary_rows(reinterpret_cast<const uint16_t*>(x.data_ptr()), x.stride(0),
                reinterpret_cast<const uint16_t*>(cos.data_ptr()), reinterpret_cast<const uint16_t*>(sin.data_ptr()),
                reinterpret_cast<uint16_t*>(out.data_ptr()), x.size(0), x.size(1), x.size(2));
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_attention", &paged_attention, "paged attention over the engine's blocks (CPU, fp32 or bf16)");
  m.def("silu_and_mul", &silu_and_mul, "silu(gate) * up of x = [gate | up] (CPU, fp32 or bf16)");
  m.def("rms_norm", &rms_norm, "RMSNorm of each row (CPU, fp32 or bf16)");
  m.def("rotary", &rotary, "rotary positions, x * cos + roll(x, d / 2) * signed sin (CPU, fp32 or bf16)");
}
