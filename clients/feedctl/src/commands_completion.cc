// feedctl completion bash|zsh: a completion script made from the command tree itself, so it
// never falls behind the commands. bash: `source <(feedctl completion bash)`; zsh: the same
// with `completion zsh` (bash completion through zsh's bashcompinit).
#include <cstdio>

#include "commands.h"
#include "exit_codes.h"
#include "fmt/format.h"

namespace feedctl {
namespace {

std::string Words(const CLI::App& app) {
  std::string words;
  for (const CLI::App* sub : app.get_subcommands({})) words += sub->get_name() + " ";
  for (const CLI::Option* opt : app.get_options({})) {
    for (const auto& name : opt->get_lnames()) words += "--" + name + " ";
    for (const auto& name : opt->get_snames()) words += "-" + name + " ";
  }
  if (!words.empty()) words.pop_back();
  return words;
}

// One case per command: "stock get"* for a command (its arguments may follow), "stock" for a
// group; deepest first, so that the first match is the most specific.
void Cases(const CLI::App& app, const std::string& path, std::vector<std::string>* out) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    Cases(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
  }
  const bool group = !app.get_subcommands({}).empty();
  out->push_back(fmt::format("    \"{}\"{}) words=\"{}\" ;;", path, group ? "" : "*", Words(app)));
}

int PrintScript(const CLI::App& root, const std::string& shell) {
  std::vector<std::string> cases;
  Cases(root, "", &cases);
  std::string script;
  if (shell == "zsh") script += "autoload -U +X bashcompinit && bashcompinit\n";
  script += R"(# feedctl completion: source <(feedctl completion )" + shell + R"()
_feedctl() {
  local cur="${COMP_WORDS[COMP_CWORD]}" path="" i words=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      -*) ;;
      *) path="${path:+$path }${COMP_WORDS[i]}" ;;
    esac
  done
  case "$path" in
)";
  for (const auto& c : cases) script += c + "\n";
  script += R"(  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _feedctl feedctl
)";
  std::fputs(script.c_str(), stdout);
  return kOk;
}

}  // namespace

void AddCompletionCommand(CLI::App& app, Context& ctx) {
  auto* c = app.add_subcommand("completion", "print a shell completion script (bash or zsh)");
  auto shell = std::make_shared<std::string>("bash");
  c->add_option("shell", *shell, "bash or zsh")->check(CLI::IsMember({"bash", "zsh"}));
  c->callback(
      [&ctx, &app, shell] { ctx.run = [&app, shell] { return PrintScript(app, *shell); }; });
}

}  // namespace feedctl
