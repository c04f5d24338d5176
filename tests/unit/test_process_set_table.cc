// The process-set table keeps nothing of a removed set: over 100,000 add/remove cycles the heap
// in use (glibc's mallinfo2, exact to the byte) does not grow, and "was removed" is still told
// from "never registered". (The whole runtime's memory over add/remove cycles:
// tests/mpi/process_set_memory.cc.)
#include <malloc.h>

#include <catch2/catch.hpp>

#include "core/process_set_table.h"

using hvd::detail::ProcessSetTable;

TEST_CASE("removed process sets leave nothing behind in the table", "[process_sets]") {
  ProcessSetTable table;
  std::lock_guard<std::mutex> lock(table.mutex());
  table.add({0, 1, 2});  // the global set, id 0
  auto cycle = [&] {
    const int id = table.add({0, 1}).id;
    table.remove(id);
    return id;
  };
  for (int i = 0; i < 1000; ++i) cycle();
  const auto before = mallinfo2().uordblks;
  int last = 0;
  for (int i = 0; i < 100000; ++i) last = cycle();
  const auto after = mallinfo2().uordblks;
  INFO("heap in use " << before << " B before, " << after << " B after 100,000 cycles");
  CHECK(after <= before);  // a record per removed set grew it by about 50 B per cycle
  CHECK(last == 101000);
  CHECK(table.find(last) == nullptr);
  CHECK(table.was_removed(last));
  CHECK(table.was_removed(1));
  CHECK_FALSE(table.was_removed(0));         // the global set is there
  CHECK_FALSE(table.was_removed(last + 1));  // never registered
  CHECK_FALSE(table.was_removed(-1));
  const int live = table.add({1, 2}).id;
  CHECK_FALSE(table.was_removed(live));
  CHECK(table.find(live) != nullptr);
}
