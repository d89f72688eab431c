// The cluster file: written and read back, and every kind of bad file
// refused naming the file and the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "plan/measure/cluster_file.h"
#include "plan/measure/cluster_measures.h"
#include "plan/input_error.h"

using namespace diloco::plan;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::string node(int rank, const std::string& extra = "") {
  return "{\"rank\":" + std::to_string(rank) +
         ",\"host\":\"h\",\"device\":\"cpu\",\"memory_bytes\":1e9,\"step_s\":0.05" + extra + "}";
}

std::string link(int a, int b, const std::string& mbps = "100") {
  return "{\"a\":" + std::to_string(a) + ",\"b\":" + std::to_string(b) + ",\"latency_ms\":1,\"bandwidth_mbps\":" + mbps +
         "}";
}

// The message of the InputError reading `text` throws ("" if none).
std::string refusal(const std::string& name, const std::string& text) {
  try {
    read_cluster(write_file(name, text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ClusterFileTest, WrittenAndReadBack) {
  Cluster c;
  c.nodes = {{0, "a", "cpu", 2e9, 0.01, 2.1e8, {0.009, 0.011}, 1.12, {0.21, 0.19}, {0.01, 0.02}},
             {1, "b", "cuda:0", 8e10, 0.002, 0, {}, 0, {}, {}},
             {2, "b", "cuda:1", 8e10, 0.003, 0, {}, 0, {}, {}}};
  c.exchange_codec = "int4";
  c.links.assign(3, std::vector<diloco::comm::LinkEstimate>(3));
  c.links[0][1] = c.links[1][0] = {0.02, 12.5e6};
  c.links[0][2] = c.links[2][0] = {0.03, 2.5e6};
  c.links[1][2] = c.links[2][1] = {0.0001, 0.0};
  const auto path = write_file("cluster_ok.json", cluster_json(c).dump());
  const auto back = read_cluster(path);
  ASSERT_EQ(back.nodes.size(), 3u);
  EXPECT_EQ(back.nodes[1].device, "cuda:0");
  EXPECT_DOUBLE_EQ(back.nodes[2].step_s, 0.003);
  EXPECT_DOUBLE_EQ(back.nodes[0].runtime_bytes, 2.1e8);  // optional: absent stays 0
  EXPECT_DOUBLE_EQ(back.nodes[1].runtime_bytes, 0.0);
  EXPECT_EQ(back.nodes[0].steps, (std::vector<double>{0.009, 0.011}));
  EXPECT_TRUE(back.nodes[1].steps.empty());  // optional too
  EXPECT_DOUBLE_EQ(back.nodes[0].overlap_slowdown, 1.12);
  EXPECT_DOUBLE_EQ(back.nodes[1].overlap_slowdown, 0.0);  // and this
  EXPECT_EQ(back.nodes[0].exchanges, (std::vector<double>{0.21, 0.19}));
  EXPECT_TRUE(back.nodes[1].exchanges.empty());
  EXPECT_EQ(back.exchange_codec, "int4");
  EXPECT_EQ(back.nodes[0].controls, (std::vector<double>{0.01, 0.02}));
  EXPECT_DOUBLE_EQ(back.links[2][0].latency_s, 0.03);
  EXPECT_DOUBLE_EQ(back.links[1][0].bandwidth_bytes_per_s, 12.5e6);
  EXPECT_EQ(bandwidth_matrix(back.links)[1][2], 0.0);
}

TEST(ClusterFileTest, BadFilesNameTheFileAndTheField) {
  const std::string links2 = "\"links\":[" + link(0, 1) + "]";
  EXPECT_NE(refusal("c_notjson.json", "{\"nodes\": [").find("c_notjson.json: not JSON"), std::string::npos);
  EXPECT_NE(refusal("c_nonodes.json", "{\"links\": []}").find("c_nonodes.json: needs a non-empty \"nodes\" array"),
            std::string::npos);
  EXPECT_NE(refusal("c_missing.json", "{\"nodes\":[" + node(0) + ",{\"rank\":1,\"host\":\"h\",\"device\":\"cpu\","
                                      "\"step_s\":1}]," + links2 + "}")
                .find("nodes[1]: missing number \"memory_bytes\""),
            std::string::npos);
  EXPECT_NE(refusal("c_twice.json", "{\"nodes\":[" + node(0) + "," + node(0) + "]," + links2 + "}")
                .find("nodes[1].rank: rank 0 given twice"),
            std::string::npos);
  EXPECT_NE(refusal("c_rank.json", "{\"nodes\":[" + node(0) + "," + node(2) + "]," + links2 + "}")
                .find("nodes[1].rank = 2 is not a rank"),
            std::string::npos);
  EXPECT_NE(refusal("c_negative.json", "{\"nodes\":[" + node(0) + "," + node(1) + "],\"links\":[" + link(0, 1, "-3") +
                                           "]}")
                .find("links[0].bandwidth_mbps must be a number >= 0"),
            std::string::npos);
  EXPECT_NE(refusal("c_pairs.json", "{\"nodes\":[" + node(0) + "," + node(1) + "," + node(2) + "],\"links\":[" +
                                        link(0, 1) + "," + link(1, 2) + "]}")
                .find("2 pairs for 3 ranks"),
            std::string::npos);
  EXPECT_NE(refusal("c_nolinks.json", "{\"nodes\":[" + node(0) + "]}").find("needs a \"links\" array"),
            std::string::npos);
  EXPECT_NE(refusal("c_runtime.json", "{\"nodes\":[" + node(0, ",\"runtime_bytes\":-1") + "],\"links\":[]}")
                .find("c_runtime.json: nodes[0].runtime_bytes must be a number >= 0"),
            std::string::npos);
  EXPECT_NE(refusal("c_steps.json", "{\"nodes\":[" + node(0, ",\"steps\":[0.1,-2]") + "],\"links\":[]}")
                .find("c_steps.json: nodes[0].steps[1] must be a step time > 0"),
            std::string::npos);
  EXPECT_NE(refusal("c_slowdown.json", "{\"nodes\":[" + node(0, ",\"overlap_slowdown\":0") + "],\"links\":[]}")
                .find("c_slowdown.json: nodes[0].overlap_slowdown must be > 0"),
            std::string::npos);
  EXPECT_NE(refusal("c_steps3.json", "{\"nodes\":[" + node(0, ",\"steps\":[\"x\"]") + "],\"links\":[]}")
                .find("nodes[0].steps[0] must be a step time > 0"),
            std::string::npos);
  EXPECT_NE(refusal("c_exch.json", "{\"nodes\":[" + node(0, ",\"exchanges\":[0.2,0]") + "],\"links\":[]}")
                .find("c_exch.json: nodes[0].exchanges[1] must be an exchange time > 0"),
            std::string::npos);
  EXPECT_NE(refusal("c_exch2.json", "{\"nodes\":[" + node(0, ",\"exchanges\":[0.2]") + "],\"links\":[]}")
                .find("c_exch2.json: nodes give \"exchanges\"; the file: missing string \"exchange_codec\""),
            std::string::npos);
  EXPECT_NE(refusal("c_ctl.json", "{\"nodes\":[" + node(0, ",\"controls\":[-1]") + "],\"links\":[]}")
                .find("c_ctl.json: nodes[0].controls[0] must be an all-reduce time > 0"),
            std::string::npos);
  EXPECT_NE(refusal("c_steps2.json", "{\"nodes\":[" + node(0, ",\"steps\":3") + "],\"links\":[]}")
                .find("nodes[0].steps must be an array"),
            std::string::npos);
  EXPECT_NE(refusal("c_step.json", "{\"nodes\":[" + node(0, ",\"step_s\":0") + "],\"links\":[]}").find("step_s"),
            std::string::npos);
}

// The k-th exchange lasted as long as its slowest rank's; the all-reduce
// after it, on the last rank to arrive (the one that waited for no other).
TEST(ClusterFileTest, ExchangeSpreadFromTheLeadersAndControlTimeFromEveryRank) {
  std::vector<ClusterNode> nodes(2);
  nodes[0].exchanges = {0.2, 0.3, 0.5};
  nodes[1].exchanges = {0.3, 0.1};  // the shorter series sets how many
  nodes[0].controls = {0.01, 0.05};
  nodes[1].controls = {0.03, 0.02};
  const auto spread = exchange_spread(nodes);
  ASSERT_EQ(spread.size(), 2u);
  EXPECT_NEAR(spread[0], 0.3 / 0.3, 1e-12);
  EXPECT_NEAR(spread[1], 0.3 / 0.3, 1e-12);
  nodes[1].exchanges = {0.1, 0.5};
  EXPECT_NEAR(exchange_spread(nodes)[0], 0.2 / 0.35, 1e-12);
  EXPECT_NEAR(exchange_spread(nodes)[1], 0.5 / 0.35, 1e-12);
  EXPECT_NEAR(exchange_mean_seconds(nodes), 1.0 / 3.0, 1e-12);  // rank 0's mean: the larger
  EXPECT_NEAR(control_seconds(nodes), (0.01 + 0.02) / 2.0, 1e-12);
  nodes[1].controls.clear();  // a rank without: not measured
  EXPECT_EQ(control_seconds(nodes), 0.0);
  nodes[1].exchanges.clear();  // not a leader: the leaders' exchanges alone
  ASSERT_EQ(exchange_spread(nodes).size(), 3u);
  EXPECT_NEAR(exchange_spread(nodes)[2], 0.5 / (1.0 / 3.0), 1e-12);
  nodes[0].exchanges.clear();
  EXPECT_TRUE(exchange_spread(nodes).empty());
  EXPECT_EQ(exchange_mean_seconds(nodes), 0.0);
}

// Pairs probed one at a time move at their slower end: each site's link is
// its fastest pair, its latency its lowest; and the sites the plan forms
// from those links, with their leaders.
TEST(ClusterFileTest, SiteLinksFromPairsAndThePlannedSites) {
  std::vector<std::vector<diloco::comm::LinkEstimate>> pairs(3, std::vector<diloco::comm::LinkEstimate>(3));
  const auto set = [&](int a, int b, double ms, double mbps) {
    pairs[a][b] = pairs[b][a] = {ms / 1e3, mbps * 1e6 / 8.0};
  };
  set(0, 1, 30.0, 50.0);  // sites at 100, 50 and 10 Mbit/s, latencies 5, 30, 80 ms
  set(0, 2, 80.0, 10.0);
  set(1, 2, 80.0, 10.0);
  const auto links = site_links(pairs);
  EXPECT_DOUBLE_EQ(links[1].up_bytes_per_s, 50e6 / 8.0);
  EXPECT_DOUBLE_EQ(links[2].down_bytes_per_s, 10e6 / 8.0);
  EXPECT_DOUBLE_EQ(links[0].up_bytes_per_s, 50e6 / 8.0);  // the fastest: its second's
  EXPECT_DOUBLE_EQ(links[2].latency_s, 0.08);
  EXPECT_DOUBLE_EQ(links[0].latency_s, 0.03);
  set(0, 1, 0.1, 0.0);  // too fast to measure: unlimited
  EXPECT_DOUBLE_EQ(site_links(pairs)[0].up_bytes_per_s, 0.0);
  // Every pair alike: no link stands out, so the recipe's 3 sites as blocks.
  std::vector<std::vector<diloco::comm::LinkEstimate>> even(6, std::vector<diloco::comm::LinkEstimate>(6, {0.001, 1e7}));
  const auto planned = planned_sites(even, 4.0, 3);
  EXPECT_TRUE(planned.blocks);
  EXPECT_EQ(planned.leaders, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(planned.site_of_rank, (std::vector<int>{0, 0, 1, 1, 2, 2}));
}

// Sites launched apart: the file gives each rank's site, the planner takes
// those sites (not a cut by links, which would find one here) and their
// first ranks as leaders; a file giving some sites only, or sites out of
// rank order, is refused naming the rank.
// Ranks beyond a host's cores share it: the sites all of whose ranks are
// there are marked with that host; a site with a rank elsewhere, or a host
// with a core for each rank, shares none. "cores" is read back, and checked.
TEST(ClusterFileTest, SitesSharingAHostBeyondItsCores) {
  Cluster c;
  const char* hosts[] = {"a", "a", "a", "b", "b", "c"};
  for (int r = 0; r < 6; ++r) c.nodes.push_back({r, hosts[r], "cpu", 1e9, 0.05, 0, {}, 0, {}, {}, -1, r < 3 ? 2 : 4});
  c.links.assign(6, std::vector<diloco::comm::LinkEstimate>(6, {0.001, 1e7}));
  const auto back = read_cluster(write_file("cluster_cores.json", cluster_json(c).dump()));
  EXPECT_EQ(back.nodes[0].cores, 2);
  EXPECT_EQ(back.nodes[5].cores, 4);
  // Sites: {0}, {1}, {2}: host a's 3 ranks on 2 cores; {3, 4} on b's 4 cores; {5}.
  EXPECT_EQ(shared_hosts(back.nodes, {0, 1, 2, 3, 3, 4}, 5), (std::vector<int>{0, 0, 0, -1, -1}));
  // A site with ranks on a and b shares neither whole.
  EXPECT_EQ(shared_hosts(back.nodes, {0, 0, 1, 1, 2, 3}, 4), (std::vector<int>{0, -1, -1, -1}));
  c.nodes[1].cores = 0;  // a node that does not say: its host is not known to be shared
  EXPECT_TRUE(shared_hosts(c.nodes, {0, 1, 2, 3, 3, 4}, 5).empty());
  const std::string links = "[" + link(0, 1) + "]";
  EXPECT_NE(refusal("cores.json", "{\"nodes\":[" + node(0, ",\"cores\":0") + "," + node(1, "") + "],\"links\":" + links + "}")
                .find("nodes[0].cores must be a whole number >= 1"),
            std::string::npos);
}

TEST(ClusterFileTest, SitesLaunchedApartAreTheFilesOwn) {
  Cluster c;
  for (int r = 0; r < 3; ++r) c.nodes.push_back({r, "h", "cpu", 1e9, 0.05, 0, {}, 0, {}, {}, r == 0 ? 0 : 1});
  c.links.assign(3, std::vector<diloco::comm::LinkEstimate>(3, {0.001, 1e7}));
  const auto back = read_cluster(write_file("cluster_apart.json", cluster_json(c).dump()));
  EXPECT_EQ(back.nodes[2].site, 1);
  const auto sites = cluster_sites(back, 4.0, 3);
  EXPECT_TRUE(sites.partition.launched);
  EXPECT_EQ(sites.partition.site_of_rank, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(sites.partition.leaders, (std::vector<int>{0, 1}));
  EXPECT_EQ(sites.sites.size(), 2u);

  const std::string links = "[" + link(0, 1) + "," + link(0, 2) + "," + link(1, 2) + "]";
  const auto with_sites = [&](const std::string& a, const std::string& b, const std::string& c2) {
    return "{\"nodes\":[" + node(0, a) + "," + node(1, b) + "," + node(2, c2) + "],\"links\":" + links + "}";
  };
  EXPECT_NE(refusal("some.json", with_sites(",\"site\":0", ",\"site\":1", "")).find("rank 2 gives no \"site\""),
            std::string::npos);
  EXPECT_NE(refusal("order.json", with_sites(",\"site\":0", ",\"site\":2", ",\"site\":2")).find("site 2 after site 0"),
            std::string::npos);
  EXPECT_NE(refusal("back.json", with_sites(",\"site\":0", ",\"site\":1", ",\"site\":0")).find("rank 2: site 0 after"),
            std::string::npos);
  EXPECT_EQ(refusal("fine.json", with_sites(",\"site\":0", ",\"site\":0", ",\"site\":1")), "");
}
