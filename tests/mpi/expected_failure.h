// The message of an operation that must fail, for the tests of errors.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include <horovodcpp/horovod.h>

namespace hvd::test {

inline std::string failure_of(const Handle& h) {
  try {
    h.wait();
  } catch (const hvd::Error& e) {
    return e.what();
  }
  FAIL("the operation succeeded but should have failed");
  return {};
}

}  // namespace hvd::test
