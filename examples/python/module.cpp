// fusekit._core: the Python package's extension. Models cross the boundary serialised (bytes in,
// bytes out) and reports as JSON text; fusekit/__init__.py turns them into ModelProto and dicts.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <climits>
#include <cstdio>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// What every function raises as fusekit.Error: the one line the command line prints after
// "fusekit: ".
struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw failure(fusekit::rewrite::one_line(e.what()));
  }
}

// The run options as the command line reads them, so that they are checked the same way and a
// mistake is told in the same words.
fusekit::cli::detail::arguments arguments_of(const std::string& command, const std::string& target,
                                             const std::optional<std::string>& provider,
                                             const std::optional<std::vector<std::string>>& rules,
                                             std::optional<long long> num_heads, bool explain) {
  using fusekit::cli::detail::usage_error;
  std::vector<std::string> args{"fusekit", command, "--target", target};
  if (provider) args.insert(args.end(), {"--provider", *provider});
  if (rules) {
    if (rules->empty()) throw usage_error("rules is empty: name at least one rule, or pass None");
    std::string list;
    for (const std::string& name : *rules) {
      if (name.empty() || name.find(',') != std::string::npos)
        throw usage_error("unknown rule '" + name + "'");
      list += (list.empty() ? "" : ",") + name;
    }
    args.insert(args.end(), {"--rules", list});
  }
  if (num_heads) args.insert(args.end(), {"--num-heads", std::to_string(*num_heads)});
  if (explain) args.emplace_back("--explain");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return fusekit::cli::detail::parse(static_cast<int>(argv.size()), argv.data());
}

std::string_view view(const nb::bytes& b) { return {b.c_str(), b.size()}; }

nb::bytes to_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// Fuses a model and returns it serialised, with the report as JSON.
std::pair<nb::bytes, std::string> fuse_model(fusekit::model m,
                                             const fusekit::cli::detail::arguments& a) {
  std::string out, report;
  {
    nb::gil_scoped_release unlocked;
    report = fusekit::cli::detail::fuse_model(m, a).to_json().dump();
    if (m.proto.ByteSizeLong() > std::size_t(INT_MAX))
      throw fusekit::error(
          "the fused model is over 2 GiB; protobuf cannot hold it: use fuse_file, which writes "
          "its weights as external data");
    // The bytes save_model writes.
    out = fusekit::detail::serialize_deterministic(m.proto);
  }
  return {to_bytes(out), std::move(report)};
}

std::string inspection_json(const fusekit::model& m, const fusekit::cli::detail::arguments& a) {
  nb::gil_scoped_release unlocked;
  const auto found = fusekit::cli::detail::inspect_model(m, a);
  nlohmann::json opsets = nlohmann::json::object();
  for (const auto& o : m.proto.opset_import())
    opsets[o.domain().empty() ? "ai.onnx" : o.domain()] = o.version();
  nlohmann::json rules = nlohmann::json::array();
  for (std::string_view name : fusekit::rules::names()) rules.push_back(std::string(name));
  // The facts of every value, as `inspect --shapes --json` gives them: function calls inlined
  // first, since a body has facts only where it is called.
  fusekit::model inlined = m;
  fusekit::rewrite::name_pool names(inlined.proto);
  fusekit::rewrite::inline_functions(inlined.proto, names,
                                     [](const onnx::NodeProto&) { return true; });
  auto as_json = a;
  as_json.json = true;
  std::ostringstream shapes, unreadable_dims;
  fusekit::cli::detail::inspect_shapes(as_json, inlined, shapes, unreadable_dims);
  const nlohmann::json out{{"ir_version", m.proto.ir_version()},
                           {"opsets", std::move(opsets)},
                           {"ops", found.ops},
                           {"value_dtypes", found.dtypes},
                           {"attention_blocks", found.softmaxes},
                           {"rules", std::move(rules)},
                           {"report", found.report.to_json()},
                           {"shapes", nlohmann::json::parse(shapes.str())}};
  return out.dump();
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "fusekit's compiled core: use the functions of the fusekit package instead.";
  m.attr("__version__") = FUSEKIT_VERSION;
  nb::exception<failure>(m, "Error");

  m.def(
      "fuse_bytes",
      [](nb::bytes model, const std::string& target, std::optional<std::string> provider,
         std::optional<std::vector<std::string>> rules, std::optional<long long> num_heads,
         bool explain) {
        return guarded([&] {
          const auto a = arguments_of("fuse", target, provider, rules, num_heads, explain);
          fusekit::model parsed;
          {
            const std::string_view bytes = view(model);
            nb::gil_scoped_release unlocked;
            parsed = fusekit::parse_model(bytes);
          }
          return fuse_model(std::move(parsed), a);
        });
      },
      "model"_a, "target"_a, "provider"_a.none(), "rules"_a.none(), "num_heads"_a.none(),
      "explain"_a, "Fuses a serialised model; returns (fused model serialised, report as JSON).");

  m.def(
      "fuse_path",
      [](const std::string& path, const std::string& target, std::optional<std::string> provider,
         std::optional<std::vector<std::string>> rules, std::optional<long long> num_heads,
         bool explain) {
        return guarded([&] {
          const auto a = arguments_of("fuse", target, provider, rules, num_heads, explain);
          fusekit::model loaded;
          {
            nb::gil_scoped_release unlocked;
            loaded = fusekit::load_model(path);
          }
          return fuse_model(std::move(loaded), a);
        });
      },
      "path"_a, "target"_a, "provider"_a.none(), "rules"_a.none(), "num_heads"_a.none(),
      "explain"_a,
      "Fuses the model file at path; returns (fused model serialised, its external data still "
      "relative to the file's directory, report as JSON).");

  m.def(
      "fuse_file",
      [](const std::string& src, const std::string& dst, const std::string& target,
         std::optional<std::string> provider, std::optional<std::vector<std::string>> rules,
         std::optional<long long> num_heads, bool explain) {
        return guarded([&] {
          auto a = arguments_of("fuse", target, provider, rules, num_heads, explain);
          nb::gil_scoped_release unlocked;
          fusekit::model m = fusekit::load_model(src);
          const auto report = fusekit::cli::detail::fuse_model(m, a);
          fusekit::cli::detail::check_replaceable(dst);
          fusekit::save_model(m, dst);
          return report.to_json().dump();
        });
      },
      "src"_a, "dst"_a, "target"_a, "provider"_a.none(), "rules"_a.none(), "num_heads"_a.none(),
      "explain"_a,
      "Fuses the model file src into dst as `fusekit fuse` does; returns the report as JSON.");

  m.def(
      "inspect_bytes",
      [](nb::bytes model, const std::string& target, std::optional<std::string> provider,
         std::optional<std::vector<std::string>> rules, std::optional<long long> num_heads) {
        return guarded([&] {
          const auto a = arguments_of("inspect", target, provider, rules, num_heads, false);
          fusekit::model parsed;
          {
            const std::string_view bytes = view(model);
            nb::gil_scoped_release unlocked;
            parsed = fusekit::parse_model(bytes);
          }
          return inspection_json(parsed, a);
        });
      },
      "model"_a, "target"_a, "provider"_a.none(), "rules"_a.none(), "num_heads"_a.none(),
      "What `fusekit inspect` says of a serialised model, as JSON.");

  m.def(
      "inspect_path",
      [](const std::string& path, const std::string& target, std::optional<std::string> provider,
         std::optional<std::vector<std::string>> rules, std::optional<long long> num_heads) {
        return guarded([&] {
          const auto a = arguments_of("inspect", target, provider, rules, num_heads, false);
          fusekit::model loaded;
          {
            nb::gil_scoped_release unlocked;
            loaded = fusekit::load_model(path);
          }
          return inspection_json(loaded, a);
        });
      },
      "path"_a, "target"_a, "provider"_a.none(), "rules"_a.none(), "num_heads"_a.none(),
      "What `fusekit inspect` says of the model file at path, as JSON.");

  m.def(
      "cli",
      [](std::vector<std::string> args) {
        if (args.empty()) args.emplace_back("fusekit");
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        int code = 0;
        {
          nb::gil_scoped_release unlocked;
          code = fusekit::cli::run(static_cast<int>(args.size()), argv.data());
          std::cout.flush();
          std::cerr.flush();
          std::fflush(stdout);
          std::fflush(stderr);
        }
        return code;
      },
      "argv"_a,
      "Runs the fusekit command line on argv (argv[0] is the program's name); returns its exit "
      "code.");
}
