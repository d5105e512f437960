/// @file test_host_cli.cpp
/// @brief host::parse_example_args and the typed option getters: defaults, full forms, and an
///        error naming the argument for every malformed one.

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "hipgrad/host/cli.hpp"

namespace {

using hipgrad::Status;
using hipgrad::StatusCode;
using hipgrad::host::example_usage;
using hipgrad::host::ExampleArgs;
using hipgrad::host::InitMethod;
using hipgrad::host::parse_example_args;
using Sizes = std::vector<std::int64_t>;

/// Parses {"example", args...}.
Status parse(std::initializer_list<const char*> args, ExampleArgs* out) {
  std::vector<const char*> argv = {"example"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_example_args(static_cast<int>(argv.size()), argv.data(), out);
}

/// The message of a parse that must fail with invalid_argument.
std::string parse_error(std::initializer_list<const char*> args) {
  ExampleArgs out;
  const Status s = parse(args, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "accepted: " << s.to_string();
  return s.message();
}

TEST(HostCli, NoArgumentsGiveTheDefaults) {
  ExampleArgs a;
  ASSERT_TRUE(parse({}, &a).is_ok());
  EXPECT_TRUE(a.verify);
  EXPECT_EQ(a.init, InitMethod::kIntegers);
  EXPECT_FALSE(a.time);
  EXPECT_FALSE(a.help);
  EXPECT_TRUE(a.sizes.empty());
  EXPECT_TRUE(a.options.empty());
}

TEST(HostCli, FullForm) {
  ExampleArgs a;
  const Status s = parse({"0", "2", "1", "4096", "8192", "--dtype=bf16", "7", "--iters=12", "--tag="}, &a);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_FALSE(a.verify);
  EXPECT_EQ(a.init, InitMethod::kDecimals);
  EXPECT_TRUE(a.time);
  EXPECT_EQ(a.sizes, (Sizes{4096, 8192, 7}));  // options may sit between sizes
  EXPECT_EQ(a.options.size(), 3u);
  EXPECT_EQ(a.options.at("dtype"), "bf16");
  EXPECT_EQ(a.options.at("tag"), "");
}

TEST(HostCli, ConvStyleSizeListAndNegativeNumbers) {
  // NDim G N K C Y X Hi Wi strides dilations left pads right pads
  ExampleArgs a;
  ASSERT_TRUE(parse({"1",  "1",  "0", "2", "1", "128", "256", "192", "3", "3",
                     "71", "71", "2", "2", "1", "1",   "1",   "1",   "1", "1"},
                    &a)
                  .is_ok());
  EXPECT_EQ(a.sizes.size(), 17u);
  EXPECT_EQ(a.sizes.front(), 2);
  ASSERT_TRUE(parse({"1", "1", "0", "-3", "+4"}, &a).is_ok());  // each example judges its own sizes
  EXPECT_EQ(a.sizes, (Sizes{-3, 4}));
}

TEST(HostCli, PrefixOfTheFlagsKeepsTheOtherDefaults) {
  ExampleArgs a;
  ASSERT_TRUE(parse({"0"}, &a).is_ok());
  EXPECT_FALSE(a.verify);
  EXPECT_EQ(a.init, InitMethod::kIntegers);
  ASSERT_TRUE(parse({"1", "0"}, &a).is_ok());
  EXPECT_EQ(a.init, InitMethod::kNone);
  EXPECT_FALSE(a.time);
}

TEST(HostCli, RepeatedOptionKeepsTheLastAndBareOptionMeansTrue) {
  ExampleArgs a;
  ASSERT_TRUE(parse({"--dtype=fp16", "--check", "--dtype=fp32"}, &a).is_ok());
  EXPECT_EQ(a.options.at("dtype"), "fp32");
  EXPECT_EQ(a.options.at("check"), "true");
  EXPECT_TRUE(a.get_bool("check", false));
}

TEST(HostCli, HelpIsNotAnError) {
  ExampleArgs a;
  ASSERT_TRUE(parse({"--help"}, &a).is_ok());
  EXPECT_TRUE(a.help);
  ASSERT_TRUE(parse({"1", "1", "1", "-h"}, &a).is_ok());
  EXPECT_TRUE(a.help);
  EXPECT_TRUE(a.time);
  EXPECT_TRUE(a.options.empty());
}

/// CK's examples read the third argument as a count of runs ("run kernel # of times (>1)"):
/// `example_convnd_bwd_data 0 1 5` times 5 runs; 1 times the example's default; --repeats wins.
TEST(HostCli, TimeIsAFlagOrACountOfRuns) {
  ExampleArgs a;
  ASSERT_TRUE(parse({"0", "1", "5"}, &a).is_ok());
  EXPECT_FALSE(a.verify);
  EXPECT_TRUE(a.time);
  EXPECT_EQ(a.timed_runs(20), 5);
  ASSERT_TRUE(parse({"1", "2", "1"}, &a).is_ok());
  EXPECT_TRUE(a.time);
  EXPECT_EQ(a.timed_runs(20), 20);
  ASSERT_TRUE(parse({"1", "2", "0"}, &a).is_ok());
  EXPECT_FALSE(a.time);
  ASSERT_TRUE(parse({"1", "1", "5", "--repeats=7"}, &a).is_ok());
  EXPECT_EQ(a.timed_runs(20), 7);
}

/// An example may time by default (the GroupNorm examples, as CK's client examples do): its
/// defaults hold where no argument overrides them, and a time argument of 0 still turns timing off.
TEST(HostCli, AnExamplesDefaultsHoldUntilAnArgumentOverridesThem) {
  ExampleArgs timing;
  timing.time = true;
  const char* none[] = {"example"};
  ExampleArgs a;
  ASSERT_TRUE(parse_example_args(1, none, &a, timing).is_ok());
  EXPECT_TRUE(a.time);
  EXPECT_TRUE(a.verify);
  EXPECT_EQ(a.timed_runs(20), 20);
  const char* off[] = {"example", "1", "1", "0"};
  ASSERT_TRUE(parse_example_args(4, off, &a, timing).is_ok());
  EXPECT_FALSE(a.time);
  EXPECT_NE(example_usage("e", nullptr, true).find("runs (default)"), std::string::npos);
  EXPECT_NE(example_usage("e", nullptr).find("0: skip (default)"), std::string::npos);
}

TEST(HostCli, FlagsOutOfRange) {
  EXPECT_EQ(parse_error({"2"}), "bad argument '2': verify must be 0 or 1");
  EXPECT_EQ(parse_error({"1", "3"}), "bad argument '3': init must be 0, 1 or 2");
  EXPECT_EQ(parse_error({"1", "1", "-2"}), "bad argument '-2': time must be 0, 1 or a count of runs up to 1000000");
  EXPECT_EQ(parse_error({"1", "1", "1000001"}),
            "bad argument '1000001': time must be 0, 1 or a count of runs up to 1000000");
  EXPECT_EQ(parse_error({"-1"}), "bad argument '-1': verify must be 0 or 1");
}

TEST(HostCli, NonNumbers) {
  EXPECT_EQ(parse_error({"yes"}), "bad argument 'yes': verify must be an integer");
  EXPECT_EQ(parse_error({"1", "1.5"}), "bad argument '1.5': init must be an integer");
  EXPECT_EQ(parse_error({"1", "1", "0", "64", "12x"}), "bad argument '12x': size 2 must be an integer");
  EXPECT_EQ(parse_error({"1", "1", "0", "1e3"}), "bad argument '1e3': size 1 must be an integer");
  EXPECT_EQ(parse_error({"1", "1", "0", "0x10"}), "bad argument '0x10': size 1 must be an integer");
  EXPECT_EQ(parse_error({"1", "1", "0", " 5"}), "bad argument ' 5': size 1 must be an integer");
  EXPECT_EQ(parse_error({"1", "1", "0", "99999999999999999999"}),
            "bad argument '99999999999999999999': size 1 must be an integer");
  EXPECT_EQ(parse_error({"1", "1", "0", "+"}), "bad argument '+': size 1 must be an integer");
}

TEST(HostCli, UnknownForms) {
  EXPECT_NE(parse_error({"--"}).find("'--'"), std::string::npos);
  EXPECT_NE(parse_error({"-x"}).find("'-x'"), std::string::npos);
  EXPECT_NE(parse_error({"-"}).find("'-'"), std::string::npos);
  EXPECT_NE(parse_error({"--=3"}).find("'--=3'"), std::string::npos);
  EXPECT_NE(parse_error({"---dtype=fp16"}).find("'---dtype=fp16'"), std::string::npos);
  EXPECT_NE(parse_error({"--dt ype=fp16"}).find("option name"), std::string::npos);
  EXPECT_EQ(parse_error({"1", ""}), "argument 2 is empty");
}

TEST(HostCli, FailedParseLeavesTheOutputUnchanged) {
  ExampleArgs a;
  a.sizes = {42};
  EXPECT_FALSE(parse({"0", "2", "0", "5", "--x=1", "bad"}, &a).is_ok());
  EXPECT_EQ(a.sizes, (Sizes{42}));
  EXPECT_TRUE(a.verify);
  EXPECT_TRUE(a.options.empty());
  EXPECT_FALSE(parse_example_args(1, nullptr, nullptr).is_ok());
}

TEST(HostCliOptions, TypedGettersReadValuesAndDefaults) {
  ExampleArgs a;
  ASSERT_TRUE(parse({"--n=-12", "--scale=2.5e-3", "--on=yes", "--off=0", "--name=group norm"}, &a).is_ok());
  EXPECT_EQ(a.get_int("n", 0), -12);
  EXPECT_EQ(a.get_int("absent", 77), 77);
  EXPECT_DOUBLE_EQ(a.get_double("scale", 0), 2.5e-3);
  EXPECT_DOUBLE_EQ(a.get_double("n", 0), -12.0);
  EXPECT_TRUE(a.get_bool("on", false));
  EXPECT_FALSE(a.get_bool("off", true));
  EXPECT_TRUE(a.get_bool("absent", true));
  EXPECT_EQ(a.get_string("name", ""), "group norm");
  EXPECT_EQ(a.get_string("absent", "fp16"), "fp16");
  EXPECT_TRUE(a.has_option("n"));
  EXPECT_FALSE(a.has_option("absent"));
  EXPECT_TRUE(a.option_status().is_ok());
}

TEST(HostCliOptions, BadValuesGiveTheDefaultAndAreReported) {
  ExampleArgs a;
  ASSERT_TRUE(parse({"--n=12.5", "--scale=abc", "--flag=maybe", "--inf=inf"}, &a).is_ok());
  EXPECT_EQ(a.get_int("n", 3), 3);
  EXPECT_EQ(a.option_status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.option_status().message(), "bad option --n=12.5: expected an integer");
  // Only the first bad value is kept, the later getters still return their defaults.
  EXPECT_EQ(a.get_double("scale", 1.0), 1.0);
  EXPECT_FALSE(a.get_bool("flag", false));
  EXPECT_EQ(a.get_double("inf", 4.0), 4.0);
  EXPECT_EQ(a.option_status().message(), "bad option --n=12.5: expected an integer");

  ExampleArgs b;
  ASSERT_TRUE(parse({"--flag=maybe"}, &b).is_ok());
  EXPECT_TRUE(b.get_bool("flag", true));
  EXPECT_NE(b.option_status().message().find("--flag=maybe: expected a boolean"), std::string::npos);
}

TEST(HostCliOptions, UnknownOptionsCanBeRejected) {
  ExampleArgs a;
  ASSERT_TRUE(parse({"--dtype=fp16", "--dtpye=fp32"}, &a).is_ok());
  const Status s = a.reject_unknown_options({"dtype", "config"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown option --dtpye (known: --dtype, --config)");
  EXPECT_TRUE(a.reject_unknown_options({"dtype", "dtpye"}).is_ok());
  EXPECT_EQ(a.reject_unknown_options({}).message(), "unknown option --dtpye (this example takes none)");
}

TEST(HostCli, UsageNamesEveryArgument) {
  const std::string usage = example_usage("example_groupnorm_bwd", "N C H W G (default 32 320 64 64 32)");
  EXPECT_EQ(usage.rfind("usage: example_groupnorm_bwd [verify init time [sizes...]] [--key=value ...]\n", 0), 0u);
  for (const char* word : {"verify", "init", "time", "integers in [-5, 5]", "decimals in [-1, 1)",
                           "N C H W G (default 32 320 64 64 32)", "--help"}) {
    EXPECT_NE(usage.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(example_usage("e", nullptr).find("sizes   "), std::string::npos);
}

}  // namespace
