// The metrics library: TFRecord framing and CRCs, the event writer, the
// rates of the round line, run folders and the report's summary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "metrics/event_writer.h"
#include "metrics/rate_meter.h"
#include "metrics/report_page.h"
#include "metrics/run_rows.h"
#include "metrics/tensorboard.pb.h"
#include "metrics/tfrecord.h"

namespace fs = std::filesystem;
using namespace diloco::metrics;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("diloco_metrics_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST(TfRecordTest, MaskedCrcOfKnownInputs) {
  // CRC32C("123456789") is 0xe3069283 (the check value of the Castagnoli CRC).
  EXPECT_EQ(masked_crc32c("123456789"), 0xc78ab0e5u);
  EXPECT_EQ(masked_crc32c(""), 0xa282ead8u);
}

TEST(TfRecordTest, RecordsReadBackAndCorruptionIsNamed) {
  std::string file;
  append_record(file, "first");
  append_record(file, std::string(300, 'x'));
  EXPECT_EQ(file.size(), 2 * 16 + 5 + 300u);
  std::size_t at = 0;
  std::string data;
  ASSERT_EQ(read_record(file, at, data), "");
  EXPECT_EQ(data, "first");
  ASSERT_EQ(read_record(file, at, data), "");
  EXPECT_EQ(data, std::string(300, 'x'));
  EXPECT_EQ(at, file.size());

  std::string bad = file;
  bad[12 + 2] ^= 0x01;  // inside the first record's data
  at = 0;
  EXPECT_NE(read_record(bad, at, data).find("data CRC"), std::string::npos);
  bad = file;
  bad[3] ^= 0x40;  // the first record's length
  at = 0;
  EXPECT_NE(read_record(bad, at, data).find("length CRC"), std::string::npos);
  at = 0;
  EXPECT_NE(read_record(file.substr(0, 20), at, data).find("cut short"), std::string::npos);
}

TEST(EventWriterTest, FileVersionThenScalarsNonFiniteLeftOut) {
  const fs::path dir = fresh_dir("events");
  std::string path;
  {
    EventWriter writer((dir / "tb").string(), 1000.0);
    path = writer.path();
    writer.add_scalars(3, {{"loss/train", 2.5}, {"bad", std::numeric_limits<double>::quiet_NaN()}});
    writer.add_scalars(4, {{"bad", std::numeric_limits<double>::infinity()}});  // nothing left: no record
  }  // flushed at close
  EXPECT_NE(fs::path(path).filename().string().find("events.out.tfevents."), std::string::npos);
  const std::string file = read_file(path);
  std::size_t at = 0;
  std::string data;
  tensorboard::Event event;
  ASSERT_EQ(read_record(file, at, data), "");
  ASSERT_TRUE(event.ParseFromString(data));
  EXPECT_EQ(event.file_version(), "brain.Event:2");
  ASSERT_EQ(read_record(file, at, data), "");
  ASSERT_TRUE(event.ParseFromString(data));
  EXPECT_EQ(event.step(), 3);
  ASSERT_EQ(event.summary().value_size(), 1);
  EXPECT_EQ(event.summary().value(0).tag(), "loss/train");
  EXPECT_FLOAT_EQ(event.summary().value(0).simple_value(), 2.5f);
  EXPECT_EQ(at, file.size());
  fs::remove_all(dir);
}

TEST(EventWriterTest, UnwritableFolderIsNamed) {
  const fs::path dir = fresh_dir("unwritable");
  write_file(dir / "file", "x");
  try {
    EventWriter writer((dir / "file" / "tb").string());
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "file" / "tb").string()), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(RateMeterTest, TokensPerSecondMfuAndTimeLeft) {
  // 10 rounds; 1e9 FLOPs per token; a site of peak 1e12 FLOP/s.
  RateMeter meter(10, 1e9, 1e12);
  Rates r = meter.observe(1, 1000.0, 2.0, 500.0);
  EXPECT_DOUBLE_EQ(*r.tokens_per_s, 500.0);
  EXPECT_DOUBLE_EQ(*r.mfu, 500.0 * 1e9 / 2.0 / 1e12);
  EXPECT_DOUBLE_EQ(*r.eta_s, 9 * 2.0);
  r = meter.observe(2, 3000.0, 6.0, 500.0);
  EXPECT_DOUBLE_EQ(*r.tokens_per_s, 500.0);
  EXPECT_DOUBLE_EQ(*r.eta_s, 8 * 3.0);
  r = meter.observe(10, 9000.0, 30.0, 500.0);  // the last round: nothing left
  EXPECT_DOUBLE_EQ(*r.eta_s, 0.0);
}

TEST(RateMeterTest, NoMfuWithoutPeakAndNoRatesForAResumedFirstRound) {
  RateMeter meter(8, 1e9, 0.0);
  Rates r = meter.observe(5, 5000.0, 50.0, 100.0);  // resumed after round 4
  EXPECT_FALSE(r.tokens_per_s);
  EXPECT_FALSE(r.mfu);
  EXPECT_FALSE(r.eta_s);
  r = meter.observe(6, 6000.0, 60.0, 100.0);
  EXPECT_DOUBLE_EQ(*r.tokens_per_s, 100.0);
  EXPECT_FALSE(r.mfu);
  EXPECT_DOUBLE_EQ(*r.eta_s, 2 * 10.0);
}

TEST(RateMeterTest, PeaksFromDeviceNames) {
  EXPECT_EQ(datasheet_peak_tflops("NVIDIA H100 80GB HBM3", true), 989.0);
  EXPECT_EQ(datasheet_peak_tflops("NVIDIA H100 PCIe", true), 756.0);
  EXPECT_EQ(datasheet_peak_tflops("NVIDIA A100-SXM4-80GB", false), 19.5);
  EXPECT_EQ(datasheet_peak_tflops("NVIDIA L40S", true), 362.0);
  EXPECT_EQ(datasheet_peak_tflops("NVIDIA L4", true), 121.0);
  EXPECT_EQ(datasheet_peak_tflops("some CPU", true), 0.0);
  EXPECT_EQ(train_flops_per_token(1e6, 2, 128, 64), 6e6 + 12.0 * 2 * 128 * 64);
  EXPECT_EQ(human_duration(3725), "1h02m");
  EXPECT_EQ(human_duration(185), "3m05s");
}

TEST(RunRowsTest, SitesOfARunLaunchedApartAndAPartialLastLine) {
  const fs::path dir = fresh_dir("rows");
  fs::create_directories(dir / "run" / "site-1");
  fs::create_directories(dir / "run" / "site-0");
  write_file(dir / "run" / "site-0" / "metrics.jsonl", "{\"round\":1}\n{\"round\":2}\n{\"round\":3");
  write_file(dir / "run" / "site-1" / "metrics.jsonl", "{\"round\":1}\n");
  const auto runs = load_runs((dir / "run").string());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "run/site-0");
  EXPECT_EQ(runs[0].rows.size(), 2u);
  EXPECT_EQ(runs[1].name, "run/site-1");

  write_file(dir / "bad.jsonl", "");
  fs::create_directories(dir / "bad");
  write_file(dir / "bad" / "metrics.jsonl", "{\"round\":1}\nnot json\n");
  try {
    load_runs((dir / "bad").string());
    FAIL() << "no error";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_runs((dir / "nowhere").string()), RunError);
  fs::remove_all(dir);
}

TEST(ReportTest, SummaryMeasuresAgainstTheFirstRun) {
  RunRows dp{"dp", "", {}};
  dp.rows.push_back({{"round", 1}, {"eval_loss", 3.0}, {"train_loss", 3.1}, {"wall_s", 10.0}, {"bytes_sent", 1e9}});
  dp.rows.push_back({{"round", 2}, {"eval_loss", 2.0}, {"train_loss", 2.1}, {"wall_s", 20.0}, {"bytes_sent", 2e9}});
  RunRows diloco{"diloco", "", {}};
  diloco.rows.push_back({{"round", 1}, {"eval_loss", 1.9}, {"train_loss", 2.0}, {"wall_s", 4.0}, {"bytes_sent", 1e6}});
  diloco.rows.push_back({{"round", 2}, {"eval_loss", nullptr}, {"train_loss", 1.8}, {"wall_s", 8.0}, {"bytes_sent", 2e6}});
  RunRows slow{"slow", "", {}};
  slow.rows.push_back({{"round", 1}, {"eval_loss", 2.5}, {"train_loss", 2.6}, {"wall_s", 5.0}, {"bytes_sent", 1e6}});
  const auto s = summarize({dp, diloco, slow});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(*s[1].final_eval_loss, 1.9);  // the last evaluation, not the last row
  EXPECT_NEAR(*s[1].vs_first, -0.05, 1e-12);
  EXPECT_DOUBLE_EQ(*s[1].to_first_s, 4.0);
  EXPECT_DOUBLE_EQ(*s[1].to_first_bytes, 1e6);
  EXPECT_FALSE(s[2].to_first_s);
  const std::string text = summary_text(s);
  EXPECT_NE(text.find("not reached"), std::string::npos);
  const std::string page = render_report({dp, diloco}, "a <title>");
  EXPECT_NE(page.find("a &lt;title&gt;"), std::string::npos);
  EXPECT_NE(page.find("Chart.js v"), std::string::npos);  // inlined, nothing fetched
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);
}
