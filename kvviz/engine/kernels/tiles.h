// What the attention kernel's tiles share (a work item, the chunk sizes) and its two specialised prefill tiles:
// fp32 with the scores transposed (query rows as lanes), bf16 with AVX512-BF16 dot products. Included by
// paged_attention.cpp; its digest is a build flag, as vec.h's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vec.h"

namespace kvviz {

constexpr float kMasked = -1e30f;  // a score that must not count (a key after the query's position)

struct Item {  // one query tile of one sequence (a row of ``items``)
  int64_t row0, npos, pos0, table0;
};

// ND = head_dim / 16; keys are taken KC at a time (one running-softmax update per chunk), from one or more
// blocks (block_size divides KC); RS query rows compute scores together, RB accumulate P V together (registers).
constexpr int KC = 64, NV = KC / 16, RB = 4, RS = 8;  // RS rows share each K load of the scores

// Where each key of the chunk key0..key0+nk-1 lives for K/V head ``kvh``: its K row and its V row, through the
// sequence's block table (``krow``, ``vrow``: nk pointers each).
template <typename T, int D>
inline void chunk_rows(const Item& it, int kvh, int64_t key0, int nk, const int64_t* tables, int bs, int kv_heads,
                       const T* kc, const T* vc, const T** krow, const T** vrow) {
  const int64_t token_stride = static_cast<int64_t>(kv_heads) * D;
  for (int j = 0; j < nk; ++j) {
    const int64_t key = key0 + j;
    const int64_t at = (tables[it.table0 + key / bs] * bs + key % bs) * token_stride + static_cast<int64_t>(kvh) * D;
    krow[j] = kc + at;
    vrow[j] = vc + at;
  }
}

// P V of RB rows in registers: o[rr] = o[rr] * alpha[rr] + sum over the chunk's nk keys of weight(rr, j) V[j]
// (``o`` [RB][D] fp32, V rows in T, widened).
template <typename T, int ND, typename Weight>
inline void pv_rows(float* o, const float* alpha, int nk, const T* const* vrow, Weight weight) {
  constexpr int D = ND * 16;
  v16 acc[RB][ND];
  for (int rr = 0; rr < RB; ++rr)
    for (int c = 0; c < ND; ++c) acc[rr][c] = load(o + rr * D + c * 16) * alpha[rr];
  for (int j = 0; j < nk; ++j) {
    v16 v[ND];
    for (int c = 0; c < ND; ++c) v[c] = load_row(vrow[j] + c * 16);
    for (int rr = 0; rr < RB; ++rr) {
      const v16 b = splat(weight(rr, j));
      for (int c = 0; c < ND; ++c) acc[rr][c] += b * v[c];
    }
  }
  for (int rr = 0; rr < RB; ++rr)
    for (int c = 0; c < ND; ++c) store(o + rr * D + c * 16, acc[rr][c]);
}

// A tile's ``rows`` outputs ``o`` [rows][D], each divided by its softmax sum ``l``, into ``out`` [T, heads, D] (row
// r = tile position r / group, query head kvh * group + r % group), rounded to the output's dtype.
template <typename T, int D>
inline void write_rows(const Item& it, int kvh, int rows, int group, int heads, const float* o, const float* l,
                       T* out) {
  for (int r = 0; r < rows; ++r) {
    T* dst = out + ((it.row0 + r / group) * heads + static_cast<int64_t>(kvh) * group + r % group) * D;
    const float inv = 1.f / l[r];
    for (int d = 0; d < D; ++d) put(dst + d, o[static_cast<size_t>(r) * D + d] * inv);
  }
}

// An fp32 tile of at least RT rows with the scores transposed: lanes are query rows, so no key is transposed (each
// K element is broadcast from its row in place) and the running softmax works on 16 rows at once, with no
// reduction across lanes. RT rows (two vectors) x KB keys of scores stay in registers over the head dims.
constexpr int RT = 32, KB = 8;

template <int ND>
void attend_tile_rows(const Item& it, int kvh, const float* q, int64_t q_stride, const float* kc, const float* vc,
                      const int64_t* tables, int bs, int heads, int kv_heads, float scale, float* out) {
  constexpr int D = ND * 16;
  const int group = heads / kv_heads;
  const int rows = static_cast<int>(it.npos) * group;
  const int padded = (rows + RT - 1) / RT * RT;  // pad rows repeat the last real row (finite, never written)
  std::vector<float> qt(static_cast<size_t>(D) * padded), o(static_cast<size_t>(padded) * D, 0.f);
  std::vector<float> m(padded, kMasked), l(padded, 0.f), pos(padded);
  alignas(64) float st[KC][RT];  // scores, then weights, of RT rows: st[key][row]
  for (int r = 0; r < padded; ++r) {  // qt[d][r] = row r's query (scaled); row r = position r / group, head r % group
    const int rr = std::min(r, rows - 1);
    const int i = rr / group;
    pos[r] = static_cast<float>(it.pos0 + i);
    const float* src = q + (it.row0 + i) * q_stride + (static_cast<int64_t>(kvh) * group + rr % group) * D;
    for (int d = 0; d < D; ++d) qt[static_cast<size_t>(d) * padded + r] = src[d] * scale;
  }
  const int64_t last = it.pos0 + it.npos - 1;
  const float* krow[KC];
  const float* vrow_at[KC];
  for (int64_t key0 = 0; key0 <= last; key0 += KC) {
    const int nk = static_cast<int>(std::min<int64_t>(KC, last + 1 - key0));
    chunk_rows<float, D>(it, kvh, key0, nk, tables, bs, kv_heads, kc, vc, krow, vrow_at);
    for (int j = nk; j < KC; ++j) krow[j] = krow[0];  // past the last key: any finite row, masked below
    for (int r0 = 0; r0 < padded; r0 += RT) {
      // keys after the group's last position weigh nothing: not computed (rows are in position order)
      const int kend = static_cast<int>(std::min<int64_t>(nk, static_cast<int64_t>(pos[r0 + RT - 1]) - key0 + 1));
      if (kend <= 0) continue;
      for (int j0 = 0; j0 < kend; j0 += KB) {  // scores of KB keys x RT rows, summed over the head dims
        v16 acc[KB][2];
        for (int kk = 0; kk < KB; ++kk) acc[kk][0] = acc[kk][1] = splat(0.f);
        const float* qd = &qt[r0];
        for (int d = 0; d < D; ++d, qd += padded) {
          const v16 q0 = load(qd), q1 = load(qd + 16);
          for (int kk = 0; kk < KB; ++kk) {
            const v16 b = splat(krow[j0 + kk][d]);
            acc[kk][0] += q0 * b;
            acc[kk][1] += q1 * b;
          }
        }
        for (int kk = 0; kk < KB; ++kk) {
          store(st[j0 + kk], acc[kk][0]);
          store(st[j0 + kk] + 16, acc[kk][1]);
        }
      }
      float alpha[RT];
      for (int h = 0; h < RT; h += 16) {  // running softmax of 16 rows at once
        const v16 p = load(&pos[r0 + h]);
        v16 mx = load(&m[r0 + h]);
        for (int j = 0; j < kend; ++j) {
          v16 sc = load(st[j] + h);
          sc = splat(static_cast<float>(key0 + j)) > p ? splat(kMasked) : sc;
          store(st[j] + h, sc);
          mx = mx > sc ? mx : sc;
        }
        const v16 a = vexp(load(&m[r0 + h]) - mx);
        v16 sum = splat(0.f);
        for (int j = 0; j < kend; ++j) {
          const v16 e = vexp(load(st[j] + h) - mx);
          sum += e;
          store(st[j] + h, e);
        }
        store(&l[r0 + h], load(&l[r0 + h]) * a + sum);
        store(&m[r0 + h], mx);
        store(&alpha[h], a);
      }
      for (int g0 = 0; g0 < RT; g0 += RB)  // P V: RB rows x head dims in registers
        pv_rows<float, ND>(&o[static_cast<size_t>(r0 + g0) * D], &alpha[g0], kend, vrow_at,
                           [&](int rr, int j) { return st[j][g0 + rr]; });
    }
  }
  write_rows<float, D>(it, kvh, rows, group, heads, o.data(), l.data(), out);
}

#ifdef __AVX512BF16__
// A bf16 tile of more than RB rows with AVX512-BF16 dot products (vdpbf16ps: 16 lanes, each adding two bf16
// products to an fp32 sum), as torch's bf16 flash attention multiplies: scores from the bf16 Q and K exactly
// (each product exact, sums in fp32), the softmax in fp32, then P rounded to bf16 (nearest even) for P V. Keys
// are laid out as (d, d+1) pairs across the chunk's keys, V as (key, key+1) pairs across head dims.
typedef unsigned short u16x32 __attribute__((vector_size(64)));

inline __m512 dp(__m512 acc, u32v pair, u32v b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(pair), reinterpret_cast<__m512bh&>(b));
}
inline uint32_t bits32(const uint16_t* p) { uint32_t u; std::memcpy(&u, p, 4); return u; }

template <int R, int D>
inline void scores_bf16(const uint32_t* qs, const uint32_t* kt, float (*p)[KC]) {  // qs [R][D/2], kt [D/2][KC]
  for (int half = 0; half < KC / 32; ++half) {
    __m512 s[R][2];
    for (int rr = 0; rr < R; ++rr) s[rr][0] = s[rr][1] = _mm512_setzero_ps();
    for (int dp2 = 0; dp2 < D / 2; ++dp2) {
      const u32v k0 = reinterpret_cast<const u32v&>(*reinterpret_cast<const u32v*>(kt + dp2 * KC + half * 32));
      const u32v k1 = reinterpret_cast<const u32v&>(*reinterpret_cast<const u32v*>(kt + dp2 * KC + half * 32 + 16));
      for (int rr = 0; rr < R; ++rr) {
        const u32v b = u32v{} + qs[rr * (D / 2) + dp2];
        s[rr][0] = dp(s[rr][0], b, k0);
        s[rr][1] = dp(s[rr][1], b, k1);
      }
    }
    for (int rr = 0; rr < R; ++rr) {
      _mm512_storeu_ps(&p[rr][half * 32], s[rr][0]);
      _mm512_storeu_ps(&p[rr][half * 32 + 16], s[rr][1]);
    }
  }
}

template <int ND>
void attend_tile_bf16(const Item& it, int kvh, const uint16_t* q, int64_t q_stride, const uint16_t* kc,
                      const uint16_t* vc, const int64_t* tables, int bs, int heads, int kv_heads, float scale,
                      uint16_t* out) {
  constexpr int D = ND * 16, DP = D / 2;
  const int group = heads / kv_heads;
  const int rows = static_cast<int>(it.npos) * group;
  const int padded = (rows + RB - 1) / RB * RB;
  std::vector<uint32_t> qs(static_cast<size_t>(padded) * DP, 0u);  // Q as bf16 pairs (d, d+1), unscaled
  std::vector<float> o(static_cast<size_t>(padded) * D, 0.f), m(padded, kMasked), l(padded, 0.f), pos(padded);
  alignas(64) uint32_t kt[DP * KC];      // K of the chunk: kt[d / 2][key] = (K[key][d], K[key][d + 1])
  alignas(64) uint32_t vt[KC / 2 * D];   // V of the chunk: vt[key / 2][c] = (V[key][c], V[key + 1][c])
  alignas(64) uint16_t pb[RS][KC];       // P of RS rows, rounded to bf16, in key order
  float p[RS][KC];
  for (int r = 0; r < padded; ++r) {
    const int i = std::min(r / group, static_cast<int>(it.npos) - 1);
    pos[r] = static_cast<float>(it.pos0 + i);
    if (r < rows) {
      const uint16_t* src = q + (it.row0 + i) * q_stride + (static_cast<int64_t>(kvh) * group + r % group) * D;
      for (int d = 0; d < DP; ++d) qs[static_cast<size_t>(r) * DP + d] = bits32(src + 2 * d);
    }
  }
  const int64_t last = it.pos0 + it.npos - 1;
  const uint16_t* krow[KC];
  const uint16_t* vrow_at[KC];
  for (int64_t key0 = 0; key0 <= last; key0 += KC) {
    const int nk = static_cast<int>(std::min<int64_t>(KC, last + 1 - key0));
    chunk_rows<uint16_t, D>(it, kvh, key0, nk, tables, bs, kv_heads, kc, vc, krow, vrow_at);
    for (int d = 0; d < DP; ++d) {  // zeros past the last key: their scores are masked, their V weigh 0
      uint32_t* dst = kt + d * KC;
      for (int j = 0; j < nk; ++j) dst[j] = bits32(krow[j] + 2 * d);
      for (int j = nk; j < KC; ++j) dst[j] = 0u;
    }
    for (int jp = 0; jp < KC / 2; ++jp) {
      const int j = 2 * jp;
      for (int c = 0; c < ND; ++c) {
        u16x16 a{}, b{};
        if (j < nk) std::memcpy(&a, vrow_at[j] + c * 16, sizeof a);
        if (j + 1 < nk) std::memcpy(&b, vrow_at[j + 1] + c * 16, sizeof b);
        const u32v w = __builtin_convertvector(a, u32v) | (__builtin_convertvector(b, u32v) << 16);
        std::memcpy(vt + jp * D + c * 16, &w, sizeof w);
      }
    }
    const bool masks = key0 + KC - 1 > it.pos0;
    v16 keypos[NV];
    for (int v = 0; v < NV; ++v)
      for (int t = 0; t < 16; ++t) keypos[v][t] = static_cast<float>(key0 + v * 16 + t);
    for (int r0 = 0; r0 < padded; r0 += RS) {
      const int n_rows = std::min(RS, padded - r0);
      if (n_rows == RS)
        scores_bf16<RS, D>(&qs[static_cast<size_t>(r0) * DP], kt, p);
      else
        scores_bf16<RB, D>(&qs[static_cast<size_t>(r0) * DP], kt, p);
      float alpha[RS];
      for (int rr = 0; rr < n_rows; ++rr) {
        const int r = r0 + rr;
        v16 sc[NV];
        for (int v = 0; v < NV; ++v) {
          sc[v] = load(&p[rr][v * 16]) * scale;
          if (masks) sc[v] = keypos[v] > splat(pos[r]) ? splat(kMasked) : sc[v];
        }
        v16 vmax = sc[0];
        for (int v = 1; v < NV; ++v) vmax = vmax > sc[v] ? vmax : sc[v];
        const float mx = std::max(m[r], lane_max(vmax));
        alpha[rr] = std::exp(m[r] - mx);
        v16 vsum = splat(0.f);
        for (int v = 0; v < NV; v += 2) {
          const v16 e0 = vexp(sc[v] - mx), e1 = vexp(sc[v + 1] - mx);
          vsum += e0 + e1;
          const __m512bh h = _mm512_cvtne2ps_pbh(reinterpret_cast<const __m512&>(e1), reinterpret_cast<const __m512&>(e0));
          std::memcpy(&pb[rr][v * 16], &h, sizeof h);
        }
        l[r] = l[r] * alpha[rr] + lane_sum(vsum);
        m[r] = mx;
      }
      for (int g0 = 0; g0 < n_rows; g0 += RB) {
        __m512 acc[RB][ND];
        for (int rr = 0; rr < RB; ++rr)
          for (int c = 0; c < ND; ++c)
            acc[rr][c] = _mm512_mul_ps(_mm512_loadu_ps(&o[static_cast<size_t>(r0 + g0 + rr) * D + c * 16]),
                                       _mm512_set1_ps(alpha[g0 + rr]));
        for (int jp = 0; jp < (nk + 1) / 2; ++jp) {
          u32v vv[ND];
          for (int c = 0; c < ND; ++c) std::memcpy(&vv[c], vt + jp * D + c * 16, sizeof vv[c]);
          for (int rr = 0; rr < RB; ++rr) {
            const u32v b = u32v{} + bits32(&pb[g0 + rr][2 * jp]);
            for (int c = 0; c < ND; ++c) acc[rr][c] = dp(acc[rr][c], b, vv[c]);
          }
        }
        for (int rr = 0; rr < RB; ++rr)
          for (int c = 0; c < ND; ++c) _mm512_storeu_ps(&o[static_cast<size_t>(r0 + g0 + rr) * D + c * 16], acc[rr][c]);
      }
    }
  }
  write_rows<uint16_t, D>(it, kvh, rows, group, heads, o.data(), l.data(), out);
}
#endif

}  // namespace kvviz
