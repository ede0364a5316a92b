// feedctl's pure parts: the CSV import and export (clients/feedctl/src/stock_csv.h), how an
// import is cut into batches (import_plan.h; the shard of a SKU: common/shard_hash.h) and the
// live table of `stock watch` (watch_table.h).
#include <gtest/gtest.h>

#include "import_plan.h"
#include "stock_csv.h"
#include "watch_table.h"

namespace feedctl {
namespace {

using inventory::v1::ADJUST_MODE_DELTA;
using inventory::v1::ADJUST_MODE_SET;

TEST(StockCsvTest, ParsesLinesWithQuotesBlankLinesAndDefaults) {
  auto parsed = ParseStockCsv(
      "sku,location,quantity,reason\r\n"
      "sku-1,wh-1,10,count\n"
      "\n"
      "\"sku,2\", ,5,\"said \"\"five\"\"\"\n"
      "sku-3,,0\n",
      ADJUST_MODE_SET, "counts.csv", "csv import");
  ASSERT_TRUE(parsed.problems.empty()) << parsed.problems[0].message;
  ASSERT_EQ(parsed.adjustments.size(), 3u);
  const auto& a = parsed.adjustments;
  EXPECT_EQ(a[0].line, 2);
  EXPECT_EQ(a[0].request.sku(), "sku-1");
  EXPECT_EQ(a[0].request.location(), "wh-1");
  EXPECT_EQ(a[0].request.quantity(), 10);
  EXPECT_EQ(a[0].request.mode(), ADJUST_MODE_SET);
  EXPECT_EQ(a[0].request.reason(), "count");
  EXPECT_EQ(a[1].line, 4);
  EXPECT_EQ(a[1].request.sku(), "sku,2");
  EXPECT_EQ(a[1].request.location(), "");
  EXPECT_EQ(a[1].request.reason(), "said \"five\"");
  EXPECT_EQ(a[2].request.reason(), "csv import");  // no reason column: the default
  EXPECT_EQ(a[2].request.quantity(), 0);
  for (const auto& x : a) EXPECT_EQ(x.request.idempotency_key().rfind("csv:counts.csv:", 0), 0u);
}

TEST(StockCsvTest, NamesTheLineAndTheProblem) {
  auto parsed = ParseStockCsv(
      "sku,location,quantity\n"
      "a,w,ten\n"
      ",w,1\n"
      "b,w,-3\n"
      "c,w,1,r,extra\n"
      "\"d,w,1\n"
      "e,w,4\n",
      ADJUST_MODE_SET, "f", "r");
  ASSERT_EQ(parsed.problems.size(), 5u);
  EXPECT_EQ(parsed.problems[0].line, 2);
  EXPECT_EQ(parsed.problems[0].message, "quantity 'ten' is not a whole number");
  EXPECT_EQ(parsed.problems[1].message, "sku is empty");
  EXPECT_EQ(parsed.problems[2].line, 4);
  EXPECT_NE(parsed.problems[2].message.find("negative"), std::string::npos);
  EXPECT_NE(parsed.problems[3].message.find("got 5"), std::string::npos);
  EXPECT_EQ(parsed.problems[4].message, "a quoted field is not closed");
  ASSERT_EQ(parsed.adjustments.size(), 1u);
  EXPECT_EQ(parsed.adjustments[0].line, 7);
  // Delta mode: negative is fine, zero is not.
  auto delta = ParseStockCsv("sku,location,quantity\na,w,-3\nb,w,0\n", ADJUST_MODE_DELTA, "f", "r");
  ASSERT_EQ(delta.adjustments.size(), 1u);
  ASSERT_EQ(delta.problems.size(), 1u);
  EXPECT_EQ(delta.problems[0].line, 3);
}

TEST(StockCsvTest, RefusesAFileWithoutTheHeader) {
  auto parsed = ParseStockCsv("sku-1,wh,3\n", ADJUST_MODE_SET, "f", "r");
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_EQ(parsed.problems[0].line, 1);
  EXPECT_NE(parsed.problems[0].message.find("header"), std::string::npos);
  EXPECT_TRUE(parsed.adjustments.empty());
  EXPECT_EQ(ParseStockCsv("", ADJUST_MODE_SET, "f", "r").problems.size(), 1u);
}

TEST(StockCsvTest, KeysSurviveEditsElsewhereAndTellEqualLinesApart) {
  const std::string file = "sku,location,quantity\na,w,1\nb,w,2\nb,w,2\n";
  auto first = ParseStockCsv(file, ADJUST_MODE_DELTA, "receipts", "r");
  auto again = ParseStockCsv(file, ADJUST_MODE_DELTA, "receipts", "r");
  // A line added at the top and one corrected: the others keep their keys.
  auto edited = ParseStockCsv("sku,location,quantity\nz,w,9\na,w,1\nb,w,2\nb,w,5\n",
                              ADJUST_MODE_DELTA, "receipts", "r");
  ASSERT_EQ(first.adjustments.size(), 3u);
  ASSERT_EQ(edited.adjustments.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first.adjustments[i].request.idempotency_key(),
              again.adjustments[i].request.idempotency_key());
  }
  EXPECT_NE(first.adjustments[1].request.idempotency_key(),
            first.adjustments[2].request.idempotency_key());  // two equal receipts
  EXPECT_EQ(edited.adjustments[1].request.idempotency_key(),
            first.adjustments[0].request.idempotency_key());
  EXPECT_EQ(edited.adjustments[2].request.idempotency_key(),
            first.adjustments[1].request.idempotency_key());
  EXPECT_NE(edited.adjustments[3].request.idempotency_key(),
            first.adjustments[2].request.idempotency_key());
  // Another import id: other keys.
  auto other = ParseStockCsv(file, ADJUST_MODE_DELTA, "receipts-2", "r");
  EXPECT_NE(other.adjustments[0].request.idempotency_key(),
            first.adjustments[0].request.idempotency_key());
  EXPECT_EQ(KeySafe("my file (1).csv"), "my_file__1_.csv");
}

TEST(StockCsvTest, ExportRowsQuoteWhatNeedsIt) {
  inventory::v1::StockLevel l;
  l.set_sku("a,b");
  l.set_location("wh \"1\"");
  l.set_on_hand(5);
  l.set_reserved(2);
  l.set_available(3);
  l.set_version(7);
  l.set_sequence(42);
  EXPECT_EQ(StockCsvRow(l), "\"a,b\",\"wh \"\"1\"\"\",5,2,3,false,7,42");
  EXPECT_EQ(StockCsvHeader(),
            "sku,location,on_hand,reserved,available,allow_backorder,version,sequence");
}

inventory::v1::StockLevel Level(const std::string& sku, int64_t on_hand, uint64_t version,
                                uint64_t sequence) {
  inventory::v1::StockLevel l;
  l.set_sku(sku);
  l.set_location("default");
  l.set_on_hand(on_hand);
  l.set_available(on_hand);
  l.set_version(version);
  l.set_sequence(sequence);
  return l;
}

std::vector<CsvAdjustment> AdjustmentsOf(const std::vector<std::string>& skus) {
  std::vector<CsvAdjustment> out;
  for (size_t i = 0; i < skus.size(); ++i) {
    out.emplace_back();
    out.back().line = static_cast<int>(i) + 2;
    out.back().request.set_sku(skus[i]);
  }
  return out;
}

TEST(ImportPlanTest, ShardsAsTheServerComputesThem) {
  // fnv1a64 mod P, worked out independently (tests/e2e/cluster_readme_test.sh does the same).
  EXPECT_EQ(feed::ShardOf("sku-1", 12), 4u);
  EXPECT_EQ(feed::ShardOf("sku-11", 12), 11u);
  EXPECT_EQ(feed::ShardOf("sku-6", 4), 1u);
  EXPECT_EQ(feed::ShardOf("sku-6", 0), 0u);
}

TEST(ImportPlanTest, SingleNodeBatchesFollowTheFile) {
  auto plan = PlanImportBatches(AdjustmentsOf({"a", "b", "c", "d", "e"}), 0, 2);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].lines, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan[1].lines, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(plan[2].lines, (std::vector<size_t>{4}));
  EXPECT_TRUE(PlanImportBatches({}, 12, 500).empty());
}

TEST(ImportPlanTest, ClusterBatchesHoldOneShardEachInFileOrder) {
  // On 4 shards: sku-1, sku-5, sku-9 on shard 0; sku-2, sku-6 on shard 1.
  auto plan = PlanImportBatches(AdjustmentsOf({"sku-1", "sku-2", "sku-5", "sku-9", "sku-6"}), 4, 2);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].shard, 0u);
  EXPECT_EQ(plan[0].lines, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(plan[1].shard, 1u);
  EXPECT_EQ(plan[1].lines, (std::vector<size_t>{1, 4}));
  EXPECT_EQ(plan[2].shard, 0u);
  EXPECT_EQ(plan[2].lines, (std::vector<size_t>{3}));
  // A batch size of 0 is taken as 1, never as "no batches".
  EXPECT_EQ(PlanImportBatches(AdjustmentsOf({"sku-1", "sku-5"}), 4, 0).size(), 2u);
}

TEST(WatchTableTest, SortsKeepsTheNewestAndMarksTheLastChange) {
  WatchTable t;
  t.Apply(Level("sku-b", 5, 1, 10));
  t.Apply(Level("sku-a", 7, 3, 11));
  t.Apply(Level("sku-b", 4, 2, 12));
  t.Apply(Level("sku-b", 9, 1, 13));  // older version (a replay): ignored
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.last_sequence(), 12u);  // the ignored replay counts for nothing
  const std::string plain = t.Render("title", 10, false);
  EXPECT_LT(plain.find("sku-a"), plain.find("sku-b"));
  EXPECT_NE(plain.find("sku-b"), std::string::npos);
  EXPECT_NE(plain.find(" 4 "), std::string::npos);
  EXPECT_EQ(plain.find(" 9 "), std::string::npos);
  // The last row applied (sku-b) carries the mark; in color it is in reverse video.
  const std::string b_row = plain.substr(plain.find("sku-b"));
  EXPECT_EQ(b_row.substr(b_row.find('\n') - 2, 2), " *");
  const std::string color = t.Render("title", 10, true);
  EXPECT_NE(color.find("\x1b[7msku-b"), std::string::npos);
  // Fewer rows than levels: it says how many more.
  EXPECT_NE(t.Render("title", 1, false).find("... 1 more"), std::string::npos);
}

}  // namespace
}  // namespace feedctl
