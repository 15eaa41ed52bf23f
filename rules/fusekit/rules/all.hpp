// The bundled rule library: what `fusekit fuse` runs. Each rule is compiled once, in the
// translation unit of its family (scaled_dot_product_attention.cpp, layer_normalization.cpp …),
// and reaches the driver erased (rewrite::any_rule): a program that runs the library does not
// compile its rules again, and the library's rules build in parallel.
#pragma once

#include <string_view>
#include <vector>

#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "options.hpp"

namespace fusekit::rules {

// Each rule of the library, bound to the caller's options, which must outlive it.
// Differential attention's two products of one softmax, as one product on v whole, for the
// attention rules to fuse.
rewrite::any_rule differential_attention_values_rule();
rewrite::any_rule scaled_dot_product_attention_head_merge_rule(const attention_options& attention);
rewrite::any_rule scaled_dot_product_attention_rule(const attention_options& attention);
rewrite::any_rule scaled_dot_product_attention_head_merge_rule(
    const attention_options&& attention) = delete;
rewrite::any_rule scaled_dot_product_attention_rule(const attention_options&& attention) = delete;
rewrite::any_rule layer_normalization_rule(const fusion_options& options);
rewrite::any_rule rms_normalization_rule(const fusion_options& options);
rewrite::any_rule gelu_rule(const fusion_options& options);
rewrite::any_rule gelu_tanh_rule(const fusion_options& options);
rewrite::any_rule rotary_embedding_rule(const fusion_options& options);
rewrite::any_rule rotary_embedding_interleaved_rule(const fusion_options& options);
rewrite::any_rule layer_normalization_rule(const fusion_options&& options) = delete;
rewrite::any_rule rms_normalization_rule(const fusion_options&& options) = delete;
rewrite::any_rule gelu_rule(const fusion_options&& options) = delete;
rewrite::any_rule gelu_tanh_rule(const fusion_options&& options) = delete;
rewrite::any_rule rotary_embedding_rule(const fusion_options&& options) = delete;
rewrite::any_rule rotary_embedding_interleaved_rule(const fusion_options&& options) = delete;
// ONNX Runtime's alone (target ort): ONNX has no op for them.
rewrite::any_rule skip_layer_normalization_rule(const fusion_options& options);
rewrite::any_rule skip_rms_normalization_rule(const fusion_options& options);
rewrite::any_rule skip_layer_normalization_rule(const fusion_options&& options) = delete;
rewrite::any_rule skip_rms_normalization_rule(const fusion_options&& options) = delete;
rewrite::any_rule bias_gelu_rule(const fusion_options& options);
rewrite::any_rule bias_gelu_rule(const fusion_options&& options) = delete;
// A partial rotation's rotated part, fused by the rotary rules, widened to the whole head.
rewrite::any_rule partial_rotary_embedding_rule();
rewrite::any_rule quick_gelu_rule(const fusion_options& options);
rewrite::any_rule quick_gelu_rule(const fusion_options&& options) = delete;
// Nodes that compute nothing at inference and views that leave their input as it is, forwarded;
// Constant nodes made initializers.
rewrite::any_rule identity_elimination_rule();
rewrite::any_rule noop_elimination_rule();
rewrite::any_rule constant_to_initializer_rule();
// Where(Not(c), a, b) as Where(c, b, a).
rewrite::any_rule not_elimination_rule();
// Nodes whose every element the facts prove, and views of constants, made initializers.
rewrite::any_rule constant_folding_rule();
rewrite::any_rule constant_view_folding_rule();
// Values computed from constants alone, larger than the facts hold, made initializers where a
// node on the inputs reads them (options.fold_limit_bytes bounds each).
rewrite::any_rule constant_evaluation_rule(const fusion_options& options);
rewrite::any_rule constant_evaluation_rule(const fusion_options&& options) = delete;
// CastLike as a Cast to the type of its second input (after the folds: a CastLike of a constant
// folds whole).
rewrite::any_rule castlike_to_cast_rule();
// Two Transposes in a row as one, or none.
rewrite::any_rule transpose_folding_rule();
// A Reshape of a view as one Reshape of what the view read.
rewrite::any_rule reshape_folding_rule();
// A Reshape's computed target as a constant.
rewrite::any_rule reshape_target_folding_rule();
// Two Unsqueezes in a row as one.
rewrite::any_rule unsqueeze_folding_rule();
// An Unsqueeze of the axes a Squeeze took, or the reverse, forwarded.
rewrite::any_rule squeeze_unsqueeze_elimination_rule();
// Two Slices in a row on different axes as one.
rewrite::any_rule slice_folding_rule();
// A Concat of a Concat along the same axis as one.
rewrite::any_rule concat_folding_rule();
// Two scalar factors in a row (Mul, Div) as one.
rewrite::any_rule factor_folding_rule();
// A BatchNormalization at inference folded into the Conv, ConvTranspose or Gemm before it.
rewrite::any_rule batch_normalization_into_conv_rule();
rewrite::any_rule batch_normalization_into_conv_transpose_rule();
rewrite::any_rule batch_normalization_into_gemm_rule();
// A Pad before a Conv or a pool, folded into its pads.
rewrite::any_rule pad_into_conv_rule();
rewrite::any_rule pad_into_max_pool_rule();
rewrite::any_rule pad_into_average_pool_rule();
// A constant bias added after a Conv or a Gemm, folded into its own; MatMul and a bias as a Gemm.
rewrite::any_rule bias_into_conv_rule();
rewrite::any_rule bias_into_gemm_rule();
rewrite::any_rule matmul_add_to_gemm_rule();
// The rules above that clean the graph rather than fuse: bundled() runs them with the fusions (a
// fusion then sees the graph cleaned, and the Constants a fusion writes become initializers), and
// fuse_all's report counts their edits (report::cleaned) rather than listing them.
std::vector<rewrite::any_rule> cleaning_rules(const fusion_options& options);
std::vector<rewrite::any_rule> cleaning_rules(const fusion_options&& options) = delete;

// The library, in the order the report lists it: the one list that fuse_all runs and whose names
// the command line accepts. Target onnx runs the rules whose ops ONNX has.
std::vector<rewrite::any_rule> bundled(const attention_options& attention);
std::vector<rewrite::any_rule> bundled(const attention_options&& attention) = delete;

// The library's rule named `name` (bundled()'s name, the current one), bound to `attention`
// whatever its target: as bundled() runs it, for a program that runs or checks one rule (the
// bundled rules' selfchecks check the rules compiled here). Throws fusekit::error for a name the
// library does not have.
rewrite::any_rule rule_named(std::string_view name, const attention_options& attention);
rewrite::any_rule rule_named(std::string_view name, const attention_options&& attention) = delete;
// Every name fuse_all accepts: the rules of bundled(), then the sweeps (sweeps.hpp).
std::vector<std::string_view> names();

// A rule's name for the name it had before (dit-attention, dit-attention-merged: the rules were
// named for the first models they fused), any other name as it is. Wherever rules are selected
// by name (fuse_all's run options, the command line's --rules) the former names select the
// renamed rules for one release; reports print the current names.
std::string_view current_name(std::string_view name);

// The survey fuse_all runs before any rule: the attention ops the model held already (the
// report's already_fused), for a program that runs the library's rules in a list of its own.
void find_fused_attention(const graph& g, rewrite::report& out);

// After a run of the library's attention rule: a near miss for every Softmax left in `g`, the
// fused model's index, that no near miss accounts for, saying why it is no block the rule tries
// (its scores come from no product; no MatMul reads its probabilities as attention does). A user
// then reads every Softmax of the model as fused or explained, never passed over in silence.
void explain_every_softmax(const graph& g, rewrite::report& out);

// The library over a model, then the sweeps it names (duplicate and dead nodes, sweeps.hpp); the
// report also lists the attention ops the model held already, and every Softmax left is explained.
rewrite::report fuse_all(model& m, const rewrite::options& run = {},
                         const attention_options& attention = {});

}  // namespace fusekit::rules
