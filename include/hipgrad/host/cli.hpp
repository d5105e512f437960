/// @file cli.hpp
/// @brief The examples' command line: `example_<op> [verify init time [sizes...]] [--key=value ...]`.
///
/// Host-only. Positional arguments are verify (0/1), init (0/1/2), time (0: no timing, 1: time the
/// example's default number of runs, n > 1: time n runs, as CK's examples read it), in that order,
/// and any that follow are integer problem sizes; a shorter prefix keeps the defaults of the rest.
/// Options (`--name=value`, or `--name` meaning `--name=true`) may appear anywhere; a repeated
/// option keeps its last value, so a script can append an override. `-h` and `--help` ask for
/// the usage text. Parsing checks the forms and the three flags; each example checks how many
/// sizes it got and reads its options with the typed getters.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hipgrad/core/status.hpp"
#include "hipgrad/host/fill.hpp"

namespace hipgrad::host {

namespace detail {

/// Base-10 integer with an optional sign and nothing else (no spaces, no "1e3", no "0x10").
inline bool parse_int64(const std::string& text, std::int64_t* value) {
  const std::size_t digits_begin = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  if (digits_begin == text.size()) return false;
  for (std::size_t i = digits_begin; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  errno = 0;
  const long long parsed = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *value = static_cast<std::int64_t>(parsed);
  return true;
}

/// A finite decimal or scientific number covering the whole text.
inline bool parse_double(const std::string& text, double* value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const double parsed = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(parsed)) return false;
  *value = parsed;
  return true;
}

inline bool parse_bool(const std::string& text, bool* value) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") {
    *value = true;
    return true;
  }
  if (text == "0" || text == "false" || text == "no" || text == "off") {
    *value = false;
    return true;
  }
  return false;
}

inline bool is_option_name(const std::string& name) {
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace detail

struct ExampleArgs {
  bool verify = true;
  InitMethod init = InitMethod::kIntegers;
  bool time = false;
  std::int64_t time_runs = 0;  ///< the time argument's count where it is more than 1
  bool help = false;           ///< -h or --help was given: print example_usage() and exit
  std::vector<std::int64_t> sizes;
  std::map<std::string, std::string> options;

  bool has_option(const std::string& key) const { return options.count(key) != 0; }

  /// The timed runs: --repeats where given, else the time argument's count where it is more than
  /// 1, else `default_runs`.
  std::int64_t timed_runs(std::int64_t default_runs) const {
    if (has_option("repeats")) return get_int("repeats", default_runs);
    return time_runs > 1 ? time_runs : default_runs;
  }

  /// The typed getters return the option's value, or `default_value` when it is absent. A value
  /// that does not parse also yields the default and is recorded: option_status() reports the
  /// first one, so an example checks once after reading all of its options.
  std::string get_string(const std::string& key, const std::string& default_value) const {
    const auto it = options.find(key);
    return it == options.end() ? default_value : it->second;
  }
  std::int64_t get_int(const std::string& key, std::int64_t default_value) const {
    std::int64_t value = default_value;
    return read(key, "an integer", &value, detail::parse_int64) ? value : default_value;
  }
  double get_double(const std::string& key, double default_value) const {
    double value = default_value;
    return read(key, "a finite number", &value, detail::parse_double) ? value : default_value;
  }
  bool get_bool(const std::string& key, bool default_value) const {
    bool value = default_value;
    return read(key, "a boolean (1/0, true/false, yes/no, on/off)", &value, detail::parse_bool) ? value : default_value;
  }

  /// ok, or invalid_argument naming the first option value that a getter could not read.
  Status option_status() const {
    return option_error_.empty() ? Status::ok() : Status::invalid_argument(option_error_);
  }

  /// invalid_argument naming the first option that is not in `known` (a misspelt option would
  /// otherwise be ignored silently).
  /// --dry-run: check the command line, print what it selects and exit, touching no GPU.
  bool dry_run() const { return get_bool("dry-run", false); }

  /// invalid_argument naming the first option that is neither in `known` nor --dry-run.
  Status reject_unknown_options(const std::vector<std::string>& known) const {
    for (const auto& option : options) {
      bool found = option.first == "dry-run";
      for (const std::string& k : known) found = found || k == option.first;
      if (found) continue;
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "--" : ", --") + k;
      return Status::invalid_argument("unknown option --" + option.first +
                                      (list.empty() ? " (this example takes none)" : " (known: " + list + ")"));
    }
    return Status::ok();
  }

 private:
  template <typename T, typename Parse>
  bool read(const std::string& key, const char* expected, T* value, Parse parse) const {
    const auto it = options.find(key);
    if (it == options.end()) return false;
    if (parse(it->second, value)) return true;
    if (option_error_.empty()) option_error_ = "bad option --" + key + "=" + it->second + ": expected " + expected;
    return false;
  }

  // A message rather than a Status: nvcc warns on assigning to a [[nodiscard]] class.
  mutable std::string option_error_;
};

namespace detail {

/// Stores positional argument number `position` (0-based) of `text` into *args.
inline Status set_positional(int position, const std::string& text, ExampleArgs* args) {
  static const char* const kNames[] = {"verify", "init", "time"};
  std::int64_t value = 0;
  if (!parse_int64(text, &value)) {
    const std::string what = position < 3 ? kNames[position] : "size " + std::to_string(position - 2);
    return Status::invalid_argument("bad argument '" + text + "': " + what + " must be an integer");
  }
  if (position >= 3) {
    args->sizes.push_back(value);
    return Status::ok();
  }
  if (position == 2) {  // 0, 1 or a count of runs
    if (value < 0 || value > 1000000)
      return Status::invalid_argument("bad argument '" + text +
                                      "': time must be 0, 1 or a count of runs up to 1000000");
    args->time = value >= 1;
    args->time_runs = value > 1 ? value : 0;
    return Status::ok();
  }
  const std::int64_t max = position == 1 ? 2 : 1;
  if (value < 0 || value > max) {
    return Status::invalid_argument("bad argument '" + text + "': " + kNames[position] + " must be " +
                                    (max == 2 ? "0, 1 or 2" : "0 or 1"));
  }
  if (position == 0) args->verify = value == 1;
  if (position == 1) args->init = static_cast<InitMethod>(value);
  return Status::ok();
}

/// Handles an argument that begins with '-': an option, a help request or a negative number.
inline Status set_dashed(const std::string& text, int* position, ExampleArgs* args) {
  if (text == "-h" || text == "--help") {
    args->help = true;
    return Status::ok();
  }
  if (text.size() > 1 && text[1] >= '0' && text[1] <= '9') return set_positional((*position)++, text, args);
  if (text.size() <= 2 || text[1] != '-') {
    return Status::invalid_argument("bad argument '" + text + "': options are written --name=value");
  }
  const std::size_t equals = text.find('=');
  const std::string name = text.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
  if (!is_option_name(name)) {
    return Status::invalid_argument(
        "bad argument '" + text + "': an option name is letters, digits, '-' and '_', starting with a letter or digit");
  }
  args->options[name] = equals == std::string::npos ? "true" : text.substr(equals + 1);
  return Status::ok();
}

}  // namespace detail

/// Parses argv[1..argc). On success *args holds the result; on failure it is left unchanged and
/// the invalid_argument Status names the offending argument.
inline Status parse_example_args(int argc, const char* const* argv, ExampleArgs* args,
                                 const ExampleArgs& defaults = ExampleArgs{}) {
  if (args == nullptr) return Status::invalid_argument("parse_example_args: args is null");
  ExampleArgs parsed = defaults;
  int position = 0;
  for (int i = 1; i < argc; ++i) {
    if (argv == nullptr || argv[i] == nullptr)
      return Status::invalid_argument("argument " + std::to_string(i) + " is null");
    const std::string text = argv[i];
    if (text.empty()) return Status::invalid_argument("argument " + std::to_string(i) + " is empty");
    HIPGRAD_RETURN_IF_ERROR(text[0] == '-' ? detail::set_dashed(text, &position, &parsed)
                                           : detail::set_positional(position++, text, &parsed));
  }
  *args = std::move(parsed);
  return Status::ok();
}

/// The --help text. `sizes_help` describes the example's sizes (e.g. "rows cols (default 4096
/// 8192)"); null or empty leaves that line out. `times_by_default`: the example times when no time
/// argument is given.
inline std::string example_usage(const char* program, const char* sizes_help, bool times_by_default = false) {
  std::string usage = std::string("usage: ") + (program ? program : "example") +
                      " [verify init time [sizes...]] [--key=value ...]\n"
                      "  verify  1: compare with the CPU reference (default), 0: skip\n"
                      "  init    1: integers in [-5, 5] (default), 2: decimals in [-1, 1), 0: leave memory as is\n"
                      "  time    0: skip" +
                      (times_by_default ? "" : " (default)") +
                      ", 1: report the median time of the default number of timed\n"
                      "          runs" +
                      (times_by_default ? " (default)" : "") +
                      ", n > 1: of n timed runs (--repeats, where given, sets the count)\n";
  if (sizes_help != nullptr && sizes_help[0] != '\0') usage += std::string("  sizes   ") + sizes_help + "\n";
  usage +=
      "  --key=value  options of this example; -h, --help: this text\n"
      "  --dry-run    check the command line, print what it selects, and exit (no GPU needed)\n";
  return usage;
}

}  // namespace hipgrad::host
