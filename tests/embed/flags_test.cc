// FlagParser: both value spellings, help anywhere, every usage error naming its flag, the help
// text (defaults, wrapping), and the RuntimeOptions flags.
#define BOOST_TEST_MODULE flags_test
#include "embed/flags.h"

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "embed/runtime.h"

namespace kiln {
namespace {

// Everything one program declares, and what parsing printed.
struct Program {
  std::string file, name = "def", format = "npy";
  int64_t iters = 10;
  int threads = 0;
  bool json = false;
  std::vector<std::string> plugins, rest;
  std::map<std::string, int64_t> dims;
  FlagParser flags{"prog", "FILE [flags]", "Does things."};
  std::string out, err;

  Program() {
    flags.AddPositional("FILE", "the input", &file, true);
    flags.AddRest("MORE", "more inputs", &rest);
    flags.AddString("-n,--name", "NAME", "a name", &name);
    flags.AddInt("--iters", "N", "how many", 1, 100, &iters);
    flags.AddInt("--threads", "N", "threads", 0, 8, &threads, "all cores");
    flags.AddBool("--json", "print JSON", &json);
    flags.AddList("--plugin", "PATH", "a plugin", &plugins);
    flags.AddSizeMap("--dim", "a dim", &dims);
    flags.AddChoice("--format", "output format", {"npy", "pb"}, &format);
  }

  // Parses `args` (after the program name); nullopt or the exit code, with the output kept.
  std::optional<int> Parse(std::vector<const char*> args) {
    args.insert(args.begin(), "prog");
    std::FILE* o = std::tmpfile();
    std::FILE* e = std::tmpfile();
    std::optional<int> code = flags.Parse(static_cast<int>(args.size()), args.data(), o, e);
    out = Read(o);
    err = Read(e);
    return code;
  }

  static std::string Read(std::FILE* f) {
    std::string s(static_cast<size_t>(std::ftell(f)), '\0');
    std::rewind(f);
    s.resize(std::fread(s.data(), 1, s.size(), f));
    std::fclose(f);
    return s;
  }
};

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

BOOST_AUTO_TEST_CASE(equals_and_separate_values_mean_the_same) {
  for (bool equals : {true, false}) {
    Program p;
    std::vector<const char*> args =
        equals ? std::vector<const char*>{"f",
                                          "--iters=7",
                                          "-n=x",
                                          "--dim=a=3",
                                          "--plugin=p.so",
                                          "--format=pb",
                                          "--json",
                                          "g"}
               : std::vector<const char*>{"f",     "--iters", "7",        "-n",   "x",
                                          "--dim", "a=3",     "--plugin", "p.so", "--format",
                                          "pb",    "--json",  "g"};
    BOOST_TEST(!p.Parse(args).has_value(), p.err);
    BOOST_TEST(p.file == "f");
    BOOST_TEST(p.rest == std::vector<std::string>{"g"});
    BOOST_TEST(p.iters == 7);
    BOOST_TEST(p.name == "x");
    BOOST_TEST(p.dims.at("a") == 3);
    BOOST_TEST(p.plugins == std::vector<std::string>{"p.so"});
    BOOST_TEST(p.format == "pb");
    BOOST_TEST(p.json);
  }
}

BOOST_AUTO_TEST_CASE(defaults_stay_and_values_may_contain_equals_or_dashes) {
  Program p;
  BOOST_TEST(!p.Parse({"f", "--name", "-x=y", "--plugin", "a=b", "--plugin", "c"}).has_value());
  BOOST_TEST(p.name == "-x=y");
  BOOST_TEST(p.plugins == (std::vector<std::string>{"a=b", "c"}));
  BOOST_TEST(p.iters == 10);
  BOOST_TEST(p.format == "npy");
  BOOST_TEST(!p.json);
  Program q;  // "--" ends the flags: what follows is positional, "-h" included
  BOOST_TEST(!q.Parse({"--", "-f", "-h"}).has_value(), q.err);
  BOOST_TEST(q.file == "-f");
  BOOST_TEST(q.rest == std::vector<std::string>{"-h"});
}

BOOST_AUTO_TEST_CASE(help_anywhere_wins_and_goes_to_out) {
  for (std::vector<const char*> args :
       {std::vector<const char*>{"-h"}, std::vector<const char*>{"f", "--bogus", "--help"},
        std::vector<const char*>{"--iters", "0", "-h"}}) {
    Program p;
    BOOST_TEST(p.Parse(args).value_or(-1) == 0);
    BOOST_TEST(Contains(p.out, "usage: prog FILE [flags]\n\nDoes things.\n"), p.out);
    BOOST_TEST(p.err.empty(), p.err);
  }
}

BOOST_AUTO_TEST_CASE(usage_errors_name_the_flag_and_exit_2) {
  struct Case {
    std::vector<const char*> args;
    const char* message;
  } cases[] = {
      {{"f", "--bogus"}, "prog: unknown flag --bogus\n"},
      {{"f", "--bogus=1"}, "prog: unknown flag --bogus\n"},
      {{"f", "-x"}, "prog: unknown flag -x\n"},
      {{"f", "--iters"}, "prog: --iters needs a value (--iters N)"},
      {{"f", "--iters", "0"}, "prog: --iters: wants an integer from 1 to 100, got '0'"},
      {{"f", "--iters=abc"}, "prog: --iters: wants an integer from 1 to 100, got 'abc'"},
      {{"f", "--iters=5", "--iters=6"}, "prog: --iters is given more than once"},
      {{"f", "--json=yes"}, "prog: --json takes no value"},
      {{"f", "--format", "json"}, "prog: --format: wants npy|pb, got 'json'"},
      {{"f", "--dim", "a"}, "prog: --dim: wants NAME=VALUE, got 'a'"},
      {{"f", "--dim", "a=-1"}, "prog: --dim: a=-1: '-1' is not a non-negative integer"},
      {{"f", "--dim", "a=1", "--dim", "a=2"}, "prog: --dim: a=2: 'a' is given twice"},
      {{}, "prog: missing FILE"},
  };
  for (const Case& c : cases) {
    Program p;
    BOOST_TEST(p.Parse(c.args).value_or(-1) == 2, c.message);
    BOOST_TEST(Contains(p.err, c.message), p.err);
    BOOST_TEST(Contains(p.err, "usage: prog FILE [flags]\n('prog --help' describes every flag)\n"),
               p.err);
  }
  FlagParser one("one", "FILE", "");
  std::string file;
  one.AddPositional("FILE", "", &file, true);
  const char* args[] = {"one", "a", "b"};
  std::FILE* err = std::tmpfile();
  BOOST_TEST(one.Parse(3, args, stdout, err).value_or(-1) == 2);
  BOOST_TEST(Contains(Program::Read(err), "one: unexpected argument 'b'"));
}

BOOST_AUTO_TEST_CASE(help_lists_every_flag_with_its_default_within_100_columns) {
  Program p;
  std::string help = p.flags.Help();
  for (const char* part : {"arguments:\n  FILE                    the input\n",
                           "  MORE                    more inputs (optional)\n",
                           "  -n, --name NAME         a name (default: def)\n",
                           "  --iters N               how many (default: 10)\n",
                           "  --threads N             threads (default: all cores)\n",
                           "  --json                  print JSON\n",
                           "  --plugin PATH           a plugin (repeatable)\n",
                           "  --dim NAME=VALUE        a dim (repeatable)\n",
                           "  --format npy|pb         output format (default: npy)\n",
                           "  -h, --help              print this help and exit\n"}) {
    BOOST_TEST(Contains(help, part), part << " in\n" << help);
  }
  FlagParser wide("wide", "", "");
  bool b = false;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "word" + std::to_string(i) + " ";
  wide.AddBool("--a-rather-long-flag-name", text, &b);
  help = wide.Help();
  BOOST_TEST(Contains(help, "  --a-rather-long-flag-name\n                          word0 word1"),
             help);
  size_t start = 0;
  while (start < help.size()) {
    size_t end = help.find('\n', start);
    BOOST_TEST(end - start <= 100u, help.substr(start, end - start));
    start = end + 1;
  }
  BOOST_TEST(Contains(help, "word39\n"), help);
}

BOOST_AUTO_TEST_CASE(runtime_flags_fill_runtime_options) {
  RuntimeOptions options;
  FlagParser flags("prog", "", "");
  AddRuntimeFlags(flags, &options);
  const char* args[] = {"prog",     "--threads=3", "--jit-cache",   "/tmp/c",
                        "--plugin", "a.so",        "--plugin=b.so", "--require-vendor",
                        "--ignore-tuned-fallback"};
  BOOST_TEST(!flags.Parse(9, args).has_value());
  BOOST_TEST(options.num_threads == 3);
  BOOST_TEST(options.require_vendor);
  BOOST_TEST(options.ignore_tuned_fallback);
  BOOST_TEST(options.jit_cache == "/tmp/c");
  BOOST_TEST(options.plugins == (std::vector<std::string>{"a.so", "b.so"}));
  std::string help = flags.Help();
  BOOST_TEST(Contains(help, "  --threads N  "), help);
  BOOST_TEST(Contains(help, "(default: 0)"), help);
  BOOST_TEST(Contains(help, "  --jit-cache DIR|off  "), help);
  BOOST_TEST(Contains(help, "(default: $XDG_CACHE_HOME/kiln,"), help);
  RuntimeOptions too_many;
  FlagParser more("prog", "", "");
  AddRuntimeFlags(more, &too_many);
  const char* off[] = {"prog", "--jit-cache=off"};
  BOOST_TEST(!more.Parse(2, off).has_value());
  BOOST_TEST(too_many.jit_cache == RuntimeOptions::kJitCacheOff);
  BOOST_TEST(!too_many.require_vendor);
  BOOST_TEST(!too_many.ignore_tuned_fallback);
  const char* bad[] = {"prog", "--threads", "100000"};
  std::FILE* err = std::tmpfile();
  BOOST_TEST(more.Parse(3, bad, stdout, err).value_or(-1) == 2);
  BOOST_TEST(Contains(Program::Read(err), "--threads: wants an integer from 0 to 1024"));
}

}  // namespace
}  // namespace kiln
