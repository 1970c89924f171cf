// Command-line flags of kiln's programs (the kiln CLI, kiln_serve): one parser, one dialect.
#ifndef KILN_EMBED_FLAGS_H_
#define KILN_EMBED_FLAGS_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kiln {

struct RuntimeOptions;

/// The decimal integer `value` if it lies in [lo, hi]; else InvalidArgument naming the range.
StatusOr<int64_t> ParseIntFlag(const std::string& value, int64_t lo, int64_t hi);

/// A program's flags and positional arguments, declared once with their help and parsed in one
/// dialect: `--flag=value` and `--flag value`; `-h` / `--help` anywhere before `--` prints the
/// help to stdout; `--` ends the flags. An unknown flag, a missing or malformed value, a
/// non-repeatable flag given twice, a missing or extra positional argument are usage errors
/// whose message names the flag or the argument.
///
/// Every Add* takes a pointer the parser writes to; it must outlive Parse. Its value before
/// Parse is the default, shown in the help unless `default_text` says otherwise ("" shows
/// nothing for an empty string). Not thread-safe; build and parse on one thread.
class FlagParser {
 public:
  /// `program` leads every message ("kiln bench"); `args` follows it on the usage line
  /// ("FILE.kiln [flags]"); `about` is the paragraph under the usage line.
  FlagParser(std::string program, std::string args, std::string about);

  /// Parses one value and stores it; a non-ok status is a usage error reported as
  /// "FLAG: message". Called once per occurrence.
  using Setter = std::function<Status(const std::string& value)>;

  /// A flag taking no value (`--json`); sets *out to true. `names` is "--long" or "-s,--long".
  void AddBool(const std::string& names, const std::string& help, bool* out);
  void AddString(const std::string& names, const std::string& metavar, const std::string& help,
                 std::string* out, std::string default_text = "");
  /// An integer in [lo, hi] (which must fit `Int`); the error names the range.
  template <typename Int>
  void AddInt(const std::string& names, const std::string& metavar, const std::string& help,
              int64_t lo, int64_t hi, Int* out, std::string default_text = "") {
    AddCustom(names, metavar, help, default_text.empty() ? std::to_string(*out) : default_text,
              false, [out, lo, hi](const std::string& v) -> Status {
                ASSIGN_OR_RETURN(int64_t n, ParseIntFlag(v, lo, hi));
                *out = static_cast<Int>(n);
                return Status::Ok();
              });
  }
  /// One of `choices` (the help lists them).
  void AddChoice(const std::string& names, const std::string& help,
                 const std::vector<std::string>& choices, std::string* out);
  /// One of two words: calls set(value == on) (the help shows `on|off`, default `default_text`).
  void AddSwitch(const std::string& names, const std::string& on, const std::string& off,
                 const std::string& help, const std::string& default_text,
                 std::function<void(bool)> set);
  /// Repeatable: each occurrence appends its value.
  void AddList(const std::string& names, const std::string& metavar, const std::string& help,
               std::vector<std::string>* out);
  /// Repeatable NAME=VALUE with VALUE a non-negative integer (`--dim batch=1`); a NAME given
  /// twice is an error.
  void AddSizeMap(const std::string& names, const std::string& help,
                  std::map<std::string, int64_t>* out);
  /// The general form; `repeatable` flags may occur any number of times.
  void AddCustom(const std::string& names, const std::string& metavar, const std::string& help,
                 const std::string& default_text, bool repeatable, Setter set);

  /// The next positional argument (shown in the usage line as `metavar`).
  void AddPositional(const std::string& metavar, const std::string& help, std::string* out,
                     bool required);
  /// Every positional argument after those declared with AddPositional.
  void AddRest(const std::string& metavar, const std::string& help, std::vector<std::string>* out);

  /// Parses argv[1..argc). std::nullopt: go on. Otherwise the process exit code to return at
  /// once: 0 after printing the help to `out`, 2 after printing a usage error (naming the flag
  /// or argument) and the usage line to `err`.
  std::optional<int> Parse(int argc, const char* const* argv, std::FILE* out = stdout,
                           std::FILE* err = stderr);

  /// The full help: usage line, about, positional arguments, flags with defaults.
  std::string Help() const;
  /// "usage: PROGRAM ARGS" and where to find the help.
  std::string Usage() const;

 private:
  struct Flag {
    std::vector<std::string> names;  // "-o", "--output"
    std::string metavar;             // empty: takes no value
    std::string help, default_text;
    bool repeatable = false, seen = false;
    Setter set;
  };
  struct Positional {
    std::string metavar, help;
    std::string* one = nullptr;                // AddPositional
    std::vector<std::string>* rest = nullptr;  // AddRest
    bool required = false;
  };

  Flag* Find(std::string_view name);
  std::optional<std::string> ParseFlag(int argc, const char* const* argv, int* i);
  std::optional<std::string> AssignPositionals(const std::vector<std::string>& args);
  int UsageError(const std::string& message, std::FILE* err) const;

  std::string program_, args_, about_;
  std::vector<Flag> flags_;
  std::vector<Positional> positionals_;
};

/// Adds --threads (RuntimeOptions::num_threads), --jit-cache, --jit-tiering, --jit-bucketing,
/// --jit-min-share and --jit-payback (RuntimeOptions::dispatch), --require-vendor and --plugin
/// (repeatable), writing into *options.
void AddRuntimeFlags(FlagParser& flags, RuntimeOptions* options);
/// Adds --plugin alone (programs that load vendors but run nothing).
void AddPluginFlag(FlagParser& flags, RuntimeOptions* options);

}  // namespace kiln

#endif  // KILN_EMBED_FLAGS_H_
