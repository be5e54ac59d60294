// Step::shared_slots (model/deepseek_v4/step.h): the SWA window and HCA visible slot lists depend
// only on the step metadata and the cache group, so every layer of a group after the first reuses
// the list the first one made (one launch per step instead of one per layer).
#include <gtest/gtest.h>

#include "dsa/model/deepseek_v4/step.h"

using namespace dsa;
using dsa::model::v4::Step;

TEST(DeepseekV4Step, SlotListsAreMadeOncePerGroupAndKind) {
  Step s;
  int made = 0;
  auto make = [&] {
    ++made;
    Tensor t = Tensor::empty({1}, DType::I32);
    t.data<int32_t>()[0] = made;
    return t;
  };
  const Tensor a = s.shared_slots(0, Step::SlotList::SwaWindow, make);
  const Tensor b = s.shared_slots(0, Step::SlotList::SwaWindow, make);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(a.raw(), b.raw());  // the same tensor, not a copy
  const Tensor c = s.shared_slots(2, Step::SlotList::HcaVisible, make);
  const Tensor d = s.shared_slots(0, Step::SlotList::HcaVisible, make);  // same group, other list
  const Tensor e = s.shared_slots(1, Step::SlotList::SwaWindow, make);   // other group
  EXPECT_EQ(made, 4);
  EXPECT_EQ(c.data<int32_t>()[0], 2);
  EXPECT_EQ(d.data<int32_t>()[0], 3);
  EXPECT_EQ(e.data<int32_t>()[0], 4);
  EXPECT_EQ(s.shared_slots(2, Step::SlotList::HcaVisible, make).raw(), c.raw());
  EXPECT_EQ(made, 4);
  // an empty list (HCA before the first entry closes: K = 0) is remembered too
  int empty_made = 0;
  auto none = [&] {
    ++empty_made;
    return Tensor();
  };
  EXPECT_FALSE(s.shared_slots(5, Step::SlotList::HcaVisible, none).defined());
  EXPECT_FALSE(s.shared_slots(5, Step::SlotList::HcaVisible, none).defined());
  EXPECT_EQ(empty_made, 1);
  // a new step starts empty
  Step next;
  EXPECT_NE(next.shared_slots(0, Step::SlotList::SwaWindow, make).raw(), a.raw());
  EXPECT_EQ(made, 5);
}
