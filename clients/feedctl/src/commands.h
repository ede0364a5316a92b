// feedctl's subcommands. Each Add* function declares its commands on `app`; the one the user
// chose sets ctx.run, which main() calls after parsing and whose result is the exit code.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "connection.h"
#include "output.h"

namespace feedctl {

struct Context {
  ConnectionOptions connection;
  bool json = false;
  std::function<int()> run;

  // Opens the connection (once); on failure prints why and returns null.
  Connection* Connect();
  Output output() const { return Output(json); }

 private:
  std::unique_ptr<Connection> conn_;
};

void AddStockCommands(CLI::App& app, Context& ctx);        // stock get|adjust|watch|import|export
void AddReservationCommands(CLI::App& app, Context& ctx);  // reservation create|commit|release|get
void AddOrderCommands(CLI::App& app, Context& ctx);  // order create|get|pay|advance|cancel|follow
void AddEventCommands(CLI::App& app, Context& ctx);  // events tail
void AddCompletionCommand(CLI::App& app, Context& ctx);  // completion bash|zsh
void AddAdminCommands(CLI::App& app, Context& ctx);      // check, backup, replay

// Parses "SKU:QUANTITY[@LOCATION]" (a reservation or order line); false when malformed.
bool ParseLine(const std::string& text, std::string* sku, int64_t* quantity, std::string* location);

}  // namespace feedctl
