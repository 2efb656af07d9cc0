// Graphviz output of a model: one node per op with name and kind, producer ->
// consumer edges, simulate-only ops dashed, labels escaped.
#include <gtest/gtest.h>

#include <sstream>

#include "core/io/graphviz.h"
#include "core/io/json_model.h"
#include "core/model/presets.h"
#include "tests/io/io_test_util.h"

namespace remat {
namespace {

TEST(Graphviz, Mlp1IsExact) {
  std::ostringstream out;
  write_model_dot(out, make_preset("mlp:1:4:2"));
  EXPECT_EQ(out.str(),
            "digraph G {\n"
            "label=\"mlp:1:4:2\";\n"
            "rankdir=TB;\n"
            "node [shape=box, fontname=\"Helvetica\"];\n"
            "0[label=\"x\\nInput [2,4]\", shape=ellipse];\n"
            "1[label=\"l1.fc\\nLinear [2,4]\"];\n"
            "2[label=\"l1.relu\\nReLU [2,4]\"];\n"
            "3[label=\"loss\\nMSELoss scalar\", shape=ellipse];\n"
            "0->1 ;\n"
            "1->2 ;\n"
            "2->3 ;\n"
            "}\n");
}

TEST(Graphviz, EscapesNamesAndDashesSimulateOnlyOps) {
  const Model m = parse_json_model(testing::doc(R"(
    {"id":0,"name":"in \"x\"\\","kind":"Input","shape":[4]},
    {"id":1,"name":"conv","kind":"Generic","inputs":[0,0],"shape":[4]},
    {"id":2,"kind":"MSELoss","inputs":[1]})"), "g.json");
  std::ostringstream out;
  write_model_dot(out, m);
  const std::string s = out.str();
  EXPECT_NE(s.find("0[label=\"in \\\"x\\\"\\\\\\nInput [4]\", shape=ellipse];"), std::string::npos) << s;
  EXPECT_NE(s.find("1[label=\"conv\\nGeneric [4]\", style=dashed];"), std::string::npos) << s;
  EXPECT_NE(s.find("0->1 ;\n0->1 ;"), std::string::npos) << s;  // both arguments
}

}  // namespace
}  // namespace remat
