// flash_bench [--quick] [--tsv FILE] [--shapes]: the tiled kernel against the unfused sequence a
// runtime runs without the fused op (cuBLAS GEMM → Cast → Mul → Softmax → Cast → cuBLAS GEMM),
// fp16, timed with CUDA events, at F5-TTS and SD3 shapes and at the long sequences
// FlashAttention-2 reports. --tsv also writes the figures as tab-separated rows (what
// gpu_check.sh tables); --shapes only lists the shapes, so that other timings use the same ones.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "device_tensors.hpp"
#include "flash/launch.hpp"
#include "unfused.hpp"

namespace {

using flash::tools::check;
using flash::tools::device_tensor;

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + " failed");
}

struct shape {
  const char* name;
  int batch, heads, seq, dim;
  float scale;
  bool k_transposed;  // F5-TTS stores Kᵀ as BNHS
};

// Milliseconds per call, averaged over `iterations` after a warm-up.
double time_ms(const std::function<void()>& f, int iterations) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  check(cudaEventRecord(start), "record");
  for (int i = 0; i < iterations; ++i) f();
  check(cudaEventRecord(stop), "record");
  check(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

// Random inputs: a GPU draws less power on zeros, and runs faster.
std::vector<float> random_values(std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> out(count);
  for (float& x : out) x = normal(rng);
  return out;
}

struct figures {
  double fused_ms, tflops, unfused_ms;
};

figures bench(const shape& s, cublasHandle_t blas, int iterations) {
  const std::size_t heads = std::size_t(s.batch) * s.heads;
  const std::size_t qkv = heads * s.seq * s.dim, scores = heads * s.seq * s.seq;
  device_tensor q(flash::element::f16, random_values(qkv, 1)),
      k(flash::element::f16, random_values(qkv, 2)), v(flash::element::f16, random_values(qkv, 3)),
      o(flash::element::f16, qkv);

  const flash::strides packed = flash::bnsh(s.heads, s.seq, s.dim);
  const flash::problem p{.type = flash::element::f16,
                         .batch = s.batch,
                         .heads = s.heads,
                         .kv_heads = s.heads,
                         .seq_q = s.seq,
                         .seq_kv = s.seq,
                         .head_dim = s.dim,
                         .scale = s.scale,
                         .causal = false,
                         .q = packed,
                         .k = s.k_transposed ? flash::bnhs(s.heads, s.seq, s.dim) : packed,
                         .v = packed,
                         .o = packed};
  const flash::buffers t{q.data(), k.data(), v.data(), o.data()};
  const double fused = time_ms(
      [&] { check(flash::attention_forward(p, t, nullptr), "attention_forward"); }, iterations);

  // Unfused: S = Q·Kᵀ (f16 out, as the fp16 graph's MatMul), Cast, Mul, Softmax, Cast, O = P·V.
  device_tensor s16(flash::element::f16, scores);
  device_tensor s32(flash::element::f32, scores);
  const float one = 1.f, zero = 0.f;
  const long long sq = s.seq, sd = s.dim;
  auto unfused = [&] {
    // Row-major Q·Kᵀ as column-major (K)(Qᵀ); K is read as Kᵀ (BNHS) or as K rows (BNSH).
    check_blas(cublasGemmStridedBatchedEx(
                   blas, s.k_transposed ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, s.seq, s.seq,
                   s.dim, &one, k.data(), CUDA_R_16F, s.k_transposed ? s.seq : s.dim, sq * sd,
                   q.data(), CUDA_R_16F, s.dim, sq * sd, &zero, s16.data(), CUDA_R_16F, s.seq,
                   sq * sq, int(heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "QK GEMM");
    flash::unfused::cast_to_float(s16.data(), static_cast<float*>(s32.data()), scores, nullptr);
    flash::unfused::multiply(static_cast<float*>(s32.data()), s.scale, scores, nullptr);
    flash::unfused::softmax_rows(static_cast<float*>(s32.data()), int(heads * s.seq), s.seq,
                                 nullptr);
    flash::unfused::cast_to_half(static_cast<const float*>(s32.data()), s16.data(), scores,
                                 nullptr);
    check_blas(cublasGemmStridedBatchedEx(
                   blas, CUBLAS_OP_N, CUBLAS_OP_N, s.dim, s.seq, s.seq, &one, v.data(), CUDA_R_16F,
                   s.dim, sq * sd, s16.data(), CUDA_R_16F, s.seq, sq * sq, &zero, o.data(),
                   CUDA_R_16F, s.dim, sq * sd, int(heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "PV GEMM");
  };
  const double separate = time_ms(unfused, iterations);
  const double flops = 4.0 * double(heads) * s.seq * s.seq * s.dim;
  std::printf("%-28s fused %8.3f ms (%6.1f TFLOP/s)   unfused %8.3f ms   speed-up %5.2f×\n", s.name,
              fused, flops / fused / 1e9, separate, separate / fused);
  return {fused, flops / fused / 1e9, separate};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool quick = false, list = false;
    std::string tsv;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--quick") {
        quick = true;
      } else if (arg == "--shapes") {
        list = true;
      } else if (arg == "--tsv" && i + 1 < argc) {
        tsv = argv[++i];
      } else {
        throw std::runtime_error("usage: flash_bench [--quick] [--tsv FILE] [--shapes]");
      }
    }
    std::vector<shape> shapes = {
        {"F5-TTS B2 N16 S256 H64", 2, 16, 256, 64, 100.f, true},
        {"F5-TTS B2 N16 S1024 H64", 2, 16, 1024, 64, 100.f, true},
        {"SD3 B2 N24 S4096 H64", 2, 24, 4096, 64, 0.125f, false},
    };
    std::vector<std::string> names;  // owns the FA2 shapes' names
    names.reserve(6);
    if (!quick)
      for (int seq : {2048, 4096, 8192}) {
        // FlashAttention-2's forward benchmark: 16k tokens per batch, hidden 2048.
        names.push_back("FA2 H128 S" + std::to_string(seq));
        shapes.push_back({names.back().c_str(), 16384 / seq, 16, seq, 128, 0.088388f, false});
        names.push_back("FA2 H64 S" + std::to_string(seq));
        shapes.push_back({names.back().c_str(), 16384 / seq, 32, seq, 64, 0.125f, false});
      }
    if (list) {
      std::printf("shape\tbatch\theads\tseq\thead_dim\tscale\tk_bnhs\n");
      for (const shape& s : shapes)
        std::printf("%s\t%d\t%d\t%d\t%d\t%.9g\t%d\n", s.name, s.batch, s.heads, s.seq, s.dim,
                    double(s.scale), int(s.k_transposed));
      return 0;
    }
    cublasHandle_t blas;
    check_blas(cublasCreate(&blas), "cublasCreate");
    std::vector<figures> measured;
    for (const shape& s : shapes) measured.push_back(bench(s, blas, 30));
    cublasDestroy(blas);
    if (!tsv.empty()) {
      std::ofstream rows(tsv);
      rows << "shape\tfused_ms\tfused_tflops\tunfused_ms\n";
      for (std::size_t i = 0; i < shapes.size(); ++i)
        rows << shapes[i].name << '\t' << measured[i].fused_ms << '\t' << measured[i].tflops << '\t'
             << measured[i].unfused_ms << '\n';
      if (!rows) throw std::runtime_error("cannot write " + tsv);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flash_bench: %s\n", e.what());
    return 1;
  }
}
