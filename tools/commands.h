// Entry points of the kiln subcommands; each takes argv starting at the subcommand name and
// returns the process exit code (0 ok, 1 failure, 2 usage error).
#ifndef KILN_TOOLS_COMMANDS_H_
#define KILN_TOOLS_COMMANDS_H_

namespace kiln::tools {

int CompileMain(int argc, char** argv);
int InspectMain(int argc, char** argv);
int RunMain(int argc, char** argv);
int BenchMain(int argc, char** argv);
int ProfileMain(int argc, char** argv);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_COMMANDS_H_
