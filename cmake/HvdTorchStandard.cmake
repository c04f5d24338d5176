# The C++ standard of the code that includes PyTorch's headers (the LibTorch front end, the Python
# extension, the benchmarks' Gloo peer). horovodcpp itself is C++17, but PyTorch's own build moved
# to C++20 in 2026 (pytorch#167929), and newer releases' headers refuse C++17 outright ("C++20 or
# later compatible compiler is required to use ATen", pytorch#178150). So that code follows the
# PyTorch it is built against, and the rest of the project stays C++17. AUTO: C++20 from PyTorch
# 2.11 on (the first release after the move; 2.14's release notes make it the first that refuses
# C++17, and C++20 compiles all of them), C++17 before.
set(HVD_TORCH_CXX_STANDARD AUTO CACHE STRING
    "C++ standard of the code that includes PyTorch headers: AUTO (20 from PyTorch 2.11 on, else 17), 17 or 20")
set_property(CACHE HVD_TORCH_CXX_STANDARD PROPERTY STRINGS AUTO 17 20)

# hvd_torch_cxx_standard(<out-var> <torch-version>): the standard for that PyTorch version.
function(hvd_torch_cxx_standard out torch_version)
  if(HVD_TORCH_CXX_STANDARD STREQUAL "AUTO")
    # "2.11.0+cu130" -> "2.11.0"; an unknown version keeps C++17, which PyTorch's older releases need.
    string(REGEX MATCH "^[0-9]+(\\.[0-9]+)*" version "${torch_version}")
    if(version AND version VERSION_GREATER_EQUAL 2.11)
      set(standard 20)
    else()
      set(standard 17)
    endif()
  elseif(HVD_TORCH_CXX_STANDARD MATCHES "^(17|20)$")
    set(standard ${HVD_TORCH_CXX_STANDARD})
  else()
    message(FATAL_ERROR "HVD_TORCH_CXX_STANDARD is '${HVD_TORCH_CXX_STANDARD}'; it takes AUTO, 17 or 20")
  endif()
  set(${out} ${standard} PARENT_SCOPE)
endfunction()
