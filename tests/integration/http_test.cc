// The HTTP/JSON gateway over real loopback sockets: every route and its error paths, the
// idempotency header, 201 + Location, limits, keep-alive and pipelining, NDJSON and SSE
// streams with Last-Event-ID resume, a slow reader, and a clean end at shutdown.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "fmt/format.h"
#include "grpc_fixture.h"
#include "http_client.h"
#include "nlohmann/json.hpp"

namespace feed::test {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

class HttpTest : public GrpcTest {
 protected:
  void Customize(server::ServerConfig& c) override {
    c.http.openapi_file = FEED_OPENAPI_FILE;
    c.http.swagger_ui_dir = FEED_SWAGGER_UI_DIR;
  }
  HttpConnection Connect() { return HttpConnection(server_->http_address()); }
  json Json(const HttpReply& r) {
    auto parsed = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << r.body;
    return parsed;
  }
  // An error body: google.rpc.Status JSON with this code and a message containing `text`.
  void ExpectError(const HttpReply& r, int http_status, int code, const std::string& text) {
    EXPECT_EQ(r.status, http_status) << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    json body = Json(r);
    EXPECT_EQ(body.value("code", -1), code) << r.body;
    EXPECT_THAT(body.value("message", ""), HasSubstr(text)) << r.body;
    EXPECT_TRUE(body.contains("details")) << r.body;
  }
  HttpReply SetStock(HttpConnection& c, const std::string& sku, int quantity) {
    return c.Call("POST", "/v1/stock:adjust",
                  json{{"sku", sku}, {"mode", "ADJUST_MODE_SET"}, {"quantity", quantity}}.dump());
  }
};

TEST_F(HttpTest, ReserveCommitAndReadStockThroughTheRoutes) {
  auto c = Connect();
  auto adjusted = SetStock(c, "h-1", 10);
  ASSERT_EQ(adjusted.status, 200) << adjusted.body;
  EXPECT_EQ(Json(adjusted)["level"]["onHand"], "10");

  auto reserved = c.Call("POST", "/v1/reservations",
                         json{{"lines", {{{"sku", "h-1"}, {"quantity", 3}}}}}.dump());
  ASSERT_EQ(reserved.status, 201) << reserved.body;
  std::string id = Json(reserved)["reservation"]["reservationId"];
  EXPECT_EQ(reserved.header("Location"), "/v1/reservations/" + id);

  auto got = c.Call("GET", reserved.header("Location"));
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json(got)["state"], "RESERVATION_STATE_HELD");

  auto committed = c.Call("POST", "/v1/reservations/" + id + ":commit", "{}");
  ASSERT_EQ(committed.status, 200) << committed.body;

  // Repeated query parameters fill repeated fields; a missing SKU is reported as missing.
  auto stock = c.Call("GET", "/v1/stock?sku=h-1&sku=h-none");
  ASSERT_EQ(stock.status, 200) << stock.body;
  json body = Json(stock);
  ASSERT_EQ(body["levels"].size(), 1u) << stock.body;
  EXPECT_EQ(body["levels"][0]["onHand"], "7");
  EXPECT_EQ(body["levels"][0]["reserved"], "0");
  ASSERT_EQ(body["missing"].size(), 1u);
  EXPECT_EQ(body["missing"][0]["sku"], "h-none");

  // As of the first change (the SET to 10), from the kept events.
  auto before = c.Call("GET", "/v1/stock?sku=h-1&as_of_sequence=1");
  ASSERT_EQ(before.status, 200) << before.body;
  EXPECT_EQ(Json(before)["levels"][0]["onHand"], "10");
  EXPECT_EQ(Json(before)["asOfSequence"], "1");
  ExpectError(c.Call("GET", "/v1/stock?sku=h-1&as_of_sequence=999"), 400, 11, "as_of_sequence");

  auto batch = c.Call("POST", "/v1/stock:batchGet", json{{"keys", {{{"sku", "h-1"}}}}}.dump());
  ASSERT_EQ(batch.status, 200) << batch.body;
  EXPECT_EQ(Json(batch)["levels"][0]["onHand"], "7");

  auto released = c.Call("POST", "/v1/reservations/" + id + ":release", "{}");
  ExpectError(released, 400, 9, "COMMITTED");  // FAILED_PRECONDITION: already committed
}

TEST_F(HttpTest, BatchAdjustAnswersEachLineAndRefusesAnEmptyBatchWhole) {
  auto c = Connect();
  json lines = {{{"sku", "hb-1"}, {"mode", "ADJUST_MODE_SET"}, {"quantity", 4}},
                {{"sku", "hb-2"}, {"mode", "ADJUST_MODE_DELTA"}, {"quantity", -1}},
                {{"sku", "hb-1"}, {"mode", "ADJUST_MODE_DELTA"}, {"quantity", 2}}};
  auto r = c.Call("POST", "/v1/stock:batchAdjust", json{{"adjustments", lines}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json results = Json(r)["results"];
  ASSERT_EQ(results.size(), 3u) << r.body;
  EXPECT_EQ(results[0]["response"]["level"]["onHand"], "4");
  EXPECT_EQ(results[1].value("code", 0), 9) << r.body;  // FAILED_PRECONDITION: below zero
  EXPECT_THAT(results[1].value("message", ""), HasSubstr("adjustments[1]"));
  EXPECT_EQ(results[2]["response"]["level"]["onHand"], "6");
  EXPECT_EQ(Json(c.Call("GET", "/v1/stock?sku=hb-1"))["levels"][0]["onHand"], "6");
  EXPECT_EQ(Json(c.Call("GET", "/v1/stock?sku=hb-2"))["missing"].size(), 1u);

  ExpectError(c.Call("POST", "/v1/stock:batchAdjust", R"({"adjustments":[]})"), 400, 3,
              "adjustments");
}

TEST_F(HttpTest, IdempotencyKeyHeaderReplaysAndConflicts) {
  auto c = Connect();
  SetStock(c, "h-idem", 5);
  std::string body = json{{"lines", {{{"sku", "h-idem"}, {"quantity", 1}}}}}.dump();
  auto first = c.Call("POST", "/v1/reservations", body, {{"Idempotency-Key", "k-1"}});
  auto second = c.Call("POST", "/v1/reservations", body, {{"Idempotency-Key", "k-1"}});
  ASSERT_EQ(first.status, 201) << first.body;
  ASSERT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(Json(first)["reservation"]["reservationId"],
            Json(second)["reservation"]["reservationId"]);
  EXPECT_EQ(first.header("Idempotent-Replayed"), "");
  EXPECT_EQ(second.header("Idempotent-Replayed"), "true");
  auto other = c.Call("POST", "/v1/reservations",
                      json{{"lines", {{{"sku", "h-idem"}, {"quantity", 2}}}}}.dump(),
                      {{"Idempotency-Key", "k-1"}});
  ExpectError(other, 409, 6, "idempotency");
  EXPECT_EQ(Json(c.Call("GET", "/v1/stock?sku=h-idem"))["levels"][0]["reserved"], "1");
}

TEST_F(HttpTest, BadRequestsNameTheFieldAndChangeNothing) {
  auto c = Connect();
  SetStock(c, "h-bad", 5);
  ExpectError(
      c.Call("POST", "/v1/reservations", R"({"lines":[{"sku":"h-bad","quantity":1}],"colour":1})"),
      400, 3, "colour");
  ExpectError(
      c.Call("POST", "/v1/reservations", R"({"lines":[{"sku":"h-bad","quantity":"many"}]})"), 400,
      3, "quantity");
  ExpectError(c.Call("POST", "/v1/reservations", R"({"lines":[)"), 400, 3, "request body");
  ExpectError(c.Call("POST", "/v1/reservations",
                     R"({"lines":[{"sku":"h-bad","quantity":99999999999999999999999}]})"),
              400, 3, "request body");
  ExpectError(c.Call("POST", "/v1/reservations", R"({"lines":[{"sku":"","quantity":1}]})"), 400, 3,
              "lines[0].sku");
  ExpectError(c.Call("POST", "/v1/reservations", R"({"lines":[{"sku":"h-bad","quantity":6}]})"),
              400, 9, "h-bad");
  ExpectError(c.Call("GET", "/v1/stock?sku=h-bad&colour=red"), 400, 3, "colour");
  ExpectError(c.Call("GET", "/v1/stock:watch?resume_after_sequence=soon"), 400, 3,
              "resume_after_sequence");
  ExpectError(c.Call("GET", "/v1/stock?location=w1"), 400, 3, "location");
  ExpectError(c.Call("GET", "/v1/reservations/rsv-nope"), 404, 5, "rsv-nope");
  ExpectError(c.Call("GET", "/v1/nothing-here"), 404, 5, "no route");
  auto wrong_method = c.Call("DELETE", "/v1/reservations");
  ExpectError(wrong_method, 405, 12, "POST");
  EXPECT_EQ(wrong_method.header("Allow"), "POST");
  c.Send("POST", "/v1/reservations", "<lines/>", {{"Content-Type", "application/xml"}});
  ExpectError(c.Read(), 415, 3, "Content-Type");
  // What curl -d and fetch send by default is read as JSON.
  c.Send("POST", "/v1/stock:batchGet", R"({"keys":[{"sku":"h-bad"}]})",
         {{"Content-Type", "application/x-www-form-urlencoded"}});
  EXPECT_EQ(c.Read().status, 200);
  // Nothing above changed the level.
  auto stock = Json(c.Call("GET", "/v1/stock?sku=h-bad"));
  EXPECT_EQ(stock["levels"][0]["reserved"], "0");
  EXPECT_EQ(stock["levels"][0]["version"], "1");
}

TEST_F(HttpTest, OrdersThroughTheRoutesIncludingTheSeedContract) {
  auto c = Connect();
  SetStock(c, "h-book", 3);
  // The seed article's CreateOrder body: customer, item ids, amount.
  auto created = c.Call(
      "POST", "/v1/orders",
      json{{"customer_id", "cust-441"}, {"item_ids", {"h-book"}}, {"total_amount", 12.5}}.dump());
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = Json(created)["orderId"];
  EXPECT_EQ(created.header("Location"), "/v1/orders/" + id);
  auto paid =
      c.Call("POST", "/v1/orders/" + id + ":pay", json{{"paymentReference", "pay-1"}}.dump());
  ASSERT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(Json(paid)["order"]["status"], "ORDER_STATUS_PAID");
  auto advanced = c.Call("POST", "/v1/orders/" + id + ":advance",
                         json{{"target", "ORDER_STATUS_PACKING"}}.dump());
  ASSERT_EQ(advanced.status, 200) << advanced.body;
  auto cancelled =
      c.Call("POST", "/v1/orders/" + id + ":cancel", json{{"reason", "changed mind"}}.dump());
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  auto got = c.Call("GET", "/v1/orders/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json(got)["status"], "ORDER_STATUS_CANCELLED");
  ExpectError(c.Call("GET", "/v1/orders/ord-nope"), 404, 5, "ord-nope");
}

TEST_F(HttpTest, KeepAliveAndPipelinedRequestsAreAnsweredInOrder) {
  auto c = Connect();
  SetStock(c, "h-pipe", 1);
  c.SendRaw(
      "GET /v1/stock?sku=h-pipe HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /v1/reservations/rsv-none HTTP/1.1\r\nHost: x\r\n\r\n");
  auto a = c.Read();
  auto b = c.Read();
  auto d = c.Read();
  EXPECT_EQ(a.status, 200);
  EXPECT_THAT(a.body, HasSubstr("h-pipe"));
  EXPECT_EQ(b.status, 200);
  EXPECT_THAT(b.body, HasSubstr("SERVING"));
  EXPECT_EQ(d.status, 404);
  // Still open afterwards.
  EXPECT_EQ(c.Call("GET", "/healthz").status, 200);
}

TEST_F(HttpTest, MalformedHttpGetsA400AndTheServerGoesOn) {
  auto c = Connect();
  c.SendRaw("THIS IS NOT HTTP\r\n\r\n");
  auto r = c.Read();
  ExpectError(r, 400, 3, "malformed HTTP request");
  EXPECT_EQ(Connect().Call("GET", "/healthz").status, 200);
}

class HttpLimitsTest : public HttpTest {
  void Customize(server::ServerConfig& c) override {
    HttpTest::Customize(c);
    c.http.max_body_bytes = 2048;
    c.http.max_header_bytes = 2048;
    c.http.max_connections = 3;
  }
};

TEST_F(HttpLimitsTest, OverALimitIsAnsweredWithWhichLimit) {
  auto big_body = Connect().Call("POST", "/v1/reservations", std::string(4096, ' '));
  ExpectError(big_body, 413, 8, "--http-max-body-bytes");
  auto big_header = Connect().Call("GET", "/healthz", "", {{"X-Filler", std::string(4096, 'x')}});
  ExpectError(big_header, 431, 8, "--http-max-header-bytes");
  {
    auto a = Connect();
    auto b = Connect();
    auto d = Connect();
    ASSERT_EQ(a.Call("GET", "/healthz").status, 200);
    auto fourth = Connect();
    ExpectError(fourth.Read(), 503, 14, "--http-max-connections");
  }
  // The slots are free again once those closed.
  bool ok = false;
  for (int i = 0; i < 50 && !ok; ++i) {
    ok = Connect().Call("GET", "/healthz").status == 200;
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ok);
}

class HttpTimeoutsTest : public HttpTest {
  void Customize(server::ServerConfig& c) override {
    HttpTest::Customize(c);
    c.http.idle_timeout_ms = 300;
    c.http.read_timeout_ms = 300;
  }
};

TEST_F(HttpTimeoutsTest, IdleAndSlowClientsAreClosedAndTheServerGoesOn) {
  auto idle = Connect();
  ASSERT_EQ(idle.Call("GET", "/healthz").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  // The server closed the idle connection: nothing more comes back on it.
  idle.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(idle.Read().status, 0);

  // A body that does not arrive within --http-read-timeout-ms: closed, no answer.
  auto slow = Connect();
  auto started = std::chrono::steady_clock::now();
  slow.SendRaw("POST /v1/reservations HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"li");
  EXPECT_EQ(slow.Read().status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  // A header sent too slowly is bounded by --http-idle-timeout-ms the same way.
  auto trickle = Connect();
  trickle.SendRaw("GET /healthz HTTP/1.1\r\nHo");
  EXPECT_EQ(trickle.Read().status, 0);
  EXPECT_EQ(Connect().Call("GET", "/healthz").status, 200);
}

// Splits SSE text into complete events; leaves an incomplete tail.
std::vector<std::map<std::string, std::string>> SseEvents(const std::string& text) {
  std::vector<std::map<std::string, std::string>> events;
  size_t start = 0;
  while (true) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) break;
    std::map<std::string, std::string> event;
    std::string block = text.substr(start, end - start);
    size_t pos = 0;
    while (pos <= block.size()) {
      size_t nl = block.find('\n', pos);
      std::string line = block.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (auto colon = line.find(": "); colon != std::string::npos) {
        event[line.substr(0, colon)] = line.substr(colon + 2);
      }
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    events.push_back(event);
    start = end + 2;
  }
  return events;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST_F(HttpTest, NdjsonWatchSendsTheSnapshotThenEveryChange) {
  Adjust("n-1", 1);
  Adjust("n-2", 2);
  auto c = Connect();
  c.Send("GET", "/v1/stock:watch?sku=n-1&sku=n-2");
  auto head = c.ReadStreamHead();
  ASSERT_EQ(head.status, 200) << head.body;
  EXPECT_EQ(head.header("Content-Type"), "application/x-ndjson");
  bool ended = false;
  auto text = c.ReadStreamUntil([](const std::string& t) { return Count(t, "\n") >= 3; },
                                std::chrono::seconds(5), &ended);
  EXPECT_EQ(Count(text, "KIND_SNAPSHOT\""), 2u) << text;
  EXPECT_EQ(Count(text, "KIND_SNAPSHOT_END"), 1u) << text;
  c.ConsumeStream(text.size());
  Adjust("n-1", 5);
  Adjust("n-3", 5);  // not watched
  Adjust("n-2", 6);
  text = c.ReadStreamUntil([](const std::string& t) { return Count(t, "\n") >= 2; },
                           std::chrono::seconds(5), &ended);
  std::vector<std::string> lines;
  for (size_t p = 0, nl; (nl = text.find('\n', p)) != std::string::npos; p = nl + 1) {
    lines.push_back(text.substr(p, nl - p));
  }
  ASSERT_EQ(lines.size(), 2u) << text;
  auto first = json::parse(lines[0]);
  auto second = json::parse(lines[1]);
  EXPECT_EQ(first["result"]["kind"], "KIND_CHANGE");
  EXPECT_EQ(first["result"]["level"]["sku"], "n-1");
  EXPECT_EQ(second["result"]["level"]["sku"], "n-2");
  EXPECT_LT(std::stoull(first["result"]["sequence"].get<std::string>()),
            std::stoull(second["result"]["sequence"].get<std::string>()));
}

TEST_F(HttpTest, SseWatchResumesWithLastEventIdExactlyWhereItLeftOff) {
  Adjust("s-1", 1);
  std::string last_id;
  {
    auto c = Connect();
    c.Send("GET", "/v1/stock:watch?sku=s-1", "", {{"Accept", "text/event-stream"}});
    auto head = c.ReadStreamHead();
    ASSERT_EQ(head.status, 200);
    EXPECT_EQ(head.header("Content-Type"), "text/event-stream");
    bool ended = false;
    Adjust("s-1", 2);
    auto text = c.ReadStreamUntil([](const std::string& t) { return SseEvents(t).size() >= 3; },
                                  std::chrono::seconds(5), &ended);
    auto events = SseEvents(text);
    ASSERT_EQ(events.size(), 3u) << text;
    EXPECT_EQ(events[0].count("id"), 0u) << "snapshot rows carry no id";
    EXPECT_THAT(events[1]["data"], HasSubstr("KIND_SNAPSHOT_END"));
    EXPECT_EQ(events[1].count("id"), 1u);
    EXPECT_THAT(events[2]["data"], HasSubstr("KIND_CHANGE"));
    last_id = events[2]["id"];
    ASSERT_FALSE(last_id.empty());
  }  // the client goes away
  Adjust("s-1", 3);
  Adjust("s-1", 4);
  auto c = Connect();
  c.Send("GET", "/v1/stock:watch?sku=s-1", "",
         {{"Accept", "text/event-stream"}, {"Last-Event-ID", last_id}});
  ASSERT_EQ(c.ReadStreamHead().status, 200);
  bool ended = false;
  auto text = c.ReadStreamUntil([](const std::string& t) { return SseEvents(t).size() >= 2; },
                                std::chrono::seconds(5), &ended);
  auto events = SseEvents(text);
  ASSERT_EQ(events.size(), 2u) << text;
  EXPECT_THAT(events[0]["data"], HasSubstr("\"onHand\":\"3\""));
  EXPECT_THAT(events[1]["data"], HasSubstr("\"onHand\":\"4\""));
  EXPECT_EQ(std::stoull(events[0]["id"]), std::stoull(last_id) + 1);
  EXPECT_EQ(std::stoull(events[1]["id"]), std::stoull(last_id) + 2);
  EXPECT_EQ(Count(text, "SNAPSHOT"), 0u) << text;
  // A bad Last-Event-ID is a 400 naming it.
  auto bad = Connect().Call("GET", "/v1/stock:watch", "", {{"Last-Event-ID", "yesterday"}});
  ExpectError(bad, 400, 3, "Last-Event-ID");
}

class HttpSmallRetentionTest : public HttpTest {
  void Customize(server::ServerConfig& c) override {
    HttpTest::Customize(c);
    c.core.change_feed_retention = 4;
  }
};

TEST_F(HttpSmallRetentionTest, AResumeOlderThanTheRetentionIsOutOfRangeOrASnapshot) {
  for (int i = 0; i < 20; ++i) Adjust("gap", i + 1);
  auto gap = Connect().Call("GET", "/v1/stock:watch?sku=gap", "", {{"Last-Event-ID", "2"}});
  ExpectError(gap, 400, 11, "retained");
  auto c = Connect();
  c.Send("GET", "/v1/stock:watch?sku=gap&snapshot_on_gap=true", "",
         {{"Last-Event-ID", "2"}, {"Accept", "text/event-stream"}});
  ASSERT_EQ(c.ReadStreamHead().status, 200);
  bool ended = false;
  auto text = c.ReadStreamUntil([](const std::string& t) { return Count(t, "KIND_SNAPSHOT_END"); },
                                std::chrono::seconds(5), &ended);
  EXPECT_THAT(text, HasSubstr("\"onHand\":\"20\""));
}

TEST_F(HttpTest, OrderUpdatesStreamEndsAtTheTerminalStatus) {
  Adjust("o-1", 2);
  auto c = Connect();
  auto created =
      c.Call("POST", "/v1/orders",
             json{{"customerId", "cust-7"}, {"lines", {{{"sku", "o-1"}, {"quantity", 1}}}}}.dump());
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = Json(created)["orderId"];
  auto watcher = Connect();
  watcher.Send("GET", "/v1/orders/" + id + "/updates");
  ASSERT_EQ(watcher.ReadStreamHead().status, 200);
  bool ended = false;
  auto text = watcher.ReadStreamUntil([](const std::string& t) { return Count(t, "\n") >= 1; },
                                      std::chrono::seconds(5), &ended);
  EXPECT_THAT(text, HasSubstr("ORDER_STATUS_CONFIRMED"));
  ASSERT_EQ(c.Call("POST", "/v1/orders/" + id + ":cancel", "{}").status, 200);
  text = watcher.ReadStreamUntil([](const std::string&) { return false; }, std::chrono::seconds(5),
                                 &ended);
  EXPECT_THAT(text, HasSubstr("ORDER_STATUS_CANCELLED"));
  EXPECT_TRUE(ended) << "the stream ends after the terminal status";
  EXPECT_TRUE(watcher.StreamDone());
}

class HttpSlowReaderTest : public HttpTest {
  void Customize(server::ServerConfig& c) override {
    HttpTest::Customize(c);
    c.stream_max_queued_levels = 200;
    c.stream_conflate_after = 50;
    c.stream_stall_timeout_ms = 500;
    c.http.write_timeout_ms = 1000;
  }
};

TEST_F(HttpSlowReaderTest, AReaderThatStopsReadingIsEndedAndTheServerGoesOn) {
  auto slow = Connect();
  slow.Send("GET", "/v1/stock:watch");
  ASSERT_EQ(slow.ReadStreamHead().status, 200);
  // 20,000 levels: far more than the socket buffers hold and the queue allows.
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<std::thread> writers;
    for (int t = 0; t < 4; ++t) {
      writers.emplace_back([&, batch, t] {
        for (int i = 0; i < 250; ++i) Adjust(fmt::format("slow-{}-{}-{}", batch, t, i), 1);
      });
    }
    for (auto& w : writers) w.join();
  }
  // The stream was ended: reading what was sent reaches its end (an error line or a close),
  // long before 20,000 updates.
  bool ended = false;
  auto text = slow.ReadStreamUntil([](const std::string&) { return false; },
                                   std::chrono::seconds(20), &ended);
  EXPECT_TRUE(ended);
  EXPECT_LT(Count(text, "KIND_CHANGE"), 20000u);
  // Everyone else is served.
  EXPECT_EQ(Connect().Call("GET", "/healthz").status, 200);
}

TEST_F(HttpTest, ShutdownEndsOpenStreamsWithUnavailable) {
  auto c = Connect();
  c.Send("GET", "/v1/stock:watch", "", {{"Accept", "text/event-stream"}});
  ASSERT_EQ(c.ReadStreamHead().status, 200);
  bool ended = false;
  c.ReadStreamUntil([](const std::string& t) { return Count(t, "KIND_SNAPSHOT_END"); },
                    std::chrono::seconds(5), &ended);
  std::thread stopper([&] { server_->Shutdown(); });
  auto text =
      c.ReadStreamUntil([](const std::string&) { return false; }, std::chrono::seconds(10), &ended);
  stopper.join();
  EXPECT_TRUE(ended);
  EXPECT_THAT(text, HasSubstr("event: error"));
  EXPECT_THAT(text, HasSubstr("\"code\":14"));
  EXPECT_TRUE(c.StreamDone()) << "the chunked body ends properly";
}

TEST_F(HttpTest, ShutdownAnswersWhatIsInFlightWholeAndLosesNoAcknowledgedReservation) {
  Adjust("down", 1000000);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> created;
  int whole = 0, cut = 0;
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      auto c = Connect();
      while (!stop) {
        if (!c.SendRaw("POST /v1/reservations HTTP/1.1\r\nHost: x\r\nContent-Length: 39\r\n\r\n"
                       R"({"lines":[{"sku":"down","quantity":1}]})")) {
          break;
        }
        HttpReply r = c.Read();
        std::lock_guard lock(mu);
        if (r.status == 0) {
          ++cut;  // closed before an answer began: the client cannot know, and retries
          break;
        }
        ++whole;
        if (r.status == 201) created.push_back(json::parse(r.body)["reservation"]["reservationId"]);
        EXPECT_TRUE(r.status == 201 || r.status == 503) << r.status << " " << r.body;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->Shutdown();
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_GT(whole, 0);
  // Every reservation the gateway acknowledged is there after a restart.
  server_.reset();
  StartServer();
  for (const auto& id : created) {
    auto held = server_->core().GetReservation(id);
    EXPECT_TRUE(held.ok()) << id << ": " << held.status();
  }
}

class HttpHeartbeatTest : public HttpTest {
  void Customize(server::ServerConfig& c) override {
    HttpTest::Customize(c);
    c.http.sse_heartbeat_ms = 100;
    c.max_open_streams = 1;
  }
};

TEST_F(HttpHeartbeatTest, IdleSseStreamsBeatAndAGoneClientFreesItsSlot) {
  Adjust("beat", 1);
  {
    auto c = Connect();
    c.Send("GET", "/v1/stock:watch?sku=beat", "", {{"Accept", "text/event-stream"}});
    ASSERT_EQ(c.ReadStreamHead().status, 200);
    bool ended = false;
    auto text =
        c.ReadStreamUntil([](const std::string& t) { return Count(t, ": keep-alive") >= 2; },
                          std::chrono::seconds(5), &ended);
    EXPECT_GE(Count(text, ": keep-alive\n\n"), 2u) << text;
    // A change still arrives between the heartbeats.
    Adjust("beat", 2);
    text = c.ReadStreamUntil([](const std::string& t) { return Count(t, "KIND_CHANGE") >= 1; },
                             std::chrono::seconds(5), &ended);
    EXPECT_THAT(text, HasSubstr("\"onHand\":\"2\""));
    // The only stream slot is taken.
    ExpectError(Connect().Call("GET", "/v1/stock:watch?sku=beat"), 503, 8, "too many open streams");
    c.Close();
  }
  // No change comes, yet the next heartbeat finds the client gone and frees the slot.
  bool opened = false;
  for (int i = 0; i < 50 && !opened; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto next = Connect();
    next.Send("GET", "/v1/stock:watch?sku=beat", "", {{"Accept", "text/event-stream"}});
    opened = next.ReadStreamHead().status == 200;
  }
  EXPECT_TRUE(opened);
}

TEST_F(HttpTest, OpenApiAndSwaggerUiAreServed) {
  auto c = Connect();
  auto doc = c.Call("GET", "/openapi.json");
  ASSERT_EQ(doc.status, 200);
  json spec = Json(doc);
  EXPECT_TRUE(spec["paths"].contains("/v1/reservations"));
  EXPECT_TRUE(spec["paths"].contains("/v1/reservations/{reservationId}:commit") ||
              spec["paths"].contains("/v1/reservations/{reservation_id}:commit"))
      << doc.body.substr(0, 400);
  auto ui = c.Call("GET", "/swaggerui/");
  ASSERT_EQ(ui.status, 200);
  EXPECT_THAT(ui.body, HasSubstr("swagger-ui"));
  auto init = c.Call("GET", "/swaggerui/swagger-initializer.js");
  EXPECT_THAT(init.body, HasSubstr("/openapi.json"));
  EXPECT_EQ(c.Call("GET", "/swaggerui/../../etc/passwd").status, 404);
}

}  // namespace
}  // namespace feed::test
