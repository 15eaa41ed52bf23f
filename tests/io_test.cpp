// Model I/O specification: what load_model and parse_model accept, the exact error for everything
// they do not, byte-stable atomic saves, and external data that stays valid wherever a model goes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/io/error.hpp"
#include "fusekit/io/external_data.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using fusekit::dtype;
using fusekit::build::model_builder;

namespace {

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& file, std::string_view bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The file names in `dir`, sorted.
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

using fusekit::testing::error_of;

// y = (x + w) * s, where w holds 16 bytes of raw_data and s 4 bytes.
model_builder small_builder() {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  auto w = b.initializer("w", dtype::float32, {4}, {1, 2, 3, 4});
  auto s = b.initializer("s", dtype::float32, {1}, {0.5});
  b.output(b.op("Mul", {b.op("Add", {x, w}), s}), dtype::float32, {4});
  return b;
}

const onnx::TensorProto& initializer(const onnx::ModelProto& m, std::string_view name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return t;
  throw std::logic_error("no initializer " + std::string(name));
}

std::string location_of(const onnx::TensorProto& t) {
  return fusekit::external_data_of(t).location;
}

// The elements of `name`, read through the graph index as a rule would.
std::vector<double> constant_values(const fusekit::model& m, std::string_view name) {
  const fusekit::graph g(m);
  const onnx::TensorProto* t = g.constant_tensor(*g.find_value(name));
  const fusekit::tensor_values values(*t, m.directory());
  std::vector<double> out;
  for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_double(i));
  return out;
}

// Each test works in its own directory, removed afterwards.
class Io : public ::testing::Test {
 protected:
  Io() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("fusekit_io_test_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Io() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  fs::path path(std::string_view name) const { return dir_ / name; }

  // Writes `m` to model.onnx, loads it and indexes it: the error names the file.
  std::string graph_error(const onnx::ModelProto& m) const {
    write_bytes(path("model.onnx"), fusekit::detail::serialize_deterministic(m));
    return error_of([&] { fusekit::graph(fusekit::load_model(path("model.onnx"))); });
  }

  // Writes `m` to model.onnx and returns the error loading it.
  std::string load_error(const onnx::ModelProto& m) const {
    write_bytes(path("model.onnx"), fusekit::detail::serialize_deterministic(m));
    return error_of([&] { fusekit::load_model(path("model.onnx")); });
  }

  // small_builder's model saved as a.onnx with w (16 bytes) in a.onnx.data and s inline.
  fs::path save_externalized() const {
    fusekit::save_model(small_builder().build_model(), path("a.onnx"), {.externalize_from = 16});
    return path("a.onnx");
  }

  // small_builder's model with w pointing at `location`, written to model.onnx.
  std::string load_error_with_location(const std::string& location) const {
    onnx::ModelProto m = small_builder().build();
    fusekit::detail::set_external(*m.mutable_graph()->mutable_initializer(0), location, 0, 16);
    return load_error(m);
  }

  fs::path dir_;
};

// ---- files that are not models

TEST_F(Io, MissingFileFailsWithTheSystemReason) {
  // Nothing to read: the message carries strerror so the user sees why.
  const fs::path file = path("absent.onnx");
  EXPECT_EQ(error_of([&] { fusekit::load_model(file); }),
            file.string() + ": cannot open: No such file or directory");
}

TEST_F(Io, DirectoryIsNotAModelFile) {
  // A directory can be opened as a stream; only reading it fails, with a confusing reason.
  EXPECT_EQ(error_of([&] { fusekit::load_model(dir_); }),
            dir_.string() + ": is a directory, not a model file");
}

TEST_F(Io, EmptyFileIsNotAModel) {
  // Zero bytes parse as an empty ModelProto: rejected before protobuf sees them.
  write_bytes(path("empty.onnx"), "");
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("empty.onnx")); }),
            path("empty.onnx").string() + ": empty file, not an ONNX model");
}

TEST_F(Io, TextIsNotAProtobuf) {
  // 'n' is field 13 with wire type 6, which protobuf does not have.
  write_bytes(path("notes.onnx"), "not a model\n");
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("notes.onnx")); }),
            path("notes.onnx").string() +
                ": not a protobuf: byte 0 is not a valid field tag (is this an ONNX model?)");
}

TEST_F(Io, ThreeContinuationBytesAreATruncatedTag) {
  // Near miss: a tag may take up to 5 bytes, so three 0xff bytes are an unfinished tag.
  write_bytes(path("ff.onnx"), "\xff\xff\xff");
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("ff.onnx")); }),
            path("ff.onnx").string() + ": truncated inside a field tag at byte 0");
}

TEST_F(Io, OverlongTagIsNotAProtobuf) {
  // Sixteen 0xff bytes are longer than any varint: garbage, not a truncated file.
  write_bytes(path("ff.onnx"), std::string(16, '\xff'));
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("ff.onnx")); }),
            path("ff.onnx").string() +
                ": not a protobuf: byte 0 is not a valid field tag (is this an ONNX model?)");
}

TEST_F(Io, TruncatedModelNamesTheCutField) {
  // The last field written is opset_import (8): cutting one byte leaves it a byte short.
  const onnx::ModelProto m = small_builder().build();
  const std::string bytes = fusekit::detail::serialize_deterministic(m);
  const std::size_t opset_size = m.opset_import(0).ByteSizeLong();
  const std::size_t field_start = bytes.size() - opset_size - 2;  // tag and length: a byte each
  write_bytes(path("cut.onnx"), bytes.substr(0, bytes.size() - 1));
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("cut.onnx")); }),
            path("cut.onnx").string() + ": truncated: field 8 at byte " +
                std::to_string(field_start) + " needs " + std::to_string(opset_size) + " bytes, " +
                std::to_string(opset_size - 1) + " remain");
}

TEST_F(Io, TensorProtoIsNotAModel) {
  // Valid protobuf, but the tensor's name (field 8, at byte 4) reads as ModelProto's opset_import,
  // whose first byte, 'w', is no field tag.
  const onnx::TensorProto t = fusekit::build::make_tensor("w", dtype::float32, {2}, {1, 2});
  write_bytes(path("tensor.pb"), t.SerializeAsString());
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("tensor.pb")); }),
            path("tensor.pb").string() +
                ": corrupt: byte 6 is not a valid field tag (in opset_import[0])");
}

// ---- faults inside nested messages: the byte offset in the file and the path to the message

// The model's bytes with the byte `before` bytes ahead of the first `marker` set to `value`, and
// where that byte is.
std::pair<std::string, std::size_t> patched(const onnx::ModelProto& m, std::string_view marker,
                                            std::size_t before, char value) {
  std::string bytes = fusekit::detail::serialize_deterministic(m);
  const std::size_t at = bytes.find(marker) - before;
  bytes[at] = value;
  return {bytes, at};
}

model_builder transpose_builder() {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto y = b.op("Relu", {x});
  b.output(b.op("Transpose", {y}, {{"perm", std::vector<std::int64_t>{1, 0}}}), dtype::float32,
           {3, 2});
  return b;
}

TEST_F(Io, CorruptTagInAnAttributeNamesItsPathAndOffset) {
  // The attribute's name "perm" follows its tag (field 1, length-delimited) and length: the tag
  // made 0x07 (field 0, wire type 7) is no tag.
  const auto [bytes, at] = patched(transpose_builder().build(), "perm", 2, '\x07');
  write_bytes(path("bad.onnx"), bytes);
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("bad.onnx")); }),
            path("bad.onnx").string() + ": corrupt: byte " + std::to_string(at) +
                " is not a valid field tag (in graph.node[1].attribute[0])");
}

TEST_F(Io, LengthPastItsMessageIsCorruptNotTruncated) {
  // The Relu's input "x" claims 127 bytes; its node has far fewer left, the file has more.
  const onnx::ModelProto m = transpose_builder().build();
  const std::string node = m.graph().node(0).SerializeAsString();
  const auto [bytes, at] = patched(m, node, 0, node[0]);  // the node's first field: input "x"
  std::string changed = bytes;
  changed[at + 1] = '\x7f';
  write_bytes(path("bad.onnx"), changed);
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("bad.onnx")); }),
            path("bad.onnx").string() + ": corrupt: field 1 at byte " + std::to_string(at) +
                " (in graph.node[0]) needs 127 bytes, " + std::to_string(node.size() - 2) +
                " remain");
}

// ir_version 8, then graph { initializer { <tensor> } }, written by hand: no writer makes these.
std::string model_with_tensor_bytes(std::string_view tensor) {
  std::string initializer = "\x2a" + std::string(1, char(tensor.size())) + std::string(tensor);
  return "\x08\x08\x3a" + std::string(1, char(initializer.size())) + initializer;
}

TEST_F(Io, PackedFloatsOfAPartialValueAreCorrupt) {
  // float_data (field 4) packed into 5 bytes: one float and a byte. The tensor starts at byte 6.
  write_bytes(path("bad.onnx"), model_with_tensor_bytes(std::string("\x22\x05\0\0\x80\x3f\0", 7)));
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("bad.onnx")); }),
            path("bad.onnx").string() +
                ": corrupt: field 4 at byte 6 (in graph.initializer[0].float_data) holds 5 bytes, "
                "not a whole number of 4-byte values");
}

TEST_F(Io, PackedDimsEndingInsideAVarintAreCorrupt) {
  // dims (field 1) packed into one byte that says more follows.
  write_bytes(path("bad.onnx"), model_with_tensor_bytes("\x0a\x01\x80"));
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("bad.onnx")); }),
            path("bad.onnx").string() +
                ": corrupt: a bad varint at byte 8 (in graph.initializer[0].dims)");
}

// If bodies in If bodies: the model's graph is at depth 1, and each level adds a node, an
// attribute and a graph, so `levels` levels reach depth 1 + 3·levels.
onnx::ModelProto nested_if_model(int levels) {
  onnx::GraphProto body;
  body.set_name("leaf");
  for (int level = 0; level < levels; ++level) {
    onnx::GraphProto outer;
    outer.set_name("level" + std::to_string(level));
    auto* node = outer.add_node();
    node->set_op_type("If");
    auto* a = node->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto_AttributeType_GRAPH);
    *a->mutable_g() = std::move(body);
    body = std::move(outer);
  }
  onnx::ModelProto m = small_builder().build();
  *m.mutable_graph() = std::move(body);
  return m;
}

TEST_F(Io, NestingAtProtobufsLimitLoads) {
  // Depth 100, the deepest protobuf parses.
  write_bytes(path("deep.onnx"), fusekit::detail::serialize_deterministic(nested_if_model(33)));
  EXPECT_EQ(error_of([&] { fusekit::load_model(path("deep.onnx")); }), "no error");
}

TEST_F(Io, NestingDeeperThanProtobufTakesIsNamed) {
  // Depth 103: the node at depth 101 is where protobuf gives up; the path keeps its ends.
  write_bytes(path("deep.onnx"), fusekit::detail::serialize_deterministic(nested_if_model(34)));
  const std::string message = error_of([&] { fusekit::load_model(path("deep.onnx")); });
  EXPECT_THAT(message, ::testing::StartsWith(
                           path("deep.onnx").string() +
                           ": corrupt: messages nested deeper than protobuf's limit of 100 at "
                           "byte "));
  EXPECT_THAT(message,
              ::testing::EndsWith("(in graph.node[0].attribute[0].….attribute[0].g.node[0])"));
}

TEST_F(Io, ModelWithoutGraphIsRejected) {
  // Parses as a ModelProto, but there is nothing to index.
  onnx::ModelProto m = small_builder().build();
  m.clear_graph();
  EXPECT_EQ(load_error(m),
            path("model.onnx").string() + ": graph: not an ONNX model: it has no graph");
}

TEST_F(Io, MissingIrVersionIsRejected) {
  // Every ONNX writer sets ir_version; without it the bytes are some other message.
  onnx::ModelProto m = small_builder().build();
  m.clear_ir_version();
  EXPECT_EQ(load_error(m),
            path("model.onnx").string() + ": ir_version: not an ONNX model: ir_version is missing");
}

TEST_F(Io, TooNewIrVersionIsRejected) {
  // A newer IR may change meaning in ways fusekit would silently get wrong.
  onnx::ModelProto m = small_builder().build();
  m.set_ir_version(99);
  EXPECT_EQ(load_error(m),
            path("model.onnx").string() +
                ": ir_version: IR version 99 is not supported (fusekit reads 3 to 14)");
}

TEST_F(Io, TooOldIrVersionIsRejected) {
  // IR 2 predates opset imports.
  onnx::ModelProto m = small_builder().build();
  m.set_ir_version(2);
  EXPECT_EQ(load_error(m),
            path("model.onnx").string() +
                ": ir_version: IR version 2 is not supported (fusekit reads 3 to 14)");
}

TEST_F(Io, OldestAndNewestSupportedIrVersionsLoad) {
  // Near miss: the bounds themselves are inside the supported range.
  onnx::ModelProto m = small_builder().build();
  for (std::int64_t ir : {fusekit::min_ir_version, fusekit::max_ir_version}) {
    m.set_ir_version(ir);
    EXPECT_EQ(load_error(m), "no error") << "IR " << ir;
  }
}

// ---- structural errors, found when the graph is indexed

TEST_F(Io, InputWithoutProducer) {
  // Add reads a value nothing defines.
  model_builder b = small_builder();
  b.proto().mutable_node(0)->set_input(1, "ghost");
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() +
                ": node Add 'Add_0': input 1: input 'ghost' has no producer: no node, initializer "
                "or graph input defines it");
}

TEST_F(Io, TwoNodesWritingOneValue) {
  // SSA: Mul writes the value Add already wrote.
  model_builder b = small_builder();
  b.proto().mutable_node(1)->set_output(0, "Add_0");
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() +
                ": node Mul 'Mul_1': output 0: value 'Add_0' is already defined as output of Add "
                "'Add_0'");
}

TEST_F(Io, NodeOutputCollidingWithInitializer) {
  // SSA: a node may not redefine an initializer.
  model_builder b = small_builder();
  b.proto().mutable_node(0)->set_output(0, "w");
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() +
                ": node Add 'Add_0': output 0: value 'w' is already defined as an initializer");
}

TEST_F(Io, NodeOutputCollidingWithGraphInput) {
  // SSA: a node may not redefine a graph input.
  model_builder b = small_builder();
  b.proto().mutable_node(0)->set_output(0, "x");
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() +
                ": node Add 'Add_0': output 0: value 'x' is already defined as a graph input");
}

TEST_F(Io, DuplicateInitializer) {
  // Two tensors for one name: which one a runtime uses is unspecified.
  model_builder b = small_builder();
  const onnx::TensorProto w = b.proto().initializer(0);
  *b.proto().add_initializer() = w;
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() + ": initializer 'w' is defined twice");
}

TEST_F(Io, InitializerDataShortOfItsShape) {
  // Refused when the graph is read, whether or not a rule would ever read the tensor.
  model_builder b = small_builder();
  onnx::TensorProto& w = *b.proto().mutable_initializer(0);
  w.set_raw_data(w.raw_data().substr(0, 3 * sizeof(float)));
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() +
                ": initializer 'w': shape holds 4 elements but its data holds 3 of float32");
}

TEST_F(Io, ConstantNodeDataBeyondItsShape) {
  // A scalar bool whose raw data holds four: the Constant node is named.
  model_builder b(17);
  auto x = b.input("x", dtype::boolean, {4});
  auto c =
      b.op("Constant", {}, {{"value", fusekit::build::make_tensor("", dtype::boolean, {}, {1})}});
  b.output(b.op("And", {x, c}), dtype::boolean, {4});
  onnx::GraphProto& g = b.proto();
  g.mutable_node(0)->mutable_attribute(0)->mutable_t()->set_raw_data(std::string(4, '\1'));
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() + ": node Constant '" + g.node(0).name() +
                "': its value: shape holds 1 elements but its data holds 4 of bool");
}

TEST_F(Io, DuplicateGraphInput) {
  // The same input declared twice is ambiguous for callers feeding it.
  model_builder b = small_builder();
  const onnx::ValueInfoProto x = b.proto().input(0);
  *b.proto().add_input() = x;
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() + ": graph input 'x' is declared twice");
}

TEST_F(Io, GraphOutputWithoutProducer) {
  // The graph promises an output nothing computes.
  model_builder b = small_builder();
  b.output({"nowhere"});
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() + ": graph output 'nowhere' has no producer");
}

TEST_F(Io, CycleNamesTheFirstNodeOnIt) {
  // Two nodes feeding each other: no topological order exists.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  auto relu = b.op("Relu", {x});
  b.output(b.op("Neg", {relu}));
  b.proto().mutable_node(0)->set_input(0, "Neg_1");  // Relu now reads Neg, which reads Relu
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() +
                ": node Relu 'Relu_0': the graph has a cycle through this node");
}

TEST_F(Io, ErrorInsideIfBranchNamesTheIfNode) {
  // A bad then_branch: the message must lead the user to the If that holds it.
  model_builder b(17);
  auto cond = b.input("cond", dtype::boolean, {});
  auto x = b.input("x", dtype::float32, {4});
  auto then_branch = b.subgraph("then");
  then_branch.output(then_branch.op("Relu", {{"ghost"}}));
  auto else_branch = b.subgraph("else");
  else_branch.output(else_branch.op("Neg", {x}));
  b.output(b.op("If", {cond},
                {{"then_branch", then_branch.proto()}, {"else_branch", else_branch.proto()}}));
  EXPECT_EQ(graph_error(b.build()),
            path("model.onnx").string() +
                ": in subgraph of If 'If_2', node Relu 'Relu_0': input 0: input 'ghost' has no "
                "producer: no node, initializer or graph input defines it");
}

// ---- saving

TEST_F(Io, SaveLoadSaveIsByteStable) {
  const model_builder b = small_builder();
  fusekit::save_model(b.build_model(), path("a.onnx"));
  fusekit::save_model(fusekit::load_model(path("a.onnx")), path("b.onnx"));
  EXPECT_EQ(read_bytes(path("a.onnx")), read_bytes(path("b.onnx")));
  EXPECT_EQ(read_bytes(path("a.onnx")), fusekit::detail::serialize_deterministic(b.build()));
}

TEST_F(Io, NarrowTypesRoundTripAndAreNamed) {
  // A weight-only quantised model as converters write it: int4 weights, a float8 scale, a Cast to
  // float8e8m0. Every element type of the current proto is read, kept and named.
  model_builder b(23);
  auto x = b.input("x", dtype::float32, {2, 4});
  auto w = b.initializer("w", dtype::float32, {4}, {0, 0, 0, 0});
  onnx::TensorProto& packed = *b.proto().mutable_initializer(0);
  packed.set_data_type(static_cast<int>(dtype::int4));
  packed.set_raw_data(std::string("\x78\x0f", 2));  // -8, 7, -1, 0
  auto scale = b.initializer("scale", dtype::float32, {}, {0});
  b.proto().mutable_initializer(1)->set_data_type(static_cast<int>(dtype::float8e4m3fn));
  b.proto().mutable_initializer(1)->set_raw_data(std::string(1, '\x38'));
  auto weights = b.op("DequantizeLinear", {w, scale}, {}, {.name = "dequantize"});
  auto cast = b.op("Cast", {x}, {{"to", dtype::float8e8m0}}, {.name = "to_e8m0"});
  b.output(b.op("Mul", {x, weights}), dtype::float32, {2, 4});
  b.output(cast, dtype::float8e8m0, {2, 4});
  fusekit::save_model(b.build_model(), path("a.onnx"));
  const fusekit::model m = fusekit::load_model(path("a.onnx"));
  fusekit::save_model(m, path("b.onnx"));
  EXPECT_EQ(read_bytes(path("a.onnx")), read_bytes(path("b.onnx")));
  const fusekit::graph g(m);
  EXPECT_EQ(fusekit::dtype_name(g.type(*g.find_value("w"))), "int4");
  EXPECT_EQ(fusekit::dtype_name(g.type(*g.find_value("scale"))), "float8e4m3fn");
  EXPECT_EQ(fusekit::dtype_name(g.type(*g.find_value("to_e8m0"))), "float8e8m0");
  const fusekit::tensor_values weights_read(m.proto.graph().initializer(0));
  EXPECT_EQ(weights_read.as_int64(0), -8);
  EXPECT_EQ(weights_read.as_int64(2), -1);
  EXPECT_EQ(fusekit::rewrite::checker_error(m), "");
}

TEST_F(Io, SaveIntoMissingDirectoryLeavesNothing) {
  // The staged file cannot be created; the error names the file asked for, not the temp.
  const fs::path file = path("missing") / "a.onnx";
  EXPECT_EQ(error_of([&] { fusekit::save_model(small_builder().build_model(), file); }),
            file.string() + ": cannot write: No such file or directory");
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{});
}

TEST_F(Io, SaveReplacesExistingFileWithoutLeftovers) {
  write_bytes(path("a.onnx"), "old contents");
  const model_builder b = small_builder();
  fusekit::save_model(b.build_model(), path("a.onnx"));
  EXPECT_EQ(read_bytes(path("a.onnx")), fusekit::detail::serialize_deterministic(b.build()));
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"a.onnx"});  // no a.onnx.tmp<pid>
}

TEST_F(Io, SaveWithoutExternalizingWritesNoDataFile) {
  fusekit::save_model(small_builder().build_model(), path("a.onnx"));
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"a.onnx"});
}

// ---- external data

TEST_F(Io, ExternalizeFromMovesLargeInitializersOnly) {
  const fs::path file = save_externalized();
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"a.onnx", "a.onnx.data"}));
  EXPECT_EQ(read_bytes(path("a.onnx.data")), initializer(small_builder().build(), "w").raw_data());

  const fusekit::model m = fusekit::load_model(file);
  const onnx::TensorProto& w = initializer(m.proto, "w");
  EXPECT_EQ(w.data_location(), onnx::TensorProto_DataLocation_EXTERNAL);
  EXPECT_FALSE(w.has_raw_data());
  EXPECT_EQ(location_of(w), "a.onnx.data");
  const onnx::TensorProto& s = initializer(m.proto, "s");  // 4 bytes: under the threshold
  EXPECT_NE(s.data_location(), onnx::TensorProto_DataLocation_EXTERNAL);
  EXPECT_EQ(s.raw_data().size(), 4u);
}

TEST_F(Io, ExternalValuesReadThroughTheGraph) {
  const fusekit::model m = fusekit::load_model(save_externalized());
  EXPECT_EQ(constant_values(m, "w"), (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(Io, ExternalValuesAreReadWhenAskedNotWhenLoaded) {
  const fusekit::model m = fusekit::load_model(save_externalized());
  const onnx::TensorProto later =
      fusekit::build::make_tensor("w", dtype::float32, {4}, {5, 6, 7, 8});
  write_bytes(path("a.onnx.data"), later.raw_data());
  EXPECT_EQ(constant_values(m, "w"), (std::vector<double>{5, 6, 7, 8}));
}

TEST_F(Io, SavingElsewhereCopiesExternalData) {
  fs::create_directories(path("src"));
  fs::create_directories(path("dst"));
  fusekit::save_model(small_builder().build_model(), path("src") / "a.onnx",
                      {.externalize_from = 16});
  fusekit::save_model(fusekit::load_model(path("src") / "a.onnx"), path("dst") / "b.onnx");
  fs::remove_all(path("src"));

  EXPECT_EQ(files_in(path("dst")), (std::vector<std::string>{"b.onnx", "b.onnx.data"}));
  const fusekit::model copy = fusekit::load_model(path("dst") / "b.onnx");
  EXPECT_EQ(location_of(initializer(copy.proto, "w")), "b.onnx.data");
  EXPECT_EQ(constant_values(copy, "w"), (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(Io, SavingInTheSameDirectoryKeepsReferences) {
  fusekit::save_model(fusekit::load_model(save_externalized()), path("b.onnx"));
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"a.onnx", "a.onnx.data", "b.onnx"}));
  EXPECT_EQ(read_bytes(path("b.onnx")), read_bytes(path("a.onnx")));
}

TEST_F(Io, MissingExternalDataFile) {
  // The weights were not copied along with the model.
  const fs::path file = save_externalized();
  fs::remove(path("a.onnx.data"));
  EXPECT_EQ(error_of([&] { fusekit::load_model(file); }),
            file.string() + ": initializer 'w': external data file '" +
                path("a.onnx.data").string() + "' is missing");
}

TEST_F(Io, ShortExternalDataFile) {
  // A partly copied data file: the tensor needs 16 bytes, 10 are there.
  const fs::path file = save_externalized();
  fs::resize_file(path("a.onnx.data"), 10);
  EXPECT_EQ(error_of([&] { fusekit::load_model(file); }),
            file.string() + ": initializer 'w': external data file '" +
                path("a.onnx.data").string() + "' has 10 bytes, the tensor needs bytes 0..16");
}

TEST_F(Io, ExternalDataMayNotLeaveTheDirectoryUpwards) {
  // A model must not make fusekit read files outside its own directory.
  EXPECT_EQ(
      load_error_with_location("../x.bin"),
      path("model.onnx").string() +
          ": initializer 'w': external data location '../x.bin' leaves the model's directory");
}

TEST_F(Io, ExternalDataMayNotBeAnAbsolutePath) {
  // Even naming a file beside the model, an absolute location breaks when the model moves.
  write_bytes(path("x.bin"), std::string(16, '\0'));
  const std::string absolute = path("x.bin").string();
  EXPECT_EQ(load_error_with_location(absolute), path("model.onnx").string() +
                                                    ": initializer 'w': external data location '" +
                                                    absolute + "' leaves the model's directory");
}

TEST_F(Io, ExternalDataNameStartingWithDotsStaysInside) {
  // Near miss: "..x.bin" is a file in the model's directory, not its parent.
  write_bytes(path("..x.bin"), std::string(16, '\0'));
  EXPECT_EQ(load_error_with_location("..x.bin"), "no error");
}

// ---- parsing bytes

TEST_F(Io, ParseModelReadsBytes) {
  const onnx::ModelProto m = small_builder().build();
  const fusekit::model parsed = fusekit::parse_model(fusekit::detail::serialize_deterministic(m));
  EXPECT_EQ(parsed.path, "<memory>");
  EXPECT_EQ(fusekit::detail::serialize_deterministic(parsed.proto),
            fusekit::detail::serialize_deterministic(m));
}

TEST_F(Io, ParseModelNamesMemoryInErrors) {
  // Bytes have no file name: "<memory>" stands where the path would be.
  EXPECT_EQ(error_of([] { fusekit::parse_model(""); }), "<memory>: empty file, not an ONNX model");
  onnx::ModelProto m = small_builder().build();
  m.set_ir_version(99);
  EXPECT_EQ(error_of([&] { fusekit::parse_model(m.SerializeAsString()); }),
            "<memory>: ir_version: IR version 99 is not supported (fusekit reads 3 to 14)");
}

}  // namespace
