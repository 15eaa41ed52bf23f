// fusekit: fuse attention blocks of ONNX models, and say why the near misses did not fuse.
// The command-line tool as a function, fusekit::cli::run, so that the fusekit executable and the
// Python package run the same code.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <onnx/common/version.h>
#include <nlohmann/json.hpp>

#include "dit_model.hpp"
#include "fusekit/rewrite/inline_functions.hpp"
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/check_bundled.hpp"

// The build defines it as the CMake project's version; `fusekit --version` prints it.
#ifndef FUSEKIT_VERSION
#error "FUSEKIT_VERSION is not defined: compile with -DFUSEKIT_VERSION=\"X.Y.Z\""
#endif

namespace fusekit::cli {

namespace detail {

// The help: an overview (`fusekit --help`, or after a wrong command line that names no command)
// and one page per command (`fusekit COMMAND --help`, or after a wrong command line for it).
inline constexpr std::string_view overview = R"(usage: fusekit COMMAND ARGS...

commands:
  fuse      rewrite every block the rules match (attention, norms, GELU, rotary embeddings);
            report what fused and each near miss
  inspect   a model's ops, opsets, dtypes and attention blocks, or every value's shape facts
  explain   what each rule made of the blocks around one node, as text and a Graphviz picture
  demo      fuse the bundled sample model (a 2-layer F5-TTS-like DiT in float16) and report
  selfcheck check each rule from its own pattern: the graphs it accepts fuse and compute the
            same in ONNX Runtime, and each graph that breaks one of its conditions is refused

  fusekit COMMAND --help   the command's arguments and options
  fusekit --version        fusekit's version and the onnx release it is built with
)";

struct command_help {
  std::string_view name, text;
};

inline constexpr command_help command_pages[] = {
    {"fuse", R"(usage: fusekit fuse IN.onnx -o OUT.onnx [--rules LIST|all] [--skip LIST]
                    [--target ort|onnx] [--provider cpu|cuda] [--num-heads N]
                    [--fold-limit BYTES] [--report R.json] [--explain] [--dry-run] [--quiet]

Rewrites every block a rule matches and reports, per rule, what fused (scale, heads, casts
removed) and each near miss with the reason it did not fuse. OUT.onnx is replaced only once
everything succeeded; external data stays valid.

  -o, --output OUT.onnx  where the fused model goes
  --rules LIST|all       comma-separated rule names (inspect lists them), default all
  --skip LIST            comma-separated rule names to leave out of those (the clean-ups, say:
                         constant-folding,constant-evaluation)
  --target ort|onnx      ort: ONNX Runtime's ops, com.microsoft.MultiHeadAttention,
                         SkipLayerNormalization … (default); onnx: standard ops only, ai.onnx
                         Attention (opset 23), LayerNormalization (17), Gelu (20),
                         RMSNormalization and RotaryEmbedding (23), each where the model
                         imports that opset
  --provider cpu|cuda    target ort: the execution provider that runs the model, where a fused
                         form pays, or keeps the model's accuracy, on one and not the other
                         (default cpu; for cuda alone a residual sum read on folds into
                         SkipLayerNormalization, and norms, GELUs and rotations fuse in float16
                         and bfloat16; GroupQueryAttention there takes no float32)
  --num-heads N          the head count, where the model does not say it
  --fold-limit BYTES     the largest tensor constant-evaluation writes (default: any, as
                         onnxslim and onnxsim)
  --report R.json        the report as JSON too
  --explain              report every anchor each rule tried, not only near misses
  --dry-run              report only, write nothing
  --quiet                no report on stdout, no progress on stderr
)"},
    {"inspect",
     R"(usage: fusekit inspect IN.onnx [--rules LIST|all] [--target ort|onnx]
                      [--provider cpu|cuda] [--num-heads N]
       fusekit inspect IN.onnx --shapes [--json]

Prints the model's IR version, opsets, op histogram and value dtypes over every graph, its
attention-like blocks (the Softmax nodes), every rule's name and what fuse with these options
would report; the model is not changed.

  --rules, --target, --provider, --num-heads   as for fuse
  --shapes   instead, every value's facts: dtype, dims and the folded contents of small tensors,
             one line each; subgraph values as GRAPH/VALUE; the bodies of model-local functions
             inlined at each call, as CALL/VALUE_k
  --json     with --shapes: one JSON object keyed by value name, {"dtype": "float32",
             "dims": [2, "batch*4", null], "value": [1.0]}; a dim is an integer, a sympy
             expression over the model's dim_params, or null (unknown, or a size no dim_param
             names); "dims" is null when the rank is unknown; "value" only where folded,
             non-finite reals as "inf", "-inf", "nan"
)"},
    {"explain", R"(usage: fusekit explain IN.onnx --node NAME [--dot FILE] [--rules LIST|all]
                       [--target ort|onnx] [--provider cpu|cuda] [--num-heads N]

Says what each rule made of the blocks through the main-graph node NAME: the fusion it is part
of, or each near miss with the node and condition that stopped it.

  --node NAME   the node, by its name
  --dot FILE    a Graphviz picture of the nodes around it: matched nodes green, the failing
                node red
  --rules, --target, --provider, --num-heads   as for fuse
)"},
    {"demo", R"(usage: fusekit demo [--rules LIST|all] [--target ort|onnx] [--provider cpu|cuda]

Fuses the bundled sample model, examples/models/dit_sample.onnx (a 2-layer F5-TTS-like DiT in
float16: RoPE on q and k, cast-wrapped softmax, scale 100), and prints the report. It writes
nothing.

  --rules, --target, --provider   as for fuse
)"},
    {"selfcheck",
     R"(usage: fusekit selfcheck [--rules LIST|all] [--target ort|onnx] [--provider cpu|cuda]
                         [--cases N] [--seed S] [--failures N] [--python PY] [--keep DIR]

Checks each rule from its own pattern, under each target it emits for (or the one --target
names). It writes a graph for every alternative the pattern holds (each branch of a choice, both
operand orders, optional ops present and absent, each float type and opset) and N random ones;
each must fuse and, run in ONNX Runtime, compute what it replaced. Then, for each condition of
the pattern, a graph that breaks that condition alone: it must not fuse, and its near miss must
name the condition. One line per rule and target, and a line for each failure.

  --rules LIST|all     as for fuse
  --target ort|onnx    check this target only
  --provider cpu|cuda  target ort as that provider runs the model (default cpu); with cuda the
                       layer rules' graphs come in float16 too (not bfloat16: ONNX Runtime's
                       CPU provider, which runs the graphs, has no kernels for it)
  --cases N            random instances beyond those that cover every alternative (default 4)
  --seed S             their seed (default 1): the same seed writes the same graphs
  --failures N         the failures listed for each rule and target (default 20; the rest are
                       counted)
  --python PY          a Python with onnxruntime and numpy, to run the graphs (default python3
                       where it has both; without one, parity is not checked and the report
                       says so)
  --keep DIR           write every graph, its fused form and the parity script under DIR
)"},
};

inline constexpr std::string_view exit_codes = R"(
exit codes: 0 done; 1 the model could not be read, fused or written (nothing is written), or
            a rule failed its selfcheck; 2 the command line is wrong
)";

// The page of `command`, or the overview where it names none.
inline std::string help(std::string_view command) {
  std::string_view text = overview;
  for (const command_help& page : command_pages)
    if (page.name == command) text = page.text;
  return std::string(text) + std::string(exit_codes);
}

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct arguments {
  std::string command;
  std::string input, output, report, node, dot;
  fusekit::rewrite::options options;
  fusekit::rules::attention_options attention;
  bool dry_run = false, quiet = false, shapes = false, json = false;
  bool target_given = false, provider_given = false;
  // selfcheck's
  std::optional<std::size_t> cases, failures;
  std::optional<std::uint64_t> seed;
  std::string python, keep;
};

// A count or seed on the command line: digits only, within range.
inline std::uint64_t unsigned_flag(const std::string& flag, const std::string& n,
                                   std::uint64_t most) {
  std::uint64_t out = 0;
  const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), out);
  if (n.empty() || ec != std::errc() || end != n.data() + n.size() || out > most)
    throw usage_error(flag + " needs an integer from 0 to " + std::to_string(most) + ", not '" + n +
                      "'");
  return out;
}

inline std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Rule names as the command line gives them, each checked against the library's; a rule's former
// name selects it for one release after the rename.
inline std::vector<std::string> known_rules(std::vector<std::string> names) {
  const std::vector<std::string_view> known = fusekit::rules::names();
  for (std::string& name : names) {
    if (const std::string_view now = fusekit::rules::current_name(name); now != name) {
      std::cerr << "fusekit: rule '" << name << "' is now '" << now
                << "'; the old name goes in the next release\n";
      name = std::string(now);
    }
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw usage_error("unknown rule '" + name + "'");
  }
  return names;
}

inline arguments parse(int argc, char** argv) {
  arguments a;
  std::vector<std::string> skipped;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) throw usage_error("no command");
  a.command = args[0];
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw usage_error(flag + " needs a value");
      return args[++i];
    };
    if (flag == "-o" || flag == "--output") {
      a.output = value();
    } else if (flag == "--report") {
      a.report = value();
    } else if (flag == "--node") {
      a.node = value();
    } else if (flag == "--dot") {
      a.dot = value();
    } else if (flag == "--rules") {
      const std::string& list = value();
      if (list != "all") a.options.rules = known_rules(split(list));
    } else if (flag == "--skip") {
      skipped = known_rules(split(value()));
    } else if (flag == "--fold-limit") {
      a.attention.fold_limit_bytes =
          std::int64_t(unsigned_flag(flag, value(), std::numeric_limits<std::int64_t>::max()));
    } else if (flag == "--target") {
      const std::string& target = value();
      if (target != "ort" && target != "onnx") throw usage_error("--target is ort or onnx");
      using target_op = fusekit::rules::attention_options::target;
      a.attention.fused_target = target == "onnx" ? target_op::onnx : target_op::ort;
      a.target_given = true;
    } else if (flag == "--provider") {
      const std::string& provider = value();
      if (provider != "cpu" && provider != "cuda") throw usage_error("--provider is cpu or cuda");
      a.attention.runs_on =
          provider == "cuda" ? fusekit::rules::provider::cuda : fusekit::rules::provider::cpu;
      a.provider_given = true;
    } else if (flag == "--num-heads") {
      const std::string& n = value();
      char* end = nullptr;
      errno = 0;
      a.attention.num_heads = std::strtoll(n.c_str(), &end, 10);
      // The fused ops store num_heads as a 32-bit attribute: larger counts are refused, never
      // clamped.
      if (*end != '\0' || errno == ERANGE || a.attention.num_heads <= 0 ||
          a.attention.num_heads > std::numeric_limits<std::int32_t>::max())
        throw usage_error("--num-heads needs a positive integer below 2^31, not '" + n + "'");
    } else if (flag == "--cases") {
      a.cases = unsigned_flag(flag, value(), 100000);
    } else if (flag == "--failures") {
      a.failures = unsigned_flag(flag, value(), 1000000);
    } else if (flag == "--seed") {
      a.seed = unsigned_flag(flag, value(), std::numeric_limits<std::uint64_t>::max());
    } else if (flag == "--python") {
      a.python = value();
    } else if (flag == "--keep") {
      a.keep = value();
    } else if (flag == "--explain") {
      a.options.explain = true;
    } else if (flag == "--dry-run") {
      a.dry_run = true;
    } else if (flag == "--quiet") {
      a.quiet = true;
    } else if (flag == "--shapes") {
      a.shapes = true;
    } else if (flag == "--json") {
      a.json = true;
    } else if (!flag.starts_with("-") && a.input.empty()) {
      a.input = flag;
    } else {
      throw usage_error("unexpected argument '" + flag + "'");
    }
  }
  if (!skipped.empty()) {
    if (a.options.rules.empty())
      for (std::string_view name : fusekit::rules::names()) a.options.rules.emplace_back(name);
    std::erase_if(a.options.rules, [&](const std::string& name) {
      return std::find(skipped.begin(), skipped.end(), name) != skipped.end();
    });
    if (a.options.rules.empty()) throw usage_error("--skip leaves no rule to run");
  }
  if (a.json && !a.shapes) throw usage_error("--json needs --shapes");
  if (a.command != "selfcheck" &&
      (a.cases || a.failures || a.seed || !a.python.empty() || !a.keep.empty()))
    throw usage_error("--cases, --failures, --seed, --python and --keep are selfcheck's");
  if (a.provider_given && a.attention.fused_target != fusekit::rules::target::ort)
    throw usage_error("--provider names an ONNX Runtime execution provider: it needs --target ort");
  return a;
}

// Progress for people watching a large model go by; silent in pipes and with --quiet.
struct progress {
  bool on;
  void operator()(std::string_view stage) const {
    if (on) std::cerr << "fusekit: " << stage << "\n";
  }
};

// Outputs replace only regular files: a symlink, device or directory at the path is refused.
inline void check_replaceable(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return;  // nothing there yet
  if (!S_ISREG(st.st_mode))
    throw fusekit::error("refusing to replace it: not a regular file", {.file = path});
}

// A text file written beside its destination and renamed over it by commit(); nothing is left
// behind when the run fails first.
class staged_text {
 public:
  staged_text(std::string path, const std::string& text)
      : path_(std::move(path)), temp_(path_ + ".fusekit-tmp") {
    check_replaceable(path_);
    std::ofstream out(temp_);
    out << text;
    if (!out) {
      std::remove(temp_.c_str());
      throw fusekit::error("cannot write", {.file = path_});
    }
  }
  staged_text(const staged_text&) = delete;
  staged_text& operator=(const staged_text&) = delete;
  ~staged_text() {
    if (!committed_) std::remove(temp_.c_str());
  }
  void commit() {
    if (std::rename(temp_.c_str(), path_.c_str()) != 0)
      throw fusekit::error(std::string("cannot write: ") + std::strerror(errno), {.file = path_});
    committed_ = true;
  }

 private:
  std::string path_, temp_;
  bool committed_ = false;
};

inline void write_text(const std::string& path, const std::string& text) {
  staged_text(path, text).commit();
}

// What fuse does to a model in memory: every rule, then the ONNX checker on the result. The
// checker's complaint about the input is no reason to refuse the output; a new one is.
inline rewrite::report fuse_model(fusekit::model& m, const arguments& a) {
  const std::string input_error = fusekit::rewrite::checker_error(m);
  auto report = fusekit::rules::fuse_all(m, a.options, a.attention);
  if (auto note = fusekit::rewrite::newer_opset_note(m)) report.notes.push_back(std::move(*note));
  if (auto note = fusekit::rewrite::check_rewrite(m, input_error))
    report.notes.push_back(std::move(*note));
  return report;
}

inline int fuse(const arguments& a) {
  if (a.input.empty()) throw usage_error("fuse needs IN.onnx");
  if (a.output.empty() && !a.dry_run) throw usage_error("fuse needs -o OUT.onnx (or --dry-run)");
  const progress say{isatty(STDERR_FILENO) && !a.quiet};
  say("reading " + a.input);
  fusekit::model m = fusekit::load_model(a.input);
  say("fusing");
  const auto report = fuse_model(m, a);
  // The report is staged first and published only after the model is written: a failure
  // anywhere leaves neither behind.
  std::optional<staged_text> report_file;
  if (!a.report.empty()) report_file.emplace(a.report, report.to_json().dump(2) + "\n");
  if (!a.dry_run) {
    say("writing " + a.output);
    check_replaceable(a.output);
    fusekit::save_model(m, a.output);
  }
  if (report_file) report_file->commit();
  if (!a.quiet) std::cout << report.to_table();
  return 0;
}

// ---- inspect --shapes: what the facts oracle proves about every value

inline bool is_identifier(std::string_view name) {
  auto letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  if (name.empty() || !letter(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) {
    return letter(c) || std::isdigit(static_cast<unsigned char>(c));
  });
}

// A dim as sympy reads it ("4 + 2*batch", "(S + T)/2"), or nothing where it is unknown or involves
// a size no dim_param names. Names sympy cannot read are written as they are and collected in
// `unreadable`, so that the user hears of them once.
inline std::optional<std::string> sympy_text(const fusekit::facts& f, const fusekit::sym& s,
                                             std::set<std::string>& unreadable) {
  if (!s.known()) return std::nullopt;
  if (const auto c = s.constant()) return std::to_string(*c);
  const auto terms = s.terms();
  std::string out;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    // sym keeps coefficients above the lowest int64: negating one cannot overflow.
    std::int64_t c = terms[i].coefficient;
    out += i == 0 ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ");
    c = c < 0 ? -c : c;
    std::string term = c != 1 || terms[i].factors.empty() ? std::to_string(c) : "";
    for (const auto& factor : terms[i].factors) {
      const fusekit::sym atom = fusekit::sym::atom(factor.atom);
      if (!f.is_named(atom)) return std::nullopt;
      const std::string name = f.text(atom);
      // The facts' own min of two dims is written as sympy writes it.
      if (!is_identifier(name) && !name.starts_with("Min(")) unreadable.insert(name);
      if (!term.empty()) term += '*';
      term += name;
      if (factor.power != 1) {
        term += "**";
        term += factor.power < 0 ? "(" + std::to_string(factor.power) + ")"
                                 : std::to_string(factor.power);
      }
    }
    out += term;
  }
  if (s.denominator() != 1) {
    if (terms.size() > 1) out = "(" + out + ")";
    out += "/" + std::to_string(s.denominator());
  }
  return out;
}

// The shortest text that reads back as the same double; JSON has no infinities or NaN, so those
// are strings everywhere.
inline std::string real_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, x).ptr;
  return std::string(buffer, end);
}

// A dim or an integer element: a number, a sympy expression, or null.
inline nlohmann::ordered_json sym_json(const fusekit::facts& f, const fusekit::sym& d,
                                       std::set<std::string>& unreadable) {
  if (const auto c = d.constant()) return *c;
  if (auto text = sympy_text(f, d, unreadable)) return std::move(*text);
  return nullptr;
}

inline nlohmann::ordered_json dims_json(const fusekit::facts& f, fusekit::value_id v,
                                        std::set<std::string>& unreadable) {
  const fusekit::shape_fact& s = f.shape(v);
  if (!s.known) return nullptr;
  nlohmann::ordered_json dims = nlohmann::ordered_json::array();
  for (const fusekit::sym& d : s.dims) dims.push_back(sym_json(f, d, unreadable));
  return dims;
}

inline nlohmann::ordered_json content_json(const fusekit::facts& f, const fusekit::content_fact& c,
                                           std::set<std::string>& unreadable) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  if (c.real) {
    for (double x : c.reals) {
      if (std::isfinite(x))
        out.push_back(x);
      else
        out.push_back(real_text(x));
    }
    return out;
  }
  for (const fusekit::sym& e : c.ints) out.push_back(sym_json(f, e, unreadable));
  return out;
}

// "[0, 0, 4, 16]"; a fill as "[0.01 × 64]".
inline std::string content_text(const fusekit::facts& f, const fusekit::content_fact& c) {
  auto element = [&](std::size_t i) { return c.real ? real_text(c.reals[i]) : f.text(c.ints[i]); };
  bool uniform = c.size() > 2;
  for (std::size_t i = 1; uniform && i < c.size(); ++i)
    uniform = c.real ? c.reals[i] == c.reals[0] : c.ints[i] == c.ints[0];
  if (uniform) return "[" + element(0) + " × " + std::to_string(c.size()) + "]";
  std::string out = "[";
  for (std::size_t i = 0; i < c.size(); ++i) out += (i ? ", " : "") + element(i);
  return out + "]";
}

// The key itself, or with "#2", "#3"… where it is taken.
inline std::string unique_key(std::set<std::string>& taken, const std::string& key) {
  std::string out = key;
  for (int k = 2; !taken.insert(out).second; ++k) out = key + "#" + std::to_string(k);
  return out;
}

// Every value of the model and of its subgraphs (keyed GRAPH/VALUE, GRAPH the body's name, or its
// node's and attribute's where it has none), each line or JSON entry written to `out` as it
// comes: an ordered JSON object would search its keys on every insertion. `warn` gets the
// dim_params sympy cannot read.
inline int inspect_shapes(const arguments& a, const fusekit::model& m,
                          std::ostream& out = std::cout, std::ostream& warn = std::cerr) {
  const fusekit::graph main_graph(m);
  struct scope {
    const fusekit::graph* g;
    std::string prefix;
  };
  std::vector<scope> graphs{{&main_graph, ""}};
  // A main-graph value may be named like a subgraph's key ("body/x"): a repeated key gets "#2".
  std::set<std::string> labels, keys, unreadable;
  bool first = true;
  if (a.json) out << "{";
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    const fusekit::graph& g = *graphs[i].g;
    const std::string prefix = graphs[i].prefix;  // graphs may grow below
    const fusekit::facts& f = fusekit::facts_of(g);
    for (fusekit::node_id n = 0; n < g.node_count(); ++n)
      for (const auto& body : g.subgraphs(n)) {
        std::string label = body.body->proto().name();
        if (label.empty())
          label = (g.node(n).name().empty() ? g.describe(n) : g.node(n).name()) + "." +
                  std::string(body.attribute);
        graphs.push_back({body.body, unique_key(labels, prefix + label) + "/"});
      }
    for (fusekit::value_id v = 0; v < g.value_count(); ++v) {
      if (g.is_outer_scope(v)) continue;  // listed with the graph that defines it
      const std::string name = unique_key(keys, prefix + std::string(g.name(v)));
      const std::string_view type = fusekit::dtype_name(g.type(v));
      const fusekit::content_fact& c = f.content(v);
      if (!a.json) {
        out << name << ": " << type << " " << f.shape_text(v);
        if (c.known) out << " = " << content_text(f, c);
        out << "\n";
        continue;
      }
      nlohmann::ordered_json entry = {{"dtype", type}, {"dims", dims_json(f, v, unreadable)}};
      if (c.known) entry["value"] = content_json(f, c, unreadable);
      out << (first ? "\n" : ",\n") << nlohmann::ordered_json(name).dump() << ": " << entry.dump();
      first = false;
    }
    if (!a.json)
      for (const std::string& line : f.contradictions())
        out << prefix << "contradiction: " << line << "\n";
  }
  if (a.json) out << "\n}\n";
  for (const std::string& name : unreadable)
    warn << "fusekit: dim_param '" << name
         << "' is not an identifier: sympy cannot read the dims that name it\n";
  return 0;
}

// What inspect says of a model: its ops and value dtypes counted over every graph, the Softmax
// nodes (where attention blocks are, fused or not) and what the rules would make of it.
struct inspection {
  std::map<std::string, int> ops, dtypes;
  std::vector<std::string> softmaxes;
  rewrite::report report;
};

inline inspection inspect_model(const fusekit::model& m, const arguments& a) {
  inspection out;
  {
    const fusekit::graph g(m);
    std::vector<const fusekit::graph*> graphs{&g};
    for (std::size_t i = 0; i < graphs.size(); ++i) {
      const fusekit::graph& sub = *graphs[i];
      for (fusekit::node_id n = 0; n < sub.node_count(); ++n) {
        ++out.ops[(sub.domain(n).empty() ? "" : std::string(sub.domain(n)) + ".") +
                  std::string(sub.op_type(n))];
        if (sub.op_type(n) == "Softmax") out.softmaxes.push_back(sub.describe(n));
        for (const auto& body : sub.subgraphs(n)) graphs.push_back(body.body);
      }
      for (fusekit::value_id v = 0; v < sub.value_count(); ++v)
        ++out.dtypes[std::string(fusekit::dtype_name(sub.type(v)))];
    }
  }
  fusekit::model copy = m;
  out.report = fusekit::rules::fuse_all(copy, a.options, a.attention);
  return out;
}

inline int inspect(const arguments& a) {
  if (a.input.empty()) throw usage_error("inspect needs IN.onnx");
  fusekit::model m = fusekit::load_model(a.input);
  if (a.shapes) {
    // A function's body has facts only where it is called: each call is inlined to be seen.
    fusekit::rewrite::name_pool names(m.proto);
    fusekit::rewrite::inline_functions(m.proto, names, [](const onnx::NodeProto&) { return true; });
    return inspect_shapes(a, m);
  }
  const inspection found = inspect_model(m, a);
  std::cout << a.input << ": IR " << m.proto.ir_version() << "\nopsets:";
  for (const auto& o : m.proto.opset_import())
    std::cout << " " << (o.domain().empty() ? "ai.onnx" : o.domain()) << " " << o.version();
  std::cout << "\nops:";
  for (const auto& [op, n] : found.ops) std::cout << " " << op << " " << n << ";";
  std::cout << "\nvalue dtypes:";
  for (const auto& [t, n] : found.dtypes) std::cout << " " << t << " " << n << ";";
  std::cout << "\nattention-like blocks (Softmax nodes): " << found.softmaxes.size() << "\n";
  std::cout << "rules:";
  for (std::string_view name : fusekit::rules::names()) std::cout << " " << name;
  std::cout << "\n" << found.report.to_table();
  return 0;
}

inline std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The nodes within `radius` edges of `center`, drawn with the explanation's colours.
inline std::string dot_picture(const fusekit::graph& g, fusekit::node_id center,
                               const std::set<std::string>& matched, const std::string& failing) {
  std::set<fusekit::node_id> near{center};
  for (int step = 0; step < 4; ++step) {
    std::set<fusekit::node_id> next = near;
    for (fusekit::node_id n : near) {
      for (fusekit::value_id in : g.inputs(n))
        if (in != fusekit::no_id && g.producer(in) != fusekit::no_id) next.insert(g.producer(in));
      for (fusekit::value_id out : g.outputs(n))
        if (out != fusekit::no_id)
          for (const auto& u : g.consumers(out)) next.insert(u.node);
    }
    near = next;
  }
  std::string dot =
      "digraph fusekit {\n  rankdir=TB;\n  node [shape=box, style=filled, "
      "fillcolor=white, fontname=Helvetica];\n";
  for (fusekit::node_id n : near) {
    const std::string label = g.describe(n);
    std::string color = "white";
    if (matched.contains(label)) color = "palegreen";
    if (label == failing) color = "salmon";
    dot += "  n" + std::to_string(n) + " [label=" + dot_quote(label) + ", fillcolor=" + color +
           (n == center ? ", penwidth=3" : "") + "];\n";
  }
  for (fusekit::node_id n : near)
    for (fusekit::value_id out : g.outputs(n))
      if (out != fusekit::no_id)
        for (const auto& u : g.consumers(out))
          if (near.contains(u.node))
            dot += "  n" + std::to_string(n) + " -> n" + std::to_string(u.node) +
                   " [label=" + dot_quote(std::string(g.name(out))) + "];\n";
  return dot + "}\n";
}

inline int explain(const arguments& a) {
  if (a.input.empty() || a.node.empty()) throw usage_error("explain needs IN.onnx and --node NAME");
  fusekit::model m = fusekit::load_model(a.input);
  const fusekit::graph g(m);
  fusekit::node_id center = fusekit::no_id;
  for (fusekit::node_id n = 0; n < g.node_count(); ++n)
    if (g.node(n).name() == a.node) center = n;
  if (center == fusekit::no_id)
    throw fusekit::error("no node named '" + a.node + "' in the main graph", {.file = a.input});
  const std::string who = g.describe(center);

  fusekit::model copy = m;
  fusekit::rewrite::options all = a.options;
  all.explain = true;
  const auto report = fusekit::rules::fuse_all(copy, all, a.attention);
  std::set<std::string> matched;
  std::string failing;
  std::size_t deepest = 0;
  bool said = false;
  for (const auto& f : report.fusions)
    if (std::find(f.nodes.begin(), f.nodes.end(), who) != f.nodes.end()) {
      std::cout << who << ": fused by " << f.rule << " in the block ending at " << f.root << " "
                << f.params.dump() << "\n";
      matched = {f.nodes.begin(), f.nodes.end()};
      said = true;
    }
  for (const auto& miss : report.near_misses) {
    const bool involved =
        miss.anchor == who || miss.failing == who ||
        std::find(miss.matched.begin(), miss.matched.end(), who) != miss.matched.end();
    if (!involved) continue;
    std::cout << "[" << miss.rule << "] from " << miss.anchor << ": " << miss.reason << "\n";
    said = true;
    if (miss.depth >= deepest) {
      deepest = miss.depth;
      matched = {miss.matched.begin(), miss.matched.end()};
      failing = miss.failing;
    }
  }
  if (!said) std::cout << who << ": no rule matched any part of a block through this node\n";
  if (!a.dot.empty()) write_text(a.dot, dot_picture(g, center, matched, failing));
  return 0;
}

inline int demo(const arguments& a) {
  if (!a.input.empty()) throw usage_error("demo takes no model, it has its own");
  fusekit::model m{fusekit::samples::make_dit_model({}), "dit_sample.onnx"};
  std::cout << "fusekit demo: the bundled sample, examples/models/dit_sample.onnx (a 2-layer "
               "F5-TTS-like DiT in float16: RoPE on q and k, cast-wrapped softmax, scale 100)\n\n";
  const auto report = fusekit::rules::fuse_all(m, a.options, a.attention);
  fusekit::rewrite::check_invariants(m);
  std::cout << report.to_table();
  return 0;
}

// Whether `python` runs ONNX Runtime: the selfcheck's judge of parity.
inline bool runs_onnxruntime(const std::string& python) {
  const std::string probe = "\"" + python + "\" -c \"import onnxruntime, numpy\" > /dev/null 2>&1";
  return std::system(probe.c_str()) == 0;
}

inline int selfcheck(const arguments& a) {
  if (!a.input.empty()) throw usage_error("selfcheck takes no model, it writes its own");
  fusekit::rules::require_bundled_checks();
  fusekit::selfcheck::options o;
  if (a.cases) o.cases = *a.cases;
  if (a.seed) o.seed = *a.seed;
  o.python = a.python.empty() ? "python3" : a.python;
  if (!runs_onnxruntime(o.python)) {
    if (!a.python.empty())
      throw fusekit::error("--python " + a.python + " cannot import onnxruntime and numpy");
    std::cout << "fusekit selfcheck: no python3 with onnxruntime and numpy here: instances are "
                 "fused and mutants refused, but parity with ONNX Runtime is not checked\n";
    o.python.clear();
  }
  // The graphs go to --keep, or to a folder of their own that is removed afterwards.
  std::optional<std::filesystem::path> scratch;
  if (!a.keep.empty()) {
    o.write_to = a.keep;
  } else if (!o.python.empty()) {
    std::string name =
        (std::filesystem::temp_directory_path() / "fusekit-selfcheck-XXXXXX").string();
    if (!mkdtemp(name.data()))
      throw fusekit::error(std::string("cannot make a scratch folder: ") + std::strerror(errno),
                           {.file = name});
    scratch = o.write_to = name;
  }
  struct remove_scratch {
    const std::optional<std::filesystem::path>& path;
    ~remove_scratch() {
      std::error_code ignored;
      if (path) std::filesystem::remove_all(*path, ignored);
    }
  } cleanup{scratch};
  const fusekit::rules::target named[] = {a.attention.fused_target};
  const std::span<const fusekit::rules::target> targets =
      a.target_given ? std::span<const fusekit::rules::target>(named)
                     : std::span<const fusekit::rules::target>(fusekit::rules::every_target);
  std::size_t failed = 0, checked = 0;
  for (const auto& r :
       fusekit::rules::check_bundled(o, a.options.rules, targets, a.attention.runs_on)) {
    std::cout << r.to_table(a.failures.value_or(20)) << std::flush;
    failed += !r.ok();
    ++checked;
  }
  if (failed) {
    std::cerr << "fusekit: " << failed << " of " << checked << " rule checks failed\n";
    return 1;
  }
  return 0;
}

}  // namespace detail

// Runs the command line argv[1..argc) as the fusekit executable does: prints to std::cout and
// std::cerr, returns the exit code (0 done, 1 failed, 2 wrong command line).
inline int run(int argc, char** argv) {
  using namespace detail;
  const std::string_view command = argc > 1 ? argv[1] : "";
  try {
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
        std::cout << help(command);
        return 0;
      }
    if (command == "--version") {
      if (argc > 2) throw usage_error("--version takes no arguments");
      std::cout << "fusekit " << FUSEKIT_VERSION << " (onnx " << ONNX_VERSION_STRING << ")\n";
      return 0;
    }
    const arguments a = parse(argc, argv);
    if (a.command == "fuse") return fuse(a);
    if (a.command == "inspect") return inspect(a);
    if (a.command == "explain") return explain(a);
    if (a.command == "demo") return demo(a);
    if (a.command == "selfcheck") return selfcheck(a);
    throw usage_error("unknown command '" + a.command + "'");
  } catch (const usage_error& e) {
    std::cerr << "fusekit: " << e.what() << "\n" << help(command);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "fusekit: " << fusekit::rewrite::one_line(e.what()) << "\n";
    return 1;
  }
}

}  // namespace fusekit::cli
