// Which backend carries a site's gradients, for every setting.
#include <gtest/gtest.h>

#include <stdexcept>

#include "comm/intra_site.h"

using namespace diloco::comm;

TEST(IntraSiteTest, AutoPicksNcclOnlyOnCudaWithNcclBuilt) {
  EXPECT_EQ(choose_intra_site(IntraSiteSetting::kAuto, true, true), IntraSiteBackend::kNccl);
  EXPECT_EQ(choose_intra_site(IntraSiteSetting::kAuto, true, false), IntraSiteBackend::kMpi);
  EXPECT_EQ(choose_intra_site(IntraSiteSetting::kAuto, false, true), IntraSiteBackend::kMpi);
  EXPECT_EQ(choose_intra_site(IntraSiteSetting::kMpi, true, true), IntraSiteBackend::kMpi);
  EXPECT_EQ(choose_intra_site(IntraSiteSetting::kNccl, true, true), IntraSiteBackend::kNccl);
}

TEST(IntraSiteTest, NcclRefusedWithTheReason) {
  try {
    choose_intra_site(IntraSiteSetting::kNccl, true, false);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no NCCL"), std::string::npos) << e.what();
  }
  try {
    choose_intra_site(IntraSiteSetting::kNccl, false, true);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("run.device"), std::string::npos) << e.what();
  }
}

TEST(IntraSiteTest, BuildReportsNccl) {
#if defined(DILOCO_HAVE_NCCL)
  EXPECT_TRUE(nccl_built());
#else
  EXPECT_FALSE(nccl_built());
#endif
}
