// The network kinds' table and the one function that chooses, per peer, which kind carries its
// data: the reasons status shows, and the refusal when --transport forces a kind a peer lacks.
#include <gtest/gtest.h>

#include <set>

#include "common/errors.h"
#include "daemon/network_kinds/network_kind.h"
#include "wire/enum_text.h"

namespace symmesh {
namespace {

// This node's ends: verbs open on "rxe0 port 1" (or absent, saying why), tcp open.
std::vector<LocalEnd> mine(const std::string& verbs_absent = "") {
  std::vector<LocalEnd> ends;
  for (const NetworkKind* kind : network_kinds()) {
    LocalEnd& end = ends.emplace_back();
    end.kind = kind;
    if (kind->name() == "verbs" && !verbs_absent.empty()) {
      end.absent = verbs_absent;
      continue;
    }
    end.open = true;
    end.described = kind->name() == "verbs" ? "rxe0 port 1" : "";
  }
  return ends;
}

// Node 1's view entry: tcp, and verbs offered or absent (saying why).
wire::NodeInfo peer(const std::string& verbs_absent = "") {
  wire::NodeInfo info;
  info.set_node_rank(1);
  wire::TransportAddress& verbs = *info.add_transport();
  verbs.set_kind("verbs");
  if (verbs_absent.empty()) {
    verbs.set_address("qp");
  } else {
    verbs.set_absent(verbs_absent);
  }
  wire::TransportAddress& tcp = *info.add_transport();
  tcp.set_kind("tcp");
  tcp.set_address("endpoint");
  return info;
}

size_t index_of(std::string_view name) {
  for (size_t k = 0; k < network_kinds().size(); ++k) {
    if (network_kinds()[k]->name() == name) return k;
  }
  ADD_FAILURE() << name << " is not a kind";
  return 0;
}

TEST(NetworkKinds, EachHasAWordOfTransportChoiceAndTheFallbackComesLast) {
  std::set<std::string_view> names;
  for (const NetworkKind* kind : network_kinds()) {
    EXPECT_TRUE(names.insert(kind->name()).second) << kind->name() << " is listed twice";
    EXPECT_NO_THROW(wire::parse_enum<wire::TransportChoice>(std::string(kind->name()), "kind"));
    EXPECT_EQ(kind->fallback(), kind == network_kinds().back()) << kind->name();
  }
}

TEST(NetworkKinds, AutoTakesTheFirstKindBothEndsHave) {
  const PeerChoice choice = choose_transport(mine(), peer(), "");
  EXPECT_EQ(choice.kind, index_of("verbs"));
  EXPECT_EQ(choice.reason, "verbs: rxe0 port 1, both ends have it");
}

TEST(NetworkKinds, APeerWithoutAKindFallsBackNamingWhyItHasNone) {
  const PeerChoice choice = choose_transport(mine(), peer("no RDMA device"), "");
  EXPECT_EQ(choice.kind, index_of("tcp"));
  EXPECT_EQ(choice.reason, "tcp: verbs: node 1 has none (no RDMA device)");
}

TEST(NetworkKinds, ThisNodeWithoutAKindFallsBackNamingWhy) {
  const PeerChoice choice = choose_transport(mine("this build has none"), peer(), "");
  EXPECT_EQ(choice.kind, index_of("tcp"));
  EXPECT_EQ(choice.reason, "tcp: verbs: this build has none");
}

TEST(NetworkKinds, APeerWhoseHelloOmitsAKindHasNoneOfIt) {
  wire::NodeInfo info;
  info.set_node_rank(1);
  wire::TransportAddress& unknown = *info.add_transport();
  unknown.set_kind("carrier-pigeon");
  unknown.set_address("loft 7");
  wire::TransportAddress& tcp = *info.add_transport();
  tcp.set_kind("tcp");
  tcp.set_address("endpoint");
  const PeerChoice choice = choose_transport(mine(), info, "");
  EXPECT_EQ(choice.kind, index_of("tcp"));
  EXPECT_EQ(choice.reason, "tcp: verbs: node 1 has none (its hello does not offer it)");
}

TEST(NetworkKinds, ForcingAKindTakesItOrTheFallbackAlone) {
  EXPECT_EQ(choose_transport(mine(), peer(), "tcp").reason, "tcp: forced by --transport");
  const PeerChoice verbs = choose_transport(mine(), peer(), "verbs");
  EXPECT_EQ(verbs.kind, index_of("verbs"));
  EXPECT_EQ(verbs.reason, "verbs: rxe0 port 1, forced by --transport");
}

TEST(NetworkKinds, ForcingAKindAPeerLacksIsRefusedNamingThePeerAndWhy) {
  try {
    choose_transport(mine(), peer("no RDMA device"), "verbs");
    FAIL() << "a forced kind the peer lacks was taken";
  } catch (const PeerError& e) {
    EXPECT_STREQ(e.what(),
                 "--transport verbs: node 1 cannot use verbs (no RDMA device); every node needs "
                 "it, or use --transport auto");
  }
}

TEST(NetworkKinds, AnAddressThatDoesNotParseIsShownAsSuch) {
  EXPECT_EQ(tcp_kind().address_text("\xff\xff\xff"), "(does not parse)");
  EXPECT_EQ(verbs_kind().address_text("\xff\xff\xff"), "(does not parse)");
}

}  // namespace
}  // namespace symmesh
