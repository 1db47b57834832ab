// The decoder layer's element-wise kernels on the engine's packed path: the MLP's SiLU-gated product, RMSNorm
// and rotary positions, fp32 or bf16 (computed in fp32), rows split over torch's OpenMP threads above a size.
#include <torch/extension.h>

#include "vec.h"

using namespace kvviz;

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

// The rest of a bf16 RMSNorm once torch has each row's inv = rsqrt(mean(x^2) + eps) [T] in fp32 (its own sum, so
// the same numbers as the module): out = w * bf16(x * inv), each product rounded to bf16 as torch rounds it.
void rms_norm_given_rows(const uint16_t* x, const float* inv, const uint16_t* w, uint16_t* out, int64_t rows,
                         int64_t dim) {
#pragma omp parallel for schedule(static) if (rows * dim >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* src = x + r * dim;
    uint16_t* dst = out + r * dim;
    const float s = inv[r];
    int64_t i = 0;
    for (; i + 16 <= dim; i += 16) store_row(dst + i, load_row(w + i) * round_bf16_v(load_row(src + i) * s));
    for (; i < dim; ++i) put(dst + i, to_f32(w[i]) * round_bf16(to_f32(src[i]) * s));
  }
}

torch::Tensor rms_norm_given(torch::Tensor x, torch::Tensor inv, torch::Tensor w) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && w.is_contiguous() && w.numel() == x.size(1), "x [T, D], w [D]");
  TORCH_CHECK(x.dtype() == torch::kBFloat16 && w.dtype() == torch::kBFloat16, "bf16 x and w");
  TORCH_CHECK(inv.dtype() == torch::kFloat32 && inv.is_contiguous() && inv.numel() == x.size(0), "inv [T] fp32");
  auto out = torch::empty_like(x);
  rms_norm_given_rows(reinterpret_cast<const uint16_t*>(x.data_ptr()), inv.data_ptr<float>(),
                      reinterpret_cast<const uint16_t*>(w.data_ptr()), reinterpret_cast<uint16_t*>(out.data_ptr()),
                      x.size(0), x.size(1));
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
