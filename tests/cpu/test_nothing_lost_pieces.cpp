// The pieces behind the "nothing lost" guarantees (docs/cli.md, "What is guaranteed"),
// each against an independent oracle: the folder lock, the strict manifest reader, the
// SHA-256 of FIPS 180-2's test vectors, the record check, a write to a full disk.
#include <gtest/gtest.h>

#include <fstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/file_checksums.h"
#include "harness/common/folder_lock.h"
#include "harness/config/strict_json.h"
#include "harness/config/sweep.h"
#include "harness/records/record_checks.h"
#include "harness/runner/run_folder.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(FolderLock, ASecondHolderIsRefusedUntilTheFirstEnds) {
  const fs::path dir = test::fresh_temp_dir("folder_lock") / "results";
  nlohmann::json previous = "unset";
  {
    const FolderLock first = FolderLock::acquire(dir, "sparsebalance run first.json", &previous);
    EXPECT_TRUE(previous.is_null()) << "a fresh folder has had no writer";
    // flock locks belong to an open file: a second open, even in this process, conflicts.
    const std::string refused = error_of([&] { FolderLock::acquire(dir, "sparsebalance run second.json"); });
    EXPECT_NE(refused.find("is being written by another sparsebalance"), std::string::npos) << refused;
    EXPECT_NE(refused.find("PID " + std::to_string(::getpid())), std::string::npos) << refused;
    EXPECT_NE(refused.find("sparsebalance run first.json"), std::string::npos) << refused;
  }
  EXPECT_EQ(read_file(folder_lock_file(dir)), "") << "a clean end empties the file";
  { const FolderLock again = FolderLock::acquire(dir, "again", &previous); }
  EXPECT_TRUE(previous.is_null()) << "released cleanly: not reported";
  // What a holder killed with -9 leaves: its line in an unlocked file.
  std::ofstream(folder_lock_file(dir)) << R"({"pid": 4242, "host": "node7", "started_at_utc": "t", "command": "c"})";
  { const FolderLock after_crash = FolderLock::acquire(dir, "after", &previous); }
  EXPECT_EQ(previous.value("pid", 0), 4242);
  EXPECT_EQ(describe_lock_holder(previous), "PID 4242 on host node7 (started t: c)");
  fs::remove_all(dir.parent_path());
}

TEST(StrictJson, RefusesRepeatedKeysAndDeepNestingNamingThePath) {
  EXPECT_EQ(parse_strict_json(R"({"a": [1, {"b": 2}], "c": {"d": null}})", "m.json"),
            nlohmann::json::parse(R"({"a": [1, {"b": 2}], "c": {"d": null}})"));
  std::string e = error_of([] { parse_strict_json(R"({"train": {"lr": 1, "x": [0, {"y": 1, "y": 2}]}})", "m.json"); });
  EXPECT_NE(e.find("m.json: $.train.x[1].y: is given twice"), std::string::npos) << e;
  e = error_of([] { parse_strict_json(R"({"a": 1, "a": 1})", "m.json"); });
  EXPECT_NE(e.find("$.a: is given twice"), std::string::npos) << e;
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse_strict_json(R"([{"a": 1}, {"a": 2}])", "m.json"));
  std::string deep(65, '[');
  deep += std::string(65, ']');
  e = error_of([&] { parse_strict_json(deep, "m.json"); });
  EXPECT_NE(e.find("nests deeper than 64 levels"), std::string::npos) << e;
  EXPECT_NO_THROW(parse_strict_json(std::string(64, '[') + std::string(64, ']'), "m.json"));
  e = error_of([] { parse_strict_json("{\n  \"a\": ,\n}", "m.json"); });
  EXPECT_NE(e.find("m.json:2:"), std::string::npos) << e;
}

TEST(FileChecksums, Sha256MatchesTheStandardsVectorsAndNamesAMismatch) {
  const fs::path dir = test::fresh_temp_dir("checksums");
  std::ofstream(dir / "abc", std::ios::binary) << "abc";
  std::ofstream(dir / "empty", std::ios::binary);
  // FIPS 180-2, appendix B.1, and the digest of no bytes.
  EXPECT_EQ(sha256_of_file(dir / "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_of_file(dir / "empty"), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const ChecksumList list{{"abc", sha256_of_file(dir / "abc")}, {"empty", sha256_of_file(dir / "empty")}};
  EXPECT_EQ(parse_checksum_list(checksum_list_text(list), "x"), list);
  EXPECT_EQ(first_checksum_mismatch(dir, list), "");
  std::ofstream(dir / "abc", std::ios::binary) << "abd";
  EXPECT_EQ(first_checksum_mismatch(dir, list), (dir / "abc").string() + " differs from the SHA-256 it was written with");
  fs::remove(dir / "empty");
  std::ofstream(dir / "abc", std::ios::binary) << "abc";
  EXPECT_EQ(first_checksum_mismatch(dir, list), (dir / "empty").string() + " is missing");
  EXPECT_THROW(parse_checksum_list("not a line\n", "x"), ConfigError);
  fs::remove_all(dir);
}

IterationRecord at(int64_t iteration) {
  IterationRecord r;
  r.iteration = iteration;
  return r;
}

TEST(RecordChecks, OneRecordPerIterationInOrderAndTheCountAsked) {
  EXPECT_EQ(record_sequence_problem({at(0), at(1), at(2)}, 3), "");
  EXPECT_EQ(record_sequence_problem({at(0), at(1)}, std::nullopt), "") << "an incomplete run may stop anywhere";
  EXPECT_EQ(record_sequence_problem({at(0), at(1), at(1)}, std::nullopt), "iteration 1 is recorded twice (records 2 and 3)");
  EXPECT_EQ(record_sequence_problem({at(0), at(3)}, std::nullopt), "iterations 1-2 are missing (record 2 is iteration 3)");
  EXPECT_EQ(record_sequence_problem({at(1)}, std::nullopt), "iteration 0 is missing (record 1 is iteration 1)");
  EXPECT_EQ(record_sequence_problem({at(0), at(1)}, 3), "the run is marked complete with 2 of the 3 iterations its manifest asks for");
  // 150 records of a 120-iteration run written by two writers: caught at the first repeat.
  std::vector<IterationRecord> mixed;
  for (int64_t i = 0; i < 30; ++i) mixed.push_back(at(i));
  for (int64_t i = 0; i < 120; ++i) mixed.push_back(at(i));
  EXPECT_EQ(record_sequence_problem(mixed, 120), "iteration 0 is recorded twice (records 1 and 31)");
  EXPECT_EQ(record_sequence_problem({at(0), at(-1)}, std::nullopt), "record 2 is iteration -1, out of order");
}

TEST(SweepNames, ValuesThatNameOneFolderAreRefused) {
  EXPECT_NO_THROW(parse_sweep(nlohmann::json{{"seed", {1, 2}}}, "m.json"));
  std::string e = error_of([] { parse_sweep(nlohmann::json{{"seed", {1, 2, 1}}}, "m.json"); });
  EXPECT_NE(e.find("$.sweep[\"seed\"]: repeats the value 1"), std::string::npos) << e;
  e = error_of([] { parse_sweep(nlohmann::json{{"train.lr_schedule", {"a b", "a-b"}}}, "m.json"); });
  EXPECT_NE(e.find("has the values \"a b\" and \"a-b\", which both name their runs \"a-b\""), std::string::npos) << e;
  e = error_of([] { parse_sweep(nlohmann::json{{"seed", {1, "1"}}}, "m.json"); });
  EXPECT_NE(e.find("has the values 1 and \"1\""), std::string::npos) << e;
}

TEST(RunFolderWriter, AFullDiskNamesTheFileAndTheCause) {
  const fs::path dir = test::fresh_temp_dir("full_disk");
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_symlink("/dev/full", dir / "records.jsonl");
  RunFolderWriter writer(dir);
  const std::string e = error_of([&] { writer.append(IterationRecord{}, TimelineIteration{}); });
  EXPECT_NE(e.find((dir / "records.jsonl").string() + ": No space left on device"), std::string::npos) << e;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
