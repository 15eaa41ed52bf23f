#include "check_bundled.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "batch_normalization_folding.hpp"
#include "bias_folding.hpp"
#include "check_bundled_rule.hpp"
#include "concat_folding.hpp"
#include "constant_evaluation.hpp"
#include "constant_folding.hpp"
#include "differential_attention.hpp"
#include "eliminations.hpp"
#include "factor_folding.hpp"
#include "fusekit/io/error.hpp"
#include "gelu.hpp"
#include "layer_normalization.hpp"
#include "pad_folding.hpp"
#include "reshape_folding.hpp"
#include "rotary_embedding.hpp"
#include "scaled_dot_product_attention.hpp"
#include "skip_normalization.hpp"
#include "slice_folding.hpp"
#include "transpose_folding.hpp"
#include "unsqueeze_folding.hpp"

namespace fusekit::rules {

// Each compiled in its family's file.
#define FUSEKIT_CHECKED_IN_ITS_FAMILY(R) \
  extern template selfcheck::result check_rule<R>(const selfcheck::options&, target, provider)
FUSEKIT_CHECKED_IN_ITS_FAMILY(differential_attention_values);
FUSEKIT_CHECKED_IN_ITS_FAMILY(scaled_dot_product_attention_head_merge);
FUSEKIT_CHECKED_IN_ITS_FAMILY(scaled_dot_product_attention);
FUSEKIT_CHECKED_IN_ITS_FAMILY(layer_normalization);
FUSEKIT_CHECKED_IN_ITS_FAMILY(rms_normalization);
FUSEKIT_CHECKED_IN_ITS_FAMILY(gelu);
FUSEKIT_CHECKED_IN_ITS_FAMILY(gelu_tanh);
FUSEKIT_CHECKED_IN_ITS_FAMILY(bias_gelu);
FUSEKIT_CHECKED_IN_ITS_FAMILY(quick_gelu);
FUSEKIT_CHECKED_IN_ITS_FAMILY(rotary_embedding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(rotary_embedding_interleaved);
FUSEKIT_CHECKED_IN_ITS_FAMILY(partial_rotary_embedding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(skip_layer_normalization);
FUSEKIT_CHECKED_IN_ITS_FAMILY(skip_rms_normalization);
FUSEKIT_CHECKED_IN_ITS_FAMILY(identity_elimination);
FUSEKIT_CHECKED_IN_ITS_FAMILY(noop_elimination);
FUSEKIT_CHECKED_IN_ITS_FAMILY(not_elimination);
FUSEKIT_CHECKED_IN_ITS_FAMILY(constant_to_initializer);
FUSEKIT_CHECKED_IN_ITS_FAMILY(constant_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(constant_view_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(constant_evaluation);
FUSEKIT_CHECKED_IN_ITS_FAMILY(castlike_to_cast);
FUSEKIT_CHECKED_IN_ITS_FAMILY(transpose_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(reshape_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(reshape_target_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(unsqueeze_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(squeeze_unsqueeze_elimination);
FUSEKIT_CHECKED_IN_ITS_FAMILY(slice_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(concat_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(factor_folding);
FUSEKIT_CHECKED_IN_ITS_FAMILY(batch_normalization_into_conv);
FUSEKIT_CHECKED_IN_ITS_FAMILY(batch_normalization_into_conv_transpose);
FUSEKIT_CHECKED_IN_ITS_FAMILY(batch_normalization_into_gemm);
FUSEKIT_CHECKED_IN_ITS_FAMILY(pad_into_conv);
FUSEKIT_CHECKED_IN_ITS_FAMILY(pad_into_max_pool);
FUSEKIT_CHECKED_IN_ITS_FAMILY(pad_into_average_pool);
FUSEKIT_CHECKED_IN_ITS_FAMILY(bias_into_conv);
FUSEKIT_CHECKED_IN_ITS_FAMILY(bias_into_gemm);
FUSEKIT_CHECKED_IN_ITS_FAMILY(matmul_add_to_gemm);
#undef FUSEKIT_CHECKED_IN_ITS_FAMILY

namespace {

struct checked {
  std::string_view name;
  // Null in a build that left the checks out (CMake's FUSEKIT_BUNDLED_SELFCHECK).
  selfcheck::result (*run)(const selfcheck::options&, target, provider);
  bool both_targets;  // else target ort alone: ONNX has no op for it
  bool layer_types;   // the layer ops' element types (layer_ops.hpp), which the provider decides
  // Its leaves' shape where the options' own is not one its ops take (empty: the options').
  std::vector<std::int64_t> shape{};
  // The opset its pattern's newest ai.onnx op came in, which its instances import too (0: none
  // beyond the options').
  std::int64_t newest_op = 0;
};

template <class R>
checked rule(bool both_targets, bool layer_types, std::vector<std::int64_t> shape = {},
             std::int64_t newest_op = 0) {
#ifdef FUSEKIT_BUNDLED_SELFCHECK_LEFT_OUT
  constexpr auto run = nullptr;
#else
  constexpr auto run = &check_rule<R>;
#endif
  return {R::name, run, both_targets, layer_types, std::move(shape), newest_op};
}

// q, k and v as attention reads them: [batch, heads, sequence, head size], each a size of its own,
// so that a view's split or merge of them is one the guard can tell from any other.
const std::vector<std::int64_t> attention_shape{2, 3, 4, 8};

// x as a rotation reads it, [batch, heads, sequence, head size], of one head: the angles the
// rules' sources write are then x's shape, as one per (batch row, position, pair) for every head
// is (a source cannot drop an axis of what it slices).
const std::vector<std::int64_t> rotary_shape{2, 1, 4, 8};

// A leading dim of 1, which a Squeeze of axis 0 removes.
const std::vector<std::int64_t> squeezable_shape{1, 4, 8};

std::span<const checked> library() {
  static const checked rules[] = {
      rule<differential_attention_values>(true, false, attention_shape),
      rule<scaled_dot_product_attention_head_merge>(true, false, attention_shape),
      rule<scaled_dot_product_attention>(true, false, attention_shape),
      rule<layer_normalization>(true, true),
      rule<rms_normalization>(true, true),
      rule<gelu>(true, true),
      rule<gelu_tanh>(true, true),
      rule<rotary_embedding>(true, true, rotary_shape),
      rule<rotary_embedding_interleaved>(true, true, rotary_shape),
      rule<partial_rotary_embedding>(true, true, rotary_shape, 23),
      rule<skip_layer_normalization>(false, true),
      rule<skip_rms_normalization>(false, true),
      rule<bias_gelu>(false, true),
      rule<quick_gelu>(false, true),
      rule<identity_elimination>(true, false),
      rule<noop_elimination>(true, false),
      rule<not_elimination>(true, false),
      rule<constant_to_initializer>(true, false),
      rule<constant_folding>(true, false),
      rule<constant_view_folding>(true, false),
      rule<constant_evaluation>(true, false),
      rule<castlike_to_cast>(true, false),
      rule<transpose_folding>(true, false),
      rule<reshape_folding>(true, false, squeezable_shape),
      rule<reshape_target_folding>(true, false),
      rule<unsqueeze_folding>(true, false),
      rule<squeeze_unsqueeze_elimination>(true, false),
      rule<slice_folding>(true, false),
      rule<concat_folding>(true, false),
      rule<factor_folding>(true, false),
      rule<batch_normalization_into_conv>(true, false),
      rule<batch_normalization_into_conv_transpose>(true, false),
      rule<batch_normalization_into_gemm>(true, false),
      rule<pad_into_conv>(true, false),
      rule<pad_into_max_pool>(true, false),
      rule<pad_into_average_pool>(true, false),
      rule<bias_into_conv>(true, false),
      rule<bias_into_gemm>(true, false),
      rule<matmul_add_to_gemm>(true, false),
  };
  return rules;
}

}  // namespace

std::vector<std::string_view> checked_rules() {
  std::vector<std::string_view> out;
  for (const checked& c : library()) out.push_back(c.name);
  return out;
}

void require_bundled_checks() {
  if (!library().front().run)
    throw error(
        "this build leaves out the bundled rules' selfchecks "
        "(CMake option FUSEKIT_BUNDLED_SELFCHECK=OFF)");
}

std::vector<selfcheck::result> check_bundled(const selfcheck::options& o,
                                             std::span<const std::string> only,
                                             std::span<const target> targets, provider on) {
  for (const std::string& name : only)
    if (std::none_of(library().begin(), library().end(),
                     [&](const checked& c) { return c.name == name; }))
      throw error(name +
                  " has no pattern to check: it is a sweep, whose specifications are its "
                  "tests (rules/README.md)");
  require_bundled_checks();
  std::vector<selfcheck::result> out;
  for (const checked& c : library()) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    for (const target to : targets) {
      if (to == target::onnx && !c.both_targets) continue;
      const bool cuda = to == target::ort && on == provider::cuda;
      const std::string target_name = to == target::onnx ? "onnx" : "ort";
      selfcheck::options here = o;
      if (!c.shape.empty()) here.shape = c.shape;
      // bfloat16 is not written: ONNX Runtime's CPU provider, which judges parity, has no kernels
      // for it.
      if (c.layer_types)
        here.types = cuda ? std::vector<dtype>{layer::fused_type, dtype::float16}
                          : std::vector<dtype>{layer::fused_type};
      // Target onnx writes ops of opsets up to 23 (Attention, RMSNormalization): its instances
      // import 23, where every op it emits exists.
      if (to == target::onnx) here.opsets = {23};
      if (c.newest_op != 0 &&
          std::find(here.opsets.begin(), here.opsets.end(), c.newest_op) == here.opsets.end())
        here.opsets.push_back(c.newest_op);
      if (!o.write_to.empty())
        here.write_to =
            o.write_to / (std::string(c.name) + "-" + target_name + (cuda ? "-cuda" : ""));
      selfcheck::result r = c.run(here, to, on);
      r.rule = std::string(c.name) + " --target " + target_name + (cuda ? " --provider cuda" : "");
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace fusekit::rules
