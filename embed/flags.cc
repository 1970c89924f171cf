// FlagParser: declaration, parsing and help of kiln's command-line flags.
#include "embed/flags.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "embed/runtime.h"

namespace kiln {
namespace {

constexpr size_t kHelpColumn = 26;  // where flag descriptions start
constexpr size_t kWidth = 100;

// Splits "-o,--output" into its names.
std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    out.push_back(names.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Appends `text` word-wrapped to kWidth, continuation lines indented by `indent` (the first
// line continues wherever *out ends, which the caller has padded to that column). A '\n' in
// `text` starts a new line.
void AppendWrapped(const std::string& text, size_t indent, std::string* out) {
  size_t column = indent;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find_first_of(" \n", start);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(start, end - start);
    if (column > indent && column + 1 + word.size() > kWidth) {
      *out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      *out += ' ';
      ++column;
    }
    *out += word;
    column += word.size();
    if (end < text.size() && text[end] == '\n') {
      *out += "\n" + std::string(indent, ' ');
      column = indent;
      while (end + 1 < text.size() && text[end + 1] == '\n') {
        *out += '\n';
        ++end;
      }
    }
    start = end + 1;
  }
  *out += '\n';
}

// "  left" padded to kHelpColumn (or a new line if it is longer), then the wrapped help.
void AppendEntry(const std::string& left, const std::string& help, std::string* out) {
  std::string line = "  " + left;
  *out += line;
  if (line.size() + 2 > kHelpColumn) {
    *out += "\n" + std::string(kHelpColumn, ' ');
  } else {
    *out += std::string(kHelpColumn - line.size(), ' ');
  }
  AppendWrapped(help, kHelpColumn, out);
}

}  // namespace

StatusOr<int64_t> ParseIntFlag(const std::string& v, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
    std::string range = hi >= (int64_t{1} << 40)
                            ? ">= " + std::to_string(lo)
                            : "from " + std::to_string(lo) + " to " + std::to_string(hi);
    return InvalidArgument("wants an integer " + range + ", got '" + v + "'");
  }
  return static_cast<int64_t>(n);
}

FlagParser::FlagParser(std::string program, std::string args, std::string about)
    : program_(std::move(program)), args_(std::move(args)), about_(std::move(about)) {}

void FlagParser::AddCustom(const std::string& names, const std::string& metavar,
                           const std::string& help, const std::string& default_text,
                           bool repeatable, Setter set) {
  Flag f;
  f.names = SplitNames(names);
  f.metavar = metavar;
  f.help = help;
  f.default_text = default_text;
  f.repeatable = repeatable;
  f.set = std::move(set);
  flags_.push_back(std::move(f));
}

void FlagParser::AddBool(const std::string& names, const std::string& help, bool* out) {
  AddCustom(names, "", help, "", false, [out](const std::string&) {
    *out = true;
    return Status::Ok();
  });
}

void FlagParser::AddString(const std::string& names, const std::string& metavar,
                           const std::string& help, std::string* out, std::string default_text) {
  AddCustom(names, metavar, help, default_text.empty() ? *out : default_text, false,
            [out](const std::string& v) {
              *out = v;
              return Status::Ok();
            });
}

void FlagParser::AddChoice(const std::string& names, const std::string& help,
                           const std::vector<std::string>& choices, std::string* out) {
  std::string metavar;
  for (const std::string& c : choices) metavar += (metavar.empty() ? "" : "|") + c;
  AddCustom(names, metavar, help, *out, false, [out, choices, metavar](const std::string& v) {
    for (const std::string& c : choices) {
      if (v == c) {
        *out = v;
        return Status::Ok();
      }
    }
    return InvalidArgument("wants " + metavar + ", got '" + v + "'");
  });
}

void FlagParser::AddSwitch(const std::string& names, const std::string& on,
                           const std::string& off, const std::string& help,
                           const std::string& default_text, std::function<void(bool)> set) {
  AddCustom(names, on + "|" + off, help, default_text, false,
            [on, off, set = std::move(set)](const std::string& v) {
              if (v != on && v != off) {
                return InvalidArgument("wants " + on + " or " + off + ", got '" + v + "'");
              }
              set(v == on);
              return Status::Ok();
            });
}

void FlagParser::AddList(const std::string& names, const std::string& metavar,
                         const std::string& help, std::vector<std::string>* out) {
  AddCustom(names, metavar, help, "", true, [out](const std::string& v) {
    out->push_back(v);
    return Status::Ok();
  });
}

void FlagParser::AddSizeMap(const std::string& names, const std::string& help,
                            std::map<std::string, int64_t>* out) {
  AddCustom(names, "NAME=VALUE", help, "", true, [out](const std::string& v) -> Status {
    size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
      return InvalidArgument("wants NAME=VALUE, got '" + v + "'");
    }
    std::string name = v.substr(0, eq), value = v.substr(eq + 1);
    if (value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument(v + ": '" + value + "' is not a non-negative integer");
    }
    if (!out->emplace(name, std::stoll(value)).second) {
      return InvalidArgument(v + ": '" + name + "' is given twice");
    }
    return Status::Ok();
  });
}

void FlagParser::AddPositional(const std::string& metavar, const std::string& help,
                               std::string* out, bool required) {
  positionals_.push_back({metavar, help, out, nullptr, required});
}

void FlagParser::AddRest(const std::string& metavar, const std::string& help,
                         std::vector<std::string>* out) {
  positionals_.push_back({metavar, help, nullptr, out, false});
}

FlagParser::Flag* FlagParser::Find(std::string_view name) {
  for (Flag& f : flags_) {
    for (const std::string& n : f.names) {
      if (n == name) return &f;
    }
  }
  return nullptr;
}

// Parses the flag at argv[*i] (and its value, advancing *i past a separate one); the usage
// error if any.
std::optional<std::string> FlagParser::ParseFlag(int argc, const char* const* argv, int* i) {
  std::string arg = argv[*i];
  size_t eq = arg.find('=');
  std::string name = arg.substr(0, eq);
  Flag* f = Find(name);
  if (f == nullptr) return "unknown flag " + name;
  if (f->seen && !f->repeatable) return name + " is given more than once";
  f->seen = true;
  std::string value;
  if (f->metavar.empty()) {
    if (eq != std::string::npos) return name + " takes no value";
  } else if (eq != std::string::npos) {
    value = arg.substr(eq + 1);
  } else if (*i + 1 < argc) {
    value = argv[++*i];
  } else {
    return name + " needs a value (" + name + " " + f->metavar + ")";
  }
  Status s = f->set(value);
  if (!s.ok()) return name + ": " + s.message();
  return std::nullopt;
}

std::optional<std::string> FlagParser::AssignPositionals(const std::vector<std::string>& args) {
  size_t k = 0;
  for (Positional& p : positionals_) {
    if (p.rest != nullptr) {
      while (k < args.size()) p.rest->push_back(args[k++]);
    } else if (k < args.size()) {
      *p.one = args[k++];
    } else if (p.required) {
      return "missing " + p.metavar;
    }
  }
  if (k < args.size()) return "unexpected argument '" + args[k] + "'";
  return std::nullopt;
}

int FlagParser::UsageError(const std::string& message, std::FILE* err) const {
  std::fprintf(err, "%s: %s\n%s", program_.c_str(), message.c_str(), Usage().c_str());
  return 2;
}

std::optional<int> FlagParser::Parse(int argc, const char* const* argv, std::FILE* out,
                                     std::FILE* err) {
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(Help().c_str(), out);
      return 0;
    }
  }
  std::vector<std::string> positional;
  bool flags_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (!flags_done && a == "--") {
      flags_done = true;
    } else if (!flags_done && a.size() > 1 && a[0] == '-') {
      if (std::optional<std::string> error = ParseFlag(argc, argv, &i)) {
        return UsageError(*error, err);
      }
    } else {
      positional.push_back(a);
    }
  }
  if (std::optional<std::string> error = AssignPositionals(positional)) {
    return UsageError(*error, err);
  }
  return std::nullopt;
}

std::string FlagParser::Usage() const {
  return "usage: " + program_ + " " + args_ + "\n('" + program_ +
         " --help' describes every flag)\n";
}

std::string FlagParser::Help() const {
  std::string out = "usage: " + program_ + " " + args_ + "\n\n";
  AppendWrapped(about_, 0, &out);
  if (!positionals_.empty()) out += "\narguments:\n";
  for (const Positional& p : positionals_) {
    AppendEntry(p.metavar, p.help + (p.required ? "" : " (optional)"), &out);
  }
  out += "\nflags:\n";
  for (const Flag& f : flags_) {
    std::string left;
    for (const std::string& n : f.names) left += (left.empty() ? "" : ", ") + n;
    if (!f.metavar.empty()) left += " " + f.metavar;
    std::string help = f.help;
    if (f.repeatable) help += " (repeatable)";
    if (!f.default_text.empty()) help += " (default: " + f.default_text + ")";
    AppendEntry(left, help, &out);
  }
  AppendEntry("-h, --help", "print this help and exit", &out);
  return out;
}

void AddPluginFlag(FlagParser& flags, RuntimeOptions* options) {
  flags.AddList("--plugin", "PATH",
                "load a vendor runtime plugin, a shared library exporting kiln_plugin_register "
                "(also: KILN_PLUGINS=PATH[:PATH...])",
                &options->plugins);
}

namespace {

// A real number in [0, hi] (strtod's syntax); the error names the flag.
StatusOr<double> ParseRealFlag(const char* flag, const std::string& v, double hi) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= 0 && x <= hi)) {
    char range[32];
    std::snprintf(range, sizeof(range), "%g", hi);
    return InvalidArgument(std::string(flag) + " " + v + ": not a number in [0, " + range + "]");
  }
  return x;
}

}  // namespace

void AddRuntimeFlags(FlagParser& flags, RuntimeOptions* options) {
  flags.AddInt("--threads", "N",
               "OpenMP threads for JIT kernels and oneDNN regions; 0: $OMP_NUM_THREADS, else "
               "every core",
               0, RuntimeOptions::kMaxThreads, &options->num_threads);
  flags.AddString("--jit-cache", "DIR|off",
                  "keep compiled kernels in DIR (made if missing; shared by processes, least "
                  "recently used evicted beyond 1 GiB), so a later process loads them instead "
                  "of compiling; off: compile every kernel",
                  &options->jit_cache, "$XDG_CACHE_HOME/kiln, else ~/.cache/kiln");
  flags.AddBool("--require-vendor",
                "fail to load when a vendor declines an external region or is not registered, "
                "instead of running the region's fallback (kiln's JIT) with a notice",
                &options->require_vendor);
  flags.AddBool("--ignore-tuned-fallback",
                "create the vendor runtime of regions that `kiln compile --tune` measured slower "
                "than their fallback (which otherwise run the fallback), e.g. for A/B",
                &options->ignore_tuned_fallback);
  flags.AddSwitch("--jit-tiering", "on", "off",
                  "on: a kernel's first call compiles it quickly (cheaper, slower code) and the "
                  "optimized code is compiled in the background once it is hot; off: optimize "
                  "at once",
                  "on", [options](bool on) { options->dispatch.tiering = on; });
  flags.AddInt("--jit-startup-threads", "N",
               "threads that compile, as the process starts, the kernels its first call needs "
               "(kiln run; warm-up); 0: each kernel compiles on its first call",
               0, 64, &options->dispatch.startup_compile_threads, "one per core, at most 4");
  flags.AddSwitch("--jit-bucketing", "pow2", "exact",
                  "pow2: shapes whose varying dims are not powers of two share their "
                  "power-of-two bucket's specialized kernels (compiled once per kernel); exact: "
                  "every hot shape gets kernels of its own",
                  "pow2", [options](bool pow2) {
                    options->dispatch.bucketing =
                        pow2 ? jit::Bucketing::kPowerOfTwo : jit::Bucketing::kExact;
                  });
  flags.AddCustom(
      "--jit-payback", "K",
      "specialize a hot shape's kernel only once the kernel's run time on code that is not "
      "specialized reaches K x the compile's expected CPU time (which it then spends); 0: "
      "specialize every hot shape",
      "0", false, [options](const std::string& v) -> Status {
        ASSIGN_OR_RETURN(options->dispatch.payback, ParseRealFlag("--jit-payback", v, 1e6));
        return Status::Ok();
      });
  flags.AddCustom(
      "--jit-min-share", "S",
      "specialize a hot shape's kernel only if the kernel takes at least this share (0..1) of "
      "the run time of all kernels; 0: any kernel",
      "0.02", false, [options](const std::string& v) -> Status {
        ASSIGN_OR_RETURN(options->dispatch.min_share, ParseRealFlag("--jit-min-share", v, 1));
        return Status::Ok();
      });
  AddPluginFlag(flags, options);
}

}  // namespace kiln
