// The table of environment variables (fixtures/core/env.cpp): what each accepts, unset and empty
// alike, a bad value refused naming the knob, a knob outside the table a programming error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "fixtures/core/env.hpp"

using archbench::check_environment;
using archbench::env_number;
using archbench::env_value;
using archbench::refusal;

TEST(Env, SwitchesTakeZeroOrOne) {
  EXPECT_EQ(refusal("ARCHBENCH_ENERGY", "1"), "");
  EXPECT_EQ(refusal("ARCHBENCH_ENERGY", "0"), "");
  EXPECT_EQ(refusal("ARCHBENCH_ENERGY", "yes"), "ARCHBENCH_ENERGY must be 0 or 1 (1: on), not 'yes'");
  EXPECT_EQ(refusal("ARCHBENCH_TOPDOWN", "7", "--topdown"), "--topdown must be 0, 1, 2 or 3, not '7'");
}

TEST(Env, NumbersAreRangeChecked) {
  for (const char* bad : {"abc", "3", "18", "0", "-2", "-99999999999999999999", "4.0", " 4", ""})
    EXPECT_NE(refusal("ARCHBENCH_CHAINS", bad), "") << bad;
  EXPECT_EQ(refusal("ARCHBENCH_CHAINS", "16"), "");
  for (const char* bad : {"0", "nan", "inf", "1e400", "0x1p0", "17"}) EXPECT_NE(refusal("ARCHBENCH_WAVES", bad), "") << bad;
  EXPECT_EQ(refusal("ARCHBENCH_WAVES", "0.5"), "");
}

TEST(Env, UnsetAndEmptyAreAlikeAndABadValueThrows) {
  setenv("ARCHBENCH_CHAINS", "", 1);
  EXPECT_EQ(env_value("ARCHBENCH_CHAINS"), nullptr);
  EXPECT_EQ(check_environment(), "");
  setenv("ARCHBENCH_CHAINS", "8", 1);
  EXPECT_EQ(env_number("ARCHBENCH_CHAINS"), 8.0);
  setenv("ARCHBENCH_CHAINS", "abc", 1);
  EXPECT_EQ(check_environment(), "ARCHBENCH_CHAINS must be an even whole number from 2 to 16, not 'abc'");
  EXPECT_THROW(env_number("ARCHBENCH_CHAINS"), std::invalid_argument);
  unsetenv("ARCHBENCH_CHAINS");
}

TEST(Env, AKnobOutsideTheTableIsAProgrammingError) {
  EXPECT_THROW(env_value("ARCHBENCH_NO_SUCH_KNOB"), std::logic_error);
}
