// The whole pipeline on attention-like graphs: the fuzz input is decoded into a structurally valid
// model (one or two attention blocks with random dims, dtypes, opsets, scale forms, kᵀ layouts,
// masks (causal ones too), casts, a decode step's key/value cache, repeat_kv, extra readers of
// interior values (Shapes and Sizes of them too), missing inputs, stray attributes, an If body, a
// model-local function holding it all), serialized, loaded and fused;
// pipeline_check.hpp says what must hold. The bytes left over then edit the model's structure
// (structural_mutations.hpp): what that breaks, the loader may refuse, and nothing may crash.
//
// Every choice reads 0 from an exhausted input and 0 is the common case, so the empty input is a
// plain fusible block and short inputs stay close to it.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "pipeline_check.hpp"
#include "structural_mutations.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::dim_spec;
using fusekit::build::graph_builder;
using fusekit::build::shape_spec;
using fusekit::build::value;

template <class T, std::size_t N>
T pick(FuzzedDataProvider& in, const std::array<T, N>& options) {
  return options[in.ConsumeIntegralInRange<std::size_t>(0, N - 1)];
}

enum class declared { exact, symbolic, none, rank_dropped };
enum class key_form { bnsh, bsnh, bnhs, detour, repeat_detour };
enum class casts { none, round_trip, up_only, down_only, through_float64 };
enum class scale_form { mul, mul_left, div, pre_scaled, pre_scaled_unequal, q_only, k_only, none };
enum class scale_source { initializer, constant_node, graph_input, rank1, rank5, two_elements };
enum class mask_form {
  none,
  full,
  broadcast,
  two_d,
  key_only,
  wrong_key,
  where_bool,
  causal_trilu
};
enum class merge_form { none, merged, flattened_wrong };

struct dims {
  std::int64_t b, h, s, l, d, h_kv, d_v;
};

// One attention block, built into `g` from inputs q, k, v; returns its output.
class block_maker {
 public:
  block_maker(FuzzedDataProvider& in, graph_builder& g, graph_builder& outer, dtype t, dims n,
              int index)
      : in_(in), g_(g), outer_(outer), t_(t), n_(n), index_(index) {}

  value make() {
    const auto q = input("q", {n_.b, n_.h, n_.s, n_.d}, {"B", "H", "S", "D"});
    const value kt = key_transposed();
    const auto v = repeated(
        cached(input("v", {n_.b, n_.h_kv, n_.l, n_.d_v}, {"B", "Hkv", "L", "Dv"}), "v", n_.d_v),
        n_.d_v);
    const auto form =
        pick(in_, std::array{scale_form::mul, scale_form::div, scale_form::mul_left,
                             scale_form::pre_scaled, scale_form::pre_scaled_unequal,
                             scale_form::q_only, scale_form::k_only, scale_form::none});
    const auto cast = pick(in_, std::array{casts::none, casts::round_trip, casts::up_only,
                                           casts::down_only, casts::through_float64});
    const dtype wide = cast == casts::through_float64 ? dtype::float64 : dtype::float32;
    const bool up =
        cast == casts::round_trip || cast == casts::up_only || cast == casts::through_float64;
    const bool down =
        cast == casts::round_trip || cast == casts::down_only || cast == casts::through_float64;
    const dtype score_type = up ? wide : t_;

    value scores;
    if (form == scale_form::pre_scaled || form == scale_form::pre_scaled_unequal) {
      const double root = std::sqrt(scale_value());
      const value fq = scale(t_, root);
      const value fk = form == scale_form::pre_scaled ? fq : scale(t_, root * 2);
      scores = interior(
          g_.op("MatMul", {interior(g_.op("Mul", {q, fq})), interior(g_.op("Mul", {kt, fk}))}));
      if (up) scores = interior(g_.op("Cast", {scores}, {{"to", wide}}));
    } else if (form == scale_form::q_only || form == scale_form::k_only) {
      const value f = scale(t_, scale_value());
      scores = form == scale_form::q_only
                   ? interior(g_.op("MatMul", {interior(g_.op("Mul", {f, q})), kt}))
                   : interior(g_.op("MatMul", {q, interior(g_.op("Mul", {kt, f}))}));
      if (up) scores = interior(g_.op("Cast", {scores}, {{"to", wide}}));
    } else {
      scores = interior(g_.op("MatMul", {q, kt}));
      if (up) scores = interior(g_.op("Cast", {scores}, {{"to", wide}}));
      const double s = scale_value();
      if (form == scale_form::mul) scores = interior(g_.op("Mul", {scores, scale(score_type, s)}));
      if (form == scale_form::mul_left)
        scores = interior(g_.op("Mul", {scale(score_type, s), scores}));
      if (form == scale_form::div) scores = interior(g_.op("Div", {scores, scale(score_type, s)}));
    }
    if (const value m = mask(score_type); !m.name.empty())
      scores = interior(g_.op("Add", {scores, m}));
    value p = softmax(scores);
    if (in_.ConsumeBool())
      p = interior(g_.op(
          "Where", {g_.op("IsNaN", {p}), scale(score_type, 0.0, scale_source::initializer), p}));
    if (down) p = interior(g_.op("Cast", {p}, {{"to", t_}}));
    value y = g_.op("MatMul", {p, v});
    switch (
        pick(in_, std::array{merge_form::none, merge_form::merged, merge_form::flattened_wrong})) {
      case merge_form::none:
        break;
      case merge_form::merged:
        interior(y);
        y = g_.op("Reshape", {interior(g_.op("Transpose", {y}, {{"perm", perm({0, 2, 1, 3})}})),
                              shape_constant({0, 0, -1})});
        break;
      case merge_form::flattened_wrong:
        interior(y);
        y = g_.op("Reshape", {interior(g_.op("Transpose", {y}, {{"perm", perm({0, 2, 1, 3})}})),
                              shape_constant({0, -1, n_.d_v})});
        break;
    }
    return y;
  }

  // Values the block computes between its inputs and its output: the ones extra readers hit.
  const std::vector<value>& interiors() const { return interior_; }

 private:
  static std::vector<std::int64_t> perm(std::initializer_list<std::int64_t> axes) { return axes; }

  value interior(value v) {
    interior_.push_back(v);
    return v;
  }

  std::string name(const std::string& stem) const { return stem + std::to_string(index_); }

  // Graph inputs live in the outer graph; a body reads them from there.
  value input(const std::string& stem, std::vector<std::int64_t> sizes,
              std::vector<std::string> symbols) {
    const auto how = pick(in_, std::array{declared::exact, declared::symbolic, declared::none,
                                          declared::rank_dropped});
    const dtype type = in_.ConsumeIntegralInRange(0, 15) == 0 ? dtype::float32 : t_;
    if (how == declared::none) return outer_.input(name(stem), type);
    std::vector<dim_spec> shape;
    for (std::size_t i = how == declared::rank_dropped ? 1 : 0; i < sizes.size(); ++i)
      shape.push_back(how == declared::symbolic ? dim_spec(symbols[i]) : dim_spec(sizes[i]));
    return outer_.input(name(stem), type, shape_spec(shape));
  }

  value key_transposed() {
    switch (pick(in_, std::array{key_form::bnsh, key_form::bsnh, key_form::bnhs, key_form::detour,
                                 key_form::repeat_detour})) {
      case key_form::bnsh:
        return interior(g_.op(
            "Transpose",
            {repeated(
                cached(input("k", {n_.b, n_.h_kv, n_.l, n_.d}, {"B", "Hkv", "L", "D"}), "k", n_.d),
                n_.d)},
            {{"perm", perm({0, 1, 3, 2})}}));
      case key_form::bsnh:
        return interior(g_.op("Transpose",
                              {input("k", {n_.b, n_.l, n_.h_kv, n_.d}, {"B", "L", "Hkv", "D"})},
                              {{"perm", perm({0, 2, 3, 1})}}));
      case key_form::bnhs:
        return input("kt", {n_.b, n_.h_kv, n_.d, n_.l}, {"B", "Hkv", "D", "L"});
      case key_form::detour: {
        const value k =
            cached(input("k", {n_.b, n_.h_kv, n_.l, n_.d}, {"B", "Hkv", "L", "D"}), "k", n_.d);
        const value flat = g_.op("Reshape", {k, shape_constant({n_.b * n_.h_kv, n_.l, n_.d})});
        const value turned = g_.op("Transpose", {flat}, {{"perm", perm({0, 2, 1})}});
        return interior(g_.op("Reshape", {turned, shape_constant({n_.b, n_.h_kv, n_.d, n_.l})}));
      }
      case key_form::repeat_detour: {  // the dynamo exporter's repeat_kv merged into the detour
        const value k =
            cached(input("k", {n_.b, n_.h_kv, n_.l, n_.d}, {"B", "Hkv", "L", "D"}), "k", n_.d);
        const std::int64_t r = repeats(), heads = n_.h_kv * r;
        const value flat =
            g_.op("Reshape", {expanded(k, r, n_.d), shape_constant({n_.b * heads, keys_, n_.d})});
        const value turned = g_.op("Transpose", {flat}, {{"perm", perm({0, 2, 1})}});
        return interior(g_.op("Reshape", {turned, shape_constant({n_.b, heads, n_.d, keys_})}));
      }
    }
    return {};
  }

  // transformers' repeat_kv, sometimes: each of the h_kv heads repeated h / h_kv times (twice
  // where that is no whole number).
  std::int64_t repeats() const { return n_.h % n_.h_kv == 0 ? n_.h / n_.h_kv : 2; }
  value expanded(value x, std::int64_t r, std::int64_t head_size) {
    const value u = g_.op("Unsqueeze", {x, shape_constant({2})});
    return g_.op("Expand", {u, shape_constant({n_.b, n_.h_kv, r, keys_, head_size})});
  }
  value repeated(value x, std::int64_t head_size) {
    if (in_.ConsumeIntegralInRange(0, 3) != 1) return x;
    const std::int64_t r = repeats();
    return interior(g_.op("Reshape", {expanded(x, r, head_size),
                                      shape_constant({n_.b, n_.h_kv * r, keys_, head_size})}));
  }

  // A decode step's cache: Concat(past, new) along the sequence (or a wrong axis), which the model
  // usually returns as present. The past is as long as the new keys, so a mask over L keys no
  // longer fits: with and without a mask, both outcomes get fuzzed.
  value cached(value x, const std::string& stem, std::int64_t head_size) {
    keys_ = n_.l;
    if (in_.ConsumeIntegralInRange(0, 3) != 1) return x;
    keys_ = 2 * n_.l;
    const value past = input("past_" + stem, {n_.b, n_.h_kv, n_.l, head_size},
                             {"B", "Hkv", "L", stem == "k" ? "D" : "Dv"});
    const value present =
        g_.op("Concat", {past, x}, {{"axis", pick(in_, std::array<std::int64_t, 3>{-2, 2, 1})}});
    if (in_.ConsumeIntegralInRange(0, 3) != 0)
      g_.output(present, t_, shape_spec({"c0", "c1", "c2", "c3"}));
    return interior(present);
  }

  value shape_constant(std::vector<std::int64_t> dims) {
    std::vector<double> values(dims.begin(), dims.end());
    return g_.constant(dtype::int64, {std::int64_t(dims.size())}, values);
  }

  double scale_value() {
    return pick(in_, std::array{0.125, 1.0 / std::sqrt(double(n_.d)), 100.0, 1.0, 0.0, -1.0,
                                std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(), 1e-40, 1e40, 1e-8});
  }

  value scale(dtype type, double x) {
    return scale(type, x,
                 pick(in_, std::array{scale_source::initializer, scale_source::constant_node,
                                      scale_source::rank1, scale_source::rank5,
                                      scale_source::graph_input, scale_source::two_elements}));
  }

  value scale(dtype type, double x, scale_source source) {
    if (in_.ConsumeIntegralInRange(0, 15) == 1) return {name("missing_scale")};
    // Integer blocks get integer scales: the builder converts, and NaN or 1e40 has no int32.
    if (!fusekit::is_float(type)) x = std::isfinite(x) ? std::clamp(std::round(x), -1e6, 1e6) : 0;
    // A constant the outer graph defines is read by the body from outer scope.
    graph_builder& home = in_.ConsumeBool() ? outer_ : g_;
    switch (source) {
      case scale_source::initializer:
        return home.scalar(type, x);
      case scale_source::constant_node:
        return home.constant_scalar(type, x);
      case scale_source::rank1:
        return home.initializer(type, {1}, {x});
      case scale_source::rank5:
        return home.initializer(type, {1, 1, 1, 1, 1}, {x});
      case scale_source::graph_input:
        return outer_.input(name("scale_in"), type, shape_spec({}));
      case scale_source::two_elements:
        return home.initializer(type, {2}, {x, x});
    }
    return {};
  }

  value mask(dtype type) {
    const auto form =
        pick(in_, std::array{mask_form::none, mask_form::full, mask_form::broadcast,
                             mask_form::two_d, mask_form::key_only, mask_form::wrong_key,
                             mask_form::where_bool, mask_form::causal_trilu});
    if (form != mask_form::none && in_.ConsumeIntegralInRange(0, 15) == 1)
      return {name("missing_mask")};
    auto declared_mask = [&](std::vector<std::int64_t> sizes, std::vector<std::string> symbols,
                             dtype mask_type) {
      std::vector<dim_spec> shape;
      const bool symbolic = in_.ConsumeBool();
      for (std::size_t i = 0; i < sizes.size(); ++i)
        shape.push_back(symbolic && symbols[i] != "1" ? dim_spec(symbols[i]) : dim_spec(sizes[i]));
      return outer_.input(name("mask"), mask_type, shape_spec(shape));
    };
    switch (form) {
      case mask_form::none:
        return {};
      case mask_form::full:
        return declared_mask({n_.b, n_.h, n_.s, n_.l}, {"B", "H", "S", "L"}, type);
      case mask_form::broadcast:
        return declared_mask({1, 1, n_.s, n_.l}, {"1", "1", "S", "L"}, type);
      case mask_form::two_d:
        return declared_mask({n_.s, n_.l}, {"S", "L"}, type);
      case mask_form::key_only:
        return declared_mask({n_.b, 1, 1, n_.l}, {"B", "1", "1", "L"}, type);
      case mask_form::wrong_key:
        return declared_mask({n_.b, n_.h, n_.s, 1}, {"B", "H", "S", "1"}, type);
      case mask_form::causal_trilu: {  // SDPA's is_causal as TorchScript writes it
        const value ones =
            g_.op("Expand", {outer_.scalar(dtype::float32, 1.0), shape_constant({n_.s, n_.l})});
        const value lower = g_.op(
            "Trilu", {ones, outer_.scalar(dtype::int64, double(in_.ConsumeIntegralInRange(-1, 1)))},
            {{"upper", std::int64_t(in_.ConsumeIntegralInRange(0, 3) == 1)}});
        const value hidden = g_.op("Equal", {lower, outer_.scalar(dtype::float32, 0.0)});
        const double fill =
            pick(in_, std::array{-std::numeric_limits<double>::infinity(),
                                 double(std::numeric_limits<float>::lowest()), -65504.0, -1e4});
        return g_.op("Where", {hidden, scale(type, fill, scale_source::initializer),
                               scale(type, 0.0, scale_source::initializer)});
      }
      case mask_form::where_bool: {
        const value keep =
            declared_mask({n_.b, 1, n_.s, n_.l}, {"B", "1", "S", "L"}, dtype::boolean);
        return g_.op("Where", {keep, scale(type, 0.0, scale_source::initializer),
                               scale(type, -std::numeric_limits<double>::infinity(),
                                     scale_source::initializer)});
      }
    }
    return {};
  }

  value softmax(value scores) {
    switch (in_.ConsumeIntegralInRange(0, 4)) {
      case 0:
        return interior(g_.op("Softmax", {scores}, {{"axis", -1}}));
      case 1:
        return interior(g_.op("Softmax", {scores}, {{"axis", 3}}));
      case 2:
        return interior(g_.op("Softmax", {scores}));
      case 3:
        return interior(g_.op("Softmax", {scores}, {{"axis", 1}}));
      default:
        return interior(g_.op("LogSoftmax", {scores}, {{"axis", -1}}));
    }
  }

  FuzzedDataProvider& in_;
  graph_builder& g_;
  graph_builder& outer_;
  dtype t_;
  dims n_;
  int index_;
  std::int64_t keys_ = 0;  // the keys of the last k or v cached() returned
  std::vector<value> interior_;
};

// The ONNX checker wants every graph output typed and shaped; the dims stay open, since the ranks
// vary with the choices above and the checker does not infer shapes.
void declare_output(graph_builder& g, const value& v, dtype t) {
  g.output(v, t, shape_spec({"o0", "o1", "o2", "o3"}));
}

// Readers outside the block, graph outputs of interior values, stray attributes, and names no one
// defines: what a rule's use policy and the index must cope with.
void perturb(FuzzedDataProvider& in, graph_builder& g, const std::vector<value>& interiors,
             dtype t) {
  for (const value& v : interiors) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 1:
        declare_output(g, g.op("Identity", {v}), t);
        break;
      case 2:
        declare_output(g, v, t);
        break;
      case 3:  // reads only the dims: rewired where the facts allow, else it pins the block
        g.output(g.op("Shape", {v}, {{"start", in.ConsumeIntegralInRange<std::int64_t>(-2, 1)}}),
                 dtype::int64);
        break;
      case 4:
        g.output(g.op("Size", {v}), dtype::int64);
        break;
      default:
        break;
    }
  }
  auto& nodes = *g.proto().mutable_node();
  if (nodes.empty()) return;
  const int stray = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < stray; ++i) {
    auto& node = nodes[in.ConsumeIntegralInRange(0, nodes.size() - 1)];
    auto* a = node.add_attribute();
    a->set_name(pick(in, std::array<const char*, 5>{"axis", "perm", "to", "scale", "stray"}));
    a->set_type(onnx::AttributeProto_AttributeType_INT);
    a->set_i(in.ConsumeIntegralInRange<std::int64_t>(-3, 3));
  }
  if (in.ConsumeIntegralInRange(0, 7) == 1) {
    auto& node = nodes[in.ConsumeIntegralInRange(0, nodes.size() - 1)];
    if (node.input_size() > 0)
      node.set_input(in.ConsumeIntegralInRange(0, node.input_size() - 1),
                     in.ConsumeBool() ? "" : "undefined_value");
  }
}

fusekit::model attention_model(FuzzedDataProvider& in, fusekit::rules::attention_options& opts) {
  const std::int64_t opset =
      pick(in, std::array<std::int64_t, 9>{17, 23, 13, 11, 18, 21, 24, 7, 26});
  if (in.ConsumeBool()) opts.fused_target = fusekit::rules::attention_options::target::onnx;
  opts.num_heads = pick(in, std::array<std::int64_t, 6>{0, 2, 1, 3, 4, 1LL << 30});
  const dtype t = pick(in, std::array{dtype::float32, dtype::float16, dtype::float64,
                                      dtype::bfloat16, dtype::int32});
  dims n{};
  n.b = pick(in, std::array<std::int64_t, 3>{2, 1, 3});
  n.h = pick(in, std::array<std::int64_t, 4>{2, 1, 4, 3});
  n.s = pick(in, std::array<std::int64_t, 3>{3, 1, 5});
  n.l = in.ConsumeBool() ? pick(in, std::array<std::int64_t, 3>{4, 1, 2}) : n.s;
  n.d = pick(in, std::array<std::int64_t, 4>{4, 2, 8, 3});
  n.h_kv = in.ConsumeBool() ? pick(in, std::array<std::int64_t, 3>{1, 2, 3}) : n.h;
  n.d_v = in.ConsumeBool() ? pick(in, std::array<std::int64_t, 3>{2, 5, 8}) : n.d;

  fusekit::build::model_builder b(opset);
  if (in.ConsumeBool()) b.opset_import("com.microsoft", 1);
  const int blocks = in.ConsumeIntegralInRange(1, 2);
  const bool in_body = in.ConsumeIntegralInRange(0, 3) == 1;
  graph_builder then_branch = b.subgraph("then_branch");
  graph_builder& g = in_body ? then_branch : b;
  for (int i = 0; i < blocks; ++i) {
    block_maker block(in, g, b, t, n, i);
    declare_output(g, block.make(), t);
    perturb(in, g, block.interiors(), t);
  }
  if (in_body) {
    graph_builder else_branch = b.subgraph("else_branch");
    for (int i = 0; i < then_branch.proto().output_size(); ++i)
      declare_output(else_branch, else_branch.op("Identity", {{b.proto().input(0).name()}}), t);
    const auto cond = b.input("cond", dtype::boolean, shape_spec({}));
    const auto results = b.ops(
        "If", {cond}, {{"then_branch", then_branch.proto()}, {"else_branch", else_branch.proto()}},
        {.outputs = then_branch.proto().output_size()});
    for (const value& r : results) declare_output(b, r, t);
  }
  fusekit::model m{.proto = b.build(), .path = "attention.onnx"};
  if (!in_body && in.ConsumeIntegralInRange(0, 3) == 2)
    fusekit::build::move_into_local_function(m.proto, "Block", "local", "block");
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  fusekit::rules::attention_options opts;
  fusekit::model built = attention_model(in, opts);
  const int edits = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < edits; ++i)
    fusekit::fuzz::mutate_structure(built.proto, [&in](std::size_t n) {
      return in.ConsumeIntegralInRange<std::size_t>(0, n - 1);
    });
  // Turns a crashing input into a model file for a bug report (run the target on that input alone).
  if (const char* out = std::getenv("FUSEKIT_FUZZ_SAVE")) fusekit::save_model(built, out);
  // Through the bytes, as the command line reads a model.
  fusekit::model m;
  try {
    m = fusekit::parse_model(fusekit::detail::serialize_deterministic(built.proto),
                             "attention.onnx");
  } catch (const fusekit::error& e) {
    if (edits == 0) fusekit::fuzz::broken("a built model does not load", e.what());
    return 0;  // an edited one may break what the loader checks
  }
  fusekit::fuzz::fuse_and_check(std::move(m), opts);
  return 0;
}
