// flash_driver MODEL.onnx [--fuse ort|onnx] [--dim NAME=SIZE]... [--seed N]
//
// For every fused attention node of the model (fused by fusekit beforehand, or here with
// --fuse): map it to a kernel problem, run the kernel on random inputs of the node's shapes and
// compare the output with the fp64 CPU reference. Exits non-zero when a node fails its check or
// the model has no fused node; nodes the backend does not take are listed with the reason.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_tensors.hpp"
#include "flash/dispatch.hpp"
#include "flash/launch.hpp"
#include "flash/reference.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/rules/all.hpp"

namespace {

struct arguments {
  std::string model;
  std::string fuse;  // "", "ort" or "onnx"
  flash::dim_bindings dims;
  unsigned seed = 1;
};

arguments parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--fuse") {
      a.fuse = next();
    } else if (arg == "--dim") {
      const std::string binding = next();
      const auto eq = binding.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--dim takes NAME=SIZE");
      a.dims[binding.substr(0, eq)] = std::stoll(binding.substr(eq + 1));
    } else if (arg == "--seed") {
      a.seed = unsigned(std::stoul(next()));
    } else if (a.model.empty()) {
      a.model = arg;
    } else {
      throw std::runtime_error("unexpected argument " + arg);
    }
  }
  if (a.model.empty())
    throw std::runtime_error(
        "usage: flash_driver MODEL.onnx [--fuse ort|onnx] [--dim NAME=SIZE]... [--seed N]");
  return a;
}

std::vector<float> random_tensor(flash::element type, std::int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> out(static_cast<std::size_t>(count));
  for (float& x : out) x = flash::round_to(type, normal(rng));
  return out;
}

// Outputs are convex combinations of V rows; the tolerance is a few units in the last place.
double tolerance(flash::element type) {
  return type == flash::element::f16 ? 6e-3 : type == flash::element::bf16 ? 5e-2 : 1e-4;
}

std::string summary(const flash::problem& p) {
  return std::string(flash::element_name(p.type)) + " B" + std::to_string(p.batch) + " N" +
         std::to_string(p.heads) + "/" + std::to_string(p.kv_heads) + " S" +
         std::to_string(p.seq_q) + "×" + std::to_string(p.seq_kv) + " H" +
         std::to_string(p.head_dim) + " scale " + std::to_string(p.scale) +
         (p.causal ? " causal" : "") +
         (p.k_order() == flash::k_layout::transposed ? " K BNHS" : "");
}

// Runs one node; true when it matches the reference.
bool run(const flash::fused_attention& f, unsigned seed, int sm_count) {
  using flash::tools::device_tensor;
  const flash::problem& p = f.p;
  std::mt19937 rng(seed);
  const std::vector<float> q = random_tensor(p.type, flash::q_extent(p), rng);
  const std::vector<float> k = random_tensor(p.type, flash::k_extent(p), rng);
  const std::vector<float> v = random_tensor(p.type, flash::v_extent(p), rng);
  device_tensor dq(p.type, q), dk(p.type, k), dv(p.type, v);
  device_tensor dout(p.type, std::size_t(flash::o_extent(p)));
  const flash::buffers t{dq.data(), dk.data(), dv.data(), dout.data()};
  const flash::kernel_choice choice = flash::choose_kernel(p, flash::addresses_of(t), sm_count);
  flash::tools::check(flash::attention_forward(p, t, choice, nullptr), "launch");
  flash::tools::check(cudaDeviceSynchronize(), "kernel");
  const std::vector<float> out = dout.download();
  const std::vector<double> expected = flash::reference(p, q.data(), k.data(), v.data());
  double worst = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < p.seq_q; ++i)
        for (int d = 0; d < p.head_dim; ++d) {
          const double got = out[std::size_t(p.o.at(b, h, i, d))];
          const double want =
              expected[((std::size_t(b) * p.heads + h) * p.seq_q + i) * p.head_dim + d];
          worst = std::isnan(got) ? INFINITY : std::max(worst, std::abs(got - want));
        }
  const bool ok = worst <= tolerance(p.type);
  const std::string kernel =
      choice.which == flash::kernel_choice::kernel::tiled
          ? "tiled, " + std::to_string(64 * choice.slices) + "-row query tiles"
          : "simple";
  std::printf("  %s: %s kernel%s%s: max |error| %.3g: %s\n", summary(p).c_str(), kernel.c_str(),
              choice.why_not_faster.empty() ? "" : " (",
              choice.why_not_faster.empty() ? "" : (choice.why_not_faster + ")").c_str(), worst,
              ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const arguments a = parse(argc, argv);
    fusekit::model m = fusekit::load_model(a.model);
    if (!a.fuse.empty()) {
      fusekit::rules::attention_options attention;
      if (a.fuse == "onnx")
        attention.fused_target = fusekit::rules::attention_options::target::onnx;
      else if (a.fuse != "ort")
        throw std::runtime_error("--fuse takes ort or onnx");
      // The attention rules alone: the kernels run attention, and the report counts its blocks.
      const auto report = fusekit::rules::fuse_all(
          m, {.rules = {"scaled-dot-product-attention-head-merge", "scaled-dot-product-attention"}},
          attention);
      std::printf("fused %zu attention blocks\n", report.fusions.size());
    }
    const fusekit::graph g(m);
    const auto nodes = flash::fused_attention_nodes(g, a.dims);
    if (nodes.empty()) {
      std::fprintf(stderr, "%s: no fused attention node (fuse it first, or pass --fuse)\n",
                   a.model.c_str());
      return 2;
    }
    int device = 0, sm_count = 0;
    flash::tools::check(cudaGetDevice(&device), "cudaGetDevice");
    flash::tools::check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device),
                        "SM count");
    int failed = 0, ran = 0;
    for (const auto& f : nodes) {
      std::printf("%s\n", f.description.c_str());
      if (!f.runnable()) {
        std::printf("  not run: %s\n", f.refusal.c_str());
        continue;
      }
      ++ran;
      if (!run(f, a.seed, sm_count)) ++failed;
    }
    std::printf("%d of %zu fused nodes run, %d failed\n", ran, nodes.size(), failed);
    return failed > 0 || ran == 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flash_driver: %s\n", e.what());
    return 1;
  }
}
