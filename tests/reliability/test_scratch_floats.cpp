// Large call scratch (src/runtime/scratch_floats.hpp): below 2 MiB an ordinary array, from
// 2 MiB on a 2 MiB-aligned mapping with huge pages asked for. Each size is written and read
// back whole (ASan checks the bounds of the new[] path; a mapping too short would fault), and
// a size that cannot be mapped is the library's Error naming the argument.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "seqattn/error.hpp"
#include "src/runtime/scratch_floats.hpp"

namespace {

using seqattn::detail::scratch_floats;

void WriteAndReadBack(std::int64_t count) {
  const seqattn::detail::ScratchFloats s = scratch_floats(count, "scratch");
  ASSERT_NE(s.data(), nullptr);
  for (std::int64_t i = 0; i < count; ++i) s[static_cast<size_t>(i)] = static_cast<float>(i % 1000);
  for (std::int64_t i = 0; i < count; i += 4093) {
    ASSERT_EQ(s[static_cast<size_t>(i)], static_cast<float>(i % 1000)) << i;
  }
  ASSERT_EQ(s[static_cast<size_t>(count - 1)], static_cast<float>((count - 1) % 1000));
}

TEST(ScratchFloats, SmallAndLargeBlocksHoldEveryElement) {
  for (const std::int64_t count : {std::int64_t{1}, std::int64_t{17}, (std::int64_t{1} << 19) - 1,
                                   std::int64_t{1} << 19, (std::int64_t{3} << 19) + 5}) {
    WriteAndReadBack(count);
  }
}

TEST(ScratchFloats, LargeBlocksStartOnAHugePageBoundary) {
  const seqattn::detail::ScratchFloats s = scratch_floats(std::int64_t{3} << 20, "scratch");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data()) % (std::uintptr_t{2} << 20), 0u);
}

TEST(ScratchFloats, AnUnmappableSizeIsAnErrorNamingTheArgument) {
  try {
    scratch_floats(std::int64_t{1} << 60, "coarse keys");  // 4 EiB
    ADD_FAILURE() << "no error";
  } catch (const seqattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("coarse keys"), std::string::npos) << e.what();
  }
  try {
    scratch_floats(std::numeric_limits<std::int64_t>::max(), "coarse keys");  // bytes overflow
    ADD_FAILURE() << "no error";
  } catch (const seqattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("coarse keys"), std::string::npos) << e.what();
  }
}

}  // namespace
