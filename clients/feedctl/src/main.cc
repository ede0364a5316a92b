// feedctl: the inventory feed from a terminal. Global options (also from the environment):
// --server (FEEDCTL_SERVER), --tls-ca (FEEDCTL_TLS_CA), --tls-cert / --tls-key
// (FEEDCTL_TLS_CERT / _KEY), --token (FEEDCTL_TOKEN), --json, --timeout-ms. Exit codes: 0 ok, 1
// usage or bad input (nothing sent), 2 rejected by the server (its gRPC code is printed), 3
// unavailable.
#include <cstdio>

#include "commands.h"
#include "exit_codes.h"

namespace feedctl {

Connection* Context::Connect() {
  if (conn_) return conn_.get();
  auto opened = Connection::Open(connection);
  if (!opened.ok()) {
    std::fprintf(stderr, "feedctl: %s\n", std::string(opened.status().message()).c_str());
    return nullptr;
  }
  conn_ = std::move(*opened);
  return conn_.get();
}

}  // namespace feedctl

int main(int argc, char** argv) {
  feedctl::Context ctx;
  CLI::App app{"feedctl: stock, reservations, orders and events of an inventory feed server"};
  app.set_version_flag("--version", "feedctl 1");
  app.add_option("--server", ctx.connection.server, "server address")
      ->envname("FEEDCTL_SERVER")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->capture_default_str();
  app.add_option("--tls-ca", ctx.connection.tls_ca,
                 "PEM file of the CA of the server's certificate (TLS; default: plaintext)")
      ->envname("FEEDCTL_TLS_CA")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--tls-cert", ctx.connection.tls_cert,
                 "client certificate (PEM) for a server that asks for one (mutual TLS)")
      ->envname("FEEDCTL_TLS_CERT")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--tls-key", ctx.connection.tls_key, "the client certificate's private key (PEM)")
      ->envname("FEEDCTL_TLS_KEY")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--token", ctx.connection.token, "bearer token sent with every call")
      ->envname("FEEDCTL_TOKEN")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--timeout-ms", ctx.connection.timeout_ms, "deadline of each call")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}))
      ->capture_default_str();
  app.add_flag("--json", ctx.json, "one JSON object per result, for scripts");
  app.require_subcommand(1);
  feedctl::AddStockCommands(app, ctx);
  feedctl::AddReservationCommands(app, ctx);
  feedctl::AddOrderCommands(app, ctx);
  feedctl::AddEventCommands(app, ctx);
  feedctl::AddAdminCommands(app, ctx);
  feedctl::AddCompletionCommand(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // 0
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message
    return feedctl::kUsage;
  }
  return ctx.run ? ctx.run() : feedctl::kUsage;
}
