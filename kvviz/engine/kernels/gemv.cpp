// The one-row product of a decode step with one sequence: y = x W^T for x [1, K] and W [N, K], the model's own
// row-major weight (fp32 or bf16). Such a step must read every weight once, so the product is one pass over W:
// each thread streams one contiguous share of W's rows, four rows at a time, in fp32 sums (bf16: AVX512-BF16
// dot products where the CPU has them, else each weight widened to fp32). Two rows or more go to oneDNN's
// GEMM, which reuses each loaded weight across rows better than this pass does.
#include <omp.h>
#include <torch/extension.h>

#include <type_traits>
#include <vector>

#include "vec.h"

using namespace kvviz;

namespace {

constexpr int kGroup = 4;  // rows of W per inner loop

template <typename T>
inline v16 load_tail(const T* p, int64_t n) {  // the first n < 16 of p as floats, zeros after
  v16 v = splat(0.f);
  for (int64_t i = 0; i < n; ++i) v[i] = to_f32(p[i]);
  return v;
}

// G rows of W from n0 against x (fp32, K padded with zeros to whole vectors): y[n0 .. n0 + G)
template <int G, typename T>
void rows_f32(const float* x, const T* w, T* y, int64_t n0, int64_t k) {
  v16 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = splat(0.f);
  const T* row = w + n0 * k;
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const v16 xv = load(x + j);
    for (int g = 0; g < G; ++g) acc[g] += load_row(row + g * k + j) * xv;
  }
  if (j < k) {
    const v16 xv = load(x + j);
    for (int g = 0; g < G; ++g) acc[g] += load_tail(row + g * k + j, k - j) * xv;
  }
  for (int g = 0; g < G; ++g) put(y + n0 + g, lane_sum(acc[g]));
}

#ifdef __AVX512BF16__
// bf16 with vdpbf16ps: 32 weights a load, each lane adding two exact bf16 products to an fp32 sum. Plain loads
// in the loop (a masked load of memory not yet in cache stalled the stream: 3x slower over the LM head)
template <int G>
void rows_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, int64_t n0, int64_t k) {
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  const uint16_t* row = w + n0 * k;
  auto dot = [&](int g, __m512i xv, __m512i wv) {
    acc[g] = _mm512_dpbf16_ps(acc[g], reinterpret_cast<const __m512bh&>(xv), reinterpret_cast<const __m512bh&>(wv));
  };
  int64_t j = 0;
  for (; j + 32 <= k; j += 32) {
    const __m512i xv = _mm512_loadu_si512(x + j);
    for (int g = 0; g < G; ++g) dot(g, xv, _mm512_loadu_si512(row + g * k + j));
  }
  if (j < k) {
    const __mmask32 m = (__mmask32(1) << (k - j)) - 1;
    const __m512i xv = _mm512_maskz_loadu_epi16(m, x + j);
    for (int g = 0; g < G; ++g) dot(g, xv, _mm512_maskz_loadu_epi16(m, row + g * k + j));
  }
  for (int g = 0; g < G; ++g) put(y + n0 + g, _mm512_reduce_add_ps(acc[g]));
}
#endif

#ifdef __AVX512BF16__
constexpr bool kBf16Dot = true;
#else
constexpr bool kBf16Dot = false;
#endif

// x against W's rows split over the team; the widened sums read x as fp32, padded with zeros to whole vectors
// (made once a call; the bf16 dot products read x as it is)
template <typename T>
void gemv_one(const T* x, const T* w, T* y, int64_t n, int64_t k) {
  constexpr bool widened = !(std::is_same_v<T, uint16_t> && kBf16Dot);
  std::vector<float> xf(widened ? (k + 15) / 16 * 16 : 0, 0.f);
  for (int64_t j = 0; widened && j < k; ++j) xf[j] = to_f32(x[j]);
  auto rows = [&](auto group, int64_t n0) {
    constexpr int G = decltype(group)::value;
    if constexpr (widened)
      rows_f32<G>(xf.data(), w, y, n0, k);
#ifdef __AVX512BF16__
    else
      rows_bf16<G>(x, w, y, n0, k);
#endif
  };
  const int64_t groups = n / kGroup;
#pragma omp parallel if (n * k >= 4 * kParallelElements)
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t g0 = groups * t / threads, g1 = groups * (t + 1) / threads;  // a contiguous share of W
    for (int64_t g = g0; g < g1; ++g) rows(std::integral_constant<int, kGroup>{}, g * kGroup);
  }
  for (int64_t n0 = groups * kGroup; n0 < n; ++n0) rows(std::integral_constant<int, 1>{}, n0);  // the last N % 4
}

}  // namespace

// x [1, K] times w [N, K] transposed -> [1, N], both fp32 or both bf16
torch::Tensor gemv(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() == 2 && x.size(0) == 1 && w.dim() == 2 && x.size(1) == w.size(1), "x [1, K], w [N, K]");
  TORCH_CHECK(x.dtype() == w.dtype() && (x.dtype() == torch::kFloat32 || x.dtype() == torch::kBFloat16),
              "fp32 or bf16, both alike");
  x = x.contiguous();
  w = w.contiguous();
  auto y = torch::empty({1, w.size(0)}, x.options());
  if (x.dtype() == torch::kFloat32)
    gemv_one(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), w.size(0), w.size(1));
  else
    gemv_one(reinterpret_cast<const uint16_t*>(x.data_ptr()), reinterpret_cast<const uint16_t*>(w.data_ptr()),
             reinterpret_cast<uint16_t*>(y.data_ptr()), w.size(0), w.size(1));
  return y;
}
