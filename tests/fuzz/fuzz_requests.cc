// fuzz_requests: every request the core accepts, from arbitrary bytes, against one real
// InventoryCore (MemoryStore, FakeClock, sweep off) that lives across inputs.
//
// Input: byte 0 picks the operation (see Op: byte % 10, 0xff = clock tick), the rest is that
// operation's protobuf request
// (inputs that do not parse are skipped). The request goes through its core::Validate*
// function; an invalid one must also be refused by the core with INVALID_ARGUMENT, a valid
// one is applied and checked from the outside:
//   - every result is OK or a documented error (INVALID_ARGUMENT, NOT_FOUND,
//     FAILED_PRECONDITION, ALREADY_EXISTS, RESOURCE_EXHAUSTED), never INTERNAL, DATA_LOSS, ...;
//   - every level read is consistent (available = on_hand - reserved, on_hand >= 0,
//     reserved >= 0, available >= 0 unless backorder);
//   - a failed or replayed command changes no level; an OK one changes exactly the levels it
//     names, by exactly its quantities (read with GetStock before and after);
//   - an OK command with an idempotency key, sent again, is replayed with the same response;
//   - sequences of OK commands increase;
//   - WatchStock's snapshot (read in small chunks) matches GetStock for the same keys.
// Every kCheckStoreEvery inputs the store itself is checked (reserved == sum of the open holds,
// gap-free outbox, each level equal to the level its last event carried); every
// kReopenEvery inputs the core is restarted on the same store (recovery re-checks the
// invariants); every kResetEvery inputs the world starts over (bounds memory).
//
// Ids the server generates are not guessable from the input: an id field "@<c>" (two bytes)
// is replaced with one of the recently created reservation / order ids.
//
// Because the core outlives an input, a crash may depend on earlier inputs; rerun the crash
// file alone first (./fuzz_requests crash-...), then with the corpus in front of it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/inventory_core.h"
#include "core/message_parsing.h"
#include "core/options.h"
#include "core/validation.h"
#include "events/v1/events.pb.h"
#include "fmt/format.h"
#include "fuzz_common.h"
#include "google/protobuf/util/message_differencer.h"
#include "internal/v1/records.pb.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"
#include "spdlog/spdlog.h"
#include "storage/memory_store.h"
#include "storage/store.h"

namespace feed::fuzz {
namespace {

namespace inv = ::inventory::v1;
namespace ord = ::order::v1;
using core::CallSync;
using core::InventoryCore;
using google::protobuf::util::MessageDifferencer;
using storage::Table;

constexpr int64_t kStart = 1'700'000'000'000;
// A fixed store id makes generated ids ("rsv-f0221e-<seq>") the same from run to run.
constexpr std::string_view kStoreId = "f0221e55deadbeef";
constexpr uint64_t kCheckStoreEvery = 64;
constexpr uint64_t kReopenEvery = 512;
constexpr uint64_t kResetEvery = 4096;
constexpr size_t kRecentIds = 16;

enum Op : uint8_t {
  kAdjust = 0,
  kReserve,
  kCommit,
  kRelease,
  kGetStock,
  kCreateOrder,
  kPayOrder,
  kAdvanceOrder,
  kCancelOrder,
  kWatchKeys,
  kRequestCount,
  // Byte 0 = 0xff (rarer than the others, so that holds live long enough to be used): not a
  // request, advances the fake clock (next 4 bytes, little-endian, modulo 2 min) and runs
  // ExpireDue.
  kTick = kRequestCount,
};

using Key = std::pair<std::string, std::string>;  // (sku, location)
using Levels = std::map<Key, inv::StockLevel>;
struct Delta {
  int64_t on_hand = 0;
  int64_t reserved = 0;
};
using Deltas = std::map<Key, Delta>;

const std::set<Key>& SeedKeys() {
  static const auto* keys = new std::set<Key>{
      {"sku-1", "default"}, {"sku-2", "default"}, {"sku-3", "wh-2"}, {"sku-bo", "default"}};
  return *keys;
}

// FUZZ_REQUESTS_STATS=1: at exit, how often each operation ended with each code (shows how
// deep the fuzzer gets: OK Commits, PayOrders, ...).
const char* kOpNames[] = {"AdjustStock", "Reserve",     "Commit",   "Release",
                          "GetStock",    "CreateOrder", "PayOrder", "AdvanceOrder",
                          "CancelOrder", "WatchStock",  "Tick"};
std::map<std::pair<int, std::string>, uint64_t>* g_outcomes = nullptr;
int g_op = 0;
void Count(const std::string& outcome) {
  if (g_outcomes) ++(*g_outcomes)[{g_op, outcome}];
}
// The code and the shape of the message (quoted values and numbers elided).
std::string Outcome(const absl::Status& s) {
  std::string out = fmt::format("{}: ", absl::StatusCodeToString(s.code()));
  bool quoted = false;
  for (char c : s.message()) {
    if (c == '\'') {
      quoted = !quoted;
      if (quoted) out += "'…'";
    } else if (!quoted && !(c >= '0' && c <= '9')) {
      out += c;
    }
    if (out.size() > 90) break;
  }
  return out;
}
void PrintOutcomes() {
  for (const auto& [k, n] : *g_outcomes) {
    std::fprintf(stderr, "%-13s %8llu  %s\n", kOpNames[k.first], static_cast<unsigned long long>(n),
                 k.second.c_str());
  }
}

// Parses a request as the servers do (core::ParseMessage). Bytes that are not a valid
// message must be refused with INVALID_ARGUMENT naming the message type (and the field, for
// a string that is not UTF-8); those inputs end here.
bool Parsed(const uint8_t* data, size_t size, google::protobuf::Message* request) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::Status parsed = core::ParseMessage(bytes, request);
  if (parsed.ok()) return true;
  Count(Outcome(parsed));
  FUZZ_CHECK(parsed.code() == absl::StatusCode::kInvalidArgument, ToString(parsed));
  const std::string message(parsed.message());
  FUZZ_CHECK(message.find("could not be parsed as " + request->GetTypeName()) != std::string::npos,
             message);
  FUZZ_CHECK(message.find("UTF-8") == std::string::npos ||
                 message.find("String field '") != std::string::npos,
             fmt::format("a UTF-8 error that names no field: {}", message));
  return false;
}

bool Documented(absl::StatusCode c) {
  switch (c) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

std::string Show(const google::protobuf::Message& m) { return m.ShortDebugString(); }

bool Same(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return MessageDifferencer::Equals(a, b);
}

void CheckLevel(const inv::StockLevel& l) {
  FUZZ_CHECK(l.available() == l.on_hand() - l.reserved(), Show(l));
  FUZZ_CHECK(l.on_hand() >= 0, Show(l));
  FUZZ_CHECK(l.reserved() >= 0, Show(l));
  FUZZ_CHECK(l.allow_backorder() || l.available() >= 0, Show(l));
}

void Resolve(std::string* id, const std::vector<std::string>& recent) {
  if (id->size() == 2 && (*id)[0] == '@' && !recent.empty()) {
    *id = recent[static_cast<unsigned char>((*id)[1]) % recent.size()];
  }
}

// Commit and Release: "@<digit>" names a recent client hold, "@<other>" a recent hold of any
// kind (an order's, which they must refuse, included).
void ResolveHold(std::string* id, const std::vector<std::string>& client,
                 const std::vector<std::string>& ordered) {
  if (id->size() != 2 || (*id)[0] != '@') return;
  bool of_order = !((*id)[1] >= '0' && (*id)[1] <= '9');
  Resolve(id, of_order || client.empty() ? ordered : client);
}

void Remember(std::vector<std::string>* recent, const std::string& id) {
  if (recent->size() >= kRecentIds) recent->erase(recent->begin());
  recent->push_back(id);
}

template <class Resp>
void ExpectInvalid(const absl::StatusOr<Resp>& r, const absl::Status& validation) {
  Count("invalid");
  FUZZ_CHECK(!r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument,
             fmt::format("Validate* said '{}' but the core said {}", ToString(validation),
                         r.ok() ? std::string("OK") : ToString(r.status())));
}

class World {
 public:
  World() {
    options_.sweep_interval_ms = 0;
    options_.change_feed_retention = 1024;
    Reset();
  }

  void Run(const uint8_t* data, size_t size);

 private:
  void Reset();
  void Reopen();
  void Seed();
  void CheckStore();

  Levels Read(const std::set<Key>& keys);
  void ExpectUnchanged(const Levels& before, const Levels& after, const char* op);
  void ExpectDeltas(const Levels& before, const Levels& after, const Deltas& deltas,
                    const char* op);
  void CheckSequence(uint64_t sequence, const char* op);

  // Applies a valid request; returns the response of an OK, not replayed command (levels
  // before and after in *before / *after), or nullopt after checking the failure.
  template <class Req, class Resp>
  std::optional<Resp> Apply(const char* op,
                            void (InventoryCore::*method)(Req, core::Done<Resp>, core::CallContext),
                            const Req& request, std::set<Key> keys, Levels* before, Levels* after);

  void DoAdjust(const uint8_t* data, size_t size);
  void DoReserve(const uint8_t* data, size_t size);
  void DoCommitOrRelease(bool commit, const uint8_t* data, size_t size);
  void DoGetStock(const uint8_t* data, size_t size);
  void DoCreateOrder(const uint8_t* data, size_t size);
  void DoPayOrder(const uint8_t* data, size_t size);
  void DoAdvanceOrder(const uint8_t* data, size_t size);
  void DoCancelOrder(const uint8_t* data, size_t size);
  void DoWatchKeys(const uint8_t* data, size_t size);
  void DoTick(const uint8_t* data, size_t size);

  core::CoreOptions options_;
  core::FakeClock clock_{kStart};
  std::unique_ptr<storage::MemoryStore> store_;
  std::unique_ptr<InventoryCore> core_;
  std::vector<std::string> reservations_;  // every recent hold
  std::vector<std::string> client_holds_;  // recent holds made by Reserve
  std::vector<std::string> orders_;
  uint64_t last_sequence_ = 0;
  uint64_t outbox_checked_ = 0;  // outbox events up to this sequence were checked and trimmed
  uint64_t runs_ = 0;
};

void World::Reset() {
  if (core_) core_->Shutdown();
  core_.reset();
  store_ = std::make_unique<storage::MemoryStore>();
  auto group = store_->NewWriteGroup();
  group->Put(Table::kMeta, storage::meta_keys::kStoreId, kStoreId);
  FUZZ_CHECK(store_->Commit(*group, storage::CommitMode::kConfigured).ok(), "seeding the store id");
  clock_.Set(kStart);
  reservations_.clear();
  client_holds_.clear();
  orders_.clear();
  last_sequence_ = 0;
  outbox_checked_ = 0;
  auto opened = InventoryCore::Open(*store_, clock_, options_);
  FUZZ_CHECK(opened.ok(), ToString(opened.status()));
  core_ = std::move(*opened);
  Seed();
}

void World::Reopen() {
  core_->Shutdown();
  core_.reset();
  // Recovery checks reserved == sum of the open holds and available >= 0 (DATA_LOSS if not).
  auto opened = InventoryCore::Open(*store_, clock_, options_);
  FUZZ_CHECK(opened.ok(), fmt::format("recovery after restart: {}", ToString(opened.status())));
  core_ = std::move(*opened);
}

void World::Seed() {
  auto adjust = [&](const char* sku, const char* location, int64_t quantity, bool backorder) {
    inv::AdjustStockRequest r;
    r.set_sku(sku);
    r.set_location(location);
    r.set_mode(inv::ADJUST_MODE_SET);
    r.set_quantity(quantity);
    r.set_reason("fuzz seed");
    if (backorder) r.set_allow_backorder(true);
    auto resp = CallSync(*core_, &InventoryCore::AdjustStock, r);
    FUZZ_CHECK(resp.ok(), ToString(resp.status()));
    last_sequence_ = resp->sequence();
  };
  adjust("sku-1", "default", 100, false);
  adjust("sku-2", "default", 5, false);
  adjust("sku-3", "wh-2", 50, false);
  adjust("sku-bo", "default", 0, true);

  inv::ReserveRequest reserve;
  auto* line = reserve.add_lines();
  line->set_sku("sku-1");
  line->set_location("default");
  line->set_quantity(2);
  reserve.set_reservation_id("r-seed");
  reserve.set_ttl_ms(60'000);
  auto held = CallSync(*core_, &InventoryCore::Reserve, reserve);
  FUZZ_CHECK(held.ok(), ToString(held.status()));
  Remember(&reservations_, held->reservation().reservation_id());
  Remember(&client_holds_, held->reservation().reservation_id());
  last_sequence_ = held->sequence();

  ord::CreateOrderRequest order;
  order.set_customer_id("cust-1");
  order.add_item_ids("sku-1");
  order.set_total_amount(9.99);
  auto created = CallSync(*core_, &InventoryCore::CreateOrder, order);
  FUZZ_CHECK(created.ok(), ToString(created.status()));
  Remember(&orders_, created->order_id());
  Remember(&reservations_, created->reservation_id());
  last_sequence_ = created->sequence();
}

Levels World::Read(const std::set<Key>& keys) {
  Levels out;
  if (keys.empty()) return out;
  inv::GetStockRequest request;
  for (const auto& [sku, location] : keys) {
    auto* k = request.add_keys();
    k->set_sku(sku);
    k->set_location(location);
  }
  auto r = core_->GetStock(request);
  FUZZ_CHECK(r.ok(), fmt::format("GetStock of valid keys: {}", ToString(r.status())));
  FUZZ_CHECK(static_cast<size_t>(r->levels_size() + r->missing_size()) == keys.size(), Show(*r));
  for (const auto& l : r->levels()) {
    CheckLevel(l);
    Key k{l.sku(), l.location()};
    FUZZ_CHECK(keys.contains(k),
               fmt::format("GetStock returned an unrequested level: {}", Show(l)));
    out[k] = l;
  }
  return out;
}

void World::ExpectUnchanged(const Levels& before, const Levels& after, const char* op) {
  FUZZ_CHECK(before.size() == after.size(),
             fmt::format("{}: a failed or replayed command created or removed a level", op));
  for (const auto& [k, b] : before) {
    auto it = after.find(k);
    FUZZ_CHECK(it != after.end() && Same(b, it->second),
               fmt::format("{}: a failed or replayed command changed {} to {}", op, Show(b),
                           it == after.end() ? std::string("nothing") : Show(it->second)));
  }
}

void World::ExpectDeltas(const Levels& before, const Levels& after, const Deltas& deltas,
                         const char* op) {
  for (const auto& [k, a] : after) {
    auto b = before.find(k);
    auto d = deltas.find(k);
    if (d == deltas.end()) {
      FUZZ_CHECK(b != before.end() && Same(b->second, a),
                 fmt::format("{}: changed a level it does not name: {}", op, Show(a)));
      continue;
    }
    int64_t on_hand = b == before.end() ? 0 : b->second.on_hand();
    int64_t reserved = b == before.end() ? 0 : b->second.reserved();
    FUZZ_CHECK(
        a.on_hand() == on_hand + d->second.on_hand && a.reserved() == reserved + d->second.reserved,
        fmt::format("{}: expected on_hand {}+{}, reserved {}+{}, got {}", op, on_hand,
                    d->second.on_hand, reserved, d->second.reserved, Show(a)));
    uint64_t version = b == before.end() ? 0 : b->second.version();
    FUZZ_CHECK(a.version() > version, fmt::format("{}: version did not increase: {}", op, Show(a)));
  }
  for (const auto& [k, d] : deltas) {
    FUZZ_CHECK(after.contains(k), fmt::format("{}: level {}/{} is missing", op, k.first, k.second));
  }
}

void World::CheckSequence(uint64_t sequence, const char* op) {
  FUZZ_CHECK(sequence > last_sequence_,
             fmt::format("{}: sequence {} after {}", op, sequence, last_sequence_));
  last_sequence_ = sequence;
}

template <class Req, class Resp>
std::optional<Resp> World::Apply(
    const char* op, void (InventoryCore::*method)(Req, core::Done<Resp>, core::CallContext),
    const Req& request, std::set<Key> keys, Levels* before, Levels* after) {
  keys.insert(SeedKeys().begin(), SeedKeys().end());
  *before = Read(keys);
  absl::StatusOr<Resp> r = CallSync(*core_, method, request);
  *after = Read(keys);
  Count(r.ok() ? (r->replayed() ? "OK (replayed)" : "OK") : Outcome(r.status()));
  if (!r.ok()) {
    FUZZ_CHECK(Documented(r.status().code()),
               fmt::format("{} returned an undocumented error: {}\n    request: {}", op,
                           ToString(r.status()), Show(request)));
    ExpectUnchanged(*before, *after, op);
    return std::nullopt;
  }
  if (r->replayed()) {
    ExpectUnchanged(*before, *after, op);
    return std::nullopt;
  }
  if (!request.idempotency_key().empty()) {
    absl::StatusOr<Resp> again = CallSync(*core_, method, request);
    FUZZ_CHECK(again.ok() && again->replayed(),
               fmt::format("{}: the same request with the same key was not replayed: {}", op,
                           again.ok() ? Show(*again) : ToString(again.status())));
    Resp expected = *r;
    expected.set_replayed(true);
    FUZZ_CHECK(Same(expected, *again),
               fmt::format("{}: replay differs:\n    first:  {}\n    replay: {}", op, Show(*r),
                           Show(*again)));
    ExpectUnchanged(*after, Read(keys), op);
  }
  return *std::move(r);
}

void World::DoAdjust(const uint8_t* data, size_t size) {
  inv::AdjustStockRequest r;
  if (!Parsed(data, size, &r)) return;
  if (absl::Status v = core::ValidateAdjust(r, options_); !v.ok()) {
    ExpectInvalid(CallSync(*core_, &InventoryCore::AdjustStock, r), v);
    return;
  }
  Key k{r.sku(), r.location()};
  Levels before, after;
  auto resp = Apply("AdjustStock", &InventoryCore::AdjustStock, r, {k}, &before, &after);
  if (!resp) return;
  int64_t old = before.contains(k) ? before[k].on_hand() : 0;
  int64_t now = r.mode() == inv::ADJUST_MODE_SET ? r.quantity() : old + r.quantity();
  ExpectDeltas(before, after, {{k, {now - old, 0}}}, "AdjustStock");
  FUZZ_CHECK(Same(resp->level(), after[k]),
             fmt::format("AdjustStock: response level {} but GetStock says {}", Show(resp->level()),
                         Show(after[k])));
  if (r.has_allow_backorder()) {
    FUZZ_CHECK(after[k].allow_backorder() == r.allow_backorder(), Show(after[k]));
  }
  CheckSequence(resp->sequence(), "AdjustStock");
}

void World::DoReserve(const uint8_t* data, size_t size) {
  inv::ReserveRequest r;
  if (!Parsed(data, size, &r)) return;
  Resolve(r.mutable_reservation_id(), reservations_);
  if (absl::Status v = core::ValidateReserve(r, options_); !v.ok()) {
    ExpectInvalid(CallSync(*core_, &InventoryCore::Reserve, r), v);
    return;
  }
  std::set<Key> keys;
  Deltas deltas;
  for (const auto& line : r.lines()) {
    Key k{line.sku(), line.location()};
    keys.insert(k);
    deltas[k].reserved += line.quantity();
  }
  Levels before, after;
  auto resp = Apply("Reserve", &InventoryCore::Reserve, r, keys, &before, &after);
  if (!resp) return;
  ExpectDeltas(before, after, deltas, "Reserve");
  const auto& hold = resp->reservation();
  FUZZ_CHECK(hold.state() == inv::RESERVATION_STATE_HELD && !hold.owned_by_order(), Show(hold));
  FUZZ_CHECK(r.reservation_id().empty() || hold.reservation_id() == r.reservation_id(), Show(hold));
  Deltas held;
  for (const auto& line : hold.lines())
    held[{line.sku(), line.location()}].reserved += line.quantity();
  FUZZ_CHECK(
      held.size() == deltas.size() && static_cast<size_t>(hold.lines_size()) == deltas.size(),
      fmt::format("Reserve: the hold's lines are not the request's levels: {}", Show(hold)));
  for (const auto& [k, d] : deltas) {
    FUZZ_CHECK(held[k].reserved == d.reserved,
               fmt::format("Reserve: hold quantity: {}", Show(hold)));
  }
  FUZZ_CHECK(static_cast<size_t>(resp->levels_size()) == deltas.size(), Show(*resp));
  for (const auto& l : resp->levels()) {
    Key k{l.sku(), l.location()};
    FUZZ_CHECK(Same(l, after[k]), fmt::format("Reserve: response level {} but GetStock says {}",
                                              Show(l), Show(after[k])));
  }
  int64_t ttl = r.ttl_ms() > 0 ? r.ttl_ms() : options_.default_hold_ttl_ms;
  FUZZ_CHECK(hold.expires_at_ms() == clock_.NowMillis() + ttl, Show(hold));
  CheckSequence(resp->sequence(), "Reserve");
  Remember(&reservations_, hold.reservation_id());
  Remember(&client_holds_, hold.reservation_id());
}

void World::DoCommitOrRelease(bool commit, const uint8_t* data, size_t size) {
  const char* op = commit ? "Commit" : "Release";
  std::string id, key;
  inv::CommitRequest c;
  inv::ReleaseRequest rel;
  absl::Status v;
  if (commit) {
    if (!Parsed(data, size, &c)) return;
    ResolveHold(c.mutable_reservation_id(), client_holds_, reservations_);
    v = core::ValidateCommit(c, options_);
    if (!v.ok()) return ExpectInvalid(CallSync(*core_, &InventoryCore::Commit, c), v);
    id = c.reservation_id();
  } else {
    if (!Parsed(data, size, &rel)) return;
    ResolveHold(rel.mutable_reservation_id(), client_holds_, reservations_);
    v = core::ValidateRelease(rel, options_);
    if (!v.ok()) return ExpectInvalid(CallSync(*core_, &InventoryCore::Release, rel), v);
    id = rel.reservation_id();
  }
  auto prior = core_->GetReservation(id);
  FUZZ_CHECK(prior.ok() || prior.status().code() == absl::StatusCode::kNotFound,
             fmt::format("GetReservation: {}", ToString(prior.status())));
  std::set<Key> keys;
  Deltas deltas;
  if (prior.ok()) {
    for (const auto& line : prior->lines()) {
      Key k{line.sku(), line.location()};
      keys.insert(k);
      deltas[k].reserved -= line.quantity();
      if (commit) deltas[k].on_hand -= line.quantity();
    }
  }
  Levels before, after;
  const inv::Reservation* closed = nullptr;
  uint64_t sequence = 0;
  std::optional<inv::CommitResponse> cr;
  std::optional<inv::ReleaseResponse> rr;
  if (commit) {
    cr = Apply(op, &InventoryCore::Commit, c, keys, &before, &after);
    if (!cr) return;
    closed = &cr->reservation();
    sequence = cr->sequence();
  } else {
    rr = Apply(op, &InventoryCore::Release, rel, keys, &before, &after);
    if (!rr) return;
    closed = &rr->reservation();
    sequence = rr->sequence();
  }
  FUZZ_CHECK(
      prior.ok() && prior->state() == inv::RESERVATION_STATE_HELD && !prior->owned_by_order(),
      fmt::format("{} succeeded on {}", op, prior.ok() ? Show(*prior) : std::string("nothing")));
  FUZZ_CHECK(closed->state() ==
                 (commit ? inv::RESERVATION_STATE_COMMITTED : inv::RESERVATION_STATE_RELEASED),
             Show(*closed));
  FUZZ_CHECK(closed->lines_size() == prior->lines_size(), Show(*closed));
  ExpectDeltas(before, after, deltas, op);
  auto now = core_->GetReservation(id);
  FUZZ_CHECK(now.ok() && now->state() == closed->state(),
             fmt::format("{}: GetReservation after: {}", op,
                         now.ok() ? Show(*now) : ToString(now.status())));
  CheckSequence(sequence, op);
}

void World::DoGetStock(const uint8_t* data, size_t size) {
  inv::GetStockRequest r;
  if (!Parsed(data, size, &r)) return;
  absl::Status v = core::ValidateGetStock(r, options_);
  auto resp = core_->GetStock(r);
  if (!v.ok()) return ExpectInvalid(resp, v);
  FUZZ_CHECK(resp.ok(), fmt::format("GetStock: {}", ToString(resp.status())));
  Count(resp->levels_size() > 0 ? "OK (levels)" : "OK (none)");
  for (const auto& l : resp->levels()) CheckLevel(l);
  // Each key either matched levels or is listed as missing.
  std::multiset<Key> missing;
  for (const auto& m : resp->missing()) missing.insert({m.sku(), m.location()});
  for (const auto& k : r.keys()) {
    bool found = false;
    for (const auto& l : resp->levels()) {
      if (l.sku() == k.sku() && (k.location().empty() || l.location() == k.location())) {
        found = true;
        break;
      }
    }
    FUZZ_CHECK(found != missing.contains({k.sku(), k.location()}),
               fmt::format("GetStock: key {} found={} in {}", Show(k), found, Show(*resp)));
  }
}

void World::DoCreateOrder(const uint8_t* data, size_t size) {
  ord::CreateOrderRequest r;
  if (!Parsed(data, size, &r)) return;
  if (absl::Status v = core::ValidateCreateOrder(r, options_); !v.ok()) {
    return ExpectInvalid(CallSync(*core_, &InventoryCore::CreateOrder, r), v);
  }
  std::set<Key> keys;
  Deltas deltas;
  for (const auto& item : r.item_ids()) {
    Key k{item, options_.default_location};
    keys.insert(k);
    deltas[k].reserved += 1;
  }
  for (const auto& line : r.lines()) {
    Key k{line.sku(), line.location()};
    keys.insert(k);
    deltas[k].reserved += line.quantity();
  }
  Levels before, after;
  auto resp = Apply("CreateOrder", &InventoryCore::CreateOrder, r, keys, &before, &after);
  if (!resp) return;
  ExpectDeltas(before, after, deltas, "CreateOrder");
  FUZZ_CHECK(resp->status_code() == ord::ORDER_STATUS_CONFIRMED && resp->status() == "CONFIRMED",
             Show(*resp));
  auto order = core_->GetOrder(resp->order_id());
  FUZZ_CHECK(order.ok() && order->status() == ord::ORDER_STATUS_CONFIRMED &&
                 order->reservation_id() == resp->reservation_id() &&
                 order->customer_id() == r.customer_id(),
             fmt::format("CreateOrder: GetOrder: {}",
                         order.ok() ? Show(*order) : ToString(order.status())));
  auto hold = core_->GetReservation(resp->reservation_id());
  FUZZ_CHECK(
      hold.ok() && hold->state() == inv::RESERVATION_STATE_HELD && hold->owned_by_order() &&
          hold->order_id() == resp->order_id(),
      fmt::format("CreateOrder: hold: {}", hold.ok() ? Show(*hold) : ToString(hold.status())));
  CheckSequence(resp->sequence(), "CreateOrder");
  Remember(&orders_, resp->order_id());
  Remember(&reservations_, resp->reservation_id());
}

// The levels an order's lines name, and the order before the command.
std::set<Key> OrderKeys(const absl::StatusOr<ord::Order>& order) {
  std::set<Key> keys;
  if (order.ok()) {
    for (const auto& line : order->lines()) keys.insert({line.sku(), line.location()});
  }
  return keys;
}

void World::DoPayOrder(const uint8_t* data, size_t size) {
  ord::PayOrderRequest r;
  if (!Parsed(data, size, &r)) return;
  Resolve(r.mutable_order_id(), orders_);
  if (absl::Status v = core::ValidatePayOrder(r, options_); !v.ok()) {
    return ExpectInvalid(CallSync(*core_, &InventoryCore::PayOrder, r), v);
  }
  auto prior = core_->GetOrder(r.order_id());
  Levels before, after;
  auto resp = Apply("PayOrder", &InventoryCore::PayOrder, r, OrderKeys(prior), &before, &after);
  if (!resp) return;
  FUZZ_CHECK(prior.ok() && prior->status() == ord::ORDER_STATUS_CONFIRMED,
             fmt::format("PayOrder succeeded on {}",
                         prior.ok() ? Show(*prior) : ToString(prior.status())));
  Deltas deltas;
  for (const auto& line : prior->lines()) {
    auto& d = deltas[{line.sku(), line.location()}];
    d.on_hand -= line.quantity();
    d.reserved -= line.quantity();
  }
  ExpectDeltas(before, after, deltas, "PayOrder");
  FUZZ_CHECK(resp->order().status() == ord::ORDER_STATUS_PAID, Show(*resp));
  auto hold = core_->GetReservation(prior->reservation_id());
  FUZZ_CHECK(hold.ok() && hold->state() == inv::RESERVATION_STATE_COMMITTED,
             fmt::format("PayOrder: hold: {}", hold.ok() ? Show(*hold) : ToString(hold.status())));
  CheckSequence(resp->sequence(), "PayOrder");
}

void World::DoAdvanceOrder(const uint8_t* data, size_t size) {
  ord::AdvanceOrderRequest r;
  if (!Parsed(data, size, &r)) return;
  Resolve(r.mutable_order_id(), orders_);
  if (absl::Status v = core::ValidateAdvanceOrder(r, options_); !v.ok()) {
    return ExpectInvalid(CallSync(*core_, &InventoryCore::AdvanceOrder, r), v);
  }
  auto prior = core_->GetOrder(r.order_id());
  Levels before, after;
  auto resp =
      Apply("AdvanceOrder", &InventoryCore::AdvanceOrder, r, OrderKeys(prior), &before, &after);
  if (!resp) return;
  ExpectDeltas(before, after, {}, "AdvanceOrder");
  FUZZ_CHECK(resp->order().status() == r.target(), Show(*resp));
  CheckSequence(resp->sequence(), "AdvanceOrder");
}

void World::DoCancelOrder(const uint8_t* data, size_t size) {
  ord::CancelOrderRequest r;
  if (!Parsed(data, size, &r)) return;
  Resolve(r.mutable_order_id(), orders_);
  if (absl::Status v = core::ValidateCancelOrder(r, options_); !v.ok()) {
    return ExpectInvalid(CallSync(*core_, &InventoryCore::CancelOrder, r), v);
  }
  auto prior = core_->GetOrder(r.order_id());
  Levels before, after;
  auto resp =
      Apply("CancelOrder", &InventoryCore::CancelOrder, r, OrderKeys(prior), &before, &after);
  if (!resp) return;
  FUZZ_CHECK(prior.ok(), "CancelOrder succeeded on an order GetOrder did not find");
  Deltas deltas;
  for (const auto& line : prior->lines()) {
    auto& d = deltas[{line.sku(), line.location()}];
    if (prior->status() == ord::ORDER_STATUS_CONFIRMED) {
      d.reserved -= line.quantity();
    } else {
      FUZZ_CHECK(
          prior->status() == ord::ORDER_STATUS_PAID || prior->status() == ord::ORDER_STATUS_PACKING,
          fmt::format("CancelOrder succeeded on {}", Show(*prior)));
      d.on_hand += line.quantity();
    }
  }
  ExpectDeltas(before, after, deltas, "CancelOrder");
  FUZZ_CHECK(resp->order().status() == ord::ORDER_STATUS_CANCELLED, Show(*resp));
  CheckSequence(resp->sequence(), "CancelOrder");
}

void World::DoWatchKeys(const uint8_t* data, size_t size) {
  inv::WatchStockRequest r;
  if (!Parsed(data, size, &r)) return;
  if (!core::ValidateStockKeys("keys", r.keys(), options_).ok()) return Count("invalid");
  std::vector<inv::StockKey> filter(r.keys().begin(), r.keys().end());
  auto snapshot = core_->OpenStockSnapshot(filter);
  FUZZ_CHECK(snapshot.ok(), fmt::format("OpenStockSnapshot: {}", ToString(snapshot.status())));
  FUZZ_CHECK((*snapshot)->as_of_sequence() >= last_sequence_,
             fmt::format("snapshot as of {} but sequence {} was committed",
                         (*snapshot)->as_of_sequence(), last_sequence_));
  // Small chunks exercise the resumption of prefix scans.
  size_t chunk = 1 + r.resume_after_sequence() % 4;
  std::vector<inv::StockLevel> levels;
  for (int i = 0;; ++i) {
    FUZZ_CHECK(i < 1'000'000, "StockSnapshot::Next never ends");
    auto more = (*snapshot)->Next(chunk, &levels);
    FUZZ_CHECK(more.ok(), fmt::format("StockSnapshot::Next: {}", ToString(more.status())));
    if (!*more) break;
  }
  Count(levels.empty() ? "OK (none)" : "OK (levels)");
  std::multiset<std::pair<Key, uint64_t>> seen;
  for (const auto& l : levels) {
    CheckLevel(l);
    FUZZ_CHECK(l.sequence() <= (*snapshot)->as_of_sequence(), Show(l));
    seen.insert({{l.sku(), l.location()}, l.version()});
  }
  if (filter.empty()) {
    FUZZ_CHECK(levels.size() == core_->stats().stock_levels,
               fmt::format("full snapshot has {} levels, the core {}", levels.size(),
                           core_->stats().stock_levels));
    return;
  }
  inv::GetStockRequest get;
  *get.mutable_keys() = r.keys();
  auto resp = core_->GetStock(get);
  FUZZ_CHECK(resp.ok(), ToString(resp.status()));
  std::multiset<std::pair<Key, uint64_t>> expected;
  for (const auto& l : resp->levels()) expected.insert({{l.sku(), l.location()}, l.version()});
  FUZZ_CHECK(seen == expected, fmt::format("snapshot (chunk {}) has {} levels, GetStock {} for {}",
                                           chunk, seen.size(), expected.size(), Show(r)));
}

void World::DoTick(const uint8_t* data, size_t size) {
  uint32_t v = 0;
  std::memcpy(&v, data, std::min<size_t>(size, sizeof v));
  // At most 2 minutes: ticks are frequent (they always parse), and holds with the default
  // TTL (15 min) must stay open long enough to be committed, released or paid by later
  // inputs; short TTLs (ttl_ms >= 1000) still expire.
  clock_.Advance(static_cast<int64_t>(v % (2u * 60 * 1000 + 1)));
  Levels before = Read(SeedKeys());
  std::promise<absl::StatusOr<core::ExpireResult>> promise;
  auto future = promise.get_future();
  core_->ExpireDue(
      [&promise](absl::StatusOr<core::ExpireResult> r) { promise.set_value(std::move(r)); });
  auto r = future.get();
  FUZZ_CHECK(r.ok(), fmt::format("ExpireDue: {}", ToString(r.status())));
  Count(r->expired_holds > 0 ? "OK (expired)" : "OK (none)");
  Levels after = Read(SeedKeys());
  for (const auto& [k, a] : after) {
    // Expiry only returns held units: on_hand never changes, reserved never grows.
    const auto& b = before[k];
    FUZZ_CHECK(a.on_hand() == b.on_hand() && a.reserved() <= b.reserved(),
               fmt::format("ExpireDue changed {} to {}", Show(b), Show(a)));
  }
}

void World::CheckStore() {
  // The tables follow the journal at checkpoints: bring them up to date first.
  if (core_) FUZZ_CHECK(core_->Checkpoint().ok(), "checkpoint");
  // The journal's events: gap-free since the last check, event ids "<store id>-<sequence>".
  std::map<uint64_t, inv::StockLevel> announced;
  uint64_t expect = outbox_checked_ + 1;
  auto s = store_->Scan(
      Table::kJournal, storage::EncodeSequence(outbox_checked_ + 1), "",
      [&](std::string_view key, std::string_view value) {
        internal::v1::JournalEntry entry;
        FUZZ_CHECK(entry.ParseFromArray(value.data(), static_cast<int>(value.size())) &&
                       storage::DecodeSequence(key) == entry.last_sequence() &&
                       entry.first_sequence() == expect,
                   fmt::format("journal gap or bad entry: expected sequence {}", expect));
        for (const auto& bytes : entry.events()) {
          events::v1::Event e;
          FUZZ_CHECK(e.ParseFromString(bytes), "journal event does not parse");
          FUZZ_CHECK(
              e.sequence() == expect && e.event_id() == fmt::format("{}-{}", kStoreId, expect),
              Show(e));
          if (e.has_stock_changed()) announced[expect] = e.stock_changed().level();
          ++expect;
        }
        FUZZ_CHECK(expect == entry.last_sequence() + 1, "journal entry's event count");
        return true;
      });
  FUZZ_CHECK(s.ok(), ToString(s));
  uint64_t last = expect - 1;
  auto next = store_->Get(Table::kMeta, storage::meta_keys::kNextSequence);
  FUZZ_CHECK(next.ok() && next->has_value() && storage::DecodeSequence(**next) == last + 1,
             fmt::format("meta next_sequence is not {}", last + 1));

  std::map<Key, int64_t> held;
  s = store_->Scan(Table::kHolds, "", "", [&](std::string_view, std::string_view value) {
    inv::Reservation r;
    FUZZ_CHECK(r.ParseFromArray(value.data(), static_cast<int>(value.size())), "hold record");
    FUZZ_CHECK(r.state() == inv::RESERVATION_STATE_HELD, Show(r));
    for (const auto& l : r.lines()) held[{l.sku(), l.location()}] += l.quantity();
    return true;
  });
  FUZZ_CHECK(s.ok(), ToString(s));
  size_t levels = 0;
  s = store_->Scan(Table::kStock, "", "", [&](std::string_view, std::string_view value) {
    inv::StockLevel l;
    FUZZ_CHECK(l.ParseFromArray(value.data(), static_cast<int>(value.size())), "level record");
    CheckLevel(l);
    Key k{l.sku(), l.location()};
    FUZZ_CHECK(l.reserved() == held[k], fmt::format("reserved {} but the open holds sum to {}: {}",
                                                    l.reserved(), held[k], Show(l)));
    if (auto it = announced.find(l.sequence()); it != announced.end()) {
      FUZZ_CHECK(Same(it->second, l),
                 fmt::format("stored level {} but its event said {}", Show(l), Show(it->second)));
    }
    FUZZ_CHECK(l.sequence() >= 1 && l.sequence() <= last, Show(l));
    ++levels;
    return true;
  });
  FUZZ_CHECK(s.ok(), ToString(s));
  for (const auto& [k, sum] : held) {
    FUZZ_CHECK(sum == 0 || store_
                               ->Get(Table::kStock,
                                     fmt::format("{}{}{}", k.first, std::string(1, '\0'), k.second))
                               ->has_value(),
               fmt::format("a hold names level {}/{} that does not exist", k.first, k.second));
  }
  // What the checkpointer does once the relay has sent them: drop the checked entries (keeps
  // scans cheap). They are checkpointed already.
  if (last > outbox_checked_) {
    auto group = store_->NewWriteGroup();
    group->DeleteRange(Table::kJournal, storage::EncodeSequence(0),
                       storage::EncodeSequence(last + 1));
    FUZZ_CHECK(store_->Commit(*group, storage::CommitMode::kConfigured).ok(),
               "trimming the journal");
    outbox_checked_ = last;
  }
}

void World::Run(const uint8_t* data, size_t size) {
  if (size == 0) return;
  ++runs_;
  if (runs_ % kResetEvery == 0) {
    CheckStore();
    Reset();
  } else if (runs_ % kReopenEvery == 0) {
    CheckStore();
    Reopen();
  }
  const uint8_t* body = data + 1;
  size_t n = size - 1;
  int op = data[0] == 0xff ? kTick : data[0] % kRequestCount;
  g_op = op;
  switch (op) {
    case kAdjust:
      DoAdjust(body, n);
      break;
    case kReserve:
      DoReserve(body, n);
      break;
    case kCommit:
      DoCommitOrRelease(true, body, n);
      break;
    case kRelease:
      DoCommitOrRelease(false, body, n);
      break;
    case kGetStock:
      DoGetStock(body, n);
      break;
    case kCreateOrder:
      DoCreateOrder(body, n);
      break;
    case kPayOrder:
      DoPayOrder(body, n);
      break;
    case kAdvanceOrder:
      DoAdvanceOrder(body, n);
      break;
    case kCancelOrder:
      DoCancelOrder(body, n);
      break;
    case kWatchKeys:
      DoWatchKeys(body, n);
      break;
    case kTick:
      DoTick(body, n);
      break;
  }
  if (runs_ % kCheckStoreEvery == 0) CheckStore();
}

}  // namespace
}  // namespace feed::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static feed::fuzz::World* world = [] {
    spdlog::set_level(spdlog::level::warn);
    if (std::getenv("FUZZ_REQUESTS_STATS")) {
      feed::fuzz::g_outcomes = new std::map<std::pair<int, std::string>, uint64_t>();
      std::atexit(feed::fuzz::PrintOutcomes);
    }
    return new feed::fuzz::World();  // never destroyed: the writer thread outlives the run
  }();
  world->Run(data, size);
  return 0;
}
