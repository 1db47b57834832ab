// Paged attention for the CPU, fp32 or bf16: every query row attends to positions 0..its own of its sequence, whose
// K/V are read in place from the engine's blocks through the sequence's block table (no gather, no copy). fp32
// and a bf16 decode token compute in fp32; longer bf16 tiles use AVX512-BF16 dot products where the CPU has them.
// One work item = one query tile of one sequence x one K/V head: its rows (tile positions x the query heads
// of that K/V head) sweep the sequence's key blocks once, with a running (online) softmax per row.
// Vector code is written with GCC vector extensions (16 floats), lowered to AVX-512 or narrower by the compiler.
#include <torch/extension.h>

#include <type_traits>
#include <vector>

#include "tiles.h"
#include "vec.h"

namespace {

using namespace kvviz;

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

// Keys ahead whose K row a decode token's scores ask the memory for (each K row of one head is a short piece of a
// token's slot, one every kv_heads * D values, so the hardware's stream prefetch does not run ahead of it).
constexpr int kAheadKeys = 8;

template <typename T, int D>
inline void prefetch_row(const T* row) {
  for (int b = 0; b < D * static_cast<int>(sizeof(T)); b += 64) __builtin_prefetch(reinterpret_cast<const char*>(row) + b);
}

// The same for at most RB rows (a decode token's query heads) straight from the keys' rows, one dot product
// per (row, key): no transposed copy, which would cost more than these few rows' products. The K row kAheadKeys
// on and this key's V row (read by P V once the chunk's scores are done) are prefetched (docs/ENGINE.md).
template <typename T, int D>
inline void scores_direct(const float* qs, int n_rows, const T* const* krow, const T* const* vrow, int nk,
                          float (*p)[KC]) {
  constexpr int ND = D / 16;
  for (int j = 0; j < nk; ++j) {
    if (j + kAheadKeys < nk) prefetch_row<T, D>(krow[j + kAheadKeys]);
    prefetch_row<T, D>(vrow[j]);
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
  const bool few = padded == RB;  // a decode token's rows: scores straight from the key rows (no transposed keys)
  std::vector<float> qs(static_cast<size_t>(padded) * D, 0.f), o(static_cast<size_t>(padded) * D, 0.f);
  std::vector<float> m(padded, kMasked), l(padded, 0.f), pos(padded), kt(few ? 0 : static_cast<size_t>(D) * KC);
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
  const T* krow[KC];  // where each key of the chunk lives (its block, its slot)
  const T* vrow_at[KC];
  for (int64_t key0 = 0; key0 <= last; key0 += KC) {
    const int nk = static_cast<int>(std::min<int64_t>(KC, last + 1 - key0));
    chunk_rows<T, D>(it, kvh, key0, nk, tables, bs, kv_heads, kc, vc, krow, vrow_at);
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
        scores_direct<T, D>(&qs[static_cast<size_t>(r0) * D], n_rows, krow, vrow_at, nk, p);
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
      for (int g0 = 0; g0 < n_rows; g0 += RB)
        pv_rows<T, ND>(&o[static_cast<size_t>(r0 + g0) * D], &alpha[g0], nk, vrow_at,
                       [&](int rr, int j) { return p[g0 + rr][j]; });
    }
  }
  write_rows<T, D>(it, kvh, rows, group, heads, o.data(), l.data(), out);
}

// One work item: the bf16 dot-product tile where the CPU has it and the tile has more than a decode token's rows.
template <typename T, int ND>
inline void attend_item(const Item& it, int kvh, const T* q, int64_t q_stride, const T* kc, const T* vc,
                        const int64_t* tables, int bs, int heads, int kv_heads, float scale, T* out) {
#ifdef __AVX512BF16__
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (it.npos * (heads / kv_heads) > RB) {
      attend_tile_bf16<ND>(it, kvh, q, q_stride, kc, vc, tables, bs, heads, kv_heads, scale, out);
      return;
    }
  }
#endif
  if constexpr (std::is_same_v<T, float>) {
    if (it.npos * (heads / kv_heads) >= RT) {
      attend_tile_rows<ND>(it, kvh, q, q_stride, kc, vc, tables, bs, heads, kv_heads, scale, out);
      return;
    }
  }
  attend_tile<T, ND>(it, kvh, q, q_stride, kc, vc, tables, bs, heads, kv_heads, scale, out);
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
    attend_item<T, ND>(items[w / kv_heads], static_cast<int>(w % kv_heads), q, q_stride, kc, vc, tables, bs, heads,
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

// the layer ops (layer_ops.cpp), bound in the same module
torch::Tensor silu_and_mul(torch::Tensor x);
torch::Tensor gemv(torch::Tensor x, torch::Tensor w);
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps);
torch::Tensor rms_norm_given(torch::Tensor x, torch::Tensor inv, torch::Tensor w);
torch::Tensor rotary(torch::Tensor x, torch::Tensor cos, torch::Tensor sin);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_attention", &paged_attention, "paged attention over the engine's blocks (CPU, fp32 or bf16)");
  m.def("silu_and_mul", &silu_and_mul, "silu(gate) * up of x = [gate | up] (CPU, fp32 or bf16)");
  m.def("rms_norm", &rms_norm, "RMSNorm of each row (CPU, fp32 or bf16)");
  m.def("rms_norm_given", &rms_norm_given, "bf16 RMSNorm of each row given its inverse root mean square (CPU)");
  m.def("gemv", &gemv, "x [1, K] times w [N, K] transposed, one pass over w (CPU, fp32 or bf16)");
  m.def("rotary", &rotary, "rotary positions, x * cos + roll(x, d / 2) * signed sin (CPU, fp32 or bf16)");
}
